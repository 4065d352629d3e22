"""A Python client of tuttirun's rendezvous store (the C++ core has its own).

Used by the workers of `tutti.runner.run` to fetch the function and hand back its result,
and by tests that talk to a live store.
"""

import socket
import struct
import time

from . import store


class StoreError(RuntimeError):
    """The store refused a request or the connection failed."""


class _Lost(Exception):
    """The connection ended before a whole answer arrived."""


class StoreClient:
    """One connection to a store; every request carries the job's secret."""

    def __init__(self, host, port, secret, timeout=30.0):
        self._secret = secret.encode() if isinstance(secret, str) else bytes(secret)
        self._timeout = timeout
        self._address = (host, int(port))
        self._sock = None
        self._connect()

    def _connect(self):
        try:
            self._sock = socket.create_connection(self._address, timeout=self._timeout)
        except OSError as exc:
            raise StoreError("cannot reach the rendezvous store at %s:%s: %s"
                             % (self._address + (exc,))) from None
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    @classmethod
    def from_environment(cls, environ, prefix="TUTTI_GLOO_", secret_variable=None,
                         timeout=30.0):
        """Connects to the store named by <prefix>RENDEZVOUS_ADDR/_PORT and <prefix>SECRET."""
        try:
            host = environ[prefix + "RENDEZVOUS_ADDR"]
            port = environ[prefix + "RENDEZVOUS_PORT"]
            secret = environ[secret_variable or prefix + "SECRET"]
        except KeyError as exc:
            raise StoreError("environment variable %s is not set; was this process started "
                             "by tuttirun?" % exc.args[0]) from None
        return cls(host, port, secret, timeout=timeout)

    def close(self):
        if self._sock is not None:
            self._sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def set(self, key, value):
        status, _ = self._request(store.OP_SET, key, value)
        if status != store.STATUS_OK:
            raise StoreError("the store refused SET %r (status %d)" % (key, status))

    def get(self, key):
        """The value under `key`, or None when there is none yet."""
        status, value = self._request(store.OP_GET, key, b"")
        if status == store.STATUS_NOT_FOUND:
            return None
        if status != store.STATUS_OK:
            raise StoreError("the store refused GET %r (status %d)" % (key, status))
        return value

    def wait(self, key, timeout=60.0, poll_interval=0.01):
        """Polls GET until `key` exists; StoreError after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.get(key)
            if value is not None:
                return value
            if time.monotonic() >= deadline:
                raise StoreError("key %r did not appear in the store within %s s"
                                 % (key, timeout))
            time.sleep(poll_interval)

    def _request(self, op, key, value):
        key = key.encode() if isinstance(key, str) else bytes(key)
        message = store.encode_request(op, self._secret, key, bytes(value))
        try:
            return self._exchange(message)
        except (OSError, _Lost):
            pass
        # The store closes connections that stay idle; SET and GET are idempotent, so one
        # fresh connection gets a second try.
        self.close()
        self._connect()
        try:
            return self._exchange(message)
        except (OSError, _Lost) as exc:
            raise StoreError("rendezvous store connection failed: %s" % exc) from None

    def _exchange(self, message):
        self._sock.sendall(message)
        header = self._read_exact(5)
        status = header[0]
        (length,) = struct.unpack(">I", header[1:])
        if status > store.STATUS_BAD_REQUEST or (status != store.STATUS_OK and length) \
                or length > store.MAX_VALUE_BYTES:
            raise StoreError("the service at %s:%d is not a tutti rendezvous store (it "
                             "answered %r)" % (self._address + (header,)))
        return status, self._read_exact(length)

    def _read_exact(self, count):
        chunks = []
        while count:
            chunk = self._sock.recv(min(count, 1 << 20))
            if not chunk:
                raise _Lost("the rendezvous store closed the connection")
            chunks.append(chunk)
            count -= len(chunk)
        return b"".join(chunks)
