"""The rendezvous store that tuttirun hosts for a Gloo job.

A dictionary behind a small authenticated TCP protocol (docs/architecture.md, "Rendezvous
store protocol"); the C++ core's client and `store_client.StoreClient` speak it:

    request : "TST1" | op:u8 | len:u32 secret | len:u32 key | len:u32 value
    response: status:u8 | len:u32 value

All integers are unsigned 32-bit big-endian. A request whose secret is not the job's is
answered UNAUTHORIZED and the connection is closed; so is a malformed one (BAD_REQUEST).
Waiting for a key is the client's business (it polls GET), so the server never blocks on
anything but its sockets.
"""

import hmac
import socket
import struct
import threading

MAGIC = b"TST1"

OP_SET = 1
OP_GET = 2

STATUS_OK = 0
STATUS_NOT_FOUND = 1
STATUS_UNAUTHORIZED = 2
STATUS_BAD_REQUEST = 3

# Bounds that keep a confused or hostile peer from making the server allocate gigabytes.
MAX_SECRET_BYTES = 1024
MAX_KEY_BYTES = 64 * 1024
MAX_VALUE_BYTES = 1 << 30

_U32 = struct.Struct(">I")

# How long and how much a refused client may keep sending before we close on it.
_DRAIN_SECONDS = 2.0
_DRAIN_BYTES = 1 << 20


class _Closed(Exception):
    """The peer closed the connection (cleanly or in the middle of a request)."""


def _read_exact(conn, count):
    chunks = []
    while count:
        chunk = conn.recv(min(count, 1 << 20))
        if not chunk:
            raise _Closed()
        chunks.append(chunk)
        count -= len(chunk)
    return b"".join(chunks)


def _read_field(conn, limit):
    """Reads one len:u32-prefixed field; None when it is longer than `limit`."""
    (length,) = _U32.unpack(_read_exact(conn, 4))
    if length > limit:
        return None
    return _read_exact(conn, length)


def encode_response(status, value=b""):
    return bytes([status]) + _U32.pack(len(value)) + value


def encode_request(op, secret, key, value=b""):
    """One request in wire format (used by the Python client and by tests)."""
    parts = [MAGIC, bytes([op])]
    for field in (secret, key, value):
        parts.append(_U32.pack(len(field)))
        parts.append(field)
    return b"".join(parts)


class StoreServer:
    """Serves one job's key/value store on `host:port` (port 0 picks a free one).

    Only requests that carry `secret` are answered. Use as a context manager, or call
    start() and close().
    """

    def __init__(self, host, secret, port=0):
        if not secret:
            raise ValueError("the rendezvous store needs a non-empty secret")
        self._secret = secret.encode() if isinstance(secret, str) else bytes(secret)
        self._data = {}
        self._lock = threading.Lock()
        self._connections = set()
        self._closed = False
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._listener = socket.socket(family, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind((host, port))
        self._listener.listen(128)
        self.host = host
        self.port = self._listener.getsockname()[1]
        self._acceptor = threading.Thread(target=self._accept_loop, name="tutti-store-accept",
                                          daemon=True)

    def start(self):
        self._acceptor.start()
        return self

    def close(self):
        """Stops accepting, closes every connection and waits for the acceptor."""
        self._closed = True
        try:
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._acceptor.is_alive():
            self._acceptor.join(timeout=5)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info):
        self.close()

    # Direct access for the launcher itself (no network round trip).
    def set(self, key, value):
        with self._lock:
            self._data[_as_bytes(key)] = bytes(value)

    def get(self, key):
        with self._lock:
            return self._data.get(_as_bytes(key))

    def _accept_loop(self):
        while not self._closed:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._connections.add(conn)
            threading.Thread(target=self._serve, args=(conn,), name="tutti-store-conn",
                             daemon=True).start()

    def _serve(self, conn):
        try:
            while not self._closed:
                if not self._handle_one(conn):
                    _close_after_refusal(conn)
                    return
        except (_Closed, OSError):
            pass
        finally:
            with self._lock:
                self._connections.discard(conn)
            conn.close()

    def _handle_one(self, conn):
        """Answers one request; False when the connection must be closed."""
        try:
            magic = _read_exact(conn, 4)
        except _Closed:
            return False
        if magic != MAGIC:
            conn.sendall(encode_response(STATUS_BAD_REQUEST))
            return False
        op = _read_exact(conn, 1)[0]
        secret = _read_field(conn, MAX_SECRET_BYTES)
        # Check the secret before reading anything the client may have sent after it.
        if secret is None or not hmac.compare_digest(secret, self._secret):
            conn.sendall(encode_response(STATUS_UNAUTHORIZED))
            return False
        key = _read_field(conn, MAX_KEY_BYTES)
        value = _read_field(conn, MAX_VALUE_BYTES) if key is not None else None
        if key is None or value is None or op not in (OP_SET, OP_GET):
            conn.sendall(encode_response(STATUS_BAD_REQUEST))
            return False
        if op == OP_SET:
            with self._lock:
                self._data[key] = value
            conn.sendall(encode_response(STATUS_OK))
        else:
            with self._lock:
                found = self._data.get(key)
            if found is None:
                conn.sendall(encode_response(STATUS_NOT_FOUND))
            else:
                conn.sendall(encode_response(STATUS_OK, found))
        return True


def _close_after_refusal(conn):
    """Ends a refused connection so that the client still reads our answer.

    Closing a socket with unread input makes the kernel send RST, which can destroy the
    answer before the client reads it. So: send FIN, then discard what the client still
    sends (bounded in bytes and time) until it closes its side.
    """
    try:
        conn.shutdown(socket.SHUT_WR)
        conn.settimeout(_DRAIN_SECONDS)
        drained = 0
        while drained < _DRAIN_BYTES:
            chunk = conn.recv(65536)
            if not chunk:
                break
            drained += len(chunk)
    except OSError:
        pass


def _as_bytes(key):
    return key.encode() if isinstance(key, str) else bytes(key)
