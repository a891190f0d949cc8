"""Trace context through Spark: the foreachBatch sink (``traceparent="current"``: the
driver's span) and the ``jetstream`` writer (option ``traceparent``) put it on every row,
so a traced consumer downstream continues that trace."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import jetstream
from jetstream import ConsumerConfig, JsMsg
from jetstream.embedded import NatsServer
from jetstream.spark import SparkConfigError, foreach_batch_sink
from tests import leaks
from tests.spark.helpers import classic_only, make_stream, read_all


def _process_traces(url: str, provider: TracerProvider, n: int) -> None:
    """Consume ``n`` messages of stream TRS with a traced client (process spans)."""

    async def go() -> None:
        async with jetstream.connect(url, tracing=provider) as nc:
            stream = await nc.jetstream().stream("TRS")
            cons = await stream.create_or_update_consumer(ConsumerConfig(durable_name="down"))
            done = asyncio.Event()
            seen = 0

            async def handle(msg: JsMsg) -> None:
                nonlocal seen
                await msg.ack()
                seen += 1
                if seen == n:
                    done.set()

            async with await cons.consume(handle):
                await asyncio.wait_for(done.wait(), 60)

    leaks.run(go())


@classic_only
def test_rows_carry_the_trace_context(spark: Any, module_nats_server: NatsServer) -> None:
    url = module_nats_server.url
    make_stream(url, "TRS", ["trs.>"])
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    df = spark.range(6).selectExpr("cast(id as string) as key", "cast(id as string) as value")

    with provider.get_tracer("driver").start_as_current_span("nightly job") as job:
        sink = foreach_batch_sink(
            url, subject="trs.sink", stream="TRS", key_col="key", traceparent="current"
        )
    sink(df, 1)
    writer_parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    (
        df.write.format("jetstream")
        .mode("append")
        .option("servers", url)
        .option("subject", "trs.writer")
        .option("stream", "TRS")
        .option("job_id", "tr-1")
        .option("traceparent", writer_parent)
        .option("tracestate", "vendor=1")
        .save()
    )
    job_ctx = job.get_span_context()
    job_parent = f"00-{job_ctx.trace_id:032x}-{job_ctx.span_id:016x}-{int(job_ctx.trace_flags):02x}"
    rows = read_all(url, "TRS")
    assert {(s, h["traceparent"]) for s, _, _, h in rows} == {
        ("trs.sink", job_parent),
        ("trs.writer", writer_parent),
    }
    assert len(rows) == 12
    assert {h.get("tracestate") for s, _, _, h in rows if s == "trs.writer"} == {"vendor=1"}

    # downstream, each row's process span continues the trace it was written in
    _process_traces(url, provider, 12)
    spans = [s for s in exporter.get_finished_spans() if s.name.startswith("process ")]
    assert len(spans) == 12
    traces = {(s.name, s.context.trace_id if s.context else 0) for s in spans}
    assert traces == {
        ("process trs.sink", job_ctx.trace_id),
        ("process trs.writer", 0x0AF7651916CD43DD8448EB211C80319C),
    }
    provider.shutdown()

    with pytest.raises(SparkConfigError, match="traceparent='nope' is not a W3C traceparent"):
        foreach_batch_sink(url, subject="trs.sink", key_col="key", traceparent="nope")
