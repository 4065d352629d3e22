"""The rendezvous store that tuttirun hosts for a Gloo job.

A dictionary behind a small authenticated TCP protocol (docs/architecture.md, "Rendezvous
store protocol"); the C++ core's client and `store_client.StoreClient` speak it:

    request : "TST1" | op:u8 | len:u32 secret | len:u32 key | len:u32 value
    response: status:u8 | len:u32 value

All integers are unsigned 32-bit big-endian. A request whose secret is not the job's is
answered UNAUTHORIZED and the connection is closed; so is a malformed one (BAD_REQUEST).
Waiting for a key is the client's business (it polls GET), so the server never blocks on
anything but its sockets.

The server is one thread around a selector, so a crowd of connections costs file
descriptors, not threads. It holds up against peers that do not know the secret (another
local user, or any host that can reach the port): a connection must show the secret within
AUTH_SECONDS of connecting, every request must arrive whole within REQUEST_SECONDS of its
first byte, an authenticated connection idle for IDLE_SECONDS is closed (clients reconnect),
the number of open connections is capped, and when the cap (or the file-descriptor limit)
is reached the oldest connection that has not yet shown the secret makes room. Errors of
accept() (EMFILE, ENFILE, ENOBUFS, ECONNABORTED, ...) are transient: the server backs off
and keeps accepting.
"""

import collections
import errno
import hmac
import resource
import selectors
import socket
import struct
import threading
import time

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

# Defaults of the limits described above (StoreServer takes each as an argument).
AUTH_SECONDS = 10.0
REQUEST_SECONDS = 60.0
IDLE_SECONDS = 300.0
MAX_CONNECTIONS = 4096

# How long and how much a refused client may keep sending before we close on it.
_DRAIN_SECONDS = 2.0
_DRAIN_BYTES = 1 << 20

# File descriptors kept free for the launcher itself (pipes of its ranks, ssh, logs).
_RESERVED_FDS = 64
# New connections taken per turn of the loop, so that reading requests is never starved.
_ACCEPTS_PER_TURN = 64


def encode_response(status, value=b""):
    return bytes([status]) + _U32.pack(len(value)) + value


def encode_request(op, secret, key, value=b""):
    """One request in wire format (used by the Python client and by tests)."""
    parts = [MAGIC, bytes([op])]
    for field in (secret, key, value):
        parts.append(_U32.pack(len(field)))
        parts.append(field)
    return b"".join(parts)


class _Refused(Exception):
    """The request cannot be served; the connection is answered `status` and closed."""

    def __init__(self, status):
        super().__init__(status)
        self.status = status


def _field(buf, offset, limit):
    """(field, next offset) of the len:u32 field at `offset`; None while incomplete.
    Raises _Refused(BAD_REQUEST) as soon as the length exceeds `limit`."""
    if len(buf) < offset + 4:
        return None
    (length,) = _U32.unpack_from(buf, offset)
    if length > limit:
        raise _Refused(STATUS_BAD_REQUEST)
    if len(buf) < offset + 4 + length:
        return None
    return bytes(buf[offset + 4:offset + 4 + length]), offset + 4 + length


def parse_request(buf, secret):
    """Parses one request at the start of `buf`: (op, key, value, consumed), or None while
    incomplete. Checks the magic and the secret as soon as they are complete (before any
    further byte is read) and raises _Refused with the status to answer."""
    if len(buf) >= 4 and bytes(buf[:4]) != MAGIC:
        raise _Refused(STATUS_BAD_REQUEST)
    if len(buf) < 5:
        return None
    op = buf[4]
    try:
        field = _field(buf, 5, MAX_SECRET_BYTES)
    except _Refused:
        raise _Refused(STATUS_UNAUTHORIZED) from None
    if field is None:
        return None
    given, offset = field
    if not hmac.compare_digest(given, secret):
        raise _Refused(STATUS_UNAUTHORIZED)
    field = _field(buf, offset, MAX_KEY_BYTES)
    if field is None:
        return None
    key, offset = field
    field = _field(buf, offset, MAX_VALUE_BYTES)
    if field is None:
        return None
    value, offset = field
    if op not in (OP_SET, OP_GET):
        raise _Refused(STATUS_BAD_REQUEST)
    return op, key, value, offset


