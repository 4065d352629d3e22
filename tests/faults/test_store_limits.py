"""The store's limits against peers without the secret, each with short limits so the test
is quick: a connection that shows no secret, a request sent half-way, an authenticated
connection left idle, more connections than the cap, a wrong secret."""

import socket
import time

import pytest

from tutti.runner import store
from tutti.runner.store_client import StoreClient
from flood import HALF_REQUEST, WRONG_SECRET
from scenario import scenario

SECRET = "job-secret"


@pytest.fixture
def server():
    with store.StoreServer("127.0.0.1", SECRET, auth_seconds=0.5, request_seconds=0.5,
                           idle_seconds=1.0, max_connections=16) as running:
        yield running


def closed_within(conn, seconds):
    """True when the server closes `conn` within `seconds` (whatever it answered first)."""
    conn.settimeout(seconds)
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            if conn.recv(4096) == b"":
                return True
    except socket.timeout:
        return False
    except ConnectionResetError:
        return True
    return False


def connect(server):
    return socket.create_connection(("127.0.0.1", server.port), timeout=5)


@scenario("store-silent-connection")
def test_a_connection_that_never_shows_the_secret_is_closed(server):
    with connect(server) as conn:
        assert closed_within(conn, 5)


@scenario("store-half-request")
def test_a_request_stopped_half_way_is_closed(server):
    with connect(server) as conn:
        conn.sendall(store.encode_request(store.OP_SET, SECRET.encode(), b"k", b"value")[:-3])
        assert closed_within(conn, 5)
    with connect(server) as conn:  # half-way through the secret
        conn.sendall(HALF_REQUEST)
        assert closed_within(conn, 5)


@scenario("store-wrong-secret")
def test_a_wrong_secret_is_answered_and_closed_at_once(server):
    with connect(server) as conn:
        conn.sendall(WRONG_SECRET)
        assert conn.recv(5)[0] == store.STATUS_UNAUTHORIZED
        assert closed_within(conn, 1.0)


@scenario("store-idle-client")
def test_an_idle_client_is_closed_and_the_python_client_reconnects(server):
    with StoreClient("127.0.0.1", server.port, SECRET) as client:
        client.set("k", b"v")
        time.sleep(2.5)  # past the idle limit: the server has closed this connection
        assert client.get("k") == b"v"


@scenario("store-connection-cap")
def test_connections_beyond_the_cap_make_room_for_the_job(server):
    strangers = [connect(server) for _ in range(40)]
    try:
        with StoreClient("127.0.0.1", server.port, SECRET) as client:
            client.set("k", b"v")
            assert client.get("k") == b"v"
        assert server.connection_count <= 16
        assert server.evicted >= 40 - 16
    finally:
        for conn in strangers:
            conn.close()
