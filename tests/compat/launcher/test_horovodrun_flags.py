"""horovodrun 0.28.1 command lines and config files, parsed by tuttirun.

Each case is a horovodrun spelling that tuttirun refused before, with the settings it
must produce; refusals of what the core cannot honour name the flag and the reason.
"""

import textwrap

import pytest

from tutti.runner import hosts, options, tuning
from tutti.runner.errors import UsageError


def parse(*argv):
    return options.parse(list(argv))


def write(tmp_path, text):
    path = tmp_path / "horovod.yaml"
    path.write_text(textwrap.dedent(text))
    return str(path)


def test_short_flags():
    settings = parse("-np", "2", "-p", "2222", "-i", "/keys/id", "-hostfile", "hosts.txt",
                     "python", "train.py")
    assert settings.ssh_port == 2222 and settings.ssh_identity_file == "/keys/id"
    assert settings.hostfile == "hosts.txt" and settings.master_port is None
    assert parse("-cb").check_build


def test_version_flag_prints_the_version_and_exits(capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse("-v")
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith("tutti v")


def test_introduction_command_line_master_host_and_port():
    settings = parse("-np", "20", "-hm", "10.0.0.1", "-p", "29500", "python", "train.py")
    assert (settings.np, settings.master_host, settings.master_port) == (20, "10.0.0.1", 29500)
    assert settings.ssh_port is None  # with a master host, -p is the rendezvous port
    assert settings.command == ["python", "train.py"]


@pytest.mark.parametrize("argv, words", [
    (["--master-port", "29500"], "--master-port needs a master host"),
    (["-hm", "h", "--mpi"], "mpirun does the rendezvous"),
    (["-hm", "h", "-p", "1", "--master-port", "2"], "-p 1 and --master-port 2 disagree"),
    (["-p", "1", "--ssh-port", "2"], "-p 1 and --ssh-port 2 disagree"),
    (["-p", "70000"], "not a TCP port"),
])
def test_master_and_port_misuse(argv, words):
    with pytest.raises(UsageError, match=words):
        parse(*(["-np", "1"] + argv + ["x"]))


def test_network_interfaces_are_a_list():
    settings = parse("-np", "1", "--network-interfaces", "eth0,eth1", "--network-interface",
                     "eth2", "--network-interface", "eth0", "x")
    assert settings.network_interface == "eth0,eth1,eth2"
    with pytest.raises(UsageError, match="empty interface name"):
        parse("-np", "1", "--network-interfaces", "eth0,,eth1", "x")


def test_start_timeout_from_the_flag_or_horovods_variable(monkeypatch):
    assert parse("-np", "1", "x").start_timeout == options.DEFAULT_START_TIMEOUT_SECONDS == 30
    assert parse("-np", "1", "--start-timeout", "5", "x").start_timeout == 5
    monkeypatch.setenv("HOROVOD_START_TIMEOUT", "12")
    assert parse("-np", "1", "x").start_timeout == 12
    monkeypatch.setenv("HOROVOD_START_TIMEOUT", "soon")
    with pytest.raises(UsageError, match="HOROVOD_START_TIMEOUT='soon'"):
        parse("-np", "1", "x")


def test_negations_set_the_variable_explicitly_off():
    settings = parse("-np", "1", "--no-hierarchical-allreduce", "--no-hierarchical-allgather",
                     "--no-autotune", "--no-timeline-mark-cycles", "--stall-check",
                     "--no-mpi-threads-disable", "--log-without-timestamp", "x")
    assert tuning.environment(settings) == {
        "TUTTI_HIERARCHICAL_ALLREDUCE": "0", "TUTTI_HIERARCHICAL_ALLGATHER": "0",
        "TUTTI_TIMELINE_MARK_CYCLES": "0", "TUTTI_AUTOTUNE": "0",
        "TUTTI_STALL_CHECK_DISABLE": "0", "TUTTI_LOG_HIDE_TIME": "1",
        "TUTTI_MPI_THREADS_DISABLE": "0"}


def test_a_switch_and_its_negation_exclude_each_other():
    with pytest.raises(UsageError, match="--no-autotune: not allowed with argument --autotune"):
        parse("-np", "1", "--autotune", "--no-autotune", "x")


def test_launcher_only_flags():
    settings = parse("-np", "1", "--tcp", "--prefix-output-with-timestamp", "--disable-cache",
                     "x")
    assert settings.tcp and settings.prefix_output_with_timestamp and settings.disable_cache
    assert tuning.environment(settings) == {}  # --disable-cache leaves the response cache on
    assert parse("-np", "1", "-prefix-timestamp", "x").prefix_output_with_timestamp


@pytest.mark.parametrize("argv, words", [
    (["--hierarchical-allgather"], "--hierarchical-allgather is not supported: tutti has no "
                                   "hierarchical allgather"),
    (["--mpi-threads-disable"], "--mpi-threads-disable is not supported: the tutti core "
                                "needs MPI_THREAD_MULTIPLE"),
    (["--log-with-timestamp"], "--log-with-timestamp is not supported: the core's log lines "
                               "carry no timestamps"),
    (["--no-log-hide-timestamp"], "--log-with-timestamp is not supported"),
])
def test_settings_the_core_cannot_honour_are_refused(argv, words):
    with pytest.raises(UsageError, match=words):
        parse(*(["-np", "1"] + argv + ["x"]))


def test_thread_affinity_reaches_the_core(tmp_path):
    assert tuning.environment(parse("-np", "2", "--thread-affinity", "0,1", "x")) == {
        "TUTTI_THREAD_AFFINITY": "0,1"}
    config = write(tmp_path, "library_options: {thread_affinity: 1}\n")
    assert tuning.environment(parse("--config-file", config, "-np", "1", "x")) == {
        "TUTTI_THREAD_AFFINITY": "1"}


def test_log_level_reaches_the_core():
    settings = parse("-np", "1", "--log-level", "error", "--log-hide-timestamp", "x")
    assert tuning.environment(settings) == {"TUTTI_LOG_LEVEL": "ERROR",
                                            "TUTTI_LOG_HIDE_TIME": "1"}


def test_horovod_sectioned_config_file(tmp_path):
    config = write(tmp_path, """
        controller: MPI
        params:
          fusion_threshold_mb: 32
          cycle_time_ms: 2
          cache_capacity: 512
          hierarchical_allreduce: true
          hierarchical_allgather: false
        autotune:
          enabled: true
          log_file: /tmp/autotune.csv
          warmup_samples: 2
          steps_per_sample: 4
          bayes_opt_max_samples: 8
          gaussian_process_noise: 0.5
        timeline:
          filename: /tmp/timeline.json
          mark_cycles: true
        stall_check:
          enabled: false
          warning_time_seconds: 30
          shutdown_time_seconds: 90
        library_options:
          mpi_threads_disable: false
          num_nccl_streams: 2
          gloo_timeout_seconds: 45
        logging:
          level: INFO
          with_timestamp: false
    """)
    settings = parse("--config-file", config, "-np", "2", "python", "train.py")
    assert settings.mpi and not settings.gloo
    assert tuning.environment(settings) == {
        "TUTTI_FUSION_THRESHOLD": str(32 * 1024 * 1024), "TUTTI_CYCLE_TIME": "2.0",
        "TUTTI_CACHE_CAPACITY": "512", "TUTTI_HIERARCHICAL_ALLREDUCE": "1",
        "TUTTI_HIERARCHICAL_ALLGATHER": "0", "TUTTI_TIMELINE": "/tmp/timeline.json",
        "TUTTI_TIMELINE_MARK_CYCLES": "1", "TUTTI_AUTOTUNE": "1",
        "TUTTI_AUTOTUNE_LOG": "/tmp/autotune.csv", "TUTTI_AUTOTUNE_WARMUP_SAMPLES": "2",
        "TUTTI_AUTOTUNE_STEPS_PER_SAMPLE": "4", "TUTTI_AUTOTUNE_BAYES_OPT_MAX_SAMPLES": "8",
        "TUTTI_AUTOTUNE_GAUSSIAN_PROCESS_NOISE": "0.5", "TUTTI_STALL_CHECK_DISABLE": "1",
        "TUTTI_STALL_CHECK_TIME_SECONDS": "30.0", "TUTTI_STALL_SHUTDOWN_TIME_SECONDS": "90.0",
        "TUTTI_LOG_LEVEL": "INFO", "TUTTI_LOG_HIDE_TIME": "1", "TUTTI_GLOO_TIMEOUT_SECONDS": "45.0",
        "TUTTI_MPI_THREADS_DISABLE": "0", "TUTTI_NUM_NCCL_STREAMS": "2"}


def test_command_line_wins_over_the_sections(tmp_path):
    config = write(tmp_path, """
        controller: mpi
        params: {cycle_time_ms: 2}
        autotune: {enabled: true}
    """)
    settings = parse("--config-file", config, "--gloo", "--cycle-time-ms", "7", "--no-autotune",
                     "-np", "1", "x")
    assert settings.gloo and not settings.mpi
    env = tuning.environment(settings)
    assert env["TUTTI_CYCLE_TIME"] == "7.0" and env["TUTTI_AUTOTUNE"] == "0"


@pytest.mark.parametrize("text, words", [
    ("params: {fusion_treshold_mb: 4}\n", "unknown setting 'fusion_treshold_mb' in section "
                                          "'params'"),
    ("controller: nccl\n", "controller 'nccl' is not gloo or mpi"),
    ("stall_check: {enabled: maybe}\n", "stall_check.enabled must be true or false"),
    ("timeline: [a]\n", "section 'timeline' must be a mapping"),
    ("params: {cycle_time_ms: 2}\ncycle-time-ms: 3\n", "cycle_time_ms is set twice"),
    ("cluster: {master: a}\n", "cluster must be a list of groups"),
    ("cluster: [{workers: a}]\n", "cluster group 1 must be a mapping with `master`"),
    ("cluster: [{master: [a, b]}]\n", "master must be one host"),
    ("cluster: [{master: a, workers: 10.0.0.9-10.0.0.2}]\n", "runs backwards"),
    ("cluster: [{master: a, workers: 10.0.0.1-10.0.255.255}]\n", "more than 4096"),
])
def test_bad_sections_and_clusters(tmp_path, text, words):
    config = write(tmp_path, text)
    with pytest.raises(UsageError, match=words):
        parse("--config-file", config, "-np", "1", "x")


def test_cluster_groups_expand_address_ranges(tmp_path):
    config = write(tmp_path, """
        cluster:
          - master: 10.0.0.1
            workers: 10.0.0.2-10.0.0.10
          - master: 10.0.0.11
            workers: 10.0.0.12-10.0.0.20
    """)
    settings = parse("-np", "20", "-hm", "10.0.0.1", "-p", "29500", "--config-file", config,
                     "python", "train.py")
    assert settings.master_host == "10.0.0.1" and settings.master_port == 29500
    listed = hosts.parse_hosts_argument(settings.hosts)
    assert [h.name for h in listed] == ["10.0.0.%d" % i for i in range(1, 21)]
    assert all(h.slots == 1 for h in listed)


def test_cluster_master_is_the_default_master_host(tmp_path):
    config = write(tmp_path, """
        cluster:
          - master: node-a:4
            workers: [node-b:4, 192.168.1.254-192.168.2.1:2]
    """)
    settings = parse("--config-file", config, "-p", "29500", "x")
    assert settings.master_host == "node-a" and settings.master_port == 29500
    assert settings.hosts == ("node-a:4,node-b:4,192.168.1.254:2,192.168.1.255:2,"
                              "192.168.2.0:2,192.168.2.1:2")


def test_short_range_form_and_minus_h_ranges():
    assert hosts.expand_host_entry("10.0.0.2-4:3", "w") == ["10.0.0.2:3", "10.0.0.3:3",
                                                           "10.0.0.4:3"]
    assert [h.name for h in hosts.parse_hosts_argument("a,10.1.1.1-10.1.1.2")] == [
        "a", "10.1.1.1", "10.1.1.2"]


def test_cluster_under_mpi_has_no_master_host(tmp_path):
    config = write(tmp_path, """
        controller: mpi
        cluster:
          - master: node-a
            workers: node-b
    """)
    settings = parse("--config-file", config, "-p", "2222", "x")
    assert settings.mpi and settings.master_host is None
    assert settings.hosts == "node-a,node-b" and settings.ssh_port == 2222


def test_start_timeout_bounds_each_ssh_connection():
    from tutti.runner import gloo_job

    settings = parse("-np", "2", "-H", "localhost:1,node-b:1", "--start-timeout", "7", "x")
    placements = hosts.place(2, [hosts.Host("localhost", 1), hosts.Host("node-b", 1)],
                             {"localhost": ["127.0.0.1"], "node-b": ["192.0.2.200"]})
    launches = gloo_job.plan_ranks(placements, ["x"], lambda placement: {}, settings,
                                   parent_env={}, workdir="/")
    assert launches[0].spec.argv == ["x"]  # the local rank needs no connection
    assert "ConnectTimeout=7" in launches[1].spec.argv
