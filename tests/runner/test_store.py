"""The rendezvous store: protocol of docs/architecture.md, authentication, bounds."""

import socket
import struct
import sys
import threading

import pytest

import runner_helpers
from tutti.runner import store
from tutti.runner.store_client import StoreClient, StoreError

SECRET = "job-secret"


@pytest.fixture
def server():
    with store.StoreServer("127.0.0.1", SECRET) as running:
        yield running


def raw_exchange(server, payload):
    """Sends raw bytes; returns (status, value, whether the server then closed)."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as conn:
        conn.sendall(payload)
        header = b""
        while len(header) < 5:
            chunk = conn.recv(5 - len(header))
            assert chunk, "server closed without answering"
            header += chunk
        (length,) = struct.unpack(">I", header[1:])
        value = b""
        while len(value) < length:
            value += conn.recv(length - len(value))
        conn.settimeout(0.3)  # a refused request is closed at once; a good one stays open
        try:
            closed = conn.recv(1) == b""
        except socket.timeout:
            closed = False
        return header[0], value, closed


def test_set_then_get_over_one_connection(server):
    with StoreClient("127.0.0.1", server.port, SECRET) as client:
        assert client.get("global/rank0") is None
        client.set("global/rank0", b"addr-0")
        client.set("global/rank1", b"")
        assert client.get("global/rank0") == b"addr-0"
        assert client.get("global/rank1") == b""
        client.set("global/rank0", b"replaced")
        assert client.get("global/rank0") == b"replaced"
    assert server.get("global/rank0") == b"replaced"


def test_wire_format_byte_for_byte(server):
    request = b"TST1" + b"\x01" + struct.pack(">I", len(SECRET)) + SECRET.encode() \
        + struct.pack(">I", 1) + b"k" + struct.pack(">I", 3) + b"v\x00v"
    assert raw_exchange(server, request) == (store.STATUS_OK, b"", False)
    get = b"TST1\x02" + struct.pack(">I", len(SECRET)) + SECRET.encode() \
        + struct.pack(">I", 1) + b"k" + struct.pack(">I", 0)
    assert raw_exchange(server, get) == (store.STATUS_OK, b"v\x00v", False)
    missing = get.replace(b"\x00\x00\x00\x01k", b"\x00\x00\x00\x01m")
    assert raw_exchange(server, missing) == (store.STATUS_NOT_FOUND, b"", False)


@pytest.mark.parametrize("secret", [b"", b"wrong", SECRET.encode() + b"x", SECRET.encode()[:-1]])
def test_requests_without_the_secret_are_refused_and_closed(server, secret):
    server.set("k", b"private")
    for op in (store.OP_GET, store.OP_SET):
        status, value, closed = raw_exchange(server, store.encode_request(op, secret, b"k", b"x"))
        assert (status, value, closed) == (store.STATUS_UNAUTHORIZED, b"", True)
    assert server.get("k") == b"private"


def test_client_reports_unauthorized(server):
    with StoreClient("127.0.0.1", server.port, "guess") as client:
        with pytest.raises(StoreError, match="status 2"):
            client.get("k")


@pytest.mark.parametrize("payload", [
    b"HTTP/1.1 GET /\r\n\r\n",
    store.encode_request(9, SECRET.encode(), b"k"),
    b"TST1\x02" + struct.pack(">I", len(SECRET)) + SECRET.encode() + struct.pack(">I", 1 << 30),
])
def test_malformed_requests_are_bad_requests(server, payload):
    status, _, closed = raw_exchange(server, payload)
    assert status == store.STATUS_BAD_REQUEST and closed


def test_oversized_secret_is_refused_without_reading_it(server):
    payload = b"TST1\x02" + struct.pack(">I", 1 << 31)
    status, _, closed = raw_exchange(server, payload)
    assert status == store.STATUS_UNAUTHORIZED and closed


def test_large_values_and_many_clients(server):
    blob = bytes(range(256)) * 8192  # 2 MiB

    def work(index):
        with StoreClient("127.0.0.1", server.port, SECRET) as client:
            client.set("blob/%d" % index, blob)
            assert client.wait("blob/%d" % ((index + 1) % 8), timeout=20) == blob

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert all(server.get("blob/%d" % i) == blob for i in range(8))


def test_wait_times_out(server):
    with StoreClient("127.0.0.1", server.port, SECRET) as client:
        with pytest.raises(StoreError, match="did not appear"):
            client.wait("never", timeout=0.2)


def test_closed_store_refuses_connections():
    server = store.StoreServer("127.0.0.1", SECRET).start()
    port = server.port
    server.close()
    with pytest.raises(StoreError, match="cannot reach"):
        StoreClient("127.0.0.1", port, SECRET, timeout=2)


def test_live_job_store_is_on_loopback_and_refuses_strangers():
    result = runner_helpers.tuttirun(
        ["-np", "2", sys.executable, runner_helpers.worker("store_probe.py")], timeout=60)
    assert result.returncode == 0, result.stderr
    for rank in range(2):
        assert "rank %d wrong secret: status=2 closed=True" % rank in result.stdout
        assert "rank %d no secret: status=2 closed=True" % rank in result.stdout
        assert "rank %d right secret: status=0" % rank in result.stdout
        assert "rank %d store address: 127.0.0.1" % rank in result.stdout


def test_each_job_gets_its_own_secret():
    worker = [sys.executable, "-c", "import os; print('S=' + os.environ['TUTTI_GLOO_SECRET'])"]
    secrets = set()
    for _ in range(2):
        result = runner_helpers.tuttirun(["-np", "2"] + worker, timeout=60)
        assert result.returncode == 0, result.stderr
        secrets |= {line.split("S=")[1] for line in result.stdout.splitlines()}
    assert len(secrets) == 2 and all(len(s) >= 32 for s in secrets)
