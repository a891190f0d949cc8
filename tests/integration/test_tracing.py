"""Tracing with OpenTelemetry: send spans around publishes (ending at the PubAck), receive
and process spans on the consuming side, and the W3C trace context carried between them
in the headers. Each test passes a TracerProvider of its own (``tracing=provider``) with
an in-memory exporter, so nothing depends on the global provider."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import jetstream
from jetstream import Client, ConsumerConfig, JsMsg, Msg, NoStreamError, StreamConfig
from jetstream.tracing import context_of, trace_headers

pytestmark = pytest.mark.asyncio

WAIT = 10.0  # seconds any one await may take
ROOT = Path(__file__).resolve().parents[2]


class Traced:
    """A provider of its own and what it exported."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def spans(self, name: str | None = None) -> list[ReadableSpan]:
        return [s for s in self.exporter.get_finished_spans() if name is None or s.name == name]

    def one(self, name: str) -> ReadableSpan:
        found = self.spans(name)
        assert len(found) == 1, (name, [s.name for s in self.spans()])
        return found[0]


@pytest.fixture
def traced() -> Iterator[Traced]:
    t = Traced()
    yield t
    t.provider.shutdown()


@pytest_asyncio.fixture
async def tnc(nats_url: str, traced: Traced) -> AsyncIterator[Client]:
    """A traced client of the test's own server."""
    async with jetstream.connect(nats_url, tracing=traced.provider) as client:
        yield client


def trace_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.trace_id


async def test_publish_in_one_client_consume_in_another_is_one_trace(
    nats_url: str, traced: Traced, tnc: Client
) -> None:
    js = tnc.jetstream()
    await js.create_stream(StreamConfig(name="TR", subjects=["tr.>"]))
    tracer = traced.provider.get_tracer("app")
    with tracer.start_as_current_span("checkout") as root:
        ack = await js.publish("tr.order", b"o-1", msg_id="order-1")
    send = traced.one("send tr.order")
    assert send.kind is SpanKind.PRODUCER
    assert send.parent is not None and send.parent.span_id == root.get_span_context().span_id
    assert send.attributes is not None
    assert send.attributes["messaging.system"] == "nats"
    assert send.attributes["messaging.destination.name"] == "tr.order"
    assert send.attributes["messaging.operation.type"] == "send"
    assert send.attributes["messaging.message.id"] == "order-1"
    assert send.attributes["messaging.message.body.size"] == 3
    assert send.attributes["messaging.nats.stream.name"] == "TR"
    assert send.attributes["messaging.nats.stream.sequence"] == ack.seq

    # another client (traced by the same provider) consumes it with a handler
    async with jetstream.connect(nats_url, tracing=traced.provider) as other:
        stream = await other.jetstream().stream("TR")
        cons = await stream.create_or_update_consumer(ConsumerConfig(durable_name="worker"))
        got: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        async def handle(msg: JsMsg) -> None:
            # the handler runs inside the process span: its trace is the producer's
            current = trace.get_current_span().get_span_context()
            await msg.ack()
            if not got.done():
                got.set_result(current.trace_id)

        async with await cons.consume(handle):
            in_handler = await asyncio.wait_for(got, WAIT)
    assert in_handler == trace_id(send)
    process = traced.one("process tr.order")
    assert process.kind is SpanKind.CONSUMER
    assert trace_id(process) == trace_id(send)
    assert process.parent is not None and process.parent.span_id == send.context.span_id
    assert [link.context.span_id for link in process.links] == [send.context.span_id]
    assert process.attributes is not None
    assert process.attributes["messaging.destination.subscription.name"] == "worker"
    assert process.attributes["messaging.nats.stream.name"] == "TR"
    assert process.attributes["messaging.nats.stream.sequence"] == ack.seq
    assert process.attributes["messaging.nats.message.delivery_count"] == 1
    assert process.attributes["messaging.message.id"] == "order-1"
    assert process.attributes["messaging.operation.type"] == "process"
    assert not traced.spans("receive tr.order")  # consume(): process spans only


