"""tools/bench end to end: every implementation on 2 ranks at two sizes (--quick), then checks
that the JSON holds every cell, that tutti's submission time is part of each 100-tensor
call (one call per tensor and one grouped call), that tutti's cells count their single
copies (and the 100-tensor rows their allreduces), that the CPUs' state is recorded around the
launch, and that the report names what it measured;
also that the diagnostics fused_interleaved.py and isolated_breakdown.py run, that
alternate.py hands each value of a setting to its launches, and that a probe killed
mid-trace leaves no process behind."""

import json
import os
import subprocess
import sys
import time

import launch

SCRIPT = os.path.abspath(os.path.join("tools", "bench", "collectives.py"))
IMPLS = ["mpi4py", "torch-gloo", "tutti-mpi-np", "tutti-mpi-torch", "tutti-gloo-np",
         "tutti-gloo-torch"]
SIZES = [4, 65536]


def test_quick_run_on_two_ranks_covers_every_cell(tmp_path):
    out = tmp_path / "bench.json"
    result = launch.run(
        [sys.executable, SCRIPT, "--quick", "--np", "2", "--sizes", ",".join(map(str, SIZES)),
         "--json", str(out), "--plot", str(tmp_path / "bench.png")],
        env={"TUTTI_BENCH_DIR": str(tmp_path)}, timeout=280)
    assert result.returncode == 0, launch.describe(result)
    assert "of which submitting" in result.stdout, launch.describe(result)

    doc = json.loads(out.read_text())
    (run,) = doc["runs"]
    assert run["np"] == 2
    # Raw MPI keeps its single-copy path wherever the kernel permits it.
    assert isinstance(run["mpi_single_copy"], bool), run
    assert "single-copy transfer between local ranks (CMA): " in result.stdout
    assert run["impls"] == IMPLS, run["impls"]

    cells = {(r["collective"], r["bytes"], r["impl"]): r for r in run["sweep"]}
    for collective in ("allreduce", "allgather", "broadcast"):
        for size in SIZES:
            for impl in IMPLS:
                row = cells[(collective, size, impl)]
                assert row["samples_s"] and min(row["samples_s"]) > 0, row
                # Below 1 MiB no call takes shared memory's single copy, only allreduces
                # past the tiny path may stream into the segment, and tutti's rows say so
                # (the counters shm_single_copy_calls, shm_streaming_calls); other
                # libraries' rows have no such counts.
                if impl.startswith("tutti-"):
                    assert row["single_copy_calls"] == 0, row
                    if collective != "allreduce" or size <= 1792:
                        assert row["streaming_calls"] == 0, row
                else:
                    assert "single_copy_calls" not in row, row
                    assert "streaming_calls" not in row, row
    assert "single copy" in result.stdout, launch.describe(result)
    assert "streamed" in result.stdout, launch.describe(result)

    fused = {r["impl"]: r for r in run["fused"]}
    grouped = [i + "-grouped" for i in IMPLS if i.startswith("tutti-")]
    assert set(fused) == set(IMPLS) | set(grouped) | {"mpi4py-1-buffer"}, sorted(fused)
    for impl in IMPLS + grouped:
        row = fused[impl]
        submits = row.get("submit_samples_s", [])
        if not impl.startswith("tutti-"):
            assert not submits, row
            continue
        # Submitting is part of every call (per sample: the slowest rank of each).
        assert len(submits) == len(row["samples_s"]), row
        assert all(0 < s <= t for s, t in zip(submits, row["samples_s"])), row
        # Which shared-memory algorithm ran: a grouped call is one allreduce, 100 separate
        # requests one or more; the single copies are some of them.
        if impl.endswith("-grouped"):
            assert row["collectives"] == len(row["samples_s"]), row
        else:
            assert len(row["samples_s"]) <= row["collectives"] <= 100 * len(row["samples_s"]), row
        assert 0 <= row["single_copy_calls"] <= row["collectives"], row

    assert sorted(r["impl"] for r in run["latency"]) == sorted(IMPLS)
    assert run["targets"], run
    assert (tmp_path / "bench.png").stat().st_size > 0

    # The CPUs' state before and after the launch, measured by the probe (vcpu_probe.cc).
    for when in ("before", "after"):
        state = doc["host"]["cpu_state_" + when]
        assert state["samples"] > 0, state
        assert 0 < state["round_trip_us"]["p50"] <= state["round_trip_us"]["max"], state
        assert 0 < state["memcpy_4mib_us"]["p50"] <= state["memcpy_4mib_us"]["max"], state
        kernel = state["kernel_copy_4mib_us"]
        if run["mpi_single_copy"]:  # the kernel permits process_vm_readv here
            assert 0 < kernel["p50"] <= kernel["max"], state
            assert 0 <= state["kernel_copy_outliers"] <= state["samples"], state
    assert "CPU state (tools/bench/vcpu_probe) before: round trip " in result.stdout


