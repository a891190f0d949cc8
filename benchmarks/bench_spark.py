"""PySpark benchmarks: the ``jetstream`` source and writer beside the plain client doing the
same in one process, then the foreachBatch sink.

Source (``benchmarks/_spark_source.py``): a batch read of a stream of N messages of 100
bytes (``--messages``, 400,000 by default) against a plain ordered consumer reading the
same stream in this process; also two ranges side by side, an ``availableNow`` streaming
run in four micro-batches, and Spark alone; held to the median over interleaved rounds.
Writer: ``df.write.format("jetstream")`` of N rows of 100 bytes (a job id: one message id
per row), and the same with ``commit_subject`` (atomic chunks of 999 rows with a marker
each, no message ids), against ``publish_async`` of the same messages, with message ids,
from this process; each run prints the server's memory after it. They take turns, round
after round (``--repeat``), and the best run of each counts; every run checks what was
read or stored.

Sink: three runs of the same query (a parquet file source of N rows of about 100 bytes, read
with ``trigger(availableNow=True)``), each into a fresh memory stream with a duplicate
window, on one embedded nats-server and local Spark (``local[2]``):

- jetstream: ``foreach_batch_sink`` (executors publish with ``publish_async``, msg ids);
- jetstream, commits: the same with ``commit_subject`` (atomic chunks with markers);
- nats-py: the usual driver-side foreachBatch: ``collect()`` the batch, then publish every
  row with nats-py's ``publish_async`` (msg ids too) and wait for all acks;
- spark alone: the same query into the ``noop`` format (what Spark costs by itself).

Then Spark's ``rate`` source, which offers a fixed number of rows a second (``--rate``,
100k by default), for ``--seconds`` (20) into ``noop`` and into ``foreach_batch_sink``:
the rows per second each got through, so whether the sink keeps up with Spark alone
at that rate.

KeyValue sink (``--only kv``): ``kv_sink`` and the ``jetstream-kv`` format putting
``--keys`` keys against ``kv.put`` from this process (see ``benchmarks/_spark_kv.py``).

Run: ``.venv/bin/python -m benchmarks.bench_spark [--only source,writer,sink,kv]
[--messages N] [--rows N] [--repeat R] [--cpu]`` (default one million rows, 2 rounds). The three
take turns, round after round, and the best run of each counts; the first round also
starts Spark's Python workers, which later rounds reuse. Every run checks that the stream
holds exactly N messages. ``--cpu`` prints, for each source run, the CPU per message of
the nats-server, this process, Spark's JVM and its Python workers (they share the cores).
"""

from __future__ import annotations

import asyncio
import gc
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import jetstream
from benchmarks._report import Measurement, arg_parser, report
from benchmarks._spark_kv import bench_kv_sink, report_kv_sink
from benchmarks._spark_source import (
    ROW_BYTES,
    STREAM,
    SUBJECT,
    WRITE_STREAM,
    bench_source,
    fresh_stream,
    report_source,
    spark_session,
    stored,
)
from jetstream.embedded import NatsServer

# -- the writer: a batch write against publish_async from one process ---------------------


def plain_write(url: str, n: int) -> float:
    """Seconds for this process to publish ``n`` messages with ids and have every ack."""
    fresh_stream(url, WRITE_STREAM, "bench.write")

    async def go() -> float:
        async with jetstream.connect(url) as nc:
            js = nc.jetstream(publish_async_max_pending=4000)
            t0 = time.perf_counter()
            for i in range(n):
                value = str(i).ljust(ROW_BYTES, "x").encode()
                await js.publish_async("bench.write", value, msg_id=f"plain:{i}")
            await js.publish_async_complete(timeout=120)
            return time.perf_counter() - t0

    seconds = asyncio.run(go())
    got = stored(url, WRITE_STREAM)
    assert got == n, f"plain publish: the stream holds {got} messages, not {n}"
    return seconds


def spark_write(spark: Any, url: str, n: int, commits: bool = False) -> float:
    """Seconds for ``df.write.format("jetstream")`` to store ``n`` rows; ``commits``: in
    atomic chunks with markers (``commit_subject``), into a stream that takes them."""
    if commits:
        fresh_stream(url, WRITE_STREAM, "bench.write", "bench.commits.>", allow_atomic=True)
    else:
        fresh_stream(url, WRITE_STREAM, "bench.write")
    df = spark.range(n, numPartitions=2).selectExpr(
        f"rpad(cast(id as string), {ROW_BYTES}, 'x') as value"
    )
    w = (
        df.write.format("jetstream")
        .mode("append")
        .option("servers", url)
        .option("subject", "bench.write")
        .option("stream", WRITE_STREAM)
        .option("job_id", "bench")
    )
    if commits:
        w = w.option("commit_subject", "bench.commits")
    t0 = time.perf_counter()
    w.save()
    seconds = time.perf_counter() - t0
    got = stored(url, WRITE_STREAM, "bench.write")
    assert got == n, f"spark writer: the stream holds {got} rows, not {n}"
    return seconds