class _Connection:
    def __init__(self, sock, now):
        self.sock = sock
        self.inbuf = bytearray()
        self.outbuf = bytearray()
        self.authenticated = False
        self.opened = now
        self.last_active = now
        self.request_started = None  # when the first byte of a pending request arrived
        self.closing_since = None    # set once refused: flush the answer, drain, close
        self.drained = 0


def _descriptor_limit():
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


class StoreServer:
    """Serves one job's key/value store on `host:port` (port 0 picks a free one).

    Only requests that carry `secret` are answered. Use as a context manager, or call
    start() and close(). The limits default to the module's constants.
    """

    def __init__(self, host, secret, port=0, auth_seconds=AUTH_SECONDS,
                 request_seconds=REQUEST_SECONDS, idle_seconds=IDLE_SECONDS,
                 max_connections=MAX_CONNECTIONS):
        if not secret:
            raise ValueError("the rendezvous store needs a non-empty secret")
        self._secret = secret.encode() if isinstance(secret, str) else bytes(secret)
        self._auth_seconds = auth_seconds
        self._request_seconds = request_seconds
        self._idle_seconds = idle_seconds
        self._max_connections = max(1, min(max_connections,
                                           _descriptor_limit() - _RESERVED_FDS))
        self._data = {}
        self._lock = threading.Lock()
        # fd -> _Connection, oldest first (eviction takes the oldest unauthenticated one)
        self._connections = collections.OrderedDict()
        self._closed = False
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._listener = socket.socket(family, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind((host, port))
        self._listener.listen(1024)
        self._listener.setblocking(False)
        self.host = host
        self.port = self._listener.getsockname()[1]
        self._selector = selectors.DefaultSelector()
        self._wakeup_read, self._wakeup_write = socket.socketpair()
        self._wakeup_read.setblocking(False)
        self._accept_paused_until = 0.0
        self._accept_backoff = 0.0
        self.accept_errors = 0  # accept() failures survived (for tests and diagnostics)
        self.evicted = 0        # connections closed to make room
        self._thread = threading.Thread(target=self._loop, name="tutti-store", daemon=True)

    def start(self):
        self._selector.register(self._listener, selectors.EVENT_READ, None)
        self._selector.register(self._wakeup_read, selectors.EVENT_READ, None)
        self._thread.start()
        return self

    def close(self):
        """Stops accepting, closes every connection and waits for the server thread."""
        self._closed = True
        try:
            self._wakeup_write.send(b"x")
        except OSError:
            pass
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        else:
            self._listener.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info):
        self.close()

    @property
    def connection_count(self):
        return len(self._connections)

    # Direct access for the launcher itself (no network round trip).
    def set(self, key, value):
        with self._lock:
            self._data[_as_bytes(key)] = bytes(value)

    def get(self, key):
        with self._lock:
            return self._data.get(_as_bytes(key))

    # ---- the server thread ----

    def _loop(self):
        try:
            while not self._closed:
                now = time.monotonic()
                if self._accept_paused_until and now >= self._accept_paused_until:
                    self._accept_paused_until = 0.0
                    self._selector.register(self._listener, selectors.EVENT_READ, None)
                for key, events in self._selector.select(timeout=0.25):
                    if key.fileobj is self._listener:
                        self._accept_some()
                    elif key.fileobj is self._wakeup_read:
                        pass
                    else:
                        self._service(key.data, events)
                self._expire(time.monotonic())
        finally:
            for conn in list(self._connections.values()):
                self._drop(conn)
            self._selector.close()
            self._listener.close()
            self._wakeup_read.close()
            self._wakeup_write.close()

    def _accept_some(self):
        for _ in range(_ACCEPTS_PER_TURN):
            if len(self._connections) >= self._max_connections and not self._evict_one():
                self._pause_accepting()
                return
            try:
                sock, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                # Out of descriptors or buffers, or a peer that gave up: none of it ends the
                # store. Make room if we can, and retry after a growing pause.
                self.accept_errors += 1
                if exc.errno in (errno.EMFILE, errno.ENFILE):
                    self._evict_one()
                self._pause_accepting()
                return
            self._accept_backoff = 0.0
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = _Connection(sock, time.monotonic())
            self._connections[sock.fileno()] = conn
            self._selector.register(sock, selectors.EVENT_READ, conn)

    def _pause_accepting(self):
        """Stops watching the listener for a growing pause (10 ms doubling to 0.5 s)."""
        self._accept_backoff = min(max(self._accept_backoff * 2, 0.01), 0.5)
        self._accept_paused_until = time.monotonic() + self._accept_backoff
        self._selector.unregister(self._listener)

    def _evict_one(self):
        """Closes the oldest connection that has not shown the secret; False if none."""
        for conn in self._connections.values():
            if not conn.authenticated:
                self.evicted += 1
                self._drop(conn)
                return True
        return False

    def _service(self, conn, events):
        if events & selectors.EVENT_READ:
            try:
                data = conn.sock.recv(1 << 20)
            except (BlockingIOError, InterruptedError):
                data = None
            except OSError:
                self._drop(conn)
                return
            if data == b"":
                self._drop(conn)
                return
            if data:
                now = time.monotonic()
                conn.last_active = now
                if conn.closing_since is not None:
                    conn.drained += len(data)
                    if conn.drained > _DRAIN_BYTES:
                        self._drop(conn)
                    return
                if conn.request_started is None:
                    conn.request_started = now
                conn.inbuf += data
                self._answer_requests(conn)
        if conn.sock.fileno() >= 0 and conn.outbuf:
            self._flush(conn)

    def _answer_requests(self, conn):
        while conn.inbuf:
            try:
                parsed = parse_request(conn.inbuf, self._secret)
            except _Refused as refused:
                self._refuse(conn, refused.status)
                return
            if parsed is None:
                return
            op, key, value, consumed = parsed
            del conn.inbuf[:consumed]
            conn.authenticated = True
            conn.request_started = time.monotonic() if conn.inbuf else None
            if op == OP_SET:
                with self._lock:
                    self._data[key] = value
                conn.outbuf += encode_response(STATUS_OK)
            else:
                with self._lock:
                    found = self._data.get(key)
                conn.outbuf += (encode_response(STATUS_NOT_FOUND) if found is None
                                else encode_response(STATUS_OK, found))

    def _refuse(self, conn, status):
        """Answers `status`, then ends the connection so the client still reads the answer.

        Closing a socket with unread input makes the kernel send RST, which can destroy the
        answer before the client reads it. So: send the answer and FIN, then discard what
        the client still sends (bounded in bytes and time) until it closes its side.
        """
        conn.inbuf = bytearray()
        conn.outbuf += encode_response(status)
        conn.closing_since = time.monotonic()
        conn.authenticated = False  # evictable from now on

    def _flush(self, conn):
        try:
            sent = conn.sock.send(conn.outbuf)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:
            self._drop(conn)
            return
        del conn.outbuf[:sent]
        if conn.outbuf:
            self._selector.modify(conn.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, conn)
            return
        self._selector.modify(conn.sock, selectors.EVENT_READ, conn)
        if conn.closing_since is not None:
            try:
                conn.sock.shutdown(socket.SHUT_WR)
            except OSError:
                self._drop(conn)

    def _expire(self, now):
        """Closes connections past their deadline."""
        for conn in list(self._connections.values()):
            if conn.closing_since is not None:
                overdue = now - conn.closing_since > _DRAIN_SECONDS
            elif not conn.authenticated:
                overdue = now - conn.opened > self._auth_seconds
            elif conn.request_started is not None:
                overdue = now - conn.request_started > self._request_seconds
            else:
                overdue = now - conn.last_active > self._idle_seconds
            if overdue:
                self._drop(conn)

    def _drop(self, conn):
        fd = conn.sock.fileno()
        if fd < 0:
            return
        self._connections.pop(fd, None)
        try:
            self._selector.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        conn.sock.close()


def _as_bytes(key):
    return key.encode() if isinstance(key, str) else bytes(key)
