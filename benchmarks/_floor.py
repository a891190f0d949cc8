"""What no client can beat: the workloads' calls through the server on bare blocking
sockets.

A round-trip workload (a request, a sync publish, an ``ack_sync``) waits for the
server, and on a virtual machine much of that wait is the kernel waking the
sleeping reader. These floors are measured with plain blocking sockets and
hand-written protocol lines (no client library, no event loop; ``loop_floor`` alone
runs on the event loop) against the same server as the workloads, so a latency ratio
can be read against them: a client that waits in ``epoll`` cannot come in below them
without spinning on its socket.

- ``ping``: ``PING`` -> ``PONG`` on one connection (one hop, as an ``ack_sync``);
- ``request``: a message relayed by the server to a second connection, which
  answers on the first one's subject (two hops, as a request to a responder);
- ``round_trips``: one message to each of a list of subjects, each waiting for its one
  answer: a JetStream publish and its PubAck, a direct get and the message, an ack and
  its confirmation (a sync publish, a KV put or get, an ``ack_sync``), with the same
  server-side work as the client's call;
- ``publish_all`` and ``deliver_all``: an object's chunks stored all at once, and sent
  to a socket that drops them (an ObjectStore put and get, as fast as the server goes);
- ``loop_floor``: the ``request`` round trip again, through two bare ``asyncio``
  protocols on the running event loop (the benchmark's: asyncio or uvloop), the
  responder answering from ``data_received``, the requester awaiting a future: what a
  client on one event loop waits for a request whatever else it does.

Each is reported under the name ``FLOOR`` (``--json``: a measurement of that
``impl``), ``loop_floor`` under ``CLIENT_FLOOR``, which the chart reads into its table
of round trips.
"""

from __future__ import annotations

import asyncio
import json
import socket
import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import cast
from urllib.parse import urlsplit

__all__ = [
    "CLIENT_FLOOR",
    "FLOOR",
    "deliver_all",
    "fetch_ack",
    "loop_floor",
    "loop_rounds",
    "publish_all",
    "round_trips",
    "socket_floor",
]

#: the ``impl`` of a floor's measurements
FLOOR = "socket floor"
#: the ``impl`` of what a client must spend on its own thread whatever the server does
#: (``bench_objectstore``: a reader's SHA-256 of the content, and one bytes of it;
#: ``bench_core``: a request through bare protocols on the event loop, ``loop_floor``)
CLIENT_FLOOR = "client floor"

_CONNECT = b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"no_responders":true}\r\n'


def _recv_until(sock: socket.socket, marker: bytes) -> None:
    data = b""
    while marker not in data:
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        data += chunk


