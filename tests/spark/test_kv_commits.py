"""The KeyValue sink's commit records (``kv_sink(commit_bucket=...)``): a batch written
again after later batches wrote newer values puts nothing back, at any distance in time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import jetstream
from jetstream.embedded import NatsServer
from jetstream.spark import SparkConfigError, kv_sink
from tests import leaks
from tests.spark.helpers import classic_only, run_to_end
from tests.spark.test_kv_sink import make_bucket, revisions, values


def _record(url: str, bucket: str, name: str) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        async with jetstream.connect(url) as nc:
            kv = await nc.jetstream().key_value(bucket)
            out: dict[str, Any] = json.loads((await kv.get(name)).value)
            return out

    return leaks.run(go())


def _frame(spark: Any, version: str, n: int = 40) -> Any:
    return spark.range(0, n, 1, 4).selectExpr(
        "concat('k', cast(id % 10 as string)) as key",
        f"concat('{version}-', cast(id as string)) as value",
    )


def test_an_older_batch_written_again_puts_nothing_back(
    spark: Any, module_nats_server: NatsServer
) -> None:
    url = module_nats_server.url
    make_bucket(url, "KVCV")
    make_bucket(url, "KVCREC")
    sink = kv_sink(url, bucket="KVCV", commit_bucket="KVCREC", id_prefix="nightly")
    sink(_frame(spark, "old"), 0)
    sink(_frame(spark, "new"), 1)
    newest = values(url, "KVCV")
    assert newest == {f"k{i}": f"new-{30 + i}".encode() for i in range(10)}
    stored = revisions(url, "KVCV")
    assert _record(url, "KVCREC", "nightly") == {"batch": 1}
    # batch 0 again, days later as far as the bucket knows: skipped whole
    sink(_frame(spark, "old"), 0)
    assert sink.last_report is not None and sink.last_report.skipped
    assert sink.last_report.puts == 0
    assert values(url, "KVCV") == newest
    assert revisions(url, "KVCV") == stored
    # a new batch is written, and recorded; a sink made anew reads the same record
    again = kv_sink(url, bucket="KVCV", commit_bucket="KVCREC", id_prefix="nightly")
    again(_frame(spark, "v2"), 1)
    assert again.last_report is not None and again.last_report.skipped
    again(_frame(spark, "v2"), 2)
    assert again.last_report is not None and again.last_report.puts == 10
    assert values(url, "KVCV")["k3"] == b"v2-33"
    assert _record(url, "KVCREC", "nightly") == {"batch": 2}


def test_a_query_restarted_before_its_commit_log_skips_the_batch_written(
    spark: Any, module_nats_server: NatsServer, tmp_path: Path
) -> None:
    url = module_nats_server.url
    make_bucket(url, "KVCQ")
    make_bucket(url, "KVCQREC")
    src = tmp_path / "in"
    _frame(spark, "q", 100).write.parquet(str(src))
    ckpt = tmp_path / "ckpt"
    sink = kv_sink(url, bucket="KVCQ", commit_bucket="KVCQREC")

    def run() -> str:
        df = spark.readStream.schema("key string, value string").parquet(str(src))
        return run_to_end(df.writeStream.foreachBatch(sink), ckpt)

    query_id = run()
    assert _record(url, "KVCQREC", query_id) == {"batch": 0}  # named after the query
    written = values(url, "KVCQ")
    stored = revisions(url, "KVCQ")
    assert len(written) == 10
    for f in (ckpt / "commits").iterdir():
        f.unlink()  # Spark has not recorded the batch: it runs it again at the restart
    assert run() == query_id
    assert revisions(url, "KVCQ") == stored  # nothing put again
    assert values(url, "KVCQ") == written


@classic_only
def test_commit_records_refused_where_they_cannot_be_kept(
    spark: Any, module_nats_server: NatsServer
) -> None:
    url = module_nats_server.url
    make_bucket(url, "KVCB")
    df = _frame(spark, "x", 10)
    with pytest.raises(SparkConfigError, match=r"commit_bucket='NOPE': there is no bucket"):
        kv_sink(url, bucket="KVCB", commit_bucket="NOPE", id_prefix="p")(df, 0)
    with pytest.raises(SparkConfigError, match=r"no single streaming query.*id_prefix="):
        kv_sink(url, bucket="KVCB", commit_bucket="KVCB")(df, 0)
    with pytest.raises(SparkConfigError, match=r"id_prefix='a b' cannot name a commit record"):
        kv_sink(url, bucket="KVCB", commit_bucket="KVCB", id_prefix="a b")
    assert revisions(url, "KVCB") == 0


def test_the_kv_format_skips_a_batch_written_whole_before(
    spark: Any, module_nats_server: NatsServer, tmp_path: Path
) -> None:
    url = module_nats_server.url
    make_bucket(url, "KVCF")
    make_bucket(url, "KVCFREC")
    src = tmp_path / "in"
    _frame(spark, "f", 100).write.parquet(str(src))
    ckpt = tmp_path / "ckpt"

    def run() -> str:
        df = spark.readStream.schema("key string, value string").parquet(str(src))
        writer = (
            df.writeStream.format("jetstream-kv")
            .option("servers", url)
            .option("bucket", "KVCF")
            .option("commit_bucket", "KVCFREC")
        )
        return run_to_end(writer, ckpt)

    query_id = run()
    assert _record(url, "KVCFREC", query_id) == {"batch": 0}
    written, stored = values(url, "KVCF"), revisions(url, "KVCF")
    assert len(written) == 10
    for f in (ckpt / "commits").iterdir():
        f.unlink()
    assert run() == query_id
    assert (values(url, "KVCF"), revisions(url, "KVCF")) == (written, stored)
    # a batch write is recorded under its job_id: the same job again puts nothing
    batch = _frame(spark, "b", 10).write.format("jetstream-kv").mode("append")
    batch = batch.option("servers", url).option("bucket", "KVCF")
    batch = batch.option("commit_bucket", "KVCFREC")
    with pytest.raises(Exception, match=r"commit_bucket needs option job_id"):
        batch.save()
    batch.option("job_id", "nightly").save()
    assert values(url, "KVCF")["k3"] == b"b-3"
    stored = revisions(url, "KVCF")
    _frame(spark, "c", 10).write.format("jetstream-kv").mode("append").option(
        "servers", url
    ).option("bucket", "KVCF").option("commit_bucket", "KVCFREC").option("job_id", "nightly").save()
    assert revisions(url, "KVCF") == stored
    assert values(url, "KVCF")["k3"] == b"b-3"
