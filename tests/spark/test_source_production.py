"""The ``jetstream`` source as scheduled production jobs run it: ``availableNow`` runs in
bounded micro-batches, the lag in the query progress, the read limits, and data loss
(messages removed before the query read them) against a real nats-server, in a classic
and a Spark Connect session."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

import jetstream
from jetstream.embedded import NatsServer
from tests import leaks
from tests.spark.helpers import Progress, classic_only, make_stream, publish


def _read(spark: Any, url: str, stream: str, **options: str) -> Any:
    reader = spark.readStream.format("jetstream").option("servers", url)
    for k, v in {"stream": stream, **options}.items():
        reader = reader.option(k, v)
    return reader.load()


def _available_now(spark: Any, df: Any, out: Path, ckpt: Path) -> list[dict[str, Any]]:
    """Run ``df`` to parquet files with ``Trigger.AvailableNow`` until it stops by
    itself; the progress of every batch that read rows."""
    with Progress(spark) as progress:
        q = (
            df.writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(ckpt))
            .trigger(availableNow=True)
            .start()
        )
        try:
            assert q.awaitTermination(240), "the availableNow query did not stop by itself"
            if q.exception() is not None:
                raise Exception(str(q.exception()))
            return progress.batches(q)
        finally:
            q.stop()


def _seqs(spark: Any, out: Path) -> list[int]:
    return sorted(r.sequence for r in spark.read.parquet(str(out)).collect())


def _offset(progress: dict[str, Any], key: str) -> dict[str, int]:
    value = progress["sources"][0][key]
    return json.loads(value) if isinstance(value, str) else dict(value)


def test_available_now_drains_in_bounded_batches_and_leaves_later_messages(
    spark: Any, module_nats_server: NatsServer, tmp_path: Path
) -> None:
    url = module_nats_server.url
    make_stream(url, "NOW", ["now.*"])
    publish(url, "now.a", [f"m{i}".encode() for i in range(400)])
    out, ckpt, marks = tmp_path / "out", tmp_path / "ckpt", tmp_path / "marks"

    def write(batch: Any, batch_id: int) -> None:
        batch.write.mode("append").parquet(str(out))
        if batch_id == 0:
            # published after the run fixed its end: left for the next run
            publish(url, "now.b", [f"late{i}".encode() for i in range(50)])
            marks.mkdir(exist_ok=True)

    df = _read(spark, url, "NOW", max_rows_per_batch="100")
    with Progress(spark) as progress:
        q = (
            df.writeStream.foreachBatch(write)
            .option("checkpointLocation", str(ckpt))
            .trigger(availableNow=True)
            .start()
        )
        try:
            assert q.awaitTermination(240)
            assert q.exception() is None
            batches = progress.batches(q)
        finally:
            q.stop()
    assert marks.exists()
    assert [p["numInputRows"] for p in batches] == [100, 100, 100, 100]
    assert _seqs(spark, out) == list(range(1, 401))
    # the lag: the latest offset is the stream's end as seen when each batch was
    # planned, and it moved when the 50 came in while the query ran
    ends = [_offset(p, "endOffset")["seq"] for p in batches]
    latest = [_offset(p, "latestOffset")["seq"] for p in batches]
    assert ends == [101, 201, 301, 401]
    assert latest[0] == 401 and latest[-1] == 451
    assert [lt - e for lt, e in zip(latest, ends, strict=True)][-1] == 50
    # the next run picks the 50 up from the checkpoint
    q = (
        _read(spark, url, "NOW", max_rows_per_batch="100")
        .writeStream.foreachBatch(lambda b, i: b.write.mode("append").parquet(str(out)))
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert q.awaitTermination(240)
    finally:
        q.stop()
    assert _seqs(spark, out) == list(range(1, 451))


@classic_only
def test_read_limits_bytes_and_min_rows(
    spark: Any, module_nats_server: NatsServer, tmp_path: Path
) -> None:
    url = module_nats_server.url
    make_stream(url, "LIM", ["lim.*"])
    # each message counts 100 payload bytes + 5 of subject: 4 fit in 430 bytes
    publish(url, "lim.a", [bytes(100)] * 20)
    batches = _available_now(
        spark,
        _read(spark, url, "LIM", max_bytes_per_batch="430"),
        tmp_path / "out",
        tmp_path / "ckpt",
    )
    assert [p["numInputRows"] for p in batches] == [4] * 5
    assert _seqs(spark, tmp_path / "out") == list(range(1, 21))

    # at least 30 new rows a batch, or whatever there is after an hour: 20 wait
    def running(name: str, **options: str) -> Any:
        return (
            _read(spark, url, "LIM", **options)
            .writeStream.format("parquet")
            .option("path", str(tmp_path / name))
            .option("checkpointLocation", str(tmp_path / f"{name}-ckpt"))
            .trigger(processingTime="200 milliseconds")
            .start()
        )

    def rows(progress: Progress, q: Any) -> list[int]:
        return [p["numInputRows"] for p in progress.now(q)]

    with Progress(spark) as progress:
        q = running("out2", min_rows_per_batch="30", max_trigger_delay="1h")
        try:
            time.sleep(4)
            assert rows(progress, q) == []
            publish(url, "lim.b", [b"x"] * 10)
            deadline = time.monotonic() + 120
            while not rows(progress, q):
                assert time.monotonic() < deadline, "30 rows came and no batch read them"
                time.sleep(0.2)
            assert rows(progress, q) == [30]
        finally:
            q.stop()
        # a short delay lets a small batch through
        q = running("out3", min_rows_per_batch="1000", max_trigger_delay="2s")
        try:
            deadline = time.monotonic() + 120
            while sum(rows(progress, q)) < 30:
                assert time.monotonic() < deadline, "max_trigger_delay passed and nothing read"
                time.sleep(0.2)
        finally:
            q.stop()


def test_data_loss_fails_the_query_unless_told_otherwise(
    spark: Any, module_nats_server: NatsServer, tmp_path: Path
) -> None:
    url = module_nats_server.url
    make_stream(url, "LOSS", ["loss.*"], max_msgs=100)
    publish(url, "loss.a", [f"a{i}".encode() for i in range(100)])

    async def delete_msg(seq: int) -> None:
        async with jetstream.connect(url) as nc:
            await (await nc.jetstream().stream("LOSS")).delete_msg(seq)

    # a message deleted inside a range is simply absent
    leaks.run(delete_msg(50))
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    _available_now(spark, _read(spark, url, "LOSS"), out, ckpt)
    assert _seqs(spark, out) == [s for s in range(1, 101) if s != 50]
    # 150 more on a stream that keeps 100: 101-150 go before the query reads them
    publish(url, "loss.a", [f"b{i}".encode() for i in range(150)])
    with pytest.raises(Exception, match="sequences 101-150 were removed") as err:
        _available_now(spark, _read(spark, url, "LOSS"), out, ckpt)
    assert "fail_on_data_loss=false" in str(err.value)
    assert "'LOSS'" in str(err.value)
    batches = _available_now(spark, _read(spark, url, "LOSS", fail_on_data_loss="false"), out, ckpt)
    assert _seqs(spark, out)[-100:] == list(range(151, 251))
    assert len(_seqs(spark, out)) == 199
    # the skipped sequences are counted in the offsets (checkpoint and progress)
    assert _offset(batches[-1], "endOffset") == {"seq": 251, "from": 151, "lost": 50}
    # the stream deleted and made again: its sequences went back
    make_stream(url, "LOSS", ["loss.*"], max_msgs=100)
    publish(url, "loss.a", [b"new"] * 5)
    with pytest.raises(Exception, match="deleted and made again"):
        _available_now(spark, _read(spark, url, "LOSS"), out, ckpt)


def test_bad_options_are_refused_at_start(
    spark: Any, module_nats_server: NatsServer, tmp_path: Path
) -> None:
    url = module_nats_server.url
    make_stream(url, "OPTS", ["opts.*"])
    for key, value in (
        ("fail_on_data_loss", "maybe"),
        ("max_bytes_per_batch", "0"),
        ("min_rows_per_batch", "-3"),
        ("max_trigger_delay", "later"),
    ):
        with pytest.raises(Exception, match=f"option {key}"):
            _available_now(
                spark,
                _read(spark, url, "OPTS", **{key: value}),
                tmp_path / key / "out",
                tmp_path / key / "ckpt",
            )
