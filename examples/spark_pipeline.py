"""JetStream -> Spark -> JetStream in one script: per-minute spend per user, written
exactly once, and each user's spend in a KeyValue bucket for applications to read.

1. The stream ORDERS is filled with 2,000 JSON orders (``{"user", "amount", "ts"}``).
2. A streaming query reads it with the ``jetstream`` source, at most 1,000 orders a
   micro-batch, until it has read what the stream held when it started
   (``Trigger.AvailableNow``: a scheduled job), and sums the amounts per user and minute.
3. Each updated total goes to the stream TOTALS through ``foreach_batch_sink``, exactly
   once: a row's message id is made of the query's id, the batch and the row's place in
   it, and the checkpoint keeps the query's id and progress, so a batch written again
   after a crash is stored once. (``--writer``: through the ``jetstream`` writer.)
4. A second query sums each user's spend and puts it under the user's name in the
   KeyValue bucket SPEND through ``kv_sink``. (``--writer``: the ``jetstream-kv`` format.)
5. Both are read back as an application would, and checked against the orders.

It needs Java 17 or newer and ``pip install -e '.[spark,server]'`` in a checkout (what
``make spark-demo`` installs). ``python examples/spark_pipeline.py`` starts a nats-server
of its own; ``NATS_URL=nats://host:4222`` uses yours. ``--connect``: through Spark
Connect (a server started here on ``local[2]``; ``--connect sc://host:15002``: yours);
``--master spark://host:7077``: on a cluster.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import random
import sys
import tempfile
from typing import Any

import jetstream
from jetstream import StreamConfig

USERS = ["ada", "bob", "cy", "dee"]
ORDERS = 2000


async def setup(url: str) -> dict[tuple[str, str], int]:
    """The streams ORDERS (filled) and TOTALS and the bucket SPEND, made afresh; returns
    the per-minute totals the orders make, to check the query's against."""
    async with jetstream.connect(url) as nc:
        js = nc.jetstream()
        for name, subjects in (("ORDERS", ["orders.>"]), ("TOTALS", ["totals.>"])):
            try:
                await js.delete_stream(name)
            except jetstream.errors.StreamNotFoundError:
                pass
            # duplicate_window: how long the stream remembers a message id (the sink
            # refuses a stream that forgets them sooner than a minute)
            await js.create_stream(
                StreamConfig(name=name, subjects=subjects, duplicate_window=600.0)
            )
        try:
            await js.delete_key_value("SPEND")
        except jetstream.errors.BucketNotFoundError:
            pass
        await js.create_key_value(bucket="SPEND")
        expected: dict[tuple[str, str], int] = {}
        rng = random.Random(7)
        start = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)
        for i in range(ORDERS):
            ts = start + dt.timedelta(seconds=i * 180 / ORDERS)  # three minutes of orders
            user, amount = rng.choice(USERS), rng.randint(1, 100)
            order = {"user": user, "amount": amount, "ts": ts.isoformat()}
            await js.publish_async(f"orders.{user}", json.dumps(order).encode())
            key = (ts.strftime("%H:%M"), user)
            expected[key] = expected.get(key, 0) + amount
        await js.publish_async_complete(timeout=30)
    return expected