def test_peers_horovod_without_its_environment_says_how_to_build_it(tmp_path):
    # Horovod is never built for the tests: --peers horovod must stop at once with the fix.
    missing = tmp_path / "no-horovod-venv"
    result = launch.run([sys.executable, SCRIPT, "--quick", "--np", "2", "--peers", "horovod",
                         "--json", str(tmp_path / "bench.json")],
                        env={"TUTTI_HOROVOD_VENV": str(missing)}, timeout=60)
    assert result.returncode == 2, launch.describe(result)
    assert ("--peers horovod: no Horovod benchmark environment at %s" % missing
            in result.stderr), launch.describe(result)
    assert "tools/bench/horovod-env" in result.stderr, launch.describe(result)
    assert not (tmp_path / "bench.json").exists()


def test_unknown_peer_is_refused(tmp_path):
    result = launch.run([sys.executable, SCRIPT, "--peers", "nccl"], timeout=60)
    assert result.returncode == 2, launch.describe(result)
    assert "--peers: unknown peer 'nccl'; choose from horovod" in result.stderr, \
        launch.describe(result)


def test_alternate_passes_each_value_to_its_launches(tmp_path):
    # Two launches, the streaming stores off and then on (single copy off, so that every
    # pipelined 1 MiB call of the second streams): the counts in each launch's JSON show
    # which value it ran with, and the report lists both launches and a summary per value.
    script = os.path.abspath(os.path.join("tools", "bench", "alternate.py"))
    result = launch.run(
        [sys.executable, script, "--env", "TUTTI_SHM_STREAMING_STORES", "--values", "off,on",
         "--launches", "2", "--keep", str(tmp_path), "--", sys.executable, SCRIPT, "--quick",
         "--np", "2", "--sizes", "1M", "--collectives", "allreduce", "--no-latency",
         "--no-fused", "--impls", "tutti-mpi-np", "--plot", str(tmp_path / "bench.png")],
        env={"TUTTI_BENCH_DIR": str(tmp_path), "TUTTI_SHM_SINGLE_COPY": "off"}, timeout=280)
    assert result.returncode == 0, launch.describe(result)
    streamed = []
    for number in (1, 2):
        doc = json.loads((tmp_path / ("launch_%d.json" % number)).read_text())
        (row,) = [r for r in doc["runs"][0]["sweep"] if r["impl"] == "tutti-mpi-np"]
        streamed.append(row["streaming_calls"])
    assert streamed[0] == 0 and streamed[1] > 0, streamed
    lines = result.stdout.splitlines()
    assert any(line.startswith("  1 off    apart ") for line in lines), launch.describe(result)
    assert any(line.startswith("  2 on     apart ") for line in lines), launch.describe(result)
    assert any(line.startswith("on       1 MiB  all launches (1): median ")
               for line in lines), launch.describe(result)
    assert (tmp_path / "probe.trace").stat().st_size > 0


def test_a_probe_killed_mid_trace_leaves_no_process_behind():
    # alternate.py stops its probe with SIGTERM, which may land while the probe's child is
    # echoing a batch of round trips: the child must die with its parent, not spin on.
    probe = os.path.abspath(os.path.join("tools", "bench", "vcpu_probe"))
    marker = "4321.5"  # an unusual --seconds, to find this test's processes
    for attempt in range(40):
        proc = subprocess.Popen([probe, "--seconds", marker, "--interval-ms", "1", "--trace"],
                                stdout=subprocess.DEVNULL)
        time.sleep(0.02 + 0.005 * attempt)
        proc.terminate()
        proc.wait(timeout=10)
    def probes():
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    args = f.read().split(b"\0")
            except OSError:
                continue  # gone meanwhile
            if args[0].endswith(b"vcpu_probe") and marker.encode() in args:
                found.append(pid)
        return found

    deadline = time.monotonic() + 5
    while probes() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not probes(), "probe processes left running: %s" % probes()


def test_fused_interleaved_runs_and_reports_every_contender():
    # The diagnostic that interleaves the grouped call with mpi4py call by call.
    script = os.path.abspath(os.path.join("tools", "bench", "fused_interleaved.py"))
    result = launch.run_ranks(2, [sys.executable, script, "--calls", "20", "--block", "2"],
                              controller="mpi", timeout=120)
    assert result.returncode == 0, launch.describe(result)
    assert "2 ranks, 20 calls of each, 2 in a row" in result.stdout, launch.describe(result)
    lines = [line for line in result.stdout.splitlines() if line.endswith("x")]
    assert len(lines) == 2, launch.describe(result)  # one block of 20, then all calls
    assert "mpi4py 1 buffer" in lines[-1] and "tutti grouped" in lines[-1], lines[-1]


def test_isolated_breakdown_times_both_apis():
    # The diagnostic of an isolated 4-byte allreduce, through tutti.numpy and tutti.torch.
    script = os.path.abspath(os.path.join("tools", "bench", "isolated_breakdown.py"))
    for api in ("numpy", "torch"):
        result = launch.run_ranks(2, [sys.executable, script, "--calls", "5", "--idle-ms", "1",
                                      "--api", api], controller="mpi", timeout=120)
        assert result.returncode == 0, launch.describe(result)
        for rank in range(2):
            prefix = "rank %d (tutti.%s): async: submit " % (rank, api)
            line = next((text for text in result.stdout.splitlines()
                         if text.startswith(prefix)), None)
            assert line is not None, launch.describe(result)
            assert "blocking: allreduce_ " in line and "mpi4py Allreduce " in line, line
