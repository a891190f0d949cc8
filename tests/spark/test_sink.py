"""The foreachBatch sink and write_dataframe against a real nats-server, in a classic and
a Spark Connect session (the ``spark`` fixture runs each test in both)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from jetstream.embedded import NatsServer
from jetstream.spark import SparkConfigError, SparkWriteError, foreach_batch_sink, write_dataframe
from tests import leaks
from tests.spark.helpers import (
    classic_only,
    make_stream,
    read_all,
    run_to_end,
    stream_state,
    write_parquet,
)

SCHEMA = "id long, value string"


def run_query(spark: Any, src: Path, checkpoint: Path, fn: Any, files_per_batch: int = 2) -> str:
    """Run a file-source streaming query through ``fn`` until the input is used up;
    return the query's id."""
    source = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", files_per_batch)
    return run_to_end(source.parquet(str(src)).writeStream.foreachBatch(fn), checkpoint)


def test_rows_arrive_exactly_once_named_after_their_query(
    spark: Any, connect: bool, module_nats_server: NatsServer, tmp_path: Path
) -> None:
    url = module_nats_server.url
    make_stream(url, "SINKN", ["sink.n"])
    n = 60_000
    write_parquet(spark, tmp_path / "in", n, files=6)
    sink = foreach_batch_sink(url, subject="sink.n", stream="SINKN")
    query_id = run_query(spark, tmp_path / "in", tmp_path / "ckpt", sink)
    assert stream_state(url, "SINKN") == (n, n)
    got = read_all(url, "SINKN")
    assert sorted(int(d[4:]) for _, d, _, _ in got) == list(range(n))
    # position-based ids: <query id>:<batch>:<partition>:<row>, the query found in both
    # kinds of session (under Spark Connect, from the server's foreachBatch process)
    ids = {h["Nats-Msg-Id"] for *_, h in got}
    assert len(ids) == n
    parts = [i.split(":") for i in ids]
    assert {p[0] for p in parts} == {query_id}
    assert {int(p[1]) for p in parts} == {0, 1, 2}  # three batches of two files
    if not connect:  # under Spark Connect the function ran, and reported, on the server
        assert sink.last_report is not None and sink.last_report.rows > 0


def test_crash_half_way_then_restart_from_checkpoint(
    spark: Any, connect: bool, module_nats_server: NatsServer, tmp_path: Path
) -> None:
    from pyspark.sql.functions import col, udf

    url = module_nats_server.url
    make_stream(url, "SINKCRASH", ["sink.crash"])
    n = 20_000
    write_parquet(spark, tmp_path / "in", n, files=2)
    marker = tmp_path / "crash-now"
    marker.touch()
    marker_path = str(marker)
    poison = n // 2

    def subject_of(i: int) -> str:
        import os

        # While the marker exists, one row in the middle of its partition gets a subject
        # that the stream does not store: the task fails there, after the rows before it.
        if i == poison and os.path.exists(marker_path):
            return "injected.crash"
        return "sink.crash"

    subject_udf = udf(subject_of, "string", useArrow=False)
    sink = foreach_batch_sink(url, subject_col="subj", stream="SINKCRASH")

    def fn(df: Any, batch_id: int) -> None:
        sink(df.withColumn("subj", subject_udf(col("id"))), batch_id)

    with pytest.raises(Exception, match=r"subject_col='subj'.*'injected\.crash'"):
        run_query(spark, tmp_path / "in", tmp_path / "ckpt", fn, files_per_batch=4)
    stored_after_crash, _ = stream_state(url, "SINKCRASH")
    assert 0 < stored_after_crash < n  # rows before the crash were stored, not the batch
    marker.unlink()
    query_id = run_query(spark, tmp_path / "in", tmp_path / "ckpt", fn, files_per_batch=4)
    msgs, last = stream_state(url, "SINKCRASH")
    assert (msgs, last) == (n, n)  # the re-run rows were deduplicated, none twice
    got = read_all(url, "SINKCRASH")
    assert sorted(int(d[4:]) for _, d, _, _ in got) == list(range(n))
    # the restarted query kept its id (from the checkpoint): so did the rows' ids
    assert {h["Nats-Msg-Id"].split(":")[0] for *_, h in got} == {query_id}
    if not connect:
        assert sink.last_report is not None
        assert sink.last_report.duplicates == stored_after_crash


