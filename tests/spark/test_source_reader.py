"""The source's range reader on its own (no Spark): the Arrow batches it hands to Spark,
against a real nats-server, and the batch it builds from ack subjects of either layout."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

import jetstream
from jetstream.bulk import take_runs
from jetstream.embedded import NatsServer
from jetstream.protocol.ops import Msg, OpsRun
from jetstream.spark._columns import ARROW_SCHEMA
from jetstream.spark._range import RangeReader, read_batches, read_rows
from jetstream.spark._readopts import ReadOptions
from tests import leaks
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

    leaks.run(more())
    opts = ReadOptions.parse({"servers": url, "stream": "RR"})
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
    only_b = ReadOptions.parse({"servers": url, "stream": "RR", "subjects": "rr.b"})
    rows = list(read_rows(only_b, 1, 3006))
    assert [(r[0], r[1], r[3]) for r in rows] == [("rr.b", b"b%d" % i, 3001 + i) for i in range(5)]
    assert list(read_batches(opts, 3011, 3100)) == []  # past the end of the stream


def test_a_read_is_one_range_unless_partitions_splits_it(nats_server: NatsServer) -> None:
    """One ordered consumer reads a batch by default; ``partitions`` splits the batch's
    sequences into that many contiguous ranges, read side by side."""
    from jetstream.spark._source import BatchReader

    url = nats_server.url
    make_stream(url, "PR", ["pr"])
    publish(url, "pr", [b"%d" % i for i in range(10)])
    one = BatchReader(ReadOptions.parse({"servers": url, "stream": "PR"})).partitions()
    assert [(p.first, p.end) for p in one] == [(1, 11)]
    three = BatchReader(ReadOptions.parse({"servers": url, "stream": "PR", "partitions": "3"}))
    assert [(p.first, p.end) for p in three.partitions()] == [(1, 5), (5, 8), (8, 11)]


@pytest.mark.parametrize(
    "layout",
    [
        "$JS.ACK.S.C.1.{seq}.{seq}.{ts}.{pending}",  # v1
        "$JS.ACK.dom.hash.S.C.1.{seq}.{seq}.{ts}.{pending}",  # v2
        "$JS.ACK.dom.hash.S.C.1.{seq}.{seq}.{ts}.{pending}.tok",  # v2 with a token after
    ],
)
def test_a_batch_from_ack_subjects_of_each_layout(layout: str) -> None:
    opts = ReadOptions.parse({"servers": "nats://127.0.0.1:1", "stream": "S"})
    reader = RangeReader(opts, 10, 16)
    base = 1_700_000_000_123_456_789
    seqs = [10, 12, 15, 16, 17]  # a gap, then two past the end of the range
    replies = [layout.format(seq=s, ts=base + s, pending=20 - s) for s in seqs]
    raws = [None, b"NATS/1.0\r\nk: v\r\n\r\n", *[None] * 3]
    ops = [Msg("s", 1, r, b"%d" % s, h) for r, s, h in zip(replies, seqs, raws, strict=True)]
    batch = reader._batch([OpsRun(ops[:2]), OpsRun(ops[2:])])
    assert batch.column("sequence").to_pylist() == [10, 12, 15]
    assert batch.column("data").to_pylist() == [b"10", b"12", b"15"]
    assert batch.column("headers").to_pylist() == [None, [("k", "v")], None]
    micros = [t.timestamp() for t in batch.column("timestamp").to_pylist()]
    assert micros == [(base + s) // 1000 / 1e6 for s in (10, 12, 15)]
    assert reader.done and reader.next_seq == 16


def _run(replies: list[str]) -> OpsRun:
    return OpsRun([Msg("s", 1, r, b"") for r in replies])


def _by_split(reader: RangeReader, replies: list[str]) -> tuple[list[int], list[object]]:
    """A batch's sequences and times with the fast path off (every subject split)."""
    import jetstream.spark._columns as columns

    fast, columns._run_numbers = columns._run_numbers, lambda replies: None  # type: ignore[assignment]
    try:
        batch = reader._batch([_run(replies)])
    finally:
        columns._run_numbers = fast  # type: ignore[assignment]
    return batch.column("sequence").to_pylist(), batch.column("timestamp").to_pylist()


@pytest.mark.parametrize(
    ("name", "seqs", "stamps"),
    [
        ("one by one", list(range(100, 140)), None),
        ("a gap", [*range(100, 120), *range(121, 141)], None),
        ("a stream name not in ASCII", list(range(5, 45)), None),
        ("short times", list(range(100, 140)), [10**12 + i for i in range(40)]),
        ("pending of many digits", list(range(999_990, 1_000_030)), None),
    ],
)
def test_the_sequences_and_times_of_a_run_agree_with_splitting_each_subject(
    name: str, seqs: list[int], stamps: list[int] | None
) -> None:
    from jetstream.spark._columns import _run_numbers

    stream = "Sé" if "ASCII" in name else "S"
    base = 1_700_000_000_123_456_789
    stamps = stamps or [base + 7919 * i for i in range(len(seqs))]
    pending = [10**12 - s if "many" in name else 2000 - s for s in seqs]
    replies = [
        f"$JS.ACK.{stream}.C.1.{s}.{i + 1}.{t}.{p}"
        for i, (s, t, p) in enumerate(zip(seqs, stamps, pending, strict=True))
    ]
    opts = ReadOptions.parse({"servers": "nats://127.0.0.1:1", "stream": stream})
    fast = RangeReader(opts, seqs[0], 10**9)
    batch = fast._batch([_run(replies)])
    got = batch.column("sequence").to_pylist(), batch.column("timestamp").to_pylist()
    slow = RangeReader(opts, seqs[0], 10**9)
    assert got == _by_split(slow, replies)
    assert got[0] == seqs
    # the fast path takes the runs without a gap and with 19-digit times, in ASCII
    taken = _run_numbers(replies) is not None
    assert taken == (name in ("one by one", "pending of many digits"))


