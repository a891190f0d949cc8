"""The source part of ``bench_spark`` (``--only source``): a batch read
(``spark.read.format("jetstream")`` into ``noop``) of a stream of N messages of 100 bytes
against a plain ordered consumer reading the same stream in this process; the source
reading two ranges side by side (``partitions=2``); a scheduled streaming run
(``Trigger.AvailableNow``, ``max_rows_per_batch`` = N / 4: four micro-batches, then the
query stops); and Spark alone moving the same rows from an in-memory Python data source
into ``noop`` (Spark's own share of the read). Each Spark read runs once untimed first
(the JVM's warm-up). They take turns, round after round; each
run's rate over the plain consumer's of the same round gives a ratio per round, and the
median of those is the figure the source is held to (0.9 of the plain consumer). Also the
streams and the Spark session the other parts share.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from msgspec import UNSET

import jetstream
from benchmarks._report import Measurement, proc_cpu, report
from jetstream import StreamConfig
from jetstream.api import StorageType

SUBJECT = "bench.sink"
STREAM = "BENCH_SINK"
ROW_BYTES = 100
READ_STREAM = "BENCH_READ"
WRITE_STREAM = "BENCH_WRITE"


def spark_session() -> Any:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    s = (
        SparkSession.builder.master("local[2]")
        .appName("jetstream-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "2g")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    s.sparkContext.setLogLevel("ERROR")
    return s


def fresh_stream(
    url: str, name: str = STREAM, subject: str = SUBJECT, *more: str, allow_atomic: bool = False
) -> None:
    """A new memory stream of ``subject`` (and ``more`` subjects) with a duplicate window;
    ``allow_atomic``: taking atomic batches."""

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
                    subjects=[subject, *more],
                    storage=StorageType.MEMORY,
                    duplicate_window=300.0,
                    allow_atomic=True if allow_atomic else UNSET,
                )
            )

    asyncio.run(go())


def stored(url: str, name: str = STREAM, subject: str | None = None) -> int:
    """The messages of a stream (on ``subject`` only, when given)."""

    async def go() -> int:
        async with jetstream.connect(url) as nc:
            stream = await nc.jetstream().stream(name)
            if subject is not None:
                info = await stream.info(subjects_filter=subject)
                return (info.state.subjects or {}).get(subject, 0)
            info = await stream.info()
            return info.state.messages

    return asyncio.run(go())


# -- the source: a batch read against a plain ordered consumer ---------------------------


def fill_read_stream(url: str, n: int) -> None:
    fresh_stream(url, READ_STREAM, "bench.read")

    async def go() -> None:
        async with jetstream.connect(url) as nc:
            js = nc.jetstream()
            payload = b"r" * ROW_BYTES
            for _ in range(n):
                await js.publish_async("bench.read", payload)
            await js.publish_async_complete(timeout=120)

    asyncio.run(go())


def plain_read(url: str, n: int) -> float:
    """Seconds for one ordered consumer in this process to read the ``n`` messages."""

    async def go() -> float:
        async with jetstream.connect(url) as nc:
            stream = await nc.jetstream().stream(READ_STREAM)
            t0 = time.perf_counter()
            oc = await stream.ordered_consumer()
            got = 0
            async with oc.messages(max_messages=5000) as it:
                async for _ in it:
                    got += 1
                    if got == n:
                        break
            seconds = time.perf_counter() - t0
            await oc.delete()
            return seconds

    return asyncio.run(go())


def spark_read(spark: Any, url: str, partitions: int = 0) -> float:
    """Seconds for ``spark.read.format("jetstream")`` to read the stream into ``noop``
    (in ``partitions`` ranges side by side; 0: the source's default, one)."""
    reader = spark.read.format("jetstream").option("servers", url).option("stream", READ_STREAM)
    if partitions:
        reader = reader.option("partitions", str(partitions))
    t0 = time.perf_counter()
    (reader.load().write.format("noop").mode("overwrite").save())
    return time.perf_counter() - t0


class MemoryRows:
    """``spark.read.format("jetstream_bench_memory")``: the rows of ``read 400k``, made in
    memory (one Arrow batch, built once per partition and handed over again and again):
    what Spark alone costs to move them from a Python data source into ``noop``, the
    part of the source's read that is Spark's own (its JVM, its Python workers' Arrow
    stream), with nothing read from NATS."""

    @staticmethod
    def source(n: int) -> type[Any]:
        from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

        from jetstream.spark import SCHEMA

        class Reader(DataSourceReader):
            def partitions(self) -> list[InputPartition]:
                half = n // 2
                return [InputPartition(half), InputPartition(n - half)]

            def read(self, partition: InputPartition) -> Any:
                import numpy as np
                import pyarrow as pa

                from jetstream.spark._columns import ARROW_SCHEMA, HEADERS_TYPE, strings

                rows: int = partition.value  # type: ignore[attr-defined]
                k = min(16384, rows)
                batch = pa.RecordBatch.from_arrays(
                    [
                        strings(["bench.read"] * k),
                        pa.array([b"r" * ROW_BYTES] * k, pa.binary()),
                        pa.nulls(k, HEADERS_TYPE),
                        pa.array(np.arange(k, dtype=np.int64)),
                        pa.array(np.full(k, 1_700_000_000_000_000, np.int64)).cast(
                            pa.timestamp("us", tz="UTC")
                        ),
                    ],
                    schema=ARROW_SCHEMA,
                )
                while rows:
                    yield batch.slice(0, min(k, rows))
                    rows -= min(k, rows)

        class Memory(DataSource):
            @classmethod
            def name(cls) -> str:
                return "jetstream_bench_memory"

            def schema(self) -> str:
                return SCHEMA

            def reader(self, schema: Any) -> Reader:
                return Reader()

        return Memory


def memory_read(spark: Any) -> float:
    """Seconds for Spark to read the in-memory rows (``MemoryRows``) into ``noop``."""
    t0 = time.perf_counter()
    spark.read.format("jetstream_bench_memory").load().write.format("noop").mode("overwrite").save()
    return time.perf_counter() - t0


def _descendants(pid: int) -> list[int]:
    """The processes under ``pid`` (Linux ``/proc``): Spark's JVM and its Python workers."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _cpu_by_part(server_pid: int) -> dict[str, float]:
    """CPU seconds so far of the server, this process, Spark's JVM and its Python workers
    (workers that ended meanwhile are not counted: Spark keeps its workers for reuse)."""
    parts = {"server": proc_cpu(server_pid), "this process": sum(os.times()[:2])}
    for pid in _descendants(os.getpid()):
        if pid == server_pid:
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        kind = "jvm" if b"java" in cmd else "python workers" if b"python" in cmd else None
        if kind is not None:
            parts[kind] = parts.get(kind, 0.0) + proc_cpu(pid)
    return parts


def available_now(spark: Any, url: str, n: int, batches: int, ckpt: Path) -> tuple[float, int]:
    """Seconds for a streaming query over the read stream with ``Trigger.AvailableNow``
    and ``max_rows_per_batch`` = n / ``batches`` to read it into ``noop`` and stop (a
    scheduled job), and how many micro-batches read rows."""
    shutil.rmtree(ckpt, ignore_errors=True)
    t0 = time.perf_counter()
    q = (
        spark.readStream.format("jetstream")
        .option("servers", url)
        .option("stream", READ_STREAM)
        .option("max_rows_per_batch", str(-(-n // batches)))
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    seconds = time.perf_counter() - t0
    # from the checkpoint (a Spark Connect client has no progress of an ended query):
    # the offset log's last end offset, and the batches committed
    offsets = sorted((ckpt / "offsets").glob("[0-9]*"), key=lambda f: int(f.name))
    end = json.loads(offsets[-1].read_text().splitlines()[-1])["seq"]
    assert end == n + 1, f"the availableNow run read up to sequence {end - 1}, not {n}"
    return seconds, len(list((ckpt / "commits").glob("[0-9]*")))


def bench_source(
    spark: Any, url: str, n: int, repeat: int, server_pid: int = 0
) -> tuple[list[Measurement], dict[str, float]]:
    """The source's runs and the plain consumer's, taking turns round after round: the
    best of each as Measurements, and the median per round of the source's rate over
    the plain consumer's (``ratios``, the figure the source is held to)."""
    fill_read_stream(url, n)
    count = (
        spark.read.format("jetstream")
        .option("servers", url)
        .option("stream", READ_STREAM)
        .load()
        .count()
    )
    assert count == n, f"the source read {count} rows, not {n}"
    from pyspark import cloudpickle

    # its classes go to the Python workers by value (this module may not be importable there)
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    spark.dataSource.register(MemoryRows.source(n))
    assert spark.read.format("jetstream_bench_memory").load().count() == n
    # one untimed run of each read into noop first: the JVM compiles the paths of the
    # read and the write in its first runs (2.0 us of JVM CPU a row in a first timed round
    # against 0.8 - 1.0 in the later ones, while the plain consumer has nothing to warm)
    spark_read(spark, url)
    spark_read(spark, url, 2)
    memory_read(spark)
    ckpt = Path(tempfile.mkdtemp(prefix="bench-now-"))
    batches = 4
    runs = {
        "plain consumer": lambda: plain_read(url, n),
        "spark source": lambda: spark_read(spark, url),
        "spark source, 2 ranges": lambda: spark_read(spark, url, 2),
        f"availableNow, {batches} batches": lambda: available_now(spark, url, n, batches, ckpt)[0],
        "spark alone": lambda: memory_read(spark),
    }
    best = dict.fromkeys(runs, float("inf"))
    per_round: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(max(1, repeat)):
        for impl, run in runs.items():
            gc.collect()
            cpu0 = _cpu_by_part(server_pid) if server_pid else {}
            seconds = run()
            print(f"read {n:,} x {ROW_BYTES} B, {impl}: {n / seconds:,.0f} rows/s", flush=True)
            if server_pid:
                cpu1 = _cpu_by_part(server_pid)
                used = ", ".join(
                    f"{k} {(v - cpu0.get(k, 0.0)) / n * 1e6:.2f}" for k, v in cpu1.items()
                )
                print(f"  CPU us a message: {used}", file=sys.stderr, flush=True)
            best[impl] = min(best[impl], seconds)
            per_round[impl].append(seconds)
    shutil.rmtree(ckpt, ignore_errors=True)
    plain = per_round["plain consumer"]
    ratios = {
        impl: statistics.median(p / s for p, s in zip(plain, secs, strict=True))
        for impl, secs in per_round.items()
        if impl != "plain consumer"
    }
    return [
        Measurement(f"read {n // 1000}k x 100 B", impl, sec, n, n * ROW_BYTES)
        for impl, sec in best.items()
    ], ratios


def report_source(source: list[Measurement], ratios: dict[str, float], json_output: bool) -> None:
    report(
        [m for m in source if m.impl in ("spark source", "plain consumer")],
        title="PySpark source: batch read against a plain ordered consumer (rows/s, best run)",
        json_output=json_output,
        ours="spark source",
        baseline="plain consumer",
    )
    print("median over the interleaved rounds of each run's rate / the plain consumer's:")
    for impl, ratio in ratios.items():
        rate = next(m for m in source if m.impl == impl).ops_per_s
        print(f"  {impl}: {ratio:.2f}x (best {rate:,.0f} rows/s)")
