"""The worker processes of an elastic job, started and stopped one at a time.

Each worker leads its own session (like a rank of a fixed job), so stopping it stops
everything it started. Exits are reported through a queue as (worker id, returncode).
Output lines carry the worker id: `[3]<stdout>: ...` (a worker's rank may change).
"""

import queue
import subprocess
import threading

from .. import sessions


class WorkerPool:
    def __init__(self, sink, grace_seconds):
        self._sink = sink
        self._grace = grace_seconds
        self._procs = {}
        self.exits = queue.Queue()

    def start(self, worker_id, spec):
        """Starts `spec` (a supervisor.ProcessSpec); OSError when it cannot start."""
        proc = subprocess.Popen(
            spec.argv, env=spec.env, start_new_session=True,
            stdin=subprocess.PIPE if spec.stdin_data is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self._procs[worker_id] = proc
        self._sink.attach(worker_id, "stdout", proc.stdout)
        self._sink.attach(worker_id, "stderr", proc.stderr)
        if spec.stdin_data is not None:
            try:
                proc.stdin.write(spec.stdin_data)
                proc.stdin.flush()
            except OSError:
                pass  # it died already; its exit status tells the story
        threading.Thread(target=lambda: self.exits.put((worker_id, proc.wait())), daemon=True,
                         name="tutti-elastic-wait-%d" % worker_id).start()

    def stop(self, worker_ids):
        """SIGTERM, then SIGKILL after the grace period, to the workers' sessions."""
        procs = [self._procs[w] for w in worker_ids if w in self._procs]
        for proc in procs:
            if proc.stdin is not None:
                try:
                    proc.stdin.close()
                except OSError:
                    pass
        sessions.stop_sessions([proc.pid for proc in procs], self._grace)
        for proc in procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass

    def stop_all(self):
        self.stop(list(self._procs))
        self._sink.join(timeout=2)
