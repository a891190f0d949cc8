"""The ``jetstream`` writer: ``df.writeStream.format("jetstream")`` and
``df.write.format("jetstream")``, in a classic and a Spark Connect session."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from jetstream.embedded import NatsServer
from tests.spark.helpers import (
    classic_only,
    make_stream,
    read_all,
    run_to_end,
    stream_state,
    write_parquet,
)

SCHEMA = "id long, value string"


def _writer(df: Any, url: str, **options: str) -> Any:
    w = df.write.format("jetstream").mode("append").option("servers", url)
    for k, v in options.items():
        w = w.option(k, v)
    return w


def _stream(spark: Any, src: Path, ckpt: Path, url: str, transform: Any, **options: str) -> str:
    """Run a file source through ``transform`` into the writer until the input is used
    up; return the query's id."""
    df = transform(
        spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 4).parquet(str(src))
    )
    w = df.writeStream.format("jetstream").option("servers", url)
    for k, v in options.items():
        w = w.option(k, v)
    return run_to_end(w, ckpt)


def _records(url: str) -> list[dict[str, Any]]:
    return [json.loads(d) for _, d, _, _ in read_all(url, "WREPORT")]


def test_stream_writer_exactly_once_across_a_crash_and_restart(
    spark: Any, module_nats_server: NatsServer, tmp_path: Path
) -> None:
    from pyspark.sql.functions import col, udf

    url = module_nats_server.url
    make_stream(url, "WCRASH", ["w.crash"])
    make_stream(url, "WREPORT", ["w.report"])
    n = 20_000
    write_parquet(spark, tmp_path / "in", n, files=2)
    marker = tmp_path / "crash-now"
    marker.touch()
    marker_path = str(marker)
    poison = n // 2

    def subject_of(i: int) -> str:
        import os

        # while the marker exists, one row halfway gets a subject the stream does not store
        if i == poison and os.path.exists(marker_path):
            return "w.elsewhere"
        return "w.crash"

    subject_udf = udf(subject_of, "string", useArrow=False)
    opts = {"subject_col": "subj", "stream": "WCRASH", "report_subject": "w.report"}

    def transform(df: Any) -> Any:
        return df.withColumn("subj", subject_udf(col("id")))

    with pytest.raises(Exception, match=r"subject_col='subj'.*'w\.elsewhere'"):
        _stream(spark, tmp_path / "in", tmp_path / "ckpt", url, transform, **opts)
    stored_after_crash, _ = stream_state(url, "WCRASH")
    assert 0 < stored_after_crash < n  # the rows before the bad one were stored
    aborted = _records(url)
    assert [(r["status"], r["batch"]) for r in aborted] == [("aborted", 0)]
    assert aborted[0]["failed_partitions"] >= 1
    marker.unlink()
    query_id = _stream(spark, tmp_path / "in", tmp_path / "ckpt", url, transform, **opts)
    assert stream_state(url, "WCRASH") == (n, n)  # batch 0 again: stored once
    got = read_all(url, "WCRASH")
    assert sorted(int(d[4:]) for _, d, _, _ in got) == list(range(n))
    ids = [h["Nats-Msg-Id"].split(":") for *_, h in got]
    assert {(i[0], i[1]) for i in ids} == {(query_id, "0")}  # <query>:<batch>:<part>:<row>
    committed = _records(url)[1:]
    assert [(r["status"], r["batch"], r["name"]) for r in committed] == [("committed", 0, query_id)]
    assert committed[0]["rows"] == n
    assert committed[0]["duplicates"] == stored_after_crash
    assert (committed[0]["first_seq"], committed[0]["last_seq"]) == (stored_after_crash + 1, n)


@classic_only
def test_batch_writer_job_id_and_key_col(spark: Any, module_nats_server: NatsServer) -> None:
    url = module_nats_server.url
    make_stream(url, "WBATCH", ["wb.>"])
    df = spark.range(3000, numPartitions=3).selectExpr(
        "cast(id as string) as key", "cast(id as string) as value", "id % 2 as parity"
    )
    for _ in range(2):  # the same job twice: stored once
        _writer(df, url, subject="wb.job", job_id="nightly-1", headers_cols="parity").save()
    assert stream_state(url, "WBATCH") == (3000, 3000)
    # a key column instead of a job id; an empty value_col sends each row as JSON
    _writer(df.limit(10), url, subject="wb.key", key_col="key", value_col="").save()
    got = read_all(url, "WBATCH")
    jobs = [(h, d) for s, d, _, h in got if s == "wb.job"]
    assert {h["Nats-Msg-Id"].rsplit(":", 2)[0] for h, _ in jobs} == {"nightly-1"}
    assert {(h["parity"], int(d) % 2) for h, d in jobs} == {("0", 0), ("1", 1)}
    keyed = {h["Nats-Msg-Id"]: json.loads(d) for s, d, _, h in got if s == "wb.key"}
    assert len(keyed) == 10 and keyed["3"] == {"key": "3", "value": "3", "parity": 1}
    with pytest.raises(Exception, match=r"mode\('overwrite'\).*only appends"):
        _writer(df, url, subject="wb.job", job_id="x").mode("overwrite").save()
    with pytest.raises(Exception, match=r"needs option key_col .* or job_id"):
        _writer(df, url, subject="wb.job").save()
    assert stream_state(url, "WBATCH") == (3010, 3010)


def test_writer_errors_name_the_option_and_write_nothing(
    spark: Any, module_nats_server: NatsServer, tmp_path: Path
) -> None:
    url = module_nats_server.url
    make_stream(url, "WERR", ["werr"])
    df = spark.range(5).selectExpr("cast(id as string) as value")
    cases = [
        ({"subject": "werr", "stream": "NOPE"}, "stream='NOPE': stream 'NOPE' does not exist"),
        ({"subject": "werr", "key_col": "missing"}, "key_col='missing' is not a column"),
        ({"subject": "nope.x"}, r"subject='nope\.x': no stream stores it"),
        ({"subject": "werr", "value_col": "id"}, "value_col='id' is not a column"),
        ({"subject": "werr", "max_pending": "0"}, "max_pending must be at least 1"),
        ({"subject": "werr", "report_subject": "no.such"}, "report_subject='no.such'"),
    ]
    for options, message in cases:
        with pytest.raises(Exception, match=message):
            _writer(df, url, job_id="j", **options).save()
    with pytest.raises(Exception, match="value_col='value' is a long column"):
        _writer(spark.range(3).selectExpr("id as value"), url, job_id="j", subject="werr").save()
    with pytest.raises(Exception, match=r"servers='nats://127\.0\.0\.1:1': cannot connect"):
        _writer(df, "nats://127.0.0.1:1", job_id="j", subject="werr", connect_timeout="0.5").save()
    # a streaming query fails at its start, before its first batch writes anything
    write_parquet(spark, tmp_path / "in", 10, files=1)
    with pytest.raises(Exception, match="stream='NOPE'"):
        _stream(
            spark,
            tmp_path / "in",
            tmp_path / "ckpt",
            url,
            lambda d: d,
            stream="NOPE",
            subject="werr",
        )
    assert stream_state(url, "WERR") == (0, 0)
