"""tuttirun's settings: flags, config file, tuning variables, hosts and placement."""

import textwrap

import pytest

from tutti.runner import hosts, options, tuning
from tutti.runner.errors import UsageError


def parse(*argv):
    return options.parse(list(argv))


def test_defaults_and_command():
    settings = parse("-np", "2", "python", "train.py", "--lr", "0.1")
    assert settings.np == 2
    assert settings.command == ["python", "train.py", "--lr", "0.1"]
    assert not settings.mpi and not settings.verbose
    assert settings.stop_grace_seconds == options.DEFAULT_STOP_GRACE_SECONDS
    assert tuning.environment(settings) == {}


def test_options_after_command_belong_to_the_command():
    settings = parse("-np", "2", "python", "x.py", "-np", "7", "--verbose")
    assert settings.np == 2 and not settings.verbose
    assert settings.command == ["python", "x.py", "-np", "7", "--verbose"]


def test_double_dash_separates_the_command():
    assert parse("-np", "1", "--", "echo", "hi").command == ["echo", "hi"]


def test_tuning_flags_map_to_core_variables():
    settings = parse(
        "-np", "2", "--fusion-threshold-mb", "32", "--cycle-time-ms", "2.5",
        "--cache-capacity", "512", "--timeline-filename", "/tmp/t.json", "--autotune",
        "--autotune-log-file", "/tmp/a.csv", "--stall-check-warning-time-seconds", "30",
        "--stall-check-shutdown-time-seconds", "90", "--no-stall-check", "--log-level", "debug",
        "--gloo-timeout-seconds", "45", "--hierarchical-allreduce", "x")
    assert tuning.environment(settings) == {
        "TUTTI_FUSION_THRESHOLD": str(32 * 1024 * 1024),
        "TUTTI_CYCLE_TIME": "2.5",
        "TUTTI_CACHE_CAPACITY": "512",
        "TUTTI_HIERARCHICAL_ALLREDUCE": "1",
        "TUTTI_TIMELINE": "/tmp/t.json",
        "TUTTI_AUTOTUNE": "1",
        "TUTTI_AUTOTUNE_LOG": "/tmp/a.csv",
        "TUTTI_STALL_CHECK_DISABLE": "1",
        "TUTTI_STALL_CHECK_TIME_SECONDS": "30.0",
        "TUTTI_STALL_SHUTDOWN_TIME_SECONDS": "90.0",
        "TUTTI_LOG_LEVEL": "DEBUG",
        "TUTTI_GLOO_TIMEOUT_SECONDS": "45.0",
    }


def test_fractional_fusion_threshold_and_disabled_response_cache():
    settings = parse("-np", "1", "--fusion-threshold-mb", "0.5", "--cache-capacity", "9",
                     "--disable-response-cache", "x")
    env = tuning.environment(settings)
    assert env["TUTTI_FUSION_THRESHOLD"] == str(512 * 1024)
    assert env["TUTTI_CACHE_CAPACITY"] == "0"


def test_disable_cache_is_horovodruns_launcher_cache_and_leaves_the_core_alone():
    settings = parse("-np", "1", "--cache-capacity", "9", "--disable-cache", "x")
    assert settings.disable_cache
    assert tuning.environment(settings) == {"TUTTI_CACHE_CAPACITY": "9"}


@pytest.mark.parametrize("argv, words", [
    (["-np", "0", "x"], "at least 1"),
    (["-np", "two", "x"], "not an integer"),
    (["--cycle-time-ms", "0", "-np", "1", "x"], "out of range: it must be a number from 0.001"),
    (["--fusion-threshold-mb", "-1", "-np", "1", "x"], "out of range"),
    (["--log-level", "LOUD", "-np", "1", "x"], "not a log level"),
    (["--gloo", "--mpi", "-np", "1", "x"], "not allowed with"),
    (["-H", "a:1", "--hostfile", "f", "-np", "1", "x"], "not allowed with"),
    (["--no-such-flag", "-np", "1", "x"], "unrecognized"),
])
def test_bad_flags_raise_usage_errors(argv, words):
    with pytest.raises(UsageError, match=words):
        options.parse(argv)


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def test_config_file_settings_with_dashes_or_underscores(tmp_path):
    config = write(tmp_path, "c.yaml", """
        np: 3
        fusion-threshold-mb: 8
        cycle_time_ms: 4
        autotune: true
        log_level: info
        hosts: [localhost:2, 127.0.0.1:1]
        mpi: true
        network-interface: lo
    """)
    settings = parse("--config-file", config, "python", "t.py")
    assert settings.np == 3 and settings.mpi
    assert settings.hosts == "localhost:2,127.0.0.1:1"
    assert settings.network_interface == "lo"
    assert tuning.environment(settings) == {
        "TUTTI_FUSION_THRESHOLD": str(8 * 1024 * 1024), "TUTTI_CYCLE_TIME": "4.0",
        "TUTTI_AUTOTUNE": "1", "TUTTI_LOG_LEVEL": "INFO"}


