"""The KeyValue sink (``kv_sink`` for foreachBatch) and the ``jetstream-kv`` format
against a real nats-server, in a classic and a Spark Connect session (the ``spark``
fixture runs each test in both)."""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
from pathlib import Path
from typing import Any

import pytest

import jetstream
from jetstream.api import StorageType
from jetstream.embedded import NatsServer
from jetstream.errors import BucketNotFoundError, KeyDeletedError
from jetstream.kv import KeyValueEntry
from jetstream.spark import ConnectSpec, SparkConfigError, kv_sink
from jetstream.spark._kv import new_kv_target, put_partition
from tests import leaks
from tests.faults.proxy import FaultProxy
from tests.spark.helpers import classic_only, make_stream, publish


def make_bucket(url: str, bucket: str, **config: Any) -> None:
    """(Re)make a memory bucket keeping 5 revisions a key."""

    async def go() -> None:
        async with jetstream.connect(url) as nc:
            js = nc.jetstream()
            try:
                await js.delete_key_value(bucket)
            except BucketNotFoundError:
                pass
            await js.create_key_value(
                bucket=bucket, history=5, storage=StorageType.MEMORY, **config
            )

    leaks.run(go())


def values(url: str, bucket: str) -> dict[str, bytes]:
    """Every key of the bucket holding a value, with its value."""

    async def go() -> dict[str, bytes]:
        async with jetstream.connect(url) as nc:
            kv = await nc.jetstream().key_value(bucket)
            out: dict[str, bytes] = {}
            async with kv.watch_all(ignore_deletes=True) as w:
                async for entry in w:
                    if entry is None:
                        return out
                    out[entry.key] = entry.value
            return out

    return leaks.run(go())


def revisions(url: str, bucket: str) -> int:
    """Revisions stored in the bucket (puts and delete markers)."""

    async def go() -> int:
        async with jetstream.connect(url) as nc:
            return (await (await nc.jetstream().key_value(bucket)).status()).values

    return leaks.run(go())


def deleted(url: str, bucket: str, key: str) -> KeyValueEntry:
    """The delete marker of ``key`` (fails when the key holds a value)."""

    async def go() -> KeyValueEntry:
        async with jetstream.connect(url) as nc:
            kv = await nc.jetstream().key_value(bucket)
            with pytest.raises(KeyDeletedError) as exc:
                await kv.get(key)
            return exc.value.entry

    return leaks.run(go())


def put(url: str, bucket: str, key: str, value: bytes) -> None:
    async def go() -> None:
        async with jetstream.connect(url) as nc:
            await (await nc.jetstream().key_value(bucket)).put(key, value)

    leaks.run(go())


# 30 rows in three partitions of ids 0-9, 10-19, 20-29: every key k0..k3 is in all three;
# key "gone" is put by row 5 and deleted by row 21 (a null value)
ROWS = (
    "case when id in (5, 21) then 'gone' else concat('k', cast(id % 4 as string)) end as key",
    "case when id = 21 then null else cast(id as string) end as value",
)


def test_puts_deletes_and_the_last_row_of_a_key_wins(
    spark: Any, module_nats_server: NatsServer
) -> None:
    url = module_nats_server.url
    make_bucket(url, "KVBASIC")
    put(url, "KVBASIC", "gone", b"before")
    df = spark.range(0, 30, numPartitions=3).selectExpr("id", *ROWS)
    sink = kv_sink(url, bucket="KVBASIC")
    sink(df.drop("id"), 0)
    # the last row of each key in the DataFrame's order: partition 2's
    assert values(url, "KVBASIC") == {"k0": b"28", "k1": b"29", "k2": b"26", "k3": b"27"}
    assert deleted(url, "KVBASIC", "gone").key == "gone"
    report = sink.last_report
    assert report is not None and (report.puts, report.deletes, report.retried) == (4, 1, 0)
    # each key written once by the batch: 1 put before, 5 writes
    assert revisions(url, "KVBASIC") == 6
    # the same batch again (a replay): the same values, one more revision of each key
    sink(df.drop("id"), 0)
    assert values(url, "KVBASIC") == {"k0": b"28", "k1": b"29", "k2": b"26", "k3": b"27"}
    assert revisions(url, "KVBASIC") == 11
    # the order is the DataFrame's: within one partition sorted down, the first ids win;
    # binary values are stored as they are
    down = (
        df.coalesce(1)
        .sortWithinPartitions(df.id.desc())
        .selectExpr("key", "encode(value, 'utf-8') as value")
    )
    kv_sink(url, bucket="KVBASIC")(down, 1)
    assert values(url, "KVBASIC") == {"k0": b"0", "k1": b"1", "k2": b"2", "k3": b"3", "gone": b"5"}


