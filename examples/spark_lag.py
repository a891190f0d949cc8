"""A scheduled incremental Spark job on a stream, and how far behind it is.

The job drains what the stream ``EVENTS`` holds when it starts, in micro-batches of at
most 250 messages (``Trigger.AvailableNow``), then stops; run again later (from cron, an
orchestrator), it picks up from its checkpoint. Every query progress says where the batch
read up to (``endOffset``) and where the stream was (``latestOffset``): their difference is
the lag. A ``StreamingQueryListener`` logs it as batches complete; the job prints it per
batch at the end.

Run it with an embedded nats-server and local Spark: ``python examples/spark_lag.py``, or
against a server of your own: ``NATS_URL=nats://host:4222 python examples/spark_lag.py``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import tempfile
import time
from contextlib import ExitStack
from typing import Any

import jetstream
from jetstream import StreamConfig
from jetstream.embedded import NatsServer

EVENTS = 1000
log = logging.getLogger("spark_lag")


async def setup(url: str) -> None:
    """A fresh stream ``EVENTS`` with 1000 messages."""
    async with jetstream.connect(url) as nc:
        js = nc.jetstream()
        try:
            await js.delete_stream("EVENTS")
        except jetstream.errors.StreamNotFoundError:
            pass
        await js.create_stream(StreamConfig(name="EVENTS", subjects=["events.>"]))
        for i in range(EVENTS):
            await js.publish_async("events.click", json.dumps({"n": i}).encode())
        await js.publish_async_complete(timeout=30)


# --8<-- [start:lag]
def lag(progress: dict[str, Any]) -> int:
    """Messages the stream held past what this batch read: ``latestOffset`` (the
    stream's last sequence + 1 when the batch was planned) minus ``endOffset``. The
    offsets are ``{"seq": n}`` (JSON text in ``query.lastProgress``)."""
    source = progress["sources"][0]
    latest, end = (
        json.loads(o) if isinstance(o, str) else o
        for o in (source["latestOffset"], source["endOffset"])
    )
    return int(latest["seq"]) - int(end["seq"])


def watch_lag(spark: Any) -> Any:
    """Log the lag of every batch that read rows, as batches complete; the listener
    keeps (rows, lag) per query id in ``batches`` and marks the queries that ended
    (``ended``)."""
    from pyspark.sql.streaming.listener import StreamingQueryListener

    class LagListener(StreamingQueryListener):
        def __init__(self) -> None:
            self.batches: dict[str, list[tuple[int, int]]] = {}
            self.ended: set[str] = set()

        def onQueryStarted(self, event: Any) -> None:
            pass

        def onQueryProgress(self, event: Any) -> None:
            progress = json.loads(event.progress.json)
            if progress["numInputRows"]:
                behind = lag(progress)
                self.batches.setdefault(progress["id"], []).append(
                    (progress["numInputRows"], behind)
                )
                log.info("query %s: lag %d", progress["name"], behind)

        def onQueryIdle(self, event: Any) -> None:
            pass

        def onQueryTerminated(self, event: Any) -> None:
            self.ended.add(str(event.id))

    listener = LagListener()
    spark.streams.addListener(listener)
    return listener


def run_job(spark: Any, url: str, checkpoint: str, listener: Any) -> list[tuple[int, int]]:
    """Read what ``EVENTS`` holds now, at most 250 messages a batch, and stop;
    (rows, lag) of every batch that read rows, as ``listener`` heard them."""
    events = (
        spark.readStream.format("jetstream")
        .option("servers", url)
        .option("stream", "EVENTS")
        .option("max_rows_per_batch", "250")
        .load()
    )
    query = (
        events.writeStream.format("noop")
        .queryName("events")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    # the listener hears a query's events in order, its end last
    for _ in range(300):
        if query.id in listener.ended:
            return list(listener.batches.get(query.id, []))
        time.sleep(0.1)
    # Spark Connect up to 4.3 may drop its listeners when a Python data source's job
    # reports (SPARK-59135): the query's own progress says the same
    log.warning("the listener heard no end of query %s: its progress instead", query.name)
    batches = []
    for progress in query.recentProgress:
        progress = json.loads(progress.json) if hasattr(progress, "json") else progress
        if progress["numInputRows"]:
            batches.append((progress["numInputRows"], lag(progress)))
            log.info("query %s: lag %d", progress["name"], batches[-1][1])
    return batches
    # --8<-- [end:lag]


def main() -> None:
    from pyspark.sql import SparkSession

    from jetstream.spark import register

    logging.basicConfig(format="%(name)s: %(message)s")
    log.setLevel(logging.INFO)
    # Spark's Python workers run this interpreter, which has jetstream
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    with ExitStack() as stack:
        url = os.environ.get("NATS_URL") or stack.enter_context(NatsServer()).url
        asyncio.run(setup(url))
        spark = SparkSession.builder.master("local[2]").appName("spark-lag").getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)
        listener = watch_lag(spark)
        checkpoint = stack.enter_context(tempfile.TemporaryDirectory())
        for i, (rows, behind) in enumerate(run_job(spark, url, checkpoint, listener)):
            print(f"batch {i}: {rows} rows, lag {behind}")
        spark.stop()
    sys.exit(0)


if __name__ == "__main__":
    main()
