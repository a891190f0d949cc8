"""A hostile server: malformed or oversized ops give a typed ProtocolError and a prompt
reconnect, or a documented accept; never a wedge, never a permanent close."""

from __future__ import annotations

import asyncio
import json

import pytest

import jetstream
from jetstream import ProtocolError

pytestmark = pytest.mark.asyncio

INFO = (
    b"INFO "
    + json.dumps(
        {
            "server_id": "fake",
            "version": "2.15.1",
            "headers": True,
            "max_payload": 1048576,
            "proto": 1,
        }
    ).encode()
    + b"\r\n"
)


class FakeServer:
    """Speaks just enough NATS: INFO, then PONG to every PING. The first connection gets
    ``hostile`` right after the handshake; later ones behave."""

    def __init__(self, hostile: bytes) -> None:
        self.hostile = hostile
        self.sent = asyncio.Event()  # the hostile bytes were written
        self.accepted = 0
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []
        self.port = 0

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        n = self.accepted
        self._writers.append(writer)
        writer.write(INFO)
        later: asyncio.Task[None] | None = None
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                for _ in range(data.count(b"PING\r\n")):
                    writer.write(b"PONG\r\n")
                await writer.drain()
                if n == 1 and later is None:
                    later = asyncio.create_task(self._hostile(writer))
        except (ConnectionError, OSError):
            pass
        finally:
            if later is not None:
                later.cancel()
            writer.close()

    async def _hostile(self, writer: asyncio.StreamWriter) -> None:
        # Well after the handshake, on its own: the client is up and idle by then.
        await asyncio.sleep(0.3)
        writer.write(self.hostile)
        await writer.drain()
        self.sent.set()

    async def close(self) -> None:
        for w in self._writers:
            w.close()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


# (op, what it must give): "error" = ProtocolError and a reconnect; "accept" = ignored,
# the connection stays up.
CASES = [
    (b"INFO {bad json\r\n", "error"),
    (b"INFO [1, 2]\r\n", "error"),
    (b"MSG a 1\r\n", "error"),
    (b"MSG a 1 2 3 4 5\r\n", "error"),
    (b"MSG a b 2\r\nhi\r\n", "error"),
    (b"MSG a 1 -2\r\nhi\r\n", "error"),
    (b"MSG a 1 x\r\nhi\r\n", "error"),
    (b"MSG a 1 99999999999\r\n", "error"),
    (b"MSG a 1 2\r\nhello\r\n", "error"),
    (b"MSG \xff\xfe 1 2\r\nhi\r\n", "error"),
    (b"HMSG a 1 10 5\r\nNATS/1.0\r\n\r\n\r\n", "error"),
    (b"HMSG a 1 x 5\r\nhello\r\n", "error"),
    (b"HMSG a 1 5 10\r\nXXXXXhello\r\n", "error"),
    (b"HMSG a 1 16 16\r\nNATS/1.0 9x9\r\n\r\n\r\n", "error"),
    (b"FOO bar\r\n", "error"),
    (b"MSG " + b"a" * 5000 + b" 1 2\r\nhi\r\n", "error"),
    (b"MSG " + b"a" * 5000, "error"),
    (b"\r\n", "error"),
    (b"\x00\x01\x02\x03\r\n", "error"),
    (b"PONG\r\n", "accept"),
    (b"+OK\r\n", "accept"),
    (b"-ERR \xff\xfe not utf-8\r\n", "accept"),
    (b"-ERR 'Unknown Protocol Operation'\r\n", "accept"),
    (b"MSG nobody 999 2\r\nhi\r\n", "accept"),
    (b'INFO {"connect_urls": ["bad url :::"]}\r\n', "accept"),
]


@pytest.mark.parametrize(("hostile", "outcome"), CASES, ids=[repr(c[0][:24]) for c in CASES])
async def test_hostile_op(hostile: bytes, outcome: str) -> None:
    server = FakeServer(hostile)
    await server.start()
    errors: list[BaseException] = []
    nc = await jetstream.connect(
        f"nats://127.0.0.1:{server.port}",
        error_cb=errors.append,
        reconnect_time_wait=0.05,
        reconnect_jitter=0.0,
        max_reconnect_attempts=-1,
        ping_interval=60,
    )
    loop = asyncio.get_running_loop()
    try:
        await nc.flush(timeout=5)  # before the hostile bytes come
        t0 = loop.time()
        if outcome == "error":
            async with asyncio.timeout(10):
                while nc.stats.reconnects < 1 or not nc.is_connected:
                    await asyncio.sleep(0.01)
            # a generous bound; the bar (a reconnect within 1 s) is scenario H of
            # make faults-report, which prints the measured times
            assert loop.time() - t0 < 10.0
            assert any(isinstance(e, ProtocolError) for e in errors), errors
        else:
            async with asyncio.timeout(5):
                await server.sent.wait()
            # the PONG comes after the hostile bytes: the client has read them by then
            await nc.flush(timeout=5)
            assert nc.stats.reconnects == 0
            assert not any(isinstance(e, ProtocolError) for e in errors), errors
        # usable afterwards either way
        await nc.flush(timeout=5)
        assert nc.is_connected
    finally:
        await nc.close()
        await server.close()


async def test_messages_before_the_garbage_are_delivered() -> None:
    """A good message and a bad op in one segment: the good one still reaches the reader."""
    server = FakeServer(b"MSG a 1 2\r\nhi\r\nMSG a 1 5\r\nhello!!\r\n")
    await server.start()
    errors: list[BaseException] = []
    nc = await jetstream.connect(
        f"nats://127.0.0.1:{server.port}",
        error_cb=errors.append,
        reconnect_time_wait=0.05,
        max_reconnect_attempts=-1,
    )
    try:
        sub = await nc.subscribe("a")
        assert sub.sid == 1
        msg = await sub.next_msg(timeout=5)
        assert msg.data == b"hi"
        async with asyncio.timeout(5):
            while nc.stats.reconnects < 1:
                await asyncio.sleep(0.01)
        assert any(isinstance(e, ProtocolError) for e in errors)
    finally:
        await nc.close()
        await server.close()
