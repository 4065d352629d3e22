"""Helpers of the elastic tests: simulated hosts, a discovery script, the job's events.

"Hosts" are loopback addresses (127.0.0.2, 127.0.0.3, ...): tuttirun sees that this machine
owns them and starts their workers directly, each address with its own host index (so
workers on different addresses talk over Gloo TCP, workers on one address over shared
memory). The discovery script prints a file the test rewrites to add or remove hosts.
"""

import collections
import json
import os
import re
import stat
import subprocess
import sys
import threading
import time

import launch

HERE = os.path.dirname(os.path.abspath(__file__))
TUTTIRUN = [sys.executable, "-m", "tutti.runner"]
_EVENT = re.compile(r"^\[(\d+)\]<stdout>: (\{.*\})$")


def worker(name):
    return os.path.join(HERE, "workers", name)


class Hosts:
    """A host list file and the discovery script that prints it."""

    def __init__(self, directory, lines):
        self.path = os.path.join(str(directory), "hosts.txt")
        self.script = os.path.join(str(directory), "discover.sh")
        with open(self.script, "w") as handle:
            handle.write("#!/bin/sh\ncat %s\n" % self.path)
        os.chmod(self.script, os.stat(self.script).st_mode | stat.S_IXUSR)
        self.write(lines)

    def write(self, lines):
        temporary = self.path + ".new"
        with open(temporary, "w") as handle:
            handle.write("\n".join(lines) + "\n")
        os.replace(temporary, self.path)


def events(stdout):
    """Every JSON event the workers printed, with the worker id added as `worker`."""
    found = []
    for line in stdout.splitlines():
        match = _EVENT.match(line)
        if match:
            event = json.loads(match.group(2))
            event["worker"] = int(match.group(1))
            found.append(event)
    return found


def run(args, timeout, env=None):
    return launch.run(TUTTIRUN + list(args), env=env, timeout=timeout)


class LiveJob:
    """tuttirun in the background; stdout lines collected as they come."""

    def __init__(self, args, env=None):
        self.proc = subprocess.Popen(
            TUTTIRUN + list(args), env=launch._job_environment(env), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.lines = []
        self.errors = []
        self._threads = [threading.Thread(target=self._pump, args=(s, t), daemon=True)
                         for s, t in ((self.proc.stdout, self.lines),
                                      (self.proc.stderr, self.errors))]
        for thread in self._threads:
            thread.start()

    @staticmethod
    def _pump(stream, into):
        for line in iter(stream.readline, ""):
            into.append(line)

    def wait_for(self, predicate, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate(events("".join(self.lines))):
                return True
            if self.proc.poll() is not None:
                return False
            time.sleep(0.1)
        return False

    def wait_for_stderr(self, text, timeout):
        """Whether tuttirun printed `text` on its stderr within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in "".join(self.errors):
                return True
            if self.proc.poll() is not None:
                return False
            time.sleep(0.1)
        return False

    def kill(self):
        """Kills the whole job if it still runs (a test that failed half-way)."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()

    def finish(self, timeout):
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()
            for thread in self._threads:
                thread.join(2)
            raise AssertionError("tuttirun did not finish within %s s\n%s" % (
                timeout, self.describe()))
        for thread in self._threads:
            thread.join(5)
        return subprocess.CompletedProcess(self.proc.args, self.proc.returncode,
                                           "".join(self.lines), "".join(self.errors))

    def describe(self):
        return "--- stdout ---\n%s\n--- stderr ---\n%s" % ("".join(self.lines),
                                                           "".join(self.errors))


def listening_ports(pid):
    """The TCP ports on which process `pid` listens (from /proc: its socket inodes matched
    against the kernel's socket tables)."""
    inodes = set()
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    ports = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as handle:
            for line in handle.readlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                    ports.append(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def kept_steps(all_events):
    """The steps that count: a generation that ended in a failure loses its steps after
    its last commit (the survivors restore that commit)."""
    steps = [e for e in all_events if e["event"] == "step"]
    commits = [e for e in all_events if e["event"] == "commit"]
    generations = sorted({e["gen"] for e in steps})
    kept = []
    for gen in generations:
        mine = [s for s in steps if s["gen"] == gen]
        if gen == generations[-1]:
            kept += mine
            continue
        last = max(((c["epoch"], c["processed"]) for c in commits
                    if c["gen"] == gen), default=(0, 0))
        kept += [s for s in mine if (s["epoch"], s["pos"]) < last]
    return kept


def check_each_sample_once(steps, samples, epochs):
    """Every epoch saw every sample exactly once, except the padding of its last step: when
    the samples left do not divide evenly over the workers, the sampler repeats fewer than
    `size` of them there so that every worker makes the same number of steps."""
    for epoch in range(epochs):
        mine = [s for s in steps if s["epoch"] == epoch]
        last_pos = max(s["pos"] for s in mine)
        seen = collections.Counter()
        for step in mine:
            seen.update(step["indices"])
        assert sorted(seen) == list(range(samples)), "epoch %d missed %s" % (
            epoch, sorted(set(range(samples)) - set(seen)))
        last = collections.Counter(i for s in mine if s["pos"] == last_pos for i in s["indices"])
        twice = {i: n for i, n in seen.items() if n > 1}
        padding = sum(seen.values()) - samples
        size = max(s["size"] for s in mine if s["pos"] == last_pos)
        assert padding < size and all(n == 2 and last[i] == 1 for i, n in twice.items()), (
            "epoch %d saw samples more than once outside the last step's padding: %s"
            % (epoch, twice))


def replay(steps, new_model, new_optimizer, dataset):
    """The weights of a failure-free data-parallel run that makes exactly `steps`: per step
    each rank's gradient on its batch, averaged over the ranks, then one optimizer step."""
    by_step = collections.OrderedDict()
    for step in sorted(steps, key=lambda s: (s["epoch"], s["pos"], s["rank"])):
        by_step.setdefault((step["epoch"], step["pos"]), []).append(step)
    model = new_model()
    optimizer = new_optimizer(model)
    _, x, y = dataset.tensors
    import torch

    for ranks in by_step.values():
        size = ranks[0]["size"]
        assert len(ranks) == size and all(r["size"] == size for r in ranks), ranks
        optimizer.zero_grad()
        grads = [torch.zeros_like(p) for p in model.parameters()]
        for rank in ranks:
            model.zero_grad()
            index = torch.tensor(rank["indices"])
            loss = torch.nn.functional.mse_loss(model(x[index]), y[index])
            loss.backward()
            for total, p in zip(grads, model.parameters()):
                total += p.grad
        for total, p in zip(grads, model.parameters()):
            p.grad = total / size
        optimizer.step()
    return [p.detach().flatten().tolist() for p in model.parameters()]
