"""A feed the parser says is one run goes whole to its subscription; the ops before the
run (a message whose payload began in the feed before) go each to its own.

The feeds are cut where the test says, so this runs against a server of its own that
speaks just enough NATS (INFO, PONG, and the SUBs it reads), writing each feed apart.
"""

from __future__ import annotations

import asyncio
import json
import re

import pytest

import jetstream

pytestmark = pytest.mark.asyncio

INFO = b"INFO " + json.dumps({"server_id": "feeds", "version": "2.15.1", "proto": 1}).encode()


class FeedServer:
    """Answers PINGs, notes the sid of each subject subscribed, and writes ``feeds`` (made
    by ``make(sids)`` once the client has subscribed to ``subjects``) one by one, a pause
    between them, so that each one reaches the client as a read of its own."""

    def __init__(self, subjects: list[str]) -> None:
        self.subjects = subjects
        self.sids: dict[str, int] = {}
        self.subscribed = asyncio.Event()
        self._server: asyncio.Server | None = None
        self._writer: asyncio.StreamWriter | None = None
        self.port = 0

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        writer.write(INFO + b"\r\n")
        try:
            while data := await reader.read(65536):
                for subject, sid in re.findall(rb"SUB (\S+) (\d+)\r\n", data):
                    self.sids[subject.decode()] = int(sid)
                if all(s in self.sids for s in self.subjects):
                    self.subscribed.set()
                writer.write(b"PONG\r\n" * data.count(b"PING\r\n"))
                await writer.drain()
        except (ConnectionError, OSError):
            pass

    async def send(self, feeds: list[bytes]) -> None:
        assert self._writer is not None
        for feed in feeds:
            self._writer.write(feed)
            await self._writer.drain()
            await asyncio.sleep(0.2)

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


def msg(subject: str, sid: int, payload: bytes) -> bytes:
    return b"MSG %b %d %d\r\n%b\r\n" % (subject.encode(), sid, len(payload), payload)


async def test_the_message_before_a_run_goes_to_its_own_subscription() -> None:
    server = FeedServer(["run.a", "run.b"])
    await server.start()
    try:
        async with jetstream.connect(f"nats://127.0.0.1:{server.port}") as nc:
            a = await nc.subscribe("run.a")
            b = await nc.subscribe("run.b")
            await nc.flush(timeout=5)
            await asyncio.wait_for(server.subscribed.wait(), 5)
            sa, sb = server.sids["run.a"], server.sids["run.b"]
            lone = msg("run.b", sb, b"for b, begun in the feed before")
            run = b"".join(msg("run.a", sa, b"a%02d" % i) for i in range(30))
            lead = msg("run.a", sa, b"for a, begun in the feed before")
            # 1: one message for a, then b's cut in its payload; 2: the rest of b's, then
            # a run of 30 for a (the parser's run: b's message leads it); 3: b's message
            # whole before a run of a's (the loop parses it, the batch the rest), then one
            # for a cut in its payload; 4: its rest before a run of a's, which it leads.
            first = msg("run.a", sa, b"first") + lone[:-10]
            await server.send([first, lone[-10:] + run, lone + run + lead[:-4], lead[-4:] + run])
            got_a = [m.data for m in await take(a, 92)]
            got_b = [m.data for m in await take(b, 2)]
            each = [b"a%02d" % i for i in range(30)]
            assert got_a == [b"first", *each, *each, b"for a, begun in the feed before", *each]
            assert got_b == [b"for b, begun in the feed before"] * 2
            assert nc.stats.in_msgs == 94
            assert nc.stats.in_bytes == 5 + 31 * 3 + 30 * 3 * 3
    finally:
        await server.close()


async def take(sub: jetstream.Subscription, n: int) -> list[jetstream.Msg]:
    out: list[jetstream.Msg] = []
    while len(out) < n:
        out += await sub.take_many(timeout=5)
    assert len(out) == n
    return out
