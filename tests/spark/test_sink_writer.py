"""The sink's partition writer on its own (no Spark): every row confirmed once, rows
whose publish failed sent again with the same id, a wrong stream refused."""

from __future__ import annotations

import asyncio

import pyarrow as pa
import pytest

import jetstream
from jetstream import StreamConfig
from jetstream.api import StorageType
from jetstream.embedded import NatsServer
from jetstream.spark import SparkWriteError
from jetstream.spark._common import ConnectSpec
from jetstream.spark._publish import _PartitionWriter
from jetstream.spark._target import Target as _Target

pytestmark = pytest.mark.asyncio

FAST = {"reconnect_time_wait": 0.1, "max_reconnect_attempts": -1}


def _target(url: str, stream: str, subject: str, headers_cols: tuple[str, ...] = ()) -> _Target:
    return _Target(
        conn=ConnectSpec(servers=(url,), options=FAST),
        subject=subject,
        subject_col=None,
        value_col="value",
        headers_cols=headers_cols,
        key_col=None,
        stream=stream,
        max_pending=500,
        retries=5,
        min_duplicate_window=60,
    )


def _batch(start: int, n: int) -> pa.RecordBatch:
    rows = range(start, start + n)
    return pa.RecordBatch.from_pydict(
        {"value": [b"row %d" % i for i in rows], "tag": [f"t{i % 7}" for i in rows]}
    )


@pytest.mark.parametrize("headers_cols", [(), ("tag",)])
async def test_rows_lost_to_a_restart_are_sent_again_once(
    nats_server: NatsServer, headers_cols: tuple[str, ...]
) -> None:
    async with jetstream.connect(nats_server.url) as nc:
        js = nc.jetstream()
        await js.create_stream(
            StreamConfig(
                name="SINKW", subjects=["sinkw"], storage=StorageType.FILE, duplicate_window=120
            )
        )
    t = _target(nats_server.url, "SINKW", "sinkw", headers_cols)
    nc = await t.conn.connect()
    try:
        w = _PartitionWriter(t, "job:0:0", t.conn.jetstream(nc, publish_async_max_pending=500))
        await w.write(_batch(0, 3000))
        assert w.js._publisher.pending > 0
        # the server goes away with publishes in flight (the last ones still in the
        # client's buffer, unacked for sure): they fail and are kept
        nats_server.kill()
        await nats_server.start_async()
        await w.write(_batch(3000, 3000))
        await w.finish()
    finally:
        await nc.close()
    assert w.rows == 6000 and w.index == 6000
    assert w.retried > 0
    async with jetstream.connect(nats_server.url) as nc:
        stream = await nc.jetstream().stream("SINKW")
        info = await stream.info()
        assert info.state.messages == 6000  # the ids deduplicated every row sent twice
        # every row, sent once or twice, with its id and its own headers
        oc = await stream.ordered_consumer()
        seen = set()
        async with oc.messages() as it, asyncio.timeout(60):
            async for msg in it:
                i = int(msg.data.split()[1])
                tag = {"tag": f"t{i % 7}"} if headers_cols else {}
                assert dict(msg.headers or {}) == {"Nats-Msg-Id": f"job:0:0:{i}"} | tag
                seen.add(i)
                if msg.metadata.sequence.stream == 6000:
                    break
        assert seen == set(range(6000))


async def test_a_row_stored_in_another_stream_is_an_error(nats_server: NatsServer) -> None:
    async with jetstream.connect(nats_server.url) as nc:
        js = nc.jetstream()
        await js.create_stream(StreamConfig(name="WANTED", subjects=["wanted"]))
        await js.create_stream(StreamConfig(name="OTHER", subjects=["other"]))
    t = _target(nats_server.url, "WANTED", "other")
    nc = await t.conn.connect()
    try:
        w = _PartitionWriter(t, "job:0:0", t.conn.jetstream(nc))
        await w.write(_batch(0, 10))
        with pytest.raises(SparkWriteError, match="not 'WANTED'"):
            await w.finish()
    finally:
        await nc.close()


async def test_a_value_that_is_not_binary_or_string_is_refused(nats_server: NatsServer) -> None:
    async with jetstream.connect(nats_server.url) as nc:
        await nc.jetstream().create_stream(StreamConfig(name="TYPED", subjects=["typed"]))
    t = _target(nats_server.url, "TYPED", "typed")
    nc = await t.conn.connect()
    try:
        w = _PartitionWriter(t, "job:0:0", t.conn.jetstream(nc))
        bad = pa.RecordBatch.from_pydict({"value": pa.array([7, 12], pa.int64())})
        with pytest.raises(SparkWriteError, match="row 0: value column 'value' holds a int"):
            await w.write(bad)
        assert w.js._publisher.pending == 0  # nothing of the batch was sent
    finally:
        await nc.close()