def bench_writer(
    spark: Any, url: str, n: int, repeat: int, server: NatsServer | None = None
) -> list[Measurement]:
    runs = {
        "plain publish": lambda: plain_write(url, n),
        "spark writer": lambda: spark_write(spark, url, n),
        "spark writer, commits": lambda: spark_write(spark, url, n, commits=True),
    }
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(max(1, repeat)):
        for impl, run in runs.items():
            gc.collect()
            seconds = run()
            # the server's memory with the stream as the run left it (its ids in the
            # duplicate window, or the commit markers)
            mem = f", server {server.monitor('varz')['mem'] / 2**20:,.0f} MiB" if server else ""
            print(
                f"write {n:,} x {ROW_BYTES} B, {impl}: {n / seconds:,.0f} rows/s{mem}", flush=True
            )
            best[impl] = min(best[impl], seconds)
    return [
        Measurement(f"write {n // 1000}k x 100 B", impl, sec, n, n * ROW_BYTES)
        for impl, sec in best.items()
    ]


def nats_py_batch(url: str) -> Any:
    """The driver-side foreachBatch a nats-py user writes: collect, publish, wait."""

    def fn(df: Any, batch_id: int) -> None:
        rows = df.select("value").collect()
        qid = df.sparkSession.sparkContext.getLocalProperty("sql.streaming.queryId")

        async def go() -> None:
            import nats

            nc = await nats.connect(url)
            js = nc.jetstream(publish_async_max_pending=4000)
            for i, r in enumerate(rows):
                await js.publish_async(
                    SUBJECT, r.value.encode(), headers={"Nats-Msg-Id": f"{qid}:{batch_id}:{i}"}
                )
            await asyncio.wait_for(js.publish_async_completed(), 120)
            await nc.close()

        asyncio.run(go())

    return fn


def noop_batch(df: Any, batch_id: int) -> None:
    df.write.format("noop").mode("overwrite").save()


def run_query(spark: Any, src: Path, fn: Any, ckpt: Path) -> float:
    shutil.rmtree(ckpt, ignore_errors=True)
    t0 = time.perf_counter()
    q = (
        spark.readStream.schema("id long, value string")
        .parquet(str(src))
        .writeStream.foreachBatch(fn)
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    return time.perf_counter() - t0


def run_rate(spark: Any, fn: Any, ckpt: Path, rate: int, seconds: float) -> tuple[float, int]:
    """Rows per second that a ``rate`` source offering ``rate`` rows a second got through
    ``fn``, over about ``seconds`` after the first micro-batch (which starts the Python
    workers); and the rows of the batches that completed. A sink that keeps up
    processes about ``rate``; one that does not falls behind and processes less.

    A micro-batch starts every second, or at once after one that took longer; the
    query is stopped between two of them (a stop that interrupts a batch makes Spark
    print a stack trace)."""
    shutil.rmtree(ckpt, ignore_errors=True)
    q = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", rate)
        .option("numPartitions", 2)
        .load()
        .selectExpr("value as id", f"rpad(cast(value as string), {ROW_BYTES}, 'x') as value")
        .writeStream.foreachBatch(fn)
        .option("checkpointLocation", str(ckpt))
        .trigger(processingTime="1 second")
        .start()
    )
    try:
        seen = _next_batch(q, 0, 120)
        t0, rows0 = time.perf_counter(), _rows_done(q)
        t1, rows1 = t0, rows0
        while t1 - t0 < seconds:
            seen = _next_batch(q, seen, 60)
            t1, rows1 = time.perf_counter(), _rows_done(q)
        deadline = time.monotonic() + 30
        while q.status["isTriggerActive"] and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        q.stop()
    return (rows1 - rows0) / (t1 - t0), _rows_done(q)


def _next_batch(q: Any, seen: int, timeout: float) -> int:
    """Wait until more than ``seen`` micro-batches have completed; their count."""
    deadline = time.monotonic() + timeout
    while len(q.recentProgress) <= seen:
        if time.monotonic() > deadline:
            raise TimeoutError(f"no micro-batch completed in {timeout} s")
        time.sleep(0.005)
    return len(q.recentProgress)


def _rows_done(q: Any) -> int:
    return sum(int(p["numInputRows"]) for p in q.recentProgress)


