"""The ``jetstream`` Spark source (readStream and read) against a real nats-server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import jetstream
from jetstream.embedded import NatsServer
from jetstream.spark import foreach_batch_sink
from tests import leaks
from tests.spark.helpers import classic_only, consumer_count, make_stream, publish, read_all


def _stream_to_parquet(spark: Any, url: str, out: Path, ckpt: Path, **options: str) -> None:
    """Run a query from the source to parquet files until it has read all there is
    (micro-batches as the source's read limit cuts them), then stop it."""
    reader = spark.readStream.format("jetstream").option("servers", url)
    for k, v in options.items():
        reader = reader.option(k, v)
    q = (
        reader.load()
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(ckpt))
        .start()
    )
    try:
        q.processAllAvailable()
    finally:
        q.stop()


@classic_only
def test_every_message_once_across_a_restart_from_the_checkpoint(
    spark: Any, module_nats_server: NatsServer, tmp_path: Path
) -> None:
    url = module_nats_server.url
    make_stream(url, "SRC", ["src.*"])
    publish(url, "src.a", [f"a{i}".encode() for i in range(600)])
    publish(url, "src.b", [f"b{i}".encode() for i in range(400)])
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    opts = {"stream": "SRC", "max_rows_per_batch": "300", "partitions": "3"}
    _stream_to_parquet(spark, url, out, ckpt, **opts)
    first = spark.read.parquet(str(out)).collect()
    assert sorted(r.sequence for r in first) == list(range(1, 1001))
    # more messages, then the same query again from its checkpoint
    publish(url, "src.b", [f"b{i}".encode() for i in range(400, 900)])
    _stream_to_parquet(spark, url, out, ckpt, **opts)
    rows = spark.read.parquet(str(out)).collect()
    assert sorted(r.sequence for r in rows) == list(range(1, 1501))
    expected = {m[2]: (m[0], m[1]) for m in read_all(url, "SRC")}
    assert {r.sequence: (r.subject, bytes(r.data)) for r in rows} == expected
    assert all(r.timestamp is not None for r in rows)
    # micro-batches of at most 300 sequences: 4 for the first 1000, 2 for the next 500
    commits = sorted((ckpt / "commits").glob("[0-9]*"))
    assert len(commits) == 6


@classic_only
def test_batch_read_with_filters_headers_and_bounds(
    spark: Any, module_nats_server: NatsServer
) -> None:
    url = module_nats_server.url
    make_stream(url, "SRCB", ["srcb.*"])

    async def fill() -> None:
        async with jetstream.connect(url) as nc:
            js = nc.jetstream()
            for i in range(40):
                subject = "srcb.even" if i % 2 == 0 else "srcb.odd"
                await js.publish(subject, str(i).encode(), headers={"i": str(i), "x": "y"})

    leaks.run(fill())

    def base() -> Any:  # a DataFrameReader keeps its options: one per read
        return spark.read.format("jetstream").option("servers", url).option("stream", "SRCB")

    odd = base().option("subjects", "srcb.odd").option("partitions", "4").load().collect()
    assert [int(r.data) for r in odd] == list(range(1, 40, 2))
    assert all(r.subject == "srcb.odd" and r.headers["x"] == "y" for r in odd)
    assert {r.headers["i"] for r in odd} == {str(i) for i in range(1, 40, 2)}
    window = base().option("start_seq", "11").option("end_seq", "20").load().collect()
    assert sorted(r.sequence for r in window) == list(range(11, 21))
    since = base().option("start_time", "2000-01-01T00:00:00").load().collect()
    assert len(since) == 40
    # a range with nothing in it: Spark reads once with a partition of its own
    assert base().option("start_seq", "41").load().count() == 0
    make_stream(url, "SRCB_EMPTY", ["srcb_empty.*"])
    empty = spark.read.format("jetstream").option("servers", url).option("stream", "SRCB_EMPTY")
    assert empty.load().count() == 0
    # the readers deleted their consumers when they finished
    assert consumer_count(url, "SRCB") == 0


def test_stream_a_to_spark_to_stream_b(
    spark: Any, module_nats_server: NatsServer, tmp_path: Path
) -> None:
    from pyspark.sql.functions import col, from_json, struct, to_json

    url = module_nats_server.url
    make_stream(url, "PIPE_A", ["pipe.a"])
    make_stream(url, "PIPE_B", ["pipe.b"])
    n = 2000
    publish(url, "pipe.a", [json.dumps({"n": i, "name": f"x{i}"}).encode() for i in range(n)])
    events = (
        spark.readStream.format("jetstream")
        .option("servers", url)
        .option("stream", "PIPE_A")
        .option("max_rows_per_batch", "700")
        .load()
        .select(
            col("sequence").cast("string").alias("key"),
            from_json(col("data").cast("string"), "n long, name string").alias("e"),
        )
        .select(
            "key",
            to_json(struct((col("e.n") * 2).alias("double"), col("e.name").alias("name"))).alias(
                "value"
            ),
        )
    )
    sink = foreach_batch_sink(url, subject="pipe.b", stream="PIPE_B", key_col="key")
    q = (
        events.writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert q.awaitTermination(240)
    finally:
        q.stop()
    got = read_all(url, "PIPE_B")
    assert len(got) == n
    by_key = {h["Nats-Msg-Id"]: json.loads(d) for _, d, _, h in got}
    assert by_key == {str(i + 1): {"double": 2 * i, "name": f"x{i}"} for i in range(n)}


def test_clear_errors_at_query_start(
    spark: Any, module_nats_server: NatsServer, tmp_path: Path
) -> None:
    url = module_nats_server.url
    reader = spark.read.format("jetstream")
    with pytest.raises(Exception, match="stream 'NOPE' does not exist"):
        reader.option("servers", url).option("stream", "NOPE").load().collect()
    with pytest.raises(Exception, match="needs option servers="):
        spark.read.format("jetstream").option("stream", "X").load().collect()
    with pytest.raises(Exception, match=r"cannot connect to NATS at nats://127\.0\.0\.1:1"):
        (
            spark.read.format("jetstream")
            .option("servers", "nats://127.0.0.1:1")
            .option("stream", "X")
            .load()
            .collect()
        )
    with pytest.raises(Exception, match="stream 'NOPE' does not exist"):
        _stream_to_parquet(spark, url, tmp_path / "o", tmp_path / "c", stream="NOPE")
