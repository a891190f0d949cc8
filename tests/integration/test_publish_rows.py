"""The async publisher's bulk path (``jetstream.bulk.publish_rows`` with an ``AckTracker``,
what the Spark sink uses) against a real server: every row acked or failed exactly once,
the window respected, a refused row stopping the rest with nothing after it sent."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import jetstream
from jetstream import StreamConfig
from jetstream.api import PubAck
from jetstream.bulk import publish_rows
from jetstream.embedded import NatsServer
from jetstream.errors import BadSubjectError, NoRespondersError, StreamNotMatchError
from jetstream.protocol.headers import encode_headers

pytestmark = pytest.mark.asyncio

Row = tuple[str, bytes, bytes | None, Any]


class Tracker:
    def __init__(self, js: jetstream.JetStream | None = None) -> None:
        self.acks: list[PubAck] = []
        self.failures: list[tuple[Row, BaseException]] = []
        self.js = js
        self.peak = 0  # the most acks outstanding when one came (its own included)

    def acked(self, ack: PubAck) -> None:
        self.acks.append(ack)
        if self.js is not None:
            self.peak = max(self.peak, self.js.publish_async_pending + 1)

    def failed(self, row: Row, exc: BaseException) -> None:
        self.failures.append((row, exc))

    async def settled(self, n: int) -> None:
        async with asyncio.timeout(30):
            while len(self.acks) + len(self.failures) < n:
                await asyncio.sleep(0.01)


def _id(i: int) -> bytes:
    return encode_headers({"Nats-Msg-Id": f"row-{i}"})


async def test_rows_are_sent_within_the_window_and_each_acked_once(
    nats_server: NatsServer,
) -> None:
    async with jetstream.connect(nats_server.url) as nc:
        js = nc.jetstream(publish_async_max_pending=100)
        await js.create_stream(StreamConfig(name="ROWS", subjects=["rows.>"]))
        rows: list[Row] = [(f"rows.{i % 3}", b"%d" % i, _id(i), i) for i in range(1000)]
        rows[7] = ("rows.plain", b"no header block", None, 7)
        tracker = Tracker(js)
        await publish_rows(js, rows, tracker, timeout=10)  # waits for room as it goes
        assert 0 < js.publish_async_pending <= 100  # the last window's, not more
        await tracker.settled(len(rows))
        assert 1 < tracker.peak <= 100
        assert tracker.failures == []
        assert sorted(a.seq for a in tracker.acks) == list(range(1, 1001))
        assert all(a.stream == "ROWS" and not a.duplicate for a in tracker.acks)
        stream = await js.stream("ROWS")
        assert (await stream.get_msg(8)).data == b"no header block"
        assert (await stream.get_msg(500)).headers == {"Nats-Msg-Id": "row-499"}
        # the same ids again: every row acked as a duplicate, nothing stored twice
        again = Tracker()
        await publish_rows(js, rows, again, timeout=10)
        await again.settled(len(rows))
        assert sum(a.duplicate for a in again.acks) == 999  # row 7 has no id
        assert (await stream.info()).state.messages == 1001


async def test_an_invalid_subject_stops_the_rows_after_it(nats_server: NatsServer) -> None:
    async with jetstream.connect(nats_server.url) as nc:
        js = nc.jetstream()
        await js.create_stream(StreamConfig(name="ROWS", subjects=["rows"]))
        rows: list[Row] = [("rows", b"%d" % i, _id(i), i) for i in range(10)]
        rows[4] = ("bad subject", b"x", None, 4)
        tracker = Tracker()
        with pytest.raises(BadSubjectError, match="bad subject"):
            await publish_rows(js, rows, tracker)
        await tracker.settled(4)
        await asyncio.sleep(0.2)  # a fifth ack would have had time to come
        assert len(tracker.acks) == 4 and tracker.failures == []
        assert (await (await js.stream("ROWS")).info()).state.messages == 4
        # the rest goes on from the row after the refused one
        await publish_rows(js, rows[5:], tracker)
        await tracker.settled(9)
        assert (await (await js.stream("ROWS")).info()).state.messages == 9


async def test_refused_rows_reach_the_tracker_with_their_error(nats_server: NatsServer) -> None:
    async with jetstream.connect(nats_server.url) as nc:
        js = nc.jetstream()
        await js.create_stream(StreamConfig(name="ROWS", subjects=["rows"]))
        wrong = encode_headers({"Nats-Msg-Id": "w", "Nats-Expected-Stream": "OTHER"})
        rows: list[Row] = [
            ("rows", b"ok", _id(0), "stored"),
            ("nostream", b"x", None, "no stream"),
            ("rows", b"x", wrong, "wrong stream"),
            ("rows", b"ok", _id(3), "stored too"),
        ]
        tracker = Tracker()
        await publish_rows(js, rows, tracker)
        await tracker.settled(4)
        assert len(tracker.acks) == 2
        failed = {row[3]: type(exc) for row, exc in tracker.failures}
        assert failed == {"no stream": NoRespondersError, "wrong stream": StreamNotMatchError}
        assert js.publish_async_pending == 0