def bench_sink(spark: Any, url: str, args: Any, tmp: Path) -> list[Measurement]:
    from jetstream.spark import foreach_batch_sink

    n = args.rows
    results: list[Measurement] = []
    src = tmp / "in"
    spark.range(n).selectExpr(
        "id", f"rpad(cast(id as string), {ROW_BYTES}, 'x') as value"
    ).repartition(4).write.parquet(str(src))
    commits = foreach_batch_sink(
        url, subject=SUBJECT, stream=STREAM, commit_subject=f"{SUBJECT}.commits"
    )
    runs: list[tuple[str, Any]] = [
        ("spark alone", noop_batch),
        ("jetstream", foreach_batch_sink(url, subject=SUBJECT, stream=STREAM)),
        ("nats-py", nats_py_batch(url)),
        ("jetstream, commits", commits),
    ]
    best: dict[str, float] = {}
    # rounds taking turns: a busy spell of the machine hits every client alike
    for _ in range(max(1, args.repeat)):
        for impl, fn in runs:
            if fn is commits:
                fresh_stream(url, STREAM, SUBJECT, f"{SUBJECT}.commits.>", allow_atomic=True)
            else:
                fresh_stream(url)
            seconds = run_query(spark, src, fn, tmp / "ckpt")
            if impl != "spark alone":
                got = stored(url, STREAM, SUBJECT)
                assert got == n, f"{impl}: stream holds {got} messages, not {n}"
            print(f"{impl}: {n / seconds:,.0f} rows/s ({seconds:.1f} s)", flush=True)
            best[impl] = min(best.get(impl, seconds), seconds)
    for impl, seconds in best.items():
        results.append(Measurement("foreachBatch 100 B rows", impl, seconds, n, n * ROW_BYTES))
    if args.rate:
        # Spark's rate source offers a fixed number of rows a second: does the
        # sink keep up with what Spark alone moves at that rate?
        kept: dict[str, float] = {}
        for impl, fn in runs[:2]:
            fresh_stream(url)
            kept[impl], done = run_rate(spark, fn, tmp / "ckpt", args.rate, args.seconds)
            if impl == "jetstream":
                got = stored(url)
                # every completed batch is stored; a batch cut off by stop() maybe
                assert got >= done, f"stream holds {got} messages, batches had {done}"
            print(f"rate source at {args.rate:,} rows/s, {impl}: {kept[impl]:,.0f} rows/s")
        print(
            f"rate source: jetstream sink / spark alone: "
            f"{kept['jetstream'] / kept['spark alone']:.2f}x"
        )
    return results


def _rate(ms: list[Measurement], impl: str) -> float:
    return next(m for m in ms if m.impl == impl).ops_per_s


def main() -> None:
    parser = arg_parser("PySpark source, writer and foreachBatch sink throughput")
    parser.add_argument(
        "--only", default="source,writer,sink,kv", help="which of source, writer, sink, kv to run"
    )
    parser.add_argument(
        "--messages", type=int, default=400_000, help="messages read by source, written by writer"
    )
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows through the sink")
    parser.add_argument("--keys", type=int, default=100_000, help="keys put by the kv runs")
    parser.add_argument(
        "--rate", type=int, default=100_000, help="rows/s of the rate-source run (0: none)"
    )
    parser.add_argument("--seconds", type=float, default=20.0, help="length of that run")
    parser.add_argument(
        "--cpu",
        action="store_true",
        help="source: print the CPU of each read per message (server, this process, JVM, "
        "Python workers)",
    )
    parser.set_defaults(repeat=2)  # a sink round takes a minute and a half
    args = parser.parse_args()
    only = {w.strip() for w in args.only.split(",")}
    from jetstream.spark import register

    spark = spark_session()
    register(spark)
    tmp = Path(tempfile.mkdtemp(prefix="bench-spark-"))
    source: list[Measurement] = []
    ratios: dict[str, float] = {}
    writer: list[Measurement] = []
    sink: list[Measurement] = []
    kv: list[Measurement] = []
    try:
        with NatsServer() as server:
            url = server.url
            if "source" in only:
                pid = (server.pid or 0) if args.cpu else 0
                source, ratios = bench_source(spark, url, args.messages, max(args.repeat, 3), pid)
            if "writer" in only:
                writer = bench_writer(spark, url, args.messages, max(args.repeat, 3), server)
            if "sink" in only:
                sink = bench_sink(spark, url, args, tmp)
            if "kv" in only:
                kv = bench_kv_sink(spark, url, args.keys, max(args.repeat, 3))
    finally:
        spark.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    if source:
        report_source(source, ratios, args.json)
    if writer:
        report(
            writer,
            title="PySpark writer: batch write against publish_async in one process (rows/s)",
            json_output=args.json,
            ours="spark writer",
            baseline="plain publish",
        )
    if sink:
        report(
            [m for m in sink if m.impl != "spark alone"],
            title="PySpark sink (rows/s)",
            json_output=args.json,
        )
        alone = next(m for m in sink if m.impl == "spark alone")
        ours = next(m for m in sink if m.impl == "jetstream")
        print(
            f"jetstream sink / spark alone: {ours.ops_per_s / alone.ops_per_s:.2f}x of Spark's rate"
        )
    if kv:
        report_kv_sink(kv, args.json)


if __name__ == "__main__":
    main()
