"""Talks to the job's rendezvous store with a wrong, a missing and the right secret."""

import os
import socket

from tutti.runner import store

env = os.environ
address = (env["TUTTI_GLOO_RENDEZVOUS_ADDR"], int(env["TUTTI_GLOO_RENDEZVOUS_PORT"]))
rank = env["TUTTI_RANK"]


def ask(secret):
    with socket.create_connection(address, timeout=10) as conn:
        conn.sendall(store.encode_request(store.OP_SET, secret, b"probe/" + rank.encode(), b"x"))
        header = conn.recv(5)
        status = header[0]
        closed = conn.recv(1) == b""
        return status, closed


print("rank %s wrong secret: status=%d closed=%s" % ((rank,) + ask(b"not-the-secret")))
print("rank %s no secret: status=%d closed=%s" % ((rank,) + ask(b"")))
with socket.create_connection(address, timeout=10) as conn:
    conn.sendall(store.encode_request(store.OP_SET, env["TUTTI_GLOO_SECRET"].encode(),
                                      b"probe/ok", b"x"))
    print("rank %s right secret: status=%d" % (rank, conn.recv(5)[0]))
print("rank %s store address: %s" % (rank, address[0]))
if address[0] != "127.0.0.1" and env.get("TUTTI_CROSS_RANK") == "0":
    # On the launcher's host: the store must not answer on loopback when it serves a network.
    try:
        socket.create_connection(("127.0.0.1", address[1]), timeout=5).close()
        print("rank %s loopback: open" % rank)
    except ConnectionRefusedError:
        print("rank %s loopback: refused" % rank)
