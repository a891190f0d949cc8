"""What no client can beat: round trips through the server on bare blocking sockets.

A round-trip workload (a request, a sync publish, an ``ack_sync``) waits for the
server, and on a virtual machine much of that wait is the kernel waking the
sleeping reader. These floors are measured with plain blocking sockets and
hand-written protocol lines (no client library, no event loop) against the same
server as the workloads, so a latency ratio can be read against them: a client
that waits in ``epoll`` cannot come in below them without spinning on its socket.

- ``ping``: ``PING`` -> ``PONG`` on one connection (one hop, as an ``ack_sync``);
- ``request``: a message relayed by the server to a second connection, which
  answers on the first one's subject (two hops, as a request to a responder);
- ``round_trips``: one message to each of a list of subjects, each waiting for its one
  answer: a JetStream publish and its PubAck, a direct get and the message, an ack and
  its confirmation (a sync publish, a KV put or get, an ``ack_sync``), with the same
  server-side work as the client's call.

Each is reported under the name ``FLOOR`` (``--json``: a measurement of that
``impl``), which the chart reads into its table of round trips.
"""

from __future__ import annotations

import socket
import statistics
import time
from urllib.parse import urlsplit

__all__ = ["FLOOR", "round_trips", "socket_floor"]

#: the ``impl`` of a floor's measurements
FLOOR = "socket floor"

_CONNECT = b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"no_responders":true}\r\n'


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


#: the start of a status answer that is an error (a status header line is
#: ``NATS/1.0 <code>``): 4xx and 5xx
_STATUS_ERRORS = {b"NATS/1.0 4", b"NATS/1.0 5"}


class _Wire:
    """A blocking connection that speaks just enough NATS to wait for one answer."""

    def __init__(self, host: str, port: int, subs: bytes) -> None:
        self.sock = _open(host, port, subs)
        self.buf = b""

    def _more(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        self.buf += chunk

    def answer(self) -> bytes:
        """The body (header block and payload) of the next MSG or HMSG."""
        while True:
            end = self.buf.find(b"\r\n")
            if end < 0:
                self._more()
                continue
            line = self.buf[:end]
            op = line[:4]
            if op in (b"MSG ", b"HMSG"):
                size = int(line.rsplit(b" ", 1)[1])
                total = end + 2 + size + 2
                while len(self.buf) < total:
                    self._more()
                body = self.buf[end + 2 : end + 2 + size]
                self.buf = self.buf[total:]
                return body
            self.buf = self.buf[end + 2 :]
            if op == b"PING":
                self.sock.sendall(b"PONG\r\n")
            elif op == b"-ERR":
                raise ConnectionError(line.decode(errors="replace"))


def round_trips(url: str, subjects: list[str], payload: bytes) -> float:
    """Seconds for one message to each of ``subjects`` in turn, each sent with a reply
    subject and waiting for its answer.

    Raises:
        ValueError: an answer was an error (a JetStream API error or a status such as
            404 or 503): the floor would have timed other work than the workload's.
    """
    u = urlsplit(url)
    wire = _Wire(u.hostname or "127.0.0.1", u.port or 4222, b"SUB floor.answer 1\r\n")
    try:
        tail = b" floor.answer %d\r\n%b\r\n" % (len(payload), payload)
        heads = [b"PUB " + s.encode() + tail for s in subjects]
        t0 = time.perf_counter()
        for message in heads:
            wire.sock.sendall(message)
            body = wire.answer()
            if body.startswith(b'{"error"') or body[:10] in _STATUS_ERRORS:
                raise ValueError(f"an error answered {message[:60]!r}: {body[:120]!r}")
        return time.perf_counter() - t0
    finally:
        wire.sock.close()
