"""The source's range reader on its own (no Spark): the Arrow batches it hands to Spark,
against a real nats-server, and the batch it builds from ack subjects of either layout."""

from __future__ import annotations

import asyncio
import datetime as dt

import pyarrow as pa
import pytest

import jetstream
from jetstream.embedded import NatsServer
from jetstream.spark._source import ARROW_SCHEMA, _Options, _RangeReader, _read_range, read_batches
from tests.spark.helpers import make_stream, publish


def test_the_arrow_schema_is_the_one_spark_expects() -> None:
    """The schema of ``SCHEMA``, as PySpark converts it for the batches of ``read()``."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import (
        BinaryType,
        LongType,
        MapType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    from jetstream.spark import SCHEMA

    fields = [
        ("subject", StringType()),
        ("data", BinaryType()),
        ("headers", MapType(StringType(), StringType())),
        ("sequence", LongType()),
        ("timestamp", TimestampType()),
    ]
    ddl = ", ".join(f"{n} {t.simpleString()}" for n, t in fields)
    assert ddl == SCHEMA.replace("sequence long", "sequence bigint")
    spark_schema = StructType([StructField(n, t) for n, t in fields])
    assert to_arrow_schema(spark_schema, timezone="UTC").equals(ARROW_SCHEMA)


def test_ranges_with_gaps_filters_and_headers(nats_server: NatsServer) -> None:
    url = nats_server.url
    make_stream(url, "RR", ["rr.*"])
    publish(url, "rr.a", [b"a%d" % i for i in range(3000)])  # sequences 1..3000

    async def more() -> None:
        async with jetstream.connect(url) as nc:
            js = nc.jetstream()
            for i in range(10):  # 3001..3010, with headers, one repeated
                await js.publish("rr.b", b"b%d" % i, headers={"k": str(i), "x": ["1", "2"]})
            stream = await js.stream("RR")
            for seq in (5, 1500, 2999):  # gaps inside the ranges
                await stream.delete_msg(seq)

    asyncio.run(more())
    opts = _Options.parse({"servers": url, "stream": "RR"})
    t0 = dt.datetime.now(dt.UTC)
    # two ranges meeting at 1501: together every stored sequence once
    batches = [*read_batches(opts, 1, 1501), *read_batches(opts, 1501, 3011)]
    assert all(b.schema.equals(ARROW_SCHEMA) for b in batches)
    table = pa.Table.from_batches(batches)
    seqs = table.column("sequence").to_pylist()
    assert seqs == [s for s in range(1, 3011) if s not in (5, 1500, 2999)]
    assert table.column("data").to_pylist()[:5] == [b"a0", b"a1", b"a2", b"a3", b"a5"]
    stamps = table.column("timestamp").to_pylist()
    assert all(abs((t - t0).total_seconds()) < 600 for t in stamps)
    headers = table.column("headers").to_pylist()
    assert headers[:-10] == [None] * (len(seqs) - 10)
    assert dict(headers[-1]) == {"k": "9", "x": "1, 2"}
    # a range that ends inside the stream stops there, and a filter leaves gaps of its own
    only_b = _Options.parse({"servers": url, "stream": "RR", "subjects": "rr.b"})
    rows = list(_read_range(only_b, 1, 3006))
    assert [(r[0], r[1], r[3]) for r in rows] == [("rr.b", b"b%d" % i, 3001 + i) for i in range(5)]
    assert list(read_batches(opts, 3011, 3100)) == []  # past the end of the stream


@pytest.mark.parametrize(
    "layout",
    [
        "$JS.ACK.S.C.1.{seq}.{seq}.{ts}.{pending}",  # v1
        "$JS.ACK.dom.hash.S.C.1.{seq}.{seq}.{ts}.{pending}",  # v2
        "$JS.ACK.dom.hash.S.C.1.{seq}.{seq}.{ts}.{pending}.tok",  # v2 with a token after
    ],
)
def test_a_batch_from_ack_subjects_of_each_layout(layout: str) -> None:
    opts = _Options.parse({"servers": "nats://127.0.0.1:1", "stream": "S"})
    reader = _RangeReader(opts, 10, 16)
    base = 1_700_000_000_123_456_789
    seqs = [10, 12, 15, 16, 17]  # a gap, then two past the end of the range
    replies = [layout.format(seq=s, ts=base + s, pending=20 - s) for s in seqs]
    reader._learn(replies[0])
    batch = reader._batch(
        ["s"] * 5,
        [b"%d" % s for s in seqs],
        replies,
        [None, b"NATS/1.0\r\nk: v\r\n\r\n", *[None] * 3],
    )
    assert batch.column("sequence").to_pylist() == [10, 12, 15]
    assert batch.column("data").to_pylist() == [b"10", b"12", b"15"]
    assert batch.column("headers").to_pylist() == [None, [("k", "v")], None]
    micros = [t.timestamp() for t in batch.column("timestamp").to_pylist()]
    assert micros == [(base + s) // 1000 / 1e6 for s in (10, 12, 15)]
    assert reader.done and reader.next_seq == 16
