"""Exactly once at any distance in time (``commit_subject``): the sink and the writer
commit each partition's rows in atomic batches closed by a marker, so a batch written
again after the stream's duplicate window has passed stores nothing new. The streams here
deduplicate over one second only, and every replay waits longer than that."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from jetstream.embedded import NatsServer
from jetstream.spark import SparkConfigError, foreach_batch_sink, write_dataframe
from tests.spark.helpers import (
    classic_only,
    make_stream,
    read_all,
    run_to_end,
    stream_state,
    write_parquet,
)
from tests.spark.test_sink import run_query
from tests.spark.test_writer import _writer

WINDOW = 1.0


def _commit_stream(url: str, name: str, rows: str) -> None:
    make_stream(url, name, [rows, f"{rows}c.>"], dedup=WINDOW, allow_atomic=True)


def _outlive_the_window(window: float = WINDOW) -> None:
    time.sleep(window + 0.5)


def _settled(url: str, name: str, subject: str) -> int:
    """The rows on ``subject`` once the stream has taken nothing for a second."""
    last = -1
    while True:
        got = stream_state(url, name)[0]
        if got == last:
            return len(_rows(url, name, subject))
        last = got
        time.sleep(1.0)


def _rows(url: str, name: str, subject: str) -> list[tuple[str, bytes, int, dict[str, str]]]:
    return [m for m in read_all(url, name) if m[0] == subject]


def test_sink_replay_after_the_window_stores_nothing_new(
    spark: Any, connect: bool, module_nats_server: NatsServer
) -> None:
    url = module_nats_server.url
    _commit_stream(url, "CMSINK", "cms")
    n = 5000
    df = spark.range(0, n, 1, 4).selectExpr("cast(id as string) as value")
    opts: dict[str, Any] = dict(subject="cms", stream="CMSINK", commit_subject="cmsc")
    sink = foreach_batch_sink(url, id_prefix="nightly", **opts)
    sink.write(df, "nightly:7")
    if not connect:
        assert sink.last_report is not None
        assert (sink.last_report.rows, sink.last_report.duplicates) == (n, 0)
    rows = _rows(url, "CMSINK", "cms")
    assert sorted(int(d) for _, d, _, _ in rows) == list(range(n))
    assert all("Nats-Msg-Id" not in h for *_, h in rows)  # the server keeps no ids
    markers = [m for m in read_all(url, "CMSINK") if m[0] != "cms"]
    # a marker a chunk of 999 rows: <commit_subject>.<prefix>.<batch>.<partition>.<chunk>
    assert {s for s, *_ in markers} == {f"cmsc.nightly.7.{p}.{c}" for p in range(4) for c in (0, 1)}
    assert sum(json.loads(d)["rows"] for _, d, _, _ in markers) == n
    stored = stream_state(url, "CMSINK")
    _outlive_the_window()
    again = foreach_batch_sink(url, id_prefix="nightly", tasks=3, **opts)
    again.write(df, "nightly:7")  # the same batch, written by fewer tasks: the same chunks
    assert stream_state(url, "CMSINK") == stored
    if not connect:
        assert again.last_report is not None
        assert (again.last_report.rows, again.last_report.duplicates) == (n, n)
    # write_dataframe's job id (a token with dots: base64url in the marker) and the
    # driver's way, which writes the batch as one partition
    for mode in ("executors", "driver"):
        job = write_dataframe(df, url, job_id=f"job.{mode}", mode=mode, **opts)
        assert (job.rows, job.duplicates) == (n, 0)
    _outlive_the_window()
    for mode in ("executors", "driver"):
        job = write_dataframe(df, url, job_id=f"job.{mode}", mode=mode, **opts)
        assert (job.rows, job.duplicates) == (n, n)
    assert len(_rows(url, "CMSINK", "cms")) == 3 * n
    # the same name for other rows: refused, not half-skipped
    other = spark.range(0, n, 1, 2).selectExpr("cast(id as string) as value")
    with pytest.raises(Exception, match=r"committed with 251 rows and is written again"):
        write_dataframe(other, url, job_id="job.executors", **opts)


def test_sink_crash_half_way_then_rerun_after_the_window(
    spark: Any, connect: bool, module_nats_server: NatsServer, tmp_path: Path
) -> None:
    from pyspark.sql.functions import col, udf

    url = module_nats_server.url
    _commit_stream(url, "CMCRASH", "cmx")
    n = 20_000
    write_parquet(spark, tmp_path / "in", n, files=2)
    marker = tmp_path / "crash-now"
    marker.touch()
    marker_path = str(marker)
    poison = n // 2 + 17

    def subject_of(i: int) -> str:
        import os

        # While the marker exists, one row in the middle of its partition gets a subject
        # that the stream does not store: the task fails there, after the rows before it.
        if i == poison and os.path.exists(marker_path):
            return "injected.crash"
        return "cmx"

    subject_udf = udf(subject_of, "string", useArrow=False)
    sink = foreach_batch_sink(url, subject_col="subj", stream="CMCRASH", commit_subject="cmxc")

    def fn(df: Any, batch_id: int) -> None:
        sink(df.withColumn("subj", subject_udf(col("id"))), batch_id)

    with pytest.raises(Exception, match=r"subject_col='subj'.*'injected\.crash'"):
        run_query(spark, tmp_path / "in", tmp_path / "ckpt", fn, files_per_batch=4)
    # the other task of the failed batch may still be writing: its chunks count too
    stored_after_crash = _settled(url, "CMCRASH", "cmx")
    assert 0 < stored_after_crash < n  # whole chunks before the crash, not the batch
    marker.unlink()
    _outlive_the_window()
    query_id = run_query(spark, tmp_path / "in", tmp_path / "ckpt", fn, files_per_batch=4)
    got = _rows(url, "CMCRASH", "cmx")
    assert sorted(int(d[4:]) for _, d, _, _ in got) == list(range(n))  # each row once
    markers = {s.split(".")[1] for s, *_ in read_all(url, "CMCRASH") if s != "cmx"}
    assert markers == {query_id}
    if not connect:
        assert sink.last_report is not None
        assert sink.last_report.duplicates == stored_after_crash


def test_without_commits_a_replay_after_the_window_is_stored_again(
    spark: Any, module_nats_server: NatsServer
) -> None:
    """The limit commit_subject lifts: by message id alone, the window decides. The
    window here is longer than the others' (two writes must fall inside it on a loaded
    machine, where a Spark job of 300 rows has taken over a second)."""
    url = module_nats_server.url
    window = 6.0
    make_stream(url, "CMWIN", ["cmw"], dedup=window)
    df = spark.range(0, 300, 1, 2).selectExpr("cast(id as string) as value")
    sink = foreach_batch_sink(
        url, subject="cmw", stream="CMWIN", id_prefix="w", min_duplicate_window=window
    )
    began = time.monotonic()
    sink.write(df, "w:1")
    sink.write(df, "w:1")
    took = time.monotonic() - began
    assert took < window, f"the two writes took {took:.1f} s, longer than the window"
    assert stream_state(url, "CMWIN")[0] == 300  # within the window: deduplicated
    _outlive_the_window(window)
    sink.write(df, "w:1")
    assert stream_state(url, "CMWIN")[0] == 600  # after it: stored twice


def test_writer_replay_after_the_window_stores_nothing_new(
    spark: Any, module_nats_server: NatsServer, tmp_path: Path
) -> None:
    url = module_nats_server.url
    _commit_stream(url, "CMW", "cmw2")
    n = 4000
    df = spark.range(0, n, 1, 3).selectExpr("cast(id as string) as value")
    opts = {"subject": "cmw2", "commit_subject": "cmw2c", "job_id": "nightly-2026-01-02"}
    _writer(df, url, **opts).save()
    assert len(_rows(url, "CMW", "cmw2")) == n
    _outlive_the_window()
    _writer(df, url, **opts).save()
    got = _rows(url, "CMW", "cmw2")
    assert sorted(int(d) for _, d, _, _ in got) == list(range(n))
    # a streaming write whose last batch runs again after a restart (its commit log lost)
    write_parquet(spark, tmp_path / "in", 3000, files=2)
    ckpt = tmp_path / "ckpt"

    def stream_once() -> str:
        df = spark.readStream.schema("id long, value string").parquet(str(tmp_path / "in"))
        writer = df.writeStream.format("jetstream").option("servers", url)
        return run_to_end(writer.option("subject", "cmw2").option("commit_subject", "cmw2c"), ckpt)

    query_id = stream_once()
    assert len(_rows(url, "CMW", "cmw2")) == n + 3000
    for f in (ckpt / "commits").iterdir():
        f.unlink()  # Spark has not recorded the batch: it runs it again at the restart
    _outlive_the_window()
    assert stream_once() == query_id
    got = _rows(url, "CMW", "cmw2")
    assert len(got) == n + 3000
    assert sorted(d for _, d, _, _ in got[n:]) == sorted(f"row-{i}".encode() for i in range(3000))


@classic_only
def test_commit_subject_refused_where_it_cannot_hold(
    spark: Any, module_nats_server: NatsServer
) -> None:
    url = module_nats_server.url
    df = spark.range(3).selectExpr("cast(id as string) as value", "id")
    make_stream(url, "CMNOATOM", ["cmna", "cmnac.>"])
    with pytest.raises(SparkConfigError, match=r"'CMNOATOM' does not take atomic batches"):
        write_dataframe(df, url, job_id="j", subject="cmna", commit_subject="cmnac")
    _commit_stream(url, "CMNOMARK", "cmnm")
    with pytest.raises(SparkConfigError, match=r"'CMNOMARK' does not store other\.>"):
        write_dataframe(df, url, job_id="j", subject="cmnm", commit_subject="other")
    with pytest.raises(SparkConfigError, match=r"key_col='id' with commit_subject='cmnmc'"):
        write_dataframe(df, url, key_col="id", subject="cmnm", commit_subject="cmnmc")
    with pytest.raises(
        SparkConfigError, match=r"commit_subject='cmnmc\.>' is not a subject.*wildcard"
    ):
        write_dataframe(df, url, job_id="j", subject="cmnm", commit_subject="cmnmc.>")
    with pytest.raises(Exception, match=r"'CMNOATOM' does not take atomic batches"):
        _writer(df, url, job_id="j", subject="cmna", commit_subject="cmnac").save()
    assert stream_state(url, "CMNOATOM") == (0, 0)
    assert stream_state(url, "CMNOMARK") == (0, 0)
