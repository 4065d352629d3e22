"""A minimal rendezvous store speaking tuttirun's protocol (docs/architecture.md), for the
core's tests. tutti.runner hosts the real one.

    python3 store_server.py --secret S [--port 0]   # prints "PORT <n>" once listening
"""

import argparse
import socketserver
import struct
import sys
import threading

OP_SET, OP_GET = 1, 2
OK, NOT_FOUND, UNAUTHORIZED, BAD_REQUEST = 0, 1, 2, 3


class Store:
    def __init__(self, secret):
        self.secret = secret
        self.data = {}
        self.lock = threading.Lock()


def _read_exact(stream, n):
    data = stream.read(n)
    if data is None or len(data) != n:
        raise EOFError
    return data


def _read_field(stream):
    (n,) = struct.unpack(">I", _read_exact(stream, 4))
    return _read_exact(stream, n)


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        store = self.server.store
        try:
            while True:
                magic = self.rfile.read(4)
                if not magic:
                    return
                if magic != b"TST1":
                    self._reply(BAD_REQUEST)
                    return
                op = _read_exact(self.rfile, 1)[0]
                secret, key, value = (_read_field(self.rfile) for _ in range(3))
                if secret != store.secret:
                    self._reply(UNAUTHORIZED)
                    return
                with store.lock:
                    if op == OP_SET:
                        store.data[key] = value
                        self._reply(OK)
                    elif op == OP_GET and key in store.data:
                        self._reply(OK, store.data[key])
                    elif op == OP_GET:
                        self._reply(NOT_FOUND)
                    else:
                        self._reply(BAD_REQUEST)
        except (EOFError, ConnectionError):
            return

    def _reply(self, status, value=b""):
        self.wfile.write(struct.pack(">BI", status, len(value)) + value)
        self.wfile.flush()


class Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True


def start(secret, host="127.0.0.1", port=0):
    """Starts a store in a background thread; returns the server (server_address has the port)."""
    server = Server((host, port), Handler)
    server.store = Store(secret.encode() if isinstance(secret, str) else secret)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--secret", required=True)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    server = start(args.secret, port=args.port)
    print("PORT %d" % server.server_address[1], flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    sys.exit(main())