def make_session(master: str = "local[2]", connect: str | None = None) -> Any:
    """Local Spark (or a Spark Connect session: ``connect`` is a server's ``sc://`` URL,
    or ``"local"`` for one started here), set up for this job."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable  # the executors' Python has jetstream
    builder = SparkSession.builder.appName("jetstream-pipeline")
    if connect is None:
        builder = builder.master(master)
    else:
        builder = builder.remote(master if connect == "local" else connect)
    if connect in (None, "local"):  # settings of a driver started here
        builder = builder.config("spark.driver.host", "127.0.0.1").config(
            "spark.ui.showConsoleProgress", "false"
        )
    # --8<-- [start:session]
    # An aggregation of a streaming query keeps its state in spark.sql.shuffle.partitions
    # parts, and each micro-batch runs one task per part. Spark's default, 200, is meant
    # for large clusters: on local[2] every batch would run 200 tasks, most of them only
    # overhead. Set it to the cores the query runs on, before its first start (its
    # checkpoint keeps the number: it cannot change afterwards).
    builder = builder.config("spark.sql.shuffle.partitions", "2")
    builder = builder.config("spark.sql.session.timeZone", "UTC")  # minutes in UTC
    # --8<-- [end:session]
    return builder.getOrCreate()


def run_queries(spark: Any, url: str, checkpoint: str, writer: bool = False) -> None:
    """The per-minute totals to the stream TOTALS, then each user's spend to the bucket
    SPEND: two queries, one after the other, each checkpointed under ``checkpoint``."""
    from pyspark.sql import functions as F

    from jetstream.spark import foreach_batch_sink, kv_sink, register

    # --8<-- [start:source]
    register(spark)  # the "jetstream" and "jetstream-kv" formats
    orders = (
        spark.readStream.format("jetstream")
        .option("servers", url)
        .option("stream", "ORDERS")
        .option("max_rows_per_batch", "1000")
        .load()
        .select(
            F.from_json(
                F.col("data").cast("string"), "user string, amount long, ts timestamp"
            ).alias("o")
        )
        .select("o.*")
    )
    # --8<-- [end:source]
    totals = (
        orders.groupBy(F.window("ts", "1 minute").alias("w"), "user")
        .agg(F.sum("amount").alias("total"))
        .select(F.date_format("w.start", "HH:mm").alias("window_start"), "user", "total")
    )
    if writer:
        # --8<-- [start:writer]
        query = (
            totals.writeStream.outputMode("complete")  # a data source writer: no "update"
            .format("jetstream")
            .option("servers", url)
            .option("subject", "totals.minute")
            .option("stream", "TOTALS")
            .option("value_col", "")  # each row as JSON
            .option("checkpointLocation", f"{checkpoint}/totals")
            .trigger(availableNow=True)
            .start()
        )
        # --8<-- [end:writer]
    else:
        # --8<-- [start:sink]
        sink = foreach_batch_sink(url, subject="totals.minute", stream="TOTALS", value_col=None)
        query = (
            totals.writeStream.outputMode("update")  # the totals a batch changed
            .foreachBatch(sink)
            .option("checkpointLocation", f"{checkpoint}/totals")
            .trigger(availableNow=True)  # read what the stream holds now, then stop
            .start()
        )
        # --8<-- [end:sink]
    query.awaitTermination()  # raises the query's error, if it failed
    # --8<-- [start:spend]
    spend = orders.groupBy("user").agg(F.sum("amount").cast("string").alias("spend"))
    # --8<-- [end:spend]
    if writer:
        # --8<-- [start:kv-writer]
        query = (
            spend.writeStream.outputMode("complete")  # every user's spend, each batch
            .format("jetstream-kv")
            .option("servers", url)
            .option("bucket", "SPEND")
            .option("key_col", "user")
            .option("value_col", "spend")
            .option("checkpointLocation", f"{checkpoint}/spend")
            .trigger(availableNow=True)
            .start()
        )
        # --8<-- [end:kv-writer]
    else:
        # --8<-- [start:kv-sink]
        spend_sink = kv_sink(url, bucket="SPEND", key_col="user", value_col="spend")
        query = (
            spend.writeStream.outputMode("update")  # the users whose spend changed
            .foreachBatch(spend_sink)
            .option("checkpointLocation", f"{checkpoint}/spend")
            .trigger(availableNow=True)
            .start()
        )
        # --8<-- [end:kv-sink]
    query.awaitTermination()


async def final_totals(url: str) -> dict[tuple[str, str], int]:
    """The last total written for each (minute, user): where the query ended."""
    out: dict[tuple[str, str], int] = {}
    async with jetstream.connect(url) as nc:
        stream = await nc.jetstream().stream("TOTALS")
        count = (await stream.info()).state.messages
        oc = await stream.ordered_consumer()
        async with oc.messages() as it:
            for _ in range(count):
                row = json.loads((await it.next(timeout=10)).data)
                out[(row["window_start"], row["user"])] = row["total"]
    return out


def spend_of(totals: dict[tuple[str, str], int]) -> dict[str, int]:
    """Each user's spend: the sum of the user's per-minute totals."""
    spend: dict[str, int] = {}
    for (_, user), total in totals.items():
        spend[user] = spend.get(user, 0) + total
    return spend


async def read_spend(url: str) -> dict[str, int]:
    """What an application does with the bucket: read a user's spend by key."""
    # --8<-- [start:get]
    async with jetstream.connect(url) as nc:
        kv = await nc.jetstream().key_value("SPEND")
        spend = {user: int((await kv.get(user)).value) for user in USERS}
    # --8<-- [end:get]
    return spend


async def watch_spend(url: str) -> dict[str, int]:
    """Every user's spend through a watch: the current values, then (in a service that
    keeps watching) each change as the query puts it."""
    # --8<-- [start:watch]
    spend: dict[str, int] = {}
    async with jetstream.connect(url) as nc:
        kv = await nc.jetstream().key_value("SPEND")
        async with kv.watch() as w:
            async for entry in w:
                if entry is None:  # every current value was delivered; changes follow
                    break
                spend[entry.key] = int(entry.value)
    # --8<-- [end:watch]
    return spend


def demo(spark: Any, url: str, writer: bool = False) -> bool:
    """Fill the stream, run the queries, print what they wrote; True if it is right."""
    expected = asyncio.run(setup(url))
    print(f"published {ORDERS} orders to ORDERS")
    with tempfile.TemporaryDirectory() as checkpoint:
        run_queries(spark, url, checkpoint, writer)
    totals = asyncio.run(final_totals(url))
    print("per-minute spend (the last total of each in the TOTALS stream):")
    print("minute " + " ".join(f"{u:>5}" for u in USERS))
    for minute in sorted({m for m, _ in totals}):
        print(f"{minute:<6} " + " ".join(f"{totals.get((minute, u), 0):>5}" for u in USERS))
    print("matches the orders:", "yes" if totals == expected else "NO")
    spend, watched = asyncio.run(read_spend(url)), asyncio.run(watch_spend(url))
    print("spend per user (kv.get from the SPEND bucket):")
    print(" ".join(f"{u}={spend[u]}" for u in USERS))
    print("matches the orders:", "yes" if spend == spend_of(expected) else "NO")
    print("kv.watch agrees:", "yes" if watched == spend else "NO")
    return totals == expected and spend == watched == spend_of(expected)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--writer", action="store_true", help="the writers, not the sinks")
    parser.add_argument("--connect", nargs="?", const="local", help="through Spark Connect")
    parser.add_argument("--master", default="local[2]", help="where Spark runs the jobs")
    args = parser.parse_args()
    server = None
    url = os.environ.get("NATS_URL")
    if not url:
        from jetstream.embedded import NatsServer  # the server extra's nats-server

        server = NatsServer().start()
        url = server.url
    spark = make_session(args.master, args.connect)
    try:
        ok = demo(spark, url, args.writer)
    finally:
        spark.stop()  # before the nats-server: no task is left writing to it
        if server is not None:
            server.stop()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
