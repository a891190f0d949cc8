"""JetStream -> Spark -> JetStream: per-minute spend per user, exactly once, and each
user's spend in a KeyValue bucket for applications to read.

A stream ``ORDERS`` holds JSON orders (``{"user": ..., "amount": ..., "ts": ...}``).
A Structured Streaming query reads it with the ``jetstream`` source, parses the JSON,
sums the amounts per user and per one-minute window, and writes every updated total to
the stream ``TOTALS`` exactly once: through the foreachBatch sink, or with ``--writer``
through the ``jetstream`` writer (``writeStream.format("jetstream")``). Either names each
message after the query, the batch and the row's position, so a batch written again
after a restart is stored once.

A second query sums the same orders per user and puts each user's spend under the user's
name in the KeyValue bucket ``SPEND``: through ``kv_sink`` (``update`` mode: the users
whose spend changed), or with ``--writer`` through the ``jetstream-kv`` format
(``complete`` mode). An application reads a user's spend with ``kv.get`` and follows it
with ``kv.watch``.

Run it with ``make spark-demo`` (an embedded nats-server and local Spark), or against a
server of your own: ``NATS_URL=nats://host:4222 python examples/spark_pipeline.py``. The
same code runs through Spark Connect: ``make spark-demo CONNECT=1`` (or ``--connect``: a
Spark Connect server started in this process on ``local[2]``; ``--connect sc://host:port``:
one running elsewhere), and on a cluster: ``--master spark://host:7077``.
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
from contextlib import ExitStack
from typing import Any

import jetstream
from jetstream import StreamConfig
from jetstream.embedded import NatsServer

USERS = ["ada", "bob", "cy", "dee"]
ORDERS = 2000


async def setup(url: str) -> dict[tuple[str, str], int]:
    """Create both streams (fresh), publish the orders; return the totals they make."""
    async with jetstream.connect(url) as nc:
        js = nc.jetstream()
        for name, subjects in (("ORDERS", ["orders.>"]), ("TOTALS", ["totals.>"])):
            try:
                await js.delete_stream(name)
            except jetstream.errors.StreamNotFoundError:
                pass
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


async def final_totals(url: str) -> dict[tuple[str, str], int]:
    """The last total written for each (window, user): the end state of the query."""
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


def run_query(spark: Any, url: str, checkpoint: str, writer: bool = False) -> None:
    """The per-minute totals to the stream TOTALS, then each user's spend to the bucket
    SPEND (two queries, one after the other, with checkpoints under ``checkpoint``)."""
    from pyspark.sql import functions as F

    from jetstream.spark import foreach_batch_sink, kv_sink, register

    # --8<-- [start:source]
    register(spark)
    orders = (
        spark.readStream.format("jetstream")
        .option("servers", url)
        .option("stream", "ORDERS")
        .option("max_rows_per_batch", "500")
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
        .select(
            F.date_format("w.start", "HH:mm").alias("window_start"),
            "user",
            "total",
        )
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
            .start()
        )
        # --8<-- [end:writer]
    else:
        # --8<-- [start:sink]
        sink = foreach_batch_sink(url, subject="totals.minute", stream="TOTALS", value_col=None)
        query = (
            totals.writeStream.outputMode("update")
            .foreachBatch(sink)
            .option("checkpointLocation", f"{checkpoint}/totals")
            .start()
        )
        # --8<-- [end:sink]
    try:
        query.processAllAvailable()
    finally:
        query.stop()
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
            .start()
        )
        # --8<-- [end:kv-sink]
    try:
        query.processAllAvailable()
    finally:
        query.stop()


def make_session(master: str = "local[2]", connect: str | None = None) -> Any:
    """A classic session on ``master``, or a Spark Connect session: ``connect`` is the
    server's ``sc://`` URL, or ``"local"`` for a server started in this process."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("jetstream-spark-demo")
    if connect is not None:
        builder = builder.remote(master if connect == "local" else connect)
    else:
        builder = builder.master(master)
    if connect is None or connect == "local":  # settings of a driver started here
        builder = (
            builder.config("spark.ui.enabled", "false")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.ui.showConsoleProgress", "false")
        )
    spark = builder.config("spark.sql.shuffle.partitions", "2").getOrCreate()
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    return spark


def demo(spark: Any, url: str, writer: bool = False) -> bool:
    """Publish the orders, run the query, print the totals; True if they match."""
    expected = asyncio.run(setup(url))
    print(f"published {ORDERS} orders to ORDERS")
    with tempfile.TemporaryDirectory() as checkpoint:
        run_query(spark, url, checkpoint, writer)
    totals = asyncio.run(final_totals(url))
    print("per-minute spend (from the TOTALS stream):")
    print(f"{'window':>8} " + " ".join(f"{u:>6}" for u in USERS))
    for window in sorted({w for w, _ in totals}):
        cells = " ".join(f"{totals.get((window, u), 0):>6}" for u in USERS)
        print(f"{window:>8} {cells}")
    print(f"grand total: {sum(totals.values())}")
    print("matches the orders:", "yes" if totals == expected else "NO")
    spend = asyncio.run(read_spend(url))
    print("spend per user (kv.get from the SPEND bucket):")
    print(" ".join(f"{u}={spend[u]}" for u in USERS))
    watched = asyncio.run(watch_spend(url))
    ok = totals == expected and spend == watched == spend_of(expected)
    print("matches the orders:", "yes" if spend == spend_of(expected) else "NO")
    print("kv.watch agrees:", "yes" if watched == spend else "NO")
    return ok


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument(
        "--connect",
        nargs="?",
        const="local",
        default="local" if os.environ.get("CONNECT") else None,
        help="through Spark Connect: a server's sc:// URL, or none to start one here "
        "(also: CONNECT=1 in the environment)",
    )
    parser.add_argument("--master", default="local[2]", help="where the driver runs its jobs")
    parser.add_argument(
        "--writer", action="store_true", help="the jetstream writer instead of the sink"
    )
    args = parser.parse_args(argv)
    with ExitStack() as stack:
        url = os.environ.get("NATS_URL")
        if not url:
            url = stack.enter_context(NatsServer()).url
            print(f"embedded nats-server on {url}")
        spark = make_session(args.master, args.connect)
        stack.callback(spark.stop)
        print(f"{'Spark Connect' if args.connect else 'classic'} session")
        if not demo(spark, url, args.writer):
            sys.exit(1)


if __name__ == "__main__":
    main()