async def test_pull_calls_make_receive_spans_linked_to_the_producer(
    traced: Traced, tnc: Client
) -> None:
    js = tnc.jetstream()
    stream = await js.create_stream(StreamConfig(name="PULL", subjects=["pull.*"]))
    for i in range(3):
        await js.publish(f"pull.{i}", b"x")
    sends = {s.name: s for s in traced.spans() if s.name.startswith("send ")}
    cons = await stream.create_consumer(ConsumerConfig(durable_name="p"))

    msg = await cons.next(timeout=WAIT)
    receive = traced.one("receive pull.0")
    assert receive.kind is SpanKind.CONSUMER
    assert [link.context.span_id for link in receive.links] == [
        sends["send pull.0"].context.span_id
    ]
    assert receive.parent is None  # a child of the (empty) current context, not the producer's
    # the application continues the producer's trace from the message
    ctx = context_of(msg)
    with traced.provider.get_tracer("app").start_as_current_span("work", context=ctx) as work:
        pass
    assert work.get_span_context().trace_id == trace_id(sends["send pull.0"])
    await msg.ack()

    msgs = await cons.fetch(2, expires=WAIT)
    assert [m.subject for m in msgs] == ["pull.1", "pull.2"]
    batch = [s for s in traced.spans() if s.name == "receive PULL"]
    assert len(batch) == 1
    assert batch[0].attributes is not None
    assert batch[0].attributes["messaging.batch.message_count"] == 2
    assert {link.context.span_id for link in batch[0].links} == {
        sends["send pull.1"].context.span_id,
        sends["send pull.2"].context.span_id,
    }
    for m in msgs:
        await m.ack()

    await js.publish("pull.9", b"y")
    async with cons.messages() as it:
        m = await it.next(timeout=WAIT)
        await m.ack()
    it_span = traced.one("receive pull.9")
    assert [link.context.span_id for link in it_span.links] == [
        traced.one("send pull.9").context.span_id
    ]


async def test_publish_async_span_ends_at_the_puback(traced: Traced, tnc: Client) -> None:
    js = tnc.jetstream()
    await js.create_stream(StreamConfig(name="PA", subjects=["pa"]))
    fut = await js.publish_async("pa", b"abc")
    ack = await asyncio.wait_for(fut, WAIT)
    span = traced.one("send pa")
    assert span.attributes is not None
    assert span.attributes["messaging.operation.name"] == "publish_async"
    assert span.attributes["messaging.nats.stream.sequence"] == ack.seq
    raw = await (await js.stream("PA")).get_msg(ack.seq)
    assert raw.headers is not None and "traceparent" in raw.headers


async def test_kv_put_makes_a_send_span(traced: Traced, tnc: Client) -> None:
    kv = await tnc.jetstream().create_key_value(bucket="traced")
    rev = await kv.put("color", b"blue")
    span = traced.one("send $KV.traced.color")
    assert span.kind is SpanKind.PRODUCER
    assert span.attributes is not None
    assert span.attributes["messaging.nats.stream.name"] == "KV_traced"
    assert span.attributes["messaging.nats.stream.sequence"] == rev
    assert span.status.status_code is StatusCode.UNSET


async def test_failed_publish_records_the_error_on_its_span(traced: Traced, tnc: Client) -> None:
    js = tnc.jetstream()
    with pytest.raises(NoStreamError):
        await js.publish("nowhere.stored", b"x", timeout=WAIT)
    span = traced.one("send nowhere.stored")
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes is not None
    assert span.attributes["error.type"] == "NoStreamError"
    assert [e.name for e in span.events] == ["exception"]
    assert span.end_time is not None


