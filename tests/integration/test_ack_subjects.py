"""The v2 ack and flow-control subjects (server feature flag ``js_ack_fc_v2``).

With the flag on, the server replies with domain- and account-aware subjects:

    $JS.ACK.<domain>.<account hash>.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>
    $JS.FC.<domain>.<account hash>.<stream>.<consumer>.<id>

(``_`` for no domain). The client parses the metadata of both layouts and publishes
acks and flow-control answers to the reply subject unchanged.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio

import jetstream
from jetstream import Client, ConsumerConfig, JetStream, StreamConfig
from jetstream.api import AckPolicy
from jetstream.consumer import PushStream
from jetstream.core.message import Msg
from jetstream.embedded import NatsServer

pytestmark = pytest.mark.asyncio

FEATURE_FLAGS = "feature_flags { js_ack_fc_v2: true }"


@pytest.fixture(scope="module", params=["hub", None], ids=["domain", "no-domain"])
def v2_server(request: pytest.FixtureRequest) -> Iterator[NatsServer]:
    """A server sending v2 ack subjects, with and without a JetStream domain."""
    with NatsServer(domain=request.param, extra_config=FEATURE_FLAGS) as server:
        yield server


@pytest_asyncio.fixture
async def nc(v2_server: NatsServer) -> AsyncIterator[Client]:
    async with jetstream.connect(v2_server.url) as client:
        yield client


@pytest.fixture
def domain(v2_server: NatsServer) -> str:
    return v2_server.domain or ""


async def _fresh_stream(js: JetStream, name: str) -> None:
    # The server is shared by the module: start each test from an empty stream.
    try:
        await js.delete_stream(name)
    except jetstream.StreamNotFoundError:
        pass
    await js.create_stream(StreamConfig(name=name, subjects=[f"{name.lower()}.>"]))


async def test_the_feature_flag_is_on(v2_server: NatsServer) -> None:
    flags = (await v2_server.monitor_async("varz")).get("feature_flags") or {}
    assert flags.get("js_ack_fc_v2") is True


async def test_v2_metadata(js: JetStream, domain: str) -> None:
    await _fresh_stream(js, "META")
    stream = await js.stream("META")
    for i in range(3):
        await js.publish(f"meta.{i}", str(i).encode())
    consumer = await stream.create_consumer(ConsumerConfig(durable_name="reader"))
    msgs = await consumer.fetch(3, expires=5)
    assert len(msgs) == 3
    now = dt.datetime.now(dt.UTC)
    for i, msg in enumerate(msgs, start=1):
        assert msg.reply is not None
        tokens = msg.reply.split(".")
        assert len(tokens) >= 11, msg.reply
        assert tokens[:2] == ["$JS", "ACK"]
        assert tokens[2] == (domain or "_")
        assert tokens[4:6] == ["META", "reader"]
        meta = msg.metadata
        assert meta.stream == "META" and meta.consumer == "reader"
        assert meta.domain == domain
        assert meta.sequence.stream == i and meta.sequence.consumer == i
        assert meta.num_delivered == 1
        assert meta.num_pending == 3 - i
        stored = await stream.get_msg(i)
        assert abs(meta.timestamp - stored.time) < dt.timedelta(milliseconds=1)
        assert abs(now - meta.timestamp) < dt.timedelta(minutes=5)
        await msg.ack()


async def test_acks_on_v2_subjects(js: JetStream) -> None:
    await _fresh_stream(js, "ACKS")
    stream = await js.stream("ACKS")
    for name in ("a", "b", "c", "d"):
        await js.publish(f"acks.{name}", name.encode())
    consumer = await stream.create_consumer(
        ConsumerConfig(durable_name="acker", ack_policy=AckPolicy.EXPLICIT, ack_wait=30.0)
    )
    a, b, c, d = await consumer.fetch(4, expires=5)
    assert all(len(m.reply.split(".")) >= 11 for m in (a, b, c, d) if m.reply)
    await a.ack()
    await b.ack_sync()
    await c.nak()
    await d.term("not wanted")

    again = await consumer.next(timeout=10)
    assert again.data == b"c"
    assert again.metadata.num_delivered == 2
    assert again.metadata.sequence.stream == 3
    assert again.reply is not None and len(again.reply.split(".")) >= 11
    await again.ack_sync()

    assert await consumer.fetch(1, expires=1.5) == []  # d was terminated
    info = await consumer.info()
    assert info.num_ack_pending == 0
    assert info.ack_floor.stream_seq == 4


async def test_in_progress_on_v2_subjects(js: JetStream) -> None:
    await _fresh_stream(js, "WPI")
    stream = await js.stream("WPI")
    await js.publish("wpi.1", b"slow work")
    consumer = await stream.create_consumer(ConsumerConfig(durable_name="worker", ack_wait=2.0))
    msg = await consumer.next(timeout=5)
    # A second pull waits meanwhile: it would get the message if ack_wait ran out.
    other = asyncio.create_task(consumer.fetch(1, expires=4))
    for _ in range(6):  # 3 s of work, well past ack_wait, kept alive every 0.5 s
        await asyncio.sleep(0.5)
        await msg.in_progress()
    await msg.ack_sync()
    assert await other == []
    info = await consumer.info()
    assert info.num_redelivered == 0
    assert info.ack_floor.stream_seq == 1


async def test_push_flow_control_on_v2_subjects(nc: Client, js: JetStream, domain: str) -> None:
    total = 3000
    await _fresh_stream(js, "FLOW")
    stream = await js.stream("FLOW")
    futures = [await js.publish_async("flow.x", b"y" * 1024) for _ in range(total)]
    await asyncio.gather(*futures)
    inbox = nc.new_inbox()
    consumer = await stream.create_consumer(
        ConsumerConfig(
            durable_name="pusher",
            deliver_subject=inbox,
            flow_control=True,
            idle_heartbeat=1.0,
            max_ack_pending=10 * total,
            ack_wait=120.0,
        )
    )
    control: list[Msg] = []
    it = consumer.messages()
    assert isinstance(it, PushStream)
    async with it:
        asked = asyncio.Event()

        def on_control(m: Msg) -> None:
            if m.status:
                control.append(m)
                if m.reply:
                    asked.set()

        spy = await nc.subscribe(inbox, cb=on_control)
        try:
            await asyncio.wait_for(asked.wait(), 20)  # the server waits for a flow-control answer
            seqs = []
            for _ in range(total):
                msg = await it.next(timeout=20)
                seqs.append(msg.metadata.sequence.stream)
                assert msg.metadata.domain == domain
                await msg.ack()
        finally:
            await spy.unsubscribe()
    assert seqs == list(range(1, total + 1))
    fc = [m.reply for m in control if m.reply]
    assert fc, "the server never asked for flow control"
    for reply in fc:
        tokens = reply.split(".")
        assert len(tokens) == 7, reply
        assert tokens[:3] == ["$JS", "FC", domain or "_"]
        assert tokens[4:6] == ["FLOW", "pusher"]
    await consumer.delete()


async def test_ordered_consumer_on_v2_subjects(js: JetStream) -> None:
    # The ordered consumer reads the consumer sequence from the v2 layout and, after a
    # reset, starts the new consumer after the stream sequence of the v2 reply.
    await _fresh_stream(js, "ORD")
    stream = await js.stream("ORD")
    for i in range(40):
        await js.publish("ord.x", str(i).encode())
    oc = await stream.ordered_consumer()
    got: list[int] = []
    async with oc.messages(max_messages=10, expires=2, heartbeat=0.5) as it:
        async with asyncio.timeout(60):
            async for msg in it:
                assert msg.reply is not None and len(msg.reply.split(".")) >= 11
                got.append(int(msg.data))
                assert oc.stream_seq == len(got)
                if len(got) == 20:
                    assert oc.consumer is not None
                    await stream.delete_consumer(oc.consumer.name)
                if len(got) == 40:
                    break
    assert got == list(range(40))
    assert oc.resets >= 1
