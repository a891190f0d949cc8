"""The KeyValue sink of ``bench_spark`` (``--only kv``): N keys of 100-byte values put into a
fresh memory bucket (history 1)

- by ``kv_sink`` called on a batch DataFrame of N rows (``sink(df, 0)``: the numbering
  stage, the aggregation by key and the writing stage, as in a micro-batch);
- by the ``jetstream-kv`` format (``df.write.format("jetstream-kv")``: each partition's
  tasks put their rows as they are, no shuffle);
- from this process with plain ``kv.put``, one put awaited at a time (what an application
  without the sink does), and with ``kv.put_async`` (a window of 4000 puts in flight, the
  sink's way of writing, without Spark).

They take turns, round after round, and the best run of each counts; every run checks
that the bucket holds exactly N keys.
"""

from __future__ import annotations

import asyncio
import gc
import time
from typing import Any

import jetstream
from benchmarks._report import Measurement, report
from jetstream.api import StorageType
from jetstream.errors import BucketNotFoundError

BUCKET = "BENCH_KV"
VALUE_BYTES = 100


def fresh_bucket(url: str) -> None:
    async def go() -> None:
        async with jetstream.connect(url) as nc:
            js = nc.jetstream()
            try:
                await js.delete_key_value(BUCKET)
            except BucketNotFoundError:
                pass
            await js.create_key_value(bucket=BUCKET, storage=StorageType.MEMORY)

    asyncio.run(go())


def _check(url: str, n: int, impl: str) -> None:
    async def go() -> int:
        async with jetstream.connect(url) as nc:
            return (await (await nc.jetstream().key_value(BUCKET)).status()).values

    got = asyncio.run(go())
    assert got == n, f"{impl}: the bucket holds {got} values, not {n}"


def _value(i: int) -> bytes:
    return str(i).ljust(VALUE_BYTES, "x").encode()


def plain_put(url: str, n: int, window: bool) -> float:
    """Seconds for this process to put ``n`` keys: awaiting each ``kv.put``, or with
    ``window``, ``kv.put_async`` with 4000 in flight and every ack awaited."""
    fresh_bucket(url)

    async def go() -> float:
        async with jetstream.connect(url) as nc:
            js = nc.jetstream(publish_async_max_pending=4000)
            kv = await js.key_value(BUCKET)
            t0 = time.perf_counter()
            if window:
                for i in range(n):
                    await kv.put_async(f"k.{i}", _value(i))
                await js.publish_async_complete(timeout=120)
            else:
                for i in range(n):
                    await kv.put(f"k.{i}", _value(i))
            return time.perf_counter() - t0

    seconds = asyncio.run(go())
    _check(url, n, "kv.put_async" if window else "kv.put")
    return seconds


def _frame(spark: Any, n: int) -> Any:
    return spark.range(n, numPartitions=2).selectExpr(
        "concat('k.', cast(id as string)) as key",
        f"rpad(cast(id as string), {VALUE_BYTES}, 'x') as value",
    )


def spark_sink(spark: Any, url: str, n: int) -> float:
    """Seconds for ``kv_sink`` to put the ``n`` rows of a batch DataFrame."""
    from jetstream.spark import kv_sink

    fresh_bucket(url)
    sink = kv_sink(url, bucket=BUCKET)
    df = _frame(spark, n)
    t0 = time.perf_counter()
    sink(df, 0)
    seconds = time.perf_counter() - t0
    _check(url, n, "kv sink")
    return seconds


def spark_format(spark: Any, url: str, n: int) -> float:
    """Seconds for ``df.write.format("jetstream-kv")`` to put the ``n`` rows."""
    fresh_bucket(url)
    df = _frame(spark, n)
    t0 = time.perf_counter()
    df.write.format("jetstream-kv").mode("append").option("servers", url).option(
        "bucket", BUCKET
    ).save()
    seconds = time.perf_counter() - t0
    _check(url, n, "kv format")
    return seconds


def bench_kv_sink(spark: Any, url: str, n: int, repeat: int) -> list[Measurement]:
    """Best seconds of each way of putting ``n`` keys, over ``repeat`` rounds."""
    runs = {
        "kv.put": lambda: plain_put(url, n, window=False),
        "kv.put_async": lambda: plain_put(url, n, window=True),
        "spark kv sink": lambda: spark_sink(spark, url, n),
        "spark kv format": lambda: spark_format(spark, url, n),
    }
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(max(1, repeat)):
        for impl, run in runs.items():
            gc.collect()
            seconds = run()
            print(
                f"put {n:,} keys x {VALUE_BYTES} B, {impl}: {n / seconds:,.0f} rows/s", flush=True
            )
            best[impl] = min(best[impl], seconds)
    return [
        Measurement(f"put {n // 1000}k keys x 100 B", impl, sec, n, n * VALUE_BYTES)
        for impl, sec in best.items()
    ]


def report_kv_sink(kv: list[Measurement], json_output: bool) -> None:
    """The table of the sink against ``kv.put``, then the format and ``kv.put_async``."""
    report(
        [m for m in kv if m.impl in ("spark kv sink", "kv.put")],
        title="PySpark KeyValue sink against kv.put from one process (rows/s)",
        json_output=json_output,
        ours="spark kv sink",
        baseline="kv.put",
    )
    if json_output:
        return
    put = next(m for m in kv if m.impl == "kv.put").ops_per_s
    for m in kv:
        if m.impl in ("spark kv format", "kv.put_async"):
            print(f"{m.impl}: {m.ops_per_s:,.0f} rows/s, {m.ops_per_s / put:.2f}x kv.put")