@classic_only
def test_key_column_json_rows_headers_and_subject_column(
    spark: Any, module_nats_server: NatsServer
) -> None:
    url = module_nats_server.url
    make_stream(url, "SINKJSON", ["json.>"])
    df = spark.createDataFrame(
        [(f"k{i}", f"json.{i % 3}", i, f"t{i % 2}") for i in range(30)],
        "key string, subj string, n int, tag string",
    )
    opts: dict[str, Any] = dict(
        subject_col="subj",
        value_col=None,
        key_col="key",
        headers_cols=["tag"],
        stream="SINKJSON",
    )
    # with a key column, no job id is needed
    report = write_dataframe(df, url, **opts)
    assert (report.rows, report.duplicates) == (30, 0)
    # the same rows again: every key is already stored
    again = write_dataframe(df, url, mode="driver", job_id="job-2", **opts)
    assert (again.rows, again.duplicates) == (30, 30)
    got = read_all(url, "SINKJSON")
    assert len(got) == 30
    bad = spark.createDataFrame([("a\nb", "x")], "key string, value string")
    with pytest.raises(SparkWriteError, match="message id 'a\\\\nb' cannot be sent"):
        write_dataframe(bad, url, subject="json.bad", key_col="key", mode="driver")
    assert stream_state(url, "SINKJSON")[0] == 30
    by_key = {h["Nats-Msg-Id"]: (s, json.loads(d), h["tag"]) for s, d, _, h in got}
    assert by_key["k7"] == ("json.1", {"key": "k7", "subj": "json.1", "n": 7, "tag": "t1"}, "t1")


def test_the_sink_outside_a_query(spark: Any, module_nats_server: NatsServer) -> None:
    url = module_nats_server.url
    make_stream(url, "SINKOUT", ["out.>"])
    df = spark.range(40).selectExpr("cast(id as string) as key", "cast(id as string) as value")
    # with a key column it writes any DataFrame
    keyed = foreach_batch_sink(url, subject="out.key", stream="SINKOUT", key_col="key")
    keyed(df, 7)
    keyed(df, 8)  # the same keys: stored once
    assert stream_state(url, "SINKOUT") == (40, 40)
    # without one, there is no query to name the rows after: refused before anything is sent
    plain = foreach_batch_sink(url, subject="out.plain", stream="SINKOUT")
    with pytest.raises(SparkConfigError, match=r"no streaming query is active.*key_col="):
        plain(df, 7)
    assert stream_state(url, "SINKOUT") == (40, 40)
    # ... unless the caller names them
    named = foreach_batch_sink(url, subject="out.plain", stream="SINKOUT", id_prefix="nightly")
    named(df, 7)
    named(df, 7)
    got = read_all(url, "SINKOUT")
    assert len(got) == 80
    assert {h["Nats-Msg-Id"].rsplit(":", 2)[0] for s, _, _, h in got if s == "out.plain"} == {
        "nightly:7"
    }
    with pytest.raises(SparkConfigError, match="write_dataframe needs job_id="):
        write_dataframe(df, url, subject="out.plain")


def test_driver_mode_write(spark: Any, module_nats_server: NatsServer) -> None:
    url = module_nats_server.url
    make_stream(url, "SINKDRV", ["drv"])
    df = spark.range(500).selectExpr("encode(cast(id as string), 'utf-8') as value")
    report = write_dataframe(df, url, job_id="drv-1", subject="drv", mode="driver")
    assert report.rows == 500 and report.partitions == [0]
    assert stream_state(url, "SINKDRV") == (500, 500)
    assert report.first_seq == 1 and report.last_seq == 500


def test_clear_errors_at_query_start(
    spark: Any, module_nats_server: NatsServer, tmp_path: Path
) -> None:
    url = module_nats_server.url
    df = spark.range(3).selectExpr("cast(id as string) as value")
    with pytest.raises(SparkConfigError, match="stream='NOPE': stream 'NOPE' does not exist"):
        write_dataframe(df, url, job_id="j", subject="nope", stream="NOPE")
    with pytest.raises(SparkConfigError, match=r"subject='nope\.x': no stream stores it"):
        write_dataframe(df, url, job_id="j", subject="nope.x")
    make_stream(url, "SINKNODUP", ["nodup"], dedup=1.0)
    with pytest.raises(SparkConfigError, match=r"too short a duplicate_window \(1s\)"):
        write_dataframe(df, url, job_id="j", subject="nodup")
    make_stream(url, "SINKERR", ["err"])
    with pytest.raises(
        SparkConfigError, match=r"subject='nodup' is not stored by stream 'SINKERR'"
    ):
        write_dataframe(df, url, job_id="j", subject="nodup", stream="SINKERR")
    with pytest.raises(SparkConfigError, match=r"key_col='missing' is not a column.*\['value'\]"):
        write_dataframe(df, url, job_id="j", subject="err", key_col="missing")
    with pytest.raises(SparkConfigError, match=r"value_col='value' is a long column"):
        write_dataframe(spark.range(3).selectExpr("id as value"), url, job_id="j", subject="err")
    with pytest.raises(SparkConfigError, match=r"servers='nats://127\.0\.0\.1:1': cannot connect"):
        write_dataframe(df, "nats://127.0.0.1:1", job_id="j", subject="err", connect_timeout=0.5)
    assert stream_state(url, "SINKERR") == (0, 0)  # nothing was sent

    # in a streaming query the error ends the query at its first batch, with the message
    write_parquet(spark, tmp_path / "in", 10, files=1)
    sink = foreach_batch_sink(url, subject="err", stream="SINKERR", value_col="payload")
    with pytest.raises(Exception, match="value_col='payload' is not a column"):
        run_query(spark, tmp_path / "in", tmp_path / "ckpt", sink)
    assert stream_state(url, "SINKERR") == (0, 0)