@pytest.mark.parametrize(
    "subjects",
    [["s.a"] * 5, ["s.a", "s.b", "s.a"], ["s.é"] * 3, ["s.é", "s.a"], ["x"], [], ["", ""]],
)
def test_a_subject_column_is_the_subjects(subjects: list[str]) -> None:
    """One subject repeated is laid out at once; any other mix goes value by value."""
    from jetstream.spark._columns import strings

    column = strings(subjects)
    column.validate(full=True)
    assert column.type == pa.string()
    assert column.to_pylist() == subjects


@pytest.mark.parametrize("found", [False, True], ids=["ops", "found in the bytes"])
def test_a_gap_inside_a_run_cuts_it_there_and_the_read_goes_on_after_it(
    nats_server: NatsServer, found: bool
) -> None:
    """A run whose consumer sequences skip one is handed over up to the gap; the consumer
    is made again from the stream sequence after the last message handed over, so every
    message still comes once, in order. Whether the run is of the parser's ops or was
    found in the feed's bytes by the source's bulk parser."""
    from jetstream._pull import PullOptions
    from jetstream._runs import RunStream
    from jetstream.message import parse_ack_subject
    from jetstream.ordered import OrderedStream
    from jetstream.protocol.ops import MsgRun
    from jetstream.spark._frames import frame_run
    from tests.unit.test_parser_properties import encode

    def parse_seqs(runs: list[MsgRun]) -> list[int]:
        replies = [run.reply(i) for run in runs for i in range(len(run))]
        return [parse_ack_subject(r or "").sequence.stream for r in replies]

    url = nats_server.url
    make_stream(url, "GAP", ["gap.*"])
    publish(url, "gap.a", [b"%d" % i for i in range(200)])

    def renumber(reply: str, tail_dots: int, sseq: int, cseq: int) -> str:
        tokens = reply.split(".")
        at = len(tokens) - tail_dots  # the consumer sequence; the stream's is before it
        tokens[at - 1], tokens[at] = str(sseq), str(cseq)
        return ".".join(tokens)

    async def read() -> tuple[list[int], int]:
        async with jetstream.connect(url) as nc:
            nc.use_bulk_parse(frame_run)
            oc = await (await nc.jetstream().stream("GAP")).ordered_consumer()
            seqs: list[int] = []
            opts = PullOptions(batch=40, expires=5.0, heartbeat=2.5)
            async with OrderedStream(oc, opts, runs=True) as it:
                runs = await take_runs(it, 5.0)
                seqs += parse_seqs(runs)
                # the connection hands over a run with consumer sequence c + 6 missing.
                # Injected: a real server never skips a consumer sequence, and a gap made on
                # the way (the fault proxy's drops) does not land inside one run on demand
                k, c, s = oc._tail_dots, oc._consumer_seq, seqs[-1]
                inner = it._inner
                assert isinstance(inner, RunStream)
                last = runs[-1].reply(-1) or ""
                fake = [
                    Msg("gap.a", inner._sid, renumber(last, k, s + d, c + d), b"")
                    for d in (*range(1, 6), *range(7, 30))
                ]
                if found:
                    _, run = frame_run(b"".join(map(encode, fake)), 0, 4096, 1 << 20)
                    assert run is not None and len(run) == len(fake)
                    inner._deliver_run(run)
                else:
                    assert inner._deliver_many(fake, 0)
                # a run that fails the check is handed over message by message, up to
                # the gap (then the consumer is made again after the last one)
                cut = await take_runs(it, 5.0)
                assert parse_seqs(cut) == [s + 1]
                seqs += parse_seqs(cut)
                while seqs[-1] < 200:
                    seqs += parse_seqs(await take_runs(it, 5.0))
            await oc.delete()
            return seqs, oc.resets

    seqs, resets = leaks.run(read())
    assert seqs == list(range(1, 201))
    assert resets == 1


def test_a_task_finds_the_head_of_its_range_removed(
    nats_server: NatsServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Between planning and reading, the stream's limits removed the head of a range:
    the task fails with SparkDataLossError, or with fail_on_data_loss=false logs the
    gap and reads the rest."""
    from jetstream.spark import SparkDataLossError

    url = nats_server.url
    make_stream(url, "HEAD", ["head.*"], max_msgs=50)
    publish(url, "head.a", [b"%d" % i for i in range(80)])  # 31..80 kept
    opts = ReadOptions.parse({"servers": url, "stream": "HEAD"})
    with pytest.raises(SparkDataLossError, match="sequences 21-30 were removed"):
        list(read_batches(opts, 21, 41))
    skip = ReadOptions.parse({"servers": url, "stream": "HEAD", "fail_on_data_loss": "false"})
    with caplog.at_level("WARNING", logger="jetstream.spark"):
        rows = list(read_rows(skip, 21, 41))
        assert list(read_batches(skip, 1, 21)) == []
    assert [r[3] for r in rows] == list(range(31, 41))
    assert [r.getMessage().split(";")[0] for r in caplog.records] == [
        "stream 'HEAD': sequences 21-30 were removed (limits or a purge) before this query "
        "read them",
        "stream 'HEAD': sequences 1-20 were removed (limits or a purge) before this query "
        "read them",
    ]
