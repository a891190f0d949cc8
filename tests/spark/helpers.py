"""Small synchronous helpers for the Spark tests: streams on the test server, reading a
stream back, writing input files."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

import jetstream
from jetstream import StreamConfig
from jetstream.api import StorageType
from tests import leaks


def make_stream(
    url: str, name: str, subjects: list[str], *, dedup: float = 120.0, **config: Any
) -> None:
    """(Re)make a memory stream; ``config``: more ``StreamConfig`` fields (limits)."""

    async def go() -> None:
        async with jetstream.connect(url) as nc:
            js = nc.jetstream()
            try:
                await js.delete_stream(name)
            except jetstream.errors.StreamNotFoundError:
                pass
            await js.create_stream(
                StreamConfig(
                    name=name,
                    subjects=subjects,
                    storage=StorageType.MEMORY,
                    duplicate_window=dedup,
                    **config,
                )
            )

    leaks.run(go())


def consumer_count(url: str, name: str) -> int:
    async def go() -> int:
        async with jetstream.connect(url) as nc:
            info = await (await nc.jetstream().stream(name)).info()
            return info.state.consumer_count

    return leaks.run(go())


def stream_state(url: str, name: str) -> tuple[int, int]:
    """(messages, last sequence) of a stream."""

    async def go() -> tuple[int, int]:
        async with jetstream.connect(url) as nc:
            info = await (await nc.jetstream().stream(name)).info()
            return info.state.messages, info.state.last_seq

    return leaks.run(go())


def read_all(url: str, name: str) -> list[tuple[str, bytes, int, dict[str, str]]]:
    """Every message of a stream in order: (subject, data, sequence, headers)."""

    async def go() -> list[tuple[str, bytes, int, dict[str, str]]]:
        async with jetstream.connect(url) as nc:
            stream = await nc.jetstream().stream(name)
            total = (await stream.info()).state.messages
            out: list[tuple[str, bytes, int, dict[str, str]]] = []
            if not total:
                return out
            oc = await stream.ordered_consumer()
            async with oc.messages(max_messages=1000) as it:
                while len(out) < total:
                    m = await it.next(timeout=30)
                    h = {k: m.headers[k] for k in m.headers} if m.raw_headers else {}
                    out.append((m.subject, m.data, m.metadata.sequence.stream, h))
            return out

    return leaks.run(go())


def publish(url: str, subject: str, payloads: list[bytes]) -> None:
    async def go() -> None:
        async with jetstream.connect(url) as nc:
            js = nc.jetstream()
            for p in payloads:
                await js.publish_async(subject, p)
            await js.publish_async_complete(timeout=30)

    leaks.run(go())


def run_to_end(writer: Any, checkpoint: Path) -> str:
    """Start the streaming ``writer`` (a ``DataStreamWriter``) with ``checkpoint`` under
    ``availableNow``, wait until it has read all there is (at most 240 s), stop it; return
    the query's id."""
    q = writer.option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
    try:
        assert q.awaitTermination(240), "the query did not finish in 240 s"
    finally:
        q.stop()
    return str(q.id)


def write_parquet(spark: Any, path: Path, n: int, files: int) -> None:
    """``n`` rows (id, value) in ``files`` parquet files under ``path``."""
    (
        spark.range(n)
        .selectExpr("id", "concat('row-', cast(id as string)) as value")
        .repartition(files, "id")
        .sortWithinPartitions("id")
        .write.mode("overwrite")
        .parquet(str(path))
    )


class Progress:
    """Every query progress of a session, heard by a ``StreamingQueryListener`` (in a
    Spark Connect session a query's ``recentProgress`` is gone once it has ended); use
    as a context manager, which adds and removes the listener."""

    def __init__(self, spark: Any) -> None:
        from pyspark.sql.streaming.listener import StreamingQueryListener

        self.spark = spark
        self.seen: dict[str, list[dict[str, Any]]] = {}
        self.ended: set[str] = set()
        outer = self

        class Listener(StreamingQueryListener):
            def onQueryStarted(self, event: Any) -> None:
                pass

            def onQueryProgress(self, event: Any) -> None:
                p = json.loads(event.progress.json)
                outer.seen.setdefault(p["id"], []).append(p)

            def onQueryIdle(self, event: Any) -> None:
                pass

            def onQueryTerminated(self, event: Any) -> None:
                outer.ended.add(str(event.id))

        self.listener = Listener()

    def __enter__(self) -> Progress:
        self.spark.streams.addListener(self.listener)
        return self

    def __exit__(self, *exc: object) -> None:
        self.spark.streams.removeListener(self.listener)

    def batches(self, query: Any) -> list[dict[str, Any]]:
        """The progress of every batch of ``query`` that read rows, once the listener
        has heard the query end (events come in order, the end last)."""
        deadline = time.monotonic() + 60
        while query.id not in self.ended:
            assert time.monotonic() < deadline, "the listener never heard the query end"
            time.sleep(0.1)
        return [p for p in self.seen.get(query.id, []) if p["numInputRows"]]

    def now(self, query: Any) -> list[dict[str, Any]]:
        """The batches of a running ``query`` that read rows, heard so far."""
        return [p for p in self.seen.get(query.id, []) if p["numInputRows"]]


#: for a test whose code takes the same path in a Spark Connect session as in a classic one
#: (what the executors read and write, the benchmarks): it runs in the classic session
#: only, where every other test of the ``spark`` fixture runs in both
classic_only = pytest.mark.parametrize("spark", ["classic"], indirect=True)