def test_command_line_flags_win_over_the_config_file(tmp_path):
    config = write(tmp_path, "c.yaml", """
        num_proc: 3
        cycle-time-ms: 4
        mpi: true
        hostfile: /nonexistent
    """)
    settings = parse("--config-file", config, "-np", "2", "--cycle-time-ms", "7", "--gloo",
                     "-H", "localhost:2", "x")
    assert settings.np == 2 and settings.gloo and not settings.mpi
    assert settings.hosts == "localhost:2" and settings.hostfile is None
    assert tuning.environment(settings)["TUTTI_CYCLE_TIME"] == "7.0"


@pytest.mark.parametrize("text, words", [
    ("bogus_setting: 1\n", "unknown setting 'bogus_setting'"),
    ("np: [1, 2]\n", "not a valid value"),
    ("np: zero\n", "not an integer"),
    ("autotune: 3\n", "true or false"),
    ("cycle_time_ms: -2\n", "out of range"),
    ("- just\n- a list\n", "must hold a mapping"),
    ("np: [unclosed\n", "not valid YAML"),
    ("command: [python]\n", "unknown setting 'command'"),
])
def test_bad_config_files(tmp_path, text, words):
    config = write(tmp_path, "bad.yaml", text)
    with pytest.raises(UsageError, match=words):
        parse("--config-file", config, "-np", "1", "x")


def test_unreadable_config_file(tmp_path):
    with pytest.raises(UsageError, match="cannot read config file"):
        parse("--config-file", str(tmp_path / "missing.yaml"), "-np", "1", "x")


def test_hosts_argument():
    assert hosts.parse_hosts_argument("a:2,b.example.com:4,c") == [
        hosts.Host("a", 2), hosts.Host("b.example.com", 4), hosts.Host("c", 1)]


@pytest.mark.parametrize("text, words", [
    ("a:2,,b:1", "empty host entry"),
    ("a:x", "not an integer"),
    ("a:0", "at least 1"),
    ("a:1:2", "must be host or host:slots"),
    (":2", "not a valid host name"),
    ("a b:2", "not a valid host name"),
    ("a:1,a:2", "listed twice"),
    ("", "at least one host"),
])
def test_malformed_hosts_argument(text, words):
    with pytest.raises(UsageError, match=words):
        hosts.parse_hosts_argument(text)


def test_hostfile(tmp_path):
    path = write(tmp_path, "hosts", """
        # training cluster
        node1 slots=4
        node2:2   # trailing comment
        node3
    """)
    assert hosts.parse_hostfile(path) == [
        hosts.Host("node1", 4), hosts.Host("node2", 2), hosts.Host("node3", 1)]


@pytest.mark.parametrize("text, words", [
    ("node1 slots=x\n", "not an integer"),
    ("node1 cpus=2\n", "host slots=N"),
    ("node1 slots=2 extra\n", "host slots=N"),
    ("# nothing\n", "lists no hosts"),
])
def test_bad_hostfile(tmp_path, text, words):
    with pytest.raises(UsageError, match=words):
        hosts.parse_hostfile(write(tmp_path, "hosts", text))


def test_placement_fills_hosts_in_order():
    host_list = [hosts.Host("localhost", 2), hosts.Host("node-b", 2), hosts.Host("node-c", 4)]
    placements = hosts.place(5, host_list, {"localhost": ["127.0.0.1"],
                                            "node-b": ["192.0.2.200"], "node-c": ["192.0.2.201"]})
    summary = [(p.rank, p.host, p.local_rank, p.local_size, p.cross_rank, p.cross_size, p.is_local)
               for p in placements]
    assert summary == [
        (0, "localhost", 0, 2, 0, 3, True), (1, "localhost", 1, 2, 0, 3, True),
        (2, "node-b", 0, 2, 1, 3, False), (3, "node-b", 1, 2, 1, 3, False),
        (4, "node-c", 0, 1, 2, 3, False)]
    assert all(p.size == 5 for p in placements)


def test_placement_uses_only_the_hosts_it_needs():
    placements = hosts.place(2, [hosts.Host("localhost", 2), hosts.Host("other", 2)],
                             {"localhost": ["127.0.0.1"], "other": ["192.0.2.200"]})
    assert {p.cross_size for p in placements} == {1}


def test_more_processes_than_slots():
    with pytest.raises(UsageError, match="more processes than the 3 slots"):
        hosts.place(4, [hosts.Host("a", 1), hosts.Host("b", 2)], {})


def test_this_host_is_recognised_by_name_and_address():
    import socket

    names = ["localhost", "127.0.0.1", socket.gethostname()]
    resolved = hosts.resolve_all(names)
    assert all(hosts.is_local(name, resolved[name]) for name in names)
    assert not hosts.is_local("192.0.2.250", ["192.0.2.250"])  # TEST-NET-1, never ours


def test_unknown_host():
    with pytest.raises(UsageError, match="unknown host 'no-such-host.invalid'"):
        hosts.resolve_all(["localhost", "no-such-host.invalid"])
