"""What no client can beat: round trips through the server on bare blocking sockets.

A round-trip workload (a request, a sync publish, an ``ack_sync``) waits for the
server, and on a virtual machine much of that wait is the kernel waking the
sleeping reader. These floors are measured with plain blocking sockets and
hand-written protocol lines (no client library, no event loop) against the same
server as the workloads, so a latency ratio can be read against them: a client
that waits in ``epoll`` cannot come in below them without spinning on its socket.

- ``ping``: ``PING`` -> ``PONG`` on one connection (one hop, as an ``ack_sync``);
- ``request``: a message relayed by the server to a second connection, which
  answers on the first one's subject (two hops, as a request to a responder).
"""

from __future__ import annotations

import socket
import statistics
import time
from urllib.parse import urlsplit

__all__ = ["socket_floor"]

_CONNECT = b'CONNECT {"verbose":false,"pedantic":false}\r\n'


def _recv_until(sock: socket.socket, marker: bytes) -> None:
    data = b""
    while marker not in data:
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        data += chunk


def _open(host: str, port: int, subs: bytes) -> socket.socket:
    sock = socket.create_connection((host, port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    _recv_until(sock, b"\r\n")  # INFO
    sock.sendall(_CONNECT + subs + b"PING\r\n")
    _recv_until(sock, b"PONG\r\n")
    return sock


def socket_floor(url: str, rounds: int = 2000) -> dict[str, float]:
    """The p50 seconds of a ``ping`` and of a ``request`` round trip (see the module)."""
    u = urlsplit(url)
    host, port = u.hostname or "127.0.0.1", u.port or 4222
    a = _open(host, port, b"SUB floor.reply 1\r\n")
    b = _open(host, port, b"SUB floor.request 1\r\n")
    try:
        # b's subscription is known to the server once a PING after it is answered
        b.sendall(b"PING\r\n")
        _recv_until(b, b"PONG\r\n")
        pings: list[float] = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            a.sendall(b"PING\r\n")
            _recv_until(a, b"PONG\r\n")
            pings.append(time.perf_counter() - t0)
        requests: list[float] = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            a.sendall(b"PUB floor.request floor.reply 1\r\nx\r\n")
            _recv_until(b, b"x\r\n")
            b.sendall(b"PUB floor.reply 1\r\ny\r\n")
            _recv_until(a, b"y\r\n")
            requests.append(time.perf_counter() - t0)
        return {"ping": statistics.median(pings), "request": statistics.median(requests)}
    finally:
        a.close()
        b.close()