def test_two_queries_at_once_without_a_key(
    spark: Any, connect: bool, module_nats_server: NatsServer, tmp_path: Path
) -> None:
    """A classic task knows its own query; under Spark Connect a second query of the same
    session makes the sink's query ambiguous: refused at its first batch, not guessed."""
    url = module_nats_server.url
    make_stream(url, "SINKTWO", ["two.>"])
    write_parquet(spark, tmp_path / "in", 100, files=1)

    def start(name: str) -> Any:
        sink = foreach_batch_sink(url, subject=f"two.{name}", stream="SINKTWO")
        return (
            spark.readStream.schema(SCHEMA)
            .parquet(str(tmp_path / "in"))
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(tmp_path / f"ckpt-{name}"))
            .trigger(processingTime="1 second")
            .start()
        )

    first = start("a")
    try:
        first.processAllAvailable()  # running on, between batches
        second = start("b")
        try:
            if connect:
                with pytest.raises(Exception, match="2 streaming queries are active"):
                    second.processAllAvailable()
            else:
                second.processAllAvailable()
        finally:
            second.stop()
    finally:
        first.stop()
    got = read_all(url, "SINKTWO")
    names = {(s, h["Nats-Msg-Id"].split(":")[0]) for s, _, _, h in got}
    if connect:
        assert names == {("two.a", str(first.id))}
    else:
        assert names == {("two.a", str(first.id)), ("two.b", str(second.id))}


@classic_only
def test_a_batch_of_many_small_partitions_is_written_over_one_connection_a_worker(
    spark: Any, module_nats_server: NatsServer
) -> None:
    """A batch of 16 partitions, half of them empty (an aggregation's output, say), is
    written by twice as many tasks as local[2] runs at once; a Python worker connects once, for
    all its tasks and batches; a row's id does not depend on how many tasks wrote it."""
    from jetstream.spark import kv_sink

    url = module_nats_server.url
    make_stream(url, "SINKPOOL", ["pool"])
    df = (
        spark.range(0, 1600, 1, 16)
        .where("id % 200 < 100")  # rows 0-99 of each 200: partitions 1, 3, 5... are empty
        .selectExpr("cast(id as string) as value")
    )
    sink = foreach_batch_sink(url, subject="pool", stream="SINKPOOL", id_prefix="p", name="pool")
    for batch in range(3):
        sink(df, batch)
        assert sink.last_report is not None
        assert (sink.last_report.rows, sink.last_report.duplicates) == (800, 0)
        assert sink.last_report.partitions == list(range(0, 16, 2))
        assert sink.last_report.tasks == 4  # twice local[2]'s cores
    # the same batch by a task per partition: the same ids, every row found stored
    per_partition = foreach_batch_sink(
        url, subject="pool", stream="SINKPOOL", id_prefix="p", tasks=16, name="pool"
    )
    per_partition(df, 2)
    assert per_partition.last_report is not None
    assert (per_partition.last_report.duplicates, per_partition.last_report.tasks) == (800, 16)
    assert stream_state(url, "SINKPOOL") == (2400, 2400)
    ids = {h["Nats-Msg-Id"] for *_, h in read_all(url, "SINKPOOL")}
    assert "p:2:14:99" in ids and "p:0:0:0" in ids
    # the KeyValue sink too: both its stages coalesced, a connection a worker
    leaks.run(_make_bucket(url, "POOLKV"))
    spend = df.selectExpr("cast(cast(value as long) % 7 as string) as key", "value")
    to_kv = kv_sink(url, bucket="POOLKV", name="pool-kv")
    for batch in range(3):
        to_kv(spend, batch)
        assert to_kv.last_report is not None and to_kv.last_report.puts == 7
    connz = module_nats_server.monitor("connz", state="all", limit=10_000)
    conns = connz.get("connections") or []
    # 20 tasks published rows (3 batches of 4, then 8), 12 put keys: a connection a task
    # would be 20 and 12 (and the checks of the driver, one a sink object); Spark's few
    # Python workers of local[2] took them all, each over its connection
    writing = [c["in_msgs"] for c in conns if c.get("name") == "pool"]
    putting = [c for c in conns if c.get("name") == "pool-kv"]
    assert sum(writing) >= 3200 and max(writing) >= 400  # one carried two tasks' rows
    assert len(writing) <= 2 + 6 and len(putting) <= 1 + 6, (writing, len(putting))


async def _make_bucket(url: str, bucket: str) -> None:
    import jetstream

    async with jetstream.connect(url) as nc:
        await nc.jetstream().create_key_value(bucket=bucket)