def test_the_jetstream_kv_format(
    spark: Any, module_nats_server: NatsServer, tmp_path: Path
) -> None:
    url = module_nats_server.url
    make_bucket(url, "KVFMT")
    df = spark.range(0, 30, numPartitions=3).selectExpr(
        "concat('p', cast(spark_partition_id() as string), '.k', cast(id % 2 as string)) as user",
        "cast(id as string) as v",
    )
    w = df.write.format("jetstream-kv").mode("append").option("servers", url)
    w.option("bucket", "KVFMT").option("key_col", "user").option("value_col", "v").save()
    # each key lives in one partition: its last row there wins
    assert values(url, "KVFMT") == {
        "p0.k0": b"8",
        "p0.k1": b"9",
        "p1.k0": b"18",
        "p1.k1": b"19",
        "p2.k0": b"28",
        "p2.k1": b"29",
    }
    with pytest.raises(Exception, match=r"mode\('overwrite'\).*use mode\('append'\)"):
        w.option("bucket", "KVFMT").mode("overwrite").save()
    # a streaming aggregation in complete mode: every batch puts every total again
    src = tmp_path / "in"
    for i in range(3):
        spark.range(i * 100, (i + 1) * 100, numPartitions=1).selectExpr(
            "concat('u', cast(id % 3 as string)) as key", "id as amount"
        ).write.mode("append").parquet(str(src))
    totals = (
        spark.readStream.schema("key string, amount long")
        .option("maxFilesPerTrigger", 1)
        .parquet(str(src))
        .groupBy("key")
        .agg({"amount": "sum"})
        .selectExpr("key", "cast(`sum(amount)` as string) as value")
    )
    q = (
        totals.writeStream.outputMode("complete")
        .format("jetstream-kv")
        .option("servers", url)
        .option("bucket", "KVFMT")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert q.awaitTermination(240), "the query did not finish in 240 s"
    finally:
        q.stop()
    got = {k: v for k, v in values(url, "KVFMT").items() if k.startswith("u")}
    assert got == {f"u{r}": str(sum(range(r, 300, 3))).encode() for r in range(3)}


def test_a_bad_key_fails_the_batch_before_anything_is_sent(
    spark: Any, module_nats_server: NatsServer
) -> None:
    url = module_nats_server.url
    make_bucket(url, "KVBADKEY")
    # the bad key is in the last partition: the others send nothing either
    df = spark.range(0, 300, numPartitions=3).selectExpr(
        "case when id = 299 then 'a b' else concat('k.', cast(id as string)) end as key",
        "cast(id as string) as value",
    )
    sink = kv_sink(url, bucket="KVBADKEY")
    with pytest.raises(SparkConfigError, match=r"key_col='key': the key 'a b' of a row"):
        sink(df, 0)
    nulls = spark.range(3).selectExpr("cast(null as string) as key", "'v' as value")
    with pytest.raises(SparkConfigError, match=r"key_col='key': a row's key is null"):
        sink(nulls, 1)
    for bad in ("k.", ".k", "k..k", "k*", "k>"):
        one = spark.range(1).selectExpr(f"'{bad}' as key", "'v' as value")
        with pytest.raises(SparkConfigError, match=re.escape(f"the key '{bad}' of a row")):
            sink(one, 2)
    # the format checks a partition's keys before that partition sends anything
    w = df.coalesce(1).write.format("jetstream-kv").mode("append").option("servers", url)
    with pytest.raises(Exception, match=r"key_col='key': the key 'a b' of a row"):
        w.option("bucket", "KVBADKEY").save()
    assert revisions(url, "KVBADKEY") == 0


def test_bad_options_name_the_option_and_send_nothing(
    spark: Any, module_nats_server: NatsServer, tmp_path: Path
) -> None:
    url = module_nats_server.url
    make_bucket(url, "KVOPTS")
    df = spark.range(3).selectExpr("cast(id as string) as key", "cast(id as string) as value")
    with pytest.raises(SparkConfigError, match=r"bucket: name the KeyValue bucket"):
        kv_sink(url)
    with pytest.raises(SparkConfigError, match=r"bucket='a\.b': invalid bucket name"):
        kv_sink(url, bucket="a.b")
    with pytest.raises(SparkConfigError, match="max_pending must be at least 1"):
        kv_sink(url, bucket="KVOPTS", max_pending=0)
    cases: list[tuple[Any, dict[str, Any], str]] = [
        (df, {"bucket": "NOPE"}, r"bucket='NOPE': there is no bucket 'NOPE'"),
        (df, {"bucket": "KVOPTS", "key_col": "user"}, r"key_col='user' is not a column"),
        (df, {"bucket": "KVOPTS", "value_col": "v"}, r"value_col='v' is not a column"),
        (
            spark.range(3).selectExpr("'k' as key", "id as value"),
            {"bucket": "KVOPTS"},
            r"value_col='value' is a long column; the value must be binary or string",
        ),
        (
            spark.range(3).selectExpr("id as key", "'v' as value"),
            {"bucket": "KVOPTS"},
            r"key_col='key' is a long column; keys must be strings",
        ),
    ]
    for frame, options, message in cases:
        with pytest.raises(SparkConfigError, match=message):
            kv_sink(url, **options)(frame, 0)
        w = frame.write.format("jetstream-kv").mode("append").option("servers", url)
        for k, v in options.items():
            w = w.option(k, v)
        with pytest.raises(Exception, match=message):
            w.save()
    formats = [
        ({}, "the jetstream-kv writer needs option bucket"),
        ({"bucket": "KVOPTS", "max_pending": "0"}, "option max_pending must be at least 1"),
        ({"bucket": "KVOPTS", "retries": "x"}, "option retries='x' is not a whole number"),
    ]
    for options, message in formats:
        w = df.write.format("jetstream-kv").mode("append").option("servers", url)
        for k, v in options.items():
            w = w.option(k, v)
        with pytest.raises(Exception, match=message):
            w.save()
    # a streaming query fails at its start, before its first batch writes anything
    df.write.parquet(str(tmp_path / "in"))
    stream = spark.readStream.schema("key string, value string").parquet(str(tmp_path / "in"))
    starts = [
        lambda: stream.writeStream.foreachBatch(kv_sink(url, bucket="KVOPTS", value_col="x")),
        lambda: (
            stream.writeStream.format("jetstream-kv")
            .option("servers", url)
            .option("bucket", "NOPE")
        ),
    ]
    for i, start in enumerate(starts):
        with pytest.raises(Exception, match=r"value_col='x' is not a column|bucket='NOPE'"):
            q = start().option("checkpointLocation", str(tmp_path / f"ckpt{i}")).start()
            try:
                q.processAllAvailable()
            finally:
                q.stop()
    assert revisions(url, "KVOPTS") == 0


def test_puts_cut_off_by_a_lost_connection_are_sent_again(module_nats_server: NatsServer) -> None:
    """A task's connection is lost with puts in flight (their answers held back first, so
    some are surely unanswered): once reconnected, each is put again and the partition
    ends with every key holding its value."""
    url = module_nats_server.url
    make_bucket(url, "KVCUT")
    n = 5000
    latest: dict[str, bytes | None] = {f"k.{i}": str(i).encode() for i in range(n)}

    async def go() -> Any:
        async with FaultProxy(module_nats_server.port) as proxy:
            proxy.latency = 0.01
            conn = ConnectSpec.make(proxy.url, reconnect_time_wait=0.1)
            target = new_kv_target(
                conn, bucket="KVCUT", key_col="key", value_col="value", max_pending=50, retries=5
            )
            task = asyncio.create_task(put_partition(target, latest, 7))
            async with jetstream.connect(url) as nc:
                kv = await nc.jetstream().key_value("KVCUT")
                while (await kv.status()).values < n // 5:
                    assert not task.done()
                    await asyncio.sleep(0.01)
            proxy.blackhole = True  # the puts in flight get no answer...
            await asyncio.sleep(0.3)
            assert not task.done()
            proxy.cut()  # ...and their connection is lost
            proxy.blackhole = False
            return await asyncio.wait_for(task, 60)

    res = leaks.run(go())
    assert (res.partition, res.puts, res.deletes) == (7, n, 0)
    assert res.retried > 0
    assert values(url, "KVCUT") == latest


USERS = [f"u{i:02}" for i in range(12)]
ORDERS = 1200
PER_BATCH = 150
POISONED = "u05"


def _orders(url: str) -> list[tuple[str, int]]:
    """Publish the orders (a fresh stream); return them in sequence order."""
    make_stream(url, "KVORDERS", ["kvorders.>"])
    rng = random.Random(34)
    orders = [(rng.choice(USERS), rng.randint(1, 100)) for _ in range(ORDERS)]
    publish(url, "kvorders.new", [json.dumps({"user": u, "amount": a}).encode() for u, a in orders])
    return orders


def _totals(orders: list[tuple[str, int]], batches: int) -> dict[str, bytes]:
    """Each user's total over the orders of the first ``batches`` micro-batches."""
    out: dict[str, int] = {}
    for user, amount in orders[: batches * PER_BATCH]:
        out[user] = out.get(user, 0) + amount
    return {u: str(t).encode() for u, t in out.items()}


# the crash, the restart and the stop are Spark's own, the same under Connect, where the
# sink's path is run by test_puts_deletes_and_the_last_row_of_a_key_wins
@classic_only
def test_update_mode_totals_survive_a_crash_mid_batch_and_a_stop(
    spark: Any, module_nats_server: NatsServer, tmp_path: Path
) -> None:
    """Per-user totals (an ``update``-mode aggregation of an orders stream read with the
    ``jetstream`` source) go to a bucket. Batch 3 fails half-written (one of its puts is
    refused, the others are stored) and the query ends; restarted from its checkpoint it
    writes batch 3 again, and is then stopped while a batch is in flight; restarted once
    more, it finishes. The bucket holds the totals computed from the orders."""
    url = module_nats_server.url
    orders = _orders(url)
    make_bucket(url, "KVTOTALS", max_value_size=1024)
    marker = tmp_path / "crash-now"
    marker.touch()
    marker_path = str(marker)
    sink = kv_sink(url, bucket="KVTOTALS", key_col="user", value_col="total")

    def fn(df: Any, batch_id: int) -> None:
        import os

        if batch_id == 3 and os.path.exists(marker_path):
            # one user's total is too large for the bucket: its put is refused
            df = df.selectExpr(
                "user", f"case when user = '{POISONED}' then repeat('x', 2048) else total end"
            ).toDF("user", "total")
        sink(df, batch_id)

    def start() -> Any:
        from pyspark.sql import functions as F

        orders_df = (
            spark.readStream.format("jetstream")
            .option("servers", url)
            .option("stream", "KVORDERS")
            .option("max_rows_per_batch", str(PER_BATCH))
            .load()
            .select(
                F.from_json(F.col("data").cast("string"), "user string, amount long").alias("o")
            )
            .select("o.*")
        )
        totals = orders_df.groupBy("user").agg(F.sum("amount").cast("string").alias("total"))
        return (
            totals.writeStream.outputMode("update")
            .foreachBatch(fn)
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .start()
        )

    q = start()
    try:
        with pytest.raises(Exception, match=rf"SparkWriteError.*key '{POISONED}'"):
            q.processAllAvailable()
    finally:
        q.stop()
    # batch 3 was cut half-way: some keys hold its totals, the poisoned one batch 2's
    before, after = _totals(orders, 3), _totals(orders, 4)
    got = values(url, "KVTOTALS")
    assert got[POISONED] == before[POISONED]
    assert all(got[u] in (before[u], after[u]) for u in USERS)
    assert any(got[u] == after[u] != before[u] for u in USERS)
    marker.unlink()

    # restarted: batch 3 again, then stopped while a later batch is in flight
    q = start()
    try:
        deadline = time.monotonic() + 120
        while not any(p["batchId"] >= 4 for p in q.recentProgress):
            assert time.monotonic() < deadline, "batch 4 did not complete in 120 s"
            assert q.exception() is None
            time.sleep(0.05)
        while not q.status["isTriggerActive"] and q.isActive and time.monotonic() < deadline:
            time.sleep(0.005)
    finally:
        q.stop()
    assert values(url, "KVTOTALS") != _totals(orders, ORDERS // PER_BATCH)

    q = start()
    try:
        q.processAllAvailable()
    finally:
        q.stop()
    expected = _totals(orders, ORDERS // PER_BATCH)
    assert len(expected) == len(USERS)
    assert values(url, "KVTOTALS") == expected
