"""A crowd of connections to one TCP port from peers that do not know the store's secret:
idle ones, ones that stop half-way through a request, ones with a wrong secret. Closed
connections are reopened, so the crowd stays as large as the server lets it be.
Loopback only."""

import errno
import selectors
import socket
import struct
import threading
import time

HALF_REQUEST = b"TST1\x02" + struct.pack(">I", 32) + b"not-the-whole-secret"
WRONG_SECRET = b"TST1\x02" + struct.pack(">I", 5) + b"wrong" + struct.pack(">I", 1) + b"k" \
    + struct.pack(">I", 0)


class Flood:
    def __init__(self, port, count):
        self.port = port
        self.count = count
        self.opened = 0
        self.reopened = 0
        self._stop = threading.Event()
        self._selector = selectors.DefaultSelector()
        self._sockets = set()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc_info):
        self._stop.set()
        self._thread.join(timeout=10)
        for sock in list(self._sockets):
            sock.close()
        self._selector.close()

    def _open(self, kind):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        code = sock.connect_ex(("127.0.0.1", self.port))
        if code not in (0, errno.EINPROGRESS):
            sock.close()
            return
        self._sockets.add(sock)
        self._selector.register(sock, selectors.EVENT_WRITE, kind)
        self.opened += 1

    def _run(self):
        kinds = ["idle", "idle", "half", "wrong"]
        while len(self._sockets) < self.count and not self._stop.is_set():
            self._open(kinds[self.opened % len(kinds)])
        while not self._stop.is_set():
            for key, events in self._selector.select(timeout=0.05):
                sock, kind = key.fileobj, key.data
                if events & selectors.EVENT_WRITE:
                    # connected: say our piece once, then only watch for the server closing
                    try:
                        if kind == "half":
                            sock.send(HALF_REQUEST)
                        elif kind == "wrong":
                            sock.send(WRONG_SECRET)
                    except OSError:
                        pass
                    self._selector.modify(sock, selectors.EVENT_READ, kind)
                    continue
                try:
                    data = sock.recv(4096)
                except OSError:
                    data = b""
                if not data:
                    self._selector.unregister(sock)
                    self._sockets.discard(sock)
                    sock.close()
                    self.reopened += 1
                    self._open(kind)