def _open(url: str, subs: bytes) -> socket.socket:
    u = urlsplit(url)
    sock = socket.create_connection((u.hostname or "127.0.0.1", u.port or 4222), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    _recv_until(sock, b"\r\n")  # INFO
    sock.sendall(_CONNECT + subs + b"PING\r\n")
    _recv_until(sock, b"PONG\r\n")
    return sock


def socket_floor(url: str, rounds: int = 2000) -> dict[str, float]:
    """The p50 seconds of a ``ping`` and of a ``request`` round trip (see the module)."""
    a = _open(url, b"SUB floor.reply 1\r\n")
    b = _open(url, b"SUB floor.request 1\r\n")
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


class _LoopWire(asyncio.Protocol):
    """A connection of ``loop_floor``: hands each MSG's reply subject and payload to
    ``got``, answers the server's PINGs, and says when the first PONG came (``ready``)."""

    def __init__(self, got: Callable[[_LoopWire, bytes, bytes], None]) -> None:
        self.got = got
        self.buf = b""
        self.transport: asyncio.Transport | None = None
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses: only written to here
        self.transport = cast(asyncio.Transport, transport)

    def write(self, data: bytes) -> None:
        assert self.transport is not None
        self.transport.write(data)

    def data_received(self, data: bytes) -> None:
        buf = self.buf + data
        while (end := buf.find(b"\r\n")) >= 0:
            line = buf[:end]
            if line.startswith(b"MSG "):
                fields = line.split()
                size = int(fields[-1])
                total = end + 2 + size + 2
                if len(buf) < total:
                    break
                self.got(self, fields[3] if len(fields) == 5 else b"", buf[end + 2 : total - 2])
                buf = buf[total:]
                continue
            buf = buf[end + 2 :]
            if line == b"PING":
                self.write(b"PONG\r\n")
            elif line == b"PONG" and not self.ready.done():
                self.ready.set_result(None)
            elif line.startswith(b"-ERR") and not self.ready.done():
                self.ready.set_exception(ConnectionError(line.decode(errors="replace")))
        self.buf = buf

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.ready.done():
            self.ready.set_exception(ConnectionError(f"the server closed the connection: {exc}"))

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


async def loop_floor(url: str, rounds: int = 2000) -> float:
    """The p50 seconds of a ``request`` round trip through two bare protocols on the
    running event loop (see the module); within ``30 s`` plus 10 ms a round.

    Raises:
        TimeoutError: the server did not answer in that time.
    """
    times = [end - start for start, end in await loop_rounds(url, rounds)]
    return statistics.median(times)


async def loop_rounds(
    url: str, rounds: int, wire_class: type[_LoopWire] | None = None
) -> list[tuple[float, float]]:
    """``loop_floor``'s round trips, each as its ``perf_counter`` start and end;
    ``wire_class``: the class of its two connections (a ``_LoopWire``, which
    ``benchmarks.request_hops`` subclasses to mark its reads and writes).

    Raises:
        TimeoutError: the server did not answer within ``30 s`` plus 10 ms a round.
    """
    u = urlsplit(url)
    loop = asyncio.get_running_loop()
    waiting: list[asyncio.Future[bytes]] = []
    cls = wire_class or _LoopWire

    def answer(wire: _LoopWire, reply: bytes, payload: bytes) -> None:
        wire.write(b"PUB %b %d\r\n%b\r\n" % (reply, len(payload), payload))

    def replied(_: _LoopWire, __: bytes, payload: bytes) -> None:
        if waiting and not waiting[0].done():
            waiting[0].set_result(payload)

    wires: list[_LoopWire] = []
    try:
        async with asyncio.timeout(30 + rounds * 0.01):
            for got, sub in ((answer, b"floor.request"), (replied, b"floor.reply")):
                _, conn = await loop.create_connection(
                    partial(cls, got), u.hostname or "127.0.0.1", u.port or 4222
                )
                wires.append(conn)
                # the subscription is known to the server once the PING after it is answered
                conn.write(_CONNECT + b"SUB %b 1\r\nPING\r\n" % sub)
                await conn.ready
            requester = wires[1]
            times: list[tuple[float, float]] = []
            for _ in range(rounds):
                fut = loop.create_future()
                waiting[:] = [fut]
                t0 = time.perf_counter()
                requester.write(b"PUB floor.request floor.reply 1\r\nx\r\n")
                await fut
                times.append((t0, time.perf_counter()))
            return times
    finally:
        for conn in wires:
            conn.close()


#: the start of a status answer that is an error (a status header line is
#: ``NATS/1.0 <code>``): 4xx and 5xx
_STATUS_ERRORS = {b"NATS/1.0 4", b"NATS/1.0 5"}


class _Wire:
    """A blocking connection that speaks just enough NATS to read what comes to it."""

    def __init__(self, url: str, subs: bytes) -> None:
        self.sock = _open(url, subs)
        self.buf = bytearray()

    def _more(self) -> None:
        chunk = self.sock.recv(262144)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        self.buf += chunk

    def answer(self, drop: bytes = b"") -> tuple[bytes, bytes]:
        """The subscription id and the body (header block and payload) of the next MSG
        or HMSG; the body of a message for the subscription ``drop`` is dropped unread
        (``b""``)."""
        buf = self.buf
        while True:
            end = buf.find(b"\r\n")
            if end < 0:
                self._more()
                continue
            line = bytes(buf[:end])
            op = line[:4]
            if op in (b"MSG ", b"HMSG"):
                size = int(line.rsplit(b" ", 1)[1])
                total = end + 2 + size + 2
                while len(buf) < total:
                    self._more()
                sid = line.split(b" ", 3)[2]
                body = b"" if sid == drop else bytes(buf[end + 2 : end + 2 + size])
                del buf[:total]
                return sid, body
            del buf[: end + 2]
            if op == b"PING":
                self.sock.sendall(b"PONG\r\n")
            elif op == b"-ERR":
                raise ConnectionError(line.decode(errors="replace"))

    def close(self) -> None:
        self.sock.close()


def _refuse_error(sent: bytes, body: bytes) -> None:
    """Raise ValueError when ``body`` is an error: a status 4xx or 5xx, or a JSON
    answer (a PubAck, an API response) with an ``error``."""
    failed = body[:10] in _STATUS_ERRORS
    if not failed and body.startswith(b"{") and b'"error"' in body:
        failed = "error" in json.loads(body)
    if failed:
        raise ValueError(f"an error answered {sent[:60]!r}: {body[:120]!r}")


def round_trips(url: str, subjects: list[str], payload: bytes) -> float:
    """Seconds for one message to each of ``subjects`` in turn, each sent with a reply
    subject and waiting for its answer.

    Raises:
        ValueError: an answer was an error (a JetStream API error or a status such as
            404 or 503): the floor would have timed other work than the workload's.
    """
    wire = _Wire(url, b"SUB floor.answer 1\r\n")
    try:
        tail = b" floor.answer %d\r\n%b\r\n" % (len(payload), payload)
        heads = [b"PUB " + s.encode() + tail for s in subjects]
        t0 = time.perf_counter()
        for message in heads:
            wire.sock.sendall(message)
            _refuse_error(message, wire.answer()[1])
        return time.perf_counter() - t0
    finally:
        wire.close()


def publish_all(
    url: str, subject: str, chunks: list[bytes], then: tuple[str, bytes] | None = None
) -> float:
    """Seconds to publish every one of ``chunks`` to ``subject`` (a stream's), each
    with a reply subject, all written at once, until every PubAck is in, and then the
    request ``then`` (a subject and a body) answered: how fast the server stores an
    object's chunks when nothing waits on the sender (with ``then``, the purge of the
    object's chunks before, as a put that replaces an object does).

    Raises:
        ValueError: a PubAck or the answer to ``then`` was an error.
    """
    wire = _Wire(url, b"SUB floor.answer 1\r\n")
    try:
        head = b"PUB " + subject.encode() + b" floor.answer "
        out = b"".join(b"%b%d\r\n%b\r\n" % (head, len(chunk), chunk) for chunk in chunks)
        last = b""
        if then is not None:
            last = b"PUB %b floor.answer %d\r\n%b\r\n" % (then[0].encode(), len(then[1]), then[1])
        t0 = time.perf_counter()
        wire.sock.sendall(out)
        for _ in chunks:
            _refuse_error(head, wire.answer()[1])
        if last:
            wire.sock.sendall(last)
            _refuse_error(last, wire.answer()[1])
        return time.perf_counter() - t0
    finally:
        wire.close()


def deliver_all(url: str, stream: str, filter_subject: str, count: int) -> float:
    """Seconds from asking for an ephemeral push consumer of the ``count`` messages on
    ``filter_subject`` of ``stream`` (no acks, no flow control) to the last of them read,
    by a socket that drops what it reads: how fast the server sends an object's chunks.

    Raises:
        ValueError: the consumer was refused.
    """
    wire = _Wire(url, b"SUB floor.answer 1\r\nSUB floor.deliver 2\r\n")
    try:
        config = {
            "deliver_subject": "floor.deliver",
            "filter_subject": filter_subject,
            "ack_policy": "none",
            "deliver_policy": "all",
            "inactive_threshold": 2_000_000_000,
        }
        body = json.dumps({"stream_name": stream, "config": config}).encode()
        create = b"PUB $JS.API.CONSUMER.CREATE.%b floor.answer %d\r\n%b\r\n" % (
            stream.encode(),
            len(body),
            body,
        )
        t0 = time.perf_counter()
        wire.sock.sendall(create)
        got = 0
        while got < count:
            sid, answer = wire.answer(drop=b"2")
            if sid == b"2":
                got += 1
            else:  # the consumer's info, or why there is none
                _refuse_error(create, answer)
        return time.perf_counter() - t0
    finally:
        wire.close()


def _answer_deliveries(buf: bytearray) -> tuple[bytes, int]:
    """Cut the whole deliveries off the front of ``buf``: the acks they need (an empty
    message to each reply subject, and a PONG for a PING), and how many there were.

    Raises:
        ValueError: a status came instead of a message.
    """
    out: list[bytes] = []
    count = pos = 0
    while (end := buf.find(b"\r\n", pos)) >= 0:
        line = bytes(buf[pos:end])
        if not line.startswith((b"MSG ", b"HMSG")):
            if line == b"PING":
                out.append(b"PONG\r\n")
            elif line.startswith(b"-ERR"):
                raise ConnectionError(line.decode(errors="replace"))
            pos = end + 2
            continue
        parts = line.split(b" ")
        size = int(parts[-1])
        total = end + 2 + size + 2
        if len(buf) < total:
            break
        if len(parts) != (5 if parts[0] == b"MSG" else 6):  # no reply subject: a status
            raise ValueError(f"a status answered a pull: {bytes(buf[end + 2 : total])[:40]!r}")
        out.append(b"PUB %b 0\r\n\r\n" % parts[3])
        count += 1
        pos = total
    del buf[:pos]
    return b"".join(out), count


def fetch_ack(
    url: str, stream: str, consumer: str, count: int, batch: int, expires: float = 5.0
) -> float:
    """Seconds to pull ``count`` messages from the durable pull ``consumer`` of
    ``stream``, ``batch`` at a time, acking each (an empty message to its reply
    subject), until the server has read the last ack: the acks of what one read brings
    written at once as they come, the next pull with the acks that end a batch. Each
    pull waits at most ``expires`` seconds.

    Raises:
        ValueError: a status came instead of a message (a timeout, no messages, a
            refused pull): the floor would have timed other work than the workload's.
    """
    wire = _Wire(url, b"SUB floor.deliver 1\r\n")
    next_subject = f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}".encode()

    def pull(n: int) -> bytes:
        body = b'{"batch":%d,"expires":%d}' % (n, int(expires * 1e9))
        return b"PUB %b floor.deliver %d\r\n%b\r\n" % (next_subject, len(body), body)

    try:
        t0 = time.perf_counter()
        got = 0
        out = pull(min(batch, count))
        while got < count:
            want = min(batch, count - got)
            wire.sock.sendall(out)
            in_batch = 0
            while True:
                wire._more()
                acks, n = _answer_deliveries(wire.buf)
                in_batch += n
                if in_batch >= want:
                    break
                if acks:
                    wire.sock.sendall(acks)
            got += want
            out = acks + (pull(min(batch, count - got)) if got < count else b"")
        # the last acks, then a PING: its PONG comes once the server has read them
        wire.sock.sendall(out + b"PING\r\n")
        _recv_until(wire.sock, b"PONG\r\n")
        return time.perf_counter() - t0
    finally:
        wire.close()
