"""A second host for the multi-host tests: a network namespace running its own sshd.

The namespace is joined to this one by a veth pair whose two ends carry the same name, as
a cluster's hosts share an interface name. A private sshd listens inside it, on the
namespace's address only, with a throwaway host key, and accepts one throwaway client
key; tuttirun reaches it with --ssh-port and --ssh-identity-file like any remote host.
The namespace shares this machine's file system and process table, so the remote side
finds the same Python, the same working directory and the same tutti packages.

`start()` raises Unavailable when this machine cannot host the namespace at all (not
root, no `ip netns`); a missing OpenSSH is an error, since tools/setup installs it.
"""

import os
import random
import shutil
import signal
import socket
import subprocess
import time

SSHD = "/usr/sbin/sshd"
# sshd refuses to start without its privilege-separation directory.
PRIVSEP_DIR = "/run/sshd"
COMMAND_TIMEOUT = 30


class Unavailable(Exception):
    """This machine cannot host a namespace (the reason is the message)."""


def _run(argv, timeout=COMMAND_TIMEOUT, check=True):
    return subprocess.run(argv, check=check, timeout=timeout, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _ip(*args, namespace=None):
    prefix = ["ip", "netns", "exec", namespace] if namespace else []
    _run(prefix + ["ip"] + list(args))


def _sshd_config(workdir, address, port):
    """An sshd that lets root in with the client key below, and nothing else."""
    return "\n".join([
        "ListenAddress %s:%d" % (address, port),
        "HostKey %s" % os.path.join(workdir, "host_key"),
        "PidFile %s" % os.path.join(workdir, "sshd.pid"),
        "AuthorizedKeysFile %s" % os.path.join(workdir, "authorized_keys"),
        "PermitRootLogin yes",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        # Without PAM, and not checking the permissions of the temporary key files.
        "UsePAM no",
        "StrictModes no",
        "UseDNS no",
        "PrintMotd no",
        "PrintLastLog no",
        "MaxStartups 64",
        "LogLevel VERBOSE",
        "",
    ])


class NamespaceHost:
    """The namespace, its veth pair and its sshd; close() removes all of them."""

    def __init__(self, workdir):
        tag = "%05d" % random.randrange(100000)
        self.namespace, self.iface, self._peer = "tutti%s" % tag, "tt%s" % tag, "tp%s" % tag
        subnet = "10.%d.%d" % (random.randrange(100, 250), random.randrange(1, 250))
        self.local, self.remote = subnet + ".1", subnet + ".2"
        # An address on the shared link that nobody holds: ssh gets "No route to host".
        self.unreachable = subnet + ".3"
        self.ssh_port = 2222
        self.workdir = str(workdir)
        self.identity_file = os.path.join(self.workdir, "client_key")
        self.sshd_log = os.path.join(self.workdir, "sshd.log")
        self.sshd = None
        self._created_namespace = False

    # --- setting up -------------------------------------------------------------------

    def _create_namespace(self):
        try:
            _ip("netns", "add", self.namespace)
        except (subprocess.CalledProcessError, OSError) as exc:
            raise Unavailable("cannot create a network namespace: %s"
                              % (getattr(exc, "stderr", None) or exc))
        self._created_namespace = True
        _ip("link", "add", self.iface, "type", "veth", "peer", "name", self._peer)
        _ip("link", "set", self._peer, "netns", self.namespace)
        _ip("addr", "add", self.local + "/24", "dev", self.iface)
        _ip("link", "set", self.iface, "up")
        _ip("link", "set", self._peer, "name", self.iface, namespace=self.namespace)
        _ip("addr", "add", self.remote + "/24", "dev", self.iface, namespace=self.namespace)
        _ip("link", "set", self.iface, "up", namespace=self.namespace)
        _ip("link", "set", "lo", "up", namespace=self.namespace)

    def _create_keys(self):
        host_key = os.path.join(self.workdir, "host_key")
        for key in (host_key, self.identity_file):
            _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "tutti-test",
                  "-f", key])
        shutil.copyfile(self.identity_file + ".pub",
                        os.path.join(self.workdir, "authorized_keys"))

    def _start_sshd(self):
        config = os.path.join(self.workdir, "sshd_config")
        with open(config, "w") as handle:
            handle.write(_sshd_config(self.workdir, self.remote, self.ssh_port))
        os.makedirs(PRIVSEP_DIR, mode=0o755, exist_ok=True)
        _run([SSHD, "-t", "-f", config])  # config errors surface here, with sshd's words
        with open(self.sshd_log, "w") as log:
            # `ip netns exec` execs sshd in place, so self.sshd.pid is the listener.
            self.sshd = subprocess.Popen(
                ["ip", "netns", "exec", self.namespace, SSHD, "-D", "-e", "-f", config],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 15
        while True:
            if self.sshd.poll() is not None:
                raise RuntimeError("sshd exited with code %d:\n%s"
                                   % (self.sshd.returncode, self.log()))
            try:
                socket.create_connection((self.remote, self.ssh_port), timeout=1).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("sshd does not accept connections:\n%s" % self.log())
                time.sleep(0.05)

    def _check_login(self):
        result = _run(["ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
                       "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
                       "-p", str(self.ssh_port), "-i", self.identity_file, self.remote,
                       "readlink /proc/self/ns/net"], check=False)
        if result.returncode != 0 or result.stdout.strip() != self.netns_id():
            raise RuntimeError("ssh to the namespace failed (code %d): %s\n%s"
                               % (result.returncode, result.stdout + result.stderr, self.log()))

    # --- using ------------------------------------------------------------------------

    def tuttirun_args(self):
        """The options that let tuttirun log in to this host."""
        return ["--ssh-port", str(self.ssh_port), "--ssh-identity-file", self.identity_file]

    def netns_id(self):
        """What readlink("/proc/self/ns/net") says for a process on this host."""
        return _run(["ip", "netns", "exec", self.namespace, "readlink",
                     "/proc/self/ns/net"]).stdout.strip()

    def processes(self):
        """{pid: command line} of the processes in the namespace, sshd's listener excepted."""
        pids = _run(["ip", "netns", "pids", self.namespace]).stdout.split()
        found = {}
        for pid in map(int, pids):
            if self.sshd is not None and pid == self.sshd.pid:
                continue
            try:
                with open("/proc/%d/cmdline" % pid, "rb") as handle:
                    found[pid] = handle.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue  # ended meanwhile
        return found

    def wait_until_idle(self, timeout=10.0):
        """Waits until only the sshd listener is left; returns the others still there."""
        deadline = time.monotonic() + timeout
        while True:
            left = self.processes()
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(0.1)

    def log(self):
        try:
            with open(self.sshd_log, errors="replace") as handle:
                return "--- sshd log ---\n" + handle.read()[-8000:]
        except OSError:
            return "(no sshd log)"

    # --- tearing down -----------------------------------------------------------------

    def close(self):
        if self.sshd is not None and self.sshd.poll() is None:
            self.sshd.terminate()
            try:
                self.sshd.wait(5)
            except subprocess.TimeoutExpired:
                self.sshd.kill()
                self.sshd.wait(5)
        if self._created_namespace:
            # Whatever a failed test left in the namespace would keep it alive.
            for pid in self.processes():
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            _run(["ip", "netns", "del", self.namespace], check=False)
        _run(["ip", "link", "del", self.iface], check=False)


def start(workdir):
    """A ready NamespaceHost (sshd accepting the client key), or Unavailable."""
    if os.geteuid() != 0:
        raise Unavailable("network namespaces need root")
    if shutil.which("ip") is None:
        raise Unavailable("`ip` (iproute2) is not installed")
    missing = [tool for tool in (SSHD, "ssh", "ssh-keygen") if shutil.which(tool) is None]
    if missing:
        raise RuntimeError("OpenSSH is missing (%s): tools/setup installs openssh-server "
                           "and openssh-client" % ", ".join(missing))
    host = NamespaceHost(workdir)
    try:
        host._create_namespace()
        host._create_keys()
        host._start_sshd()
        host._check_login()
    except BaseException:
        host.close()
        raise
    return host