async def test_subscription_callback_and_iterator_spans(traced: Traced, tnc: Client) -> None:
    seen: asyncio.Future[tuple[int, bool]] = asyncio.get_running_loop().create_future()

    def on_msg(msg: Msg) -> None:
        span = trace.get_current_span()
        if not seen.done():
            seen.set_result((span.get_span_context().trace_id, span.is_recording()))

    await tnc.subscribe("core.cb", queue="q", cb=on_msg)
    sub = await tnc.subscribe("core.it")
    await tnc.flush(WAIT)
    await tnc.publish("core.cb", b"1", headers={"k": "v"})
    await tnc.publish("core.it", b"22")
    trace_in_cb, recording = await asyncio.wait_for(seen, WAIT)
    got = await sub.next_msg(timeout=WAIT)
    assert "traceparent" in got.headers

    send_cb = traced.one("send core.cb")
    process = traced.one("process core.cb")
    assert recording and trace_in_cb == trace_id(send_cb)
    assert process.parent is not None and process.parent.span_id == send_cb.context.span_id
    assert process.attributes is not None
    assert process.attributes["messaging.consumer.group.name"] == "q"
    receive = traced.one("receive core.it")
    assert [link.context.span_id for link in receive.links] == [
        traced.one("send core.it").context.span_id
    ]
    assert receive.attributes is not None
    assert receive.attributes["messaging.message.body.size"] == 2


async def test_tracing_off_leaves_headers_untouched(nats_url: str, traced: Traced) -> None:
    async with jetstream.connect(nats_url) as nc:
        assert nc.tracing is None
        js = nc.jetstream()
        await js.create_stream(StreamConfig(name="OFF", subjects=["off.>"]))
        sub = await nc.subscribe("off.core")
        await nc.flush(WAIT)
        with traced.provider.get_tracer("app").start_as_current_span("app"):
            await nc.publish("off.core", b"x")
            ack = await js.publish("off.js", b"y", headers={"a": "b"})
            fut = await js.publish_async("off.js", b"z")
            await asyncio.wait_for(fut, WAIT)
        core = await sub.next_msg(timeout=WAIT)
        assert core.hdr is None
        raw = await (await js.stream("OFF")).get_msg(ack.seq)
        assert dict(raw.headers or {}) == {"a": "b"}
        raw2 = await (await js.stream("OFF")).get_msg(ack.seq + 1)
        assert not raw2.headers
    assert [s.name for s in traced.spans()] == ["app"]


async def test_trace_headers_carry_the_current_context(traced: Traced) -> None:
    with traced.provider.get_tracer("app").start_as_current_span("driver") as span:
        h = trace_headers()
    sc = span.get_span_context()
    assert h["traceparent"] == f"00-{sc.trace_id:032x}-{sc.span_id:016x}-{int(sc.trace_flags):02x}"
    assert trace_headers() == {}  # no span: nothing to continue


async def test_push_consumer_messages_receive_spans(traced: Traced, tnc: Client) -> None:
    js = tnc.jetstream()
    stream = await js.create_stream(StreamConfig(name="PUSHT", subjects=["pusht"]))
    await js.publish("pusht", b"p")
    cons = await stream.create_consumer(
        ConsumerConfig(durable_name="pushed", deliver_subject=tnc.new_inbox())
    )
    async with cons.messages() as it:
        msg = await it.next(timeout=WAIT)
        await msg.ack()
    receive = traced.one("receive pusht")
    assert [link.context.span_id for link in receive.links] == [
        traced.one("send pusht").context.span_id
    ]
    assert receive.attributes is not None
    assert receive.attributes["messaging.destination.subscription.name"] == "pushed"


GLOBAL_PROVIDER = """
import asyncio, sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
import jetstream

async def main():
    async with jetstream.connect(sys.argv[1], tracing=True) as nc:
        sub = await nc.subscribe("global.t")
        await nc.flush()
        # set after connect: tracing=True follows the global provider when it is set
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        await nc.publish("global.t", b"x")
        msg = await sub.next_msg(timeout=10)
        print(sorted(s.name for s in exporter.get_finished_spans()), "traceparent" in msg.headers)

asyncio.run(main())
"""


async def test_tracing_true_uses_the_global_provider(nats_url: str) -> None:
    # in a process of its own: the global provider can be set once per process
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        GLOBAL_PROVIDER,
        nats_url,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()
    assert out.decode().strip() == "['receive global.t', 'send global.t'] True"
