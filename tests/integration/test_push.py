"""Push consumers against a real server: deliver subjects, deliver groups, flow control,
idle heartbeats, binding to an existing durable, and ``consume(handler)``.

Push consumers are what the consumers documentation calls the "push" side: the server
sends to the consumer's ``deliver_subject``, and a ``deliver_group`` spreads the messages
over the subscribers of that queue group like a pull consumer spreads them over fetchers.
"""

from __future__ import annotations

import asyncio

import pytest

import jetstream
from jetstream import Client, ConsumerConfig, JetStream, StreamConfig
from jetstream.api import AckPolicy
from jetstream.consumer import PushStream
from jetstream.core.message import Msg
from jetstream.embedded import NatsServer
from jetstream.errors import NoHeartbeatError, TimeoutError
from jetstream.message import JsMsg
from jetstream.stream import Stream
from tests.integration._consumer import eventually

pytestmark = pytest.mark.asyncio


async def _stream(js: JetStream, name: str = "PUSH") -> Stream:
    return await js.create_stream(StreamConfig(name=name, subjects=[f"{name.lower()}.>"]))


async def _publish(js: JetStream, subject: str, count: int, payload: bytes = b"") -> None:
    futures = [await js.publish_async(subject, payload or str(i).encode()) for i in range(count)]
    acks = await asyncio.gather(*futures)
    assert len({a.seq for a in acks}) == count


def _push(it: object) -> PushStream:
    assert isinstance(it, PushStream), f"expected a PushStream, got {type(it).__name__}"
    return it


async def test_push_consumer_on_an_inbox(nc: Client, js: JetStream) -> None:
    stream = await _stream(js)
    await _publish(js, "push.a", 10)
    consumer = await stream.create_consumer(
        ConsumerConfig(deliver_subject=nc.new_inbox(), ack_policy=AckPolicy.EXPLICIT)
    )
    assert consumer.is_push
    async with _push(consumer.messages()) as it:
        got: list[JsMsg] = []
        while len(got) < 10:
            got.append(await it.next(timeout=10))
        for i, msg in enumerate(got, start=1):
            assert msg.subject == "push.a"
            assert msg.data == str(i - 1).encode()
            meta = msg.metadata
            assert meta.stream == "PUSH" and meta.consumer == consumer.name
            assert meta.sequence.stream == i and meta.sequence.consumer == i
            assert meta.num_delivered == 1
            assert meta.num_pending == 10 - i
            if i < 10:
                await msg.ack()
            else:
                await msg.ack_sync()  # confirmed, and after the others on the wire
        info = await consumer.info()
        assert info.num_ack_pending == 0
        assert info.ack_floor.stream_seq == 10
        # Nothing more: a timeout, not a heartbeat or anything else.
        with pytest.raises(TimeoutError):
            await it.next(timeout=0.5)


async def test_deliver_group_splits_messages_between_three_subscribers(
    nc: Client, js: JetStream
) -> None:
    stream = await _stream(js)
    consumer = await stream.create_consumer(
        ConsumerConfig(
            durable_name="workers",
            deliver_subject=nc.new_inbox(),
            deliver_group="workers",
            ack_policy=AckPolicy.EXPLICIT,
        )
    )
    streams = [_push(consumer.messages()) for _ in range(3)]
    for s in streams:
        assert s.queue == "workers"
        await s.__aenter__()
    try:
        await nc.flush()  # all three queue subscriptions are known to the server
        await _publish(js, "push.work", 300)
        got: list[list[int]] = [[], [], []]
        done = asyncio.Event()

        async def worker(k: int, it: PushStream) -> None:
            async for msg in it:
                got[k].append(msg.metadata.sequence.stream)
                await msg.ack()
                if sum(map(len, got)) >= 300:
                    done.set()

        tasks = [asyncio.create_task(worker(k, s)) for k, s in enumerate(streams)]
        try:
            await asyncio.wait_for(done.wait(), 30)
            await asyncio.sleep(0.3)  # a duplicate would show up now
        finally:
            for s in streams:
                s.stop()
            await asyncio.gather(*tasks)
    finally:
        for s in streams:
            await s.__aexit__(None, None, None)
    every = [seq for part in got for seq in part]
    assert sorted(every) == list(range(1, 301)), "lost or duplicated messages"
    assert all(part for part in got), f"a subscriber got nothing: {[len(p) for p in got]}"
    for part in got:
        assert part == sorted(part)  # each subscriber sees its share in stream order
    await eventually(consumer, lambda i: i.num_ack_pending == 0 and i.num_pending == 0)


async def test_flow_control_with_a_slow_reader(nc: Client, js: JetStream) -> None:
    total = 5000
    stream = await _stream(js)
    await _publish(js, "push.big", total, b"x" * 1024)
    inbox = nc.new_inbox()
    consumer = await stream.create_consumer(
        ConsumerConfig(
            deliver_subject=inbox,
            flow_control=True,
            idle_heartbeat=1.0,
            max_ack_pending=20 * total,
            ack_wait=120.0,
        )
    )
    control: list[Msg] = []
    async with _push(consumer.messages()) as it:
        # A plain subscription on the same subject sees the control messages too.
        asked = asyncio.Event()

        def on_control(m: Msg) -> None:
            if m.status:
                control.append(m)
                if m.reply and m.reply.startswith("$JS.FC."):
                    asked.set()

        spy = await nc.subscribe(inbox, cb=on_control)
        try:
            # The reader takes nothing: once the server asks for flow control it must wait
            # for the answer instead of pushing the whole stream into the buffer.
            await asyncio.wait_for(asked.wait(), 20)
            await nc.flush()  # what the server sent before it asked has come
            held_back = it.pending
            seqs: list[int] = []
            while len(seqs) < total:
                msg = await it.next(timeout=20)  # a stalled server ends the test here
                seqs.append(msg.metadata.sequence.stream)
                assert msg.metadata.num_delivered == 1
                assert len(msg.data) == 1024
                await msg.ack()
                if len(seqs) % 250 == 0:
                    await asyncio.sleep(0.05)  # slow
        finally:
            await spy.unsubscribe()
    assert seqs == list(range(1, total + 1)), "lost, duplicated or reordered messages"
    assert held_back < total * 0.6, f"flow control did not hold the server back: {held_back}"
    fc = [m for m in control if m.reply and m.reply.startswith("$JS.FC.")]
    assert fc, "the server never asked for flow control"
    assert all(m.status == 100 for m in control)


async def test_heartbeats_never_reach_user_code(nc: Client, js: JetStream) -> None:
    stream = await _stream(js)
    await _publish(js, "push.hb", 3)
    inbox = nc.new_inbox()
    consumer = await stream.create_consumer(
        ConsumerConfig(deliver_subject=inbox, idle_heartbeat=0.5)
    )
    heartbeats: list[Msg] = []
    errors: list[BaseException] = []
    async with _push(consumer.messages(error_cb=errors.append)) as it:
        spy = await nc.subscribe(inbox, cb=lambda m: heartbeats.append(m) if m.status else None)
        try:
            for i in range(3):
                msg = await it.next(timeout=10)
                assert msg.data == str(i).encode()
                await msg.ack()
            with pytest.raises(TimeoutError):
                await it.next(timeout=2.5)
            # several came meanwhile, unless the server was held up
            async with asyncio.timeout(10):
                while not heartbeats:
                    await asyncio.sleep(0.05)
        finally:
            await spy.unsubscribe()
        assert it.pending == 0
    assert heartbeats, "the server sent no heartbeat"
    assert all(m.status == 100 and "Heartbeat" in m.description for m in heartbeats)
    assert errors == []


async def test_missed_heartbeats_are_reported(nats_server: NatsServer) -> None:
    async with jetstream.connect(nats_server.url) as nc:
        js = nc.jetstream()
        stream = await _stream(js)
        consumer = await stream.create_consumer(
            ConsumerConfig(deliver_subject=nc.new_inbox(), idle_heartbeat=0.5)
        )
        errors: list[BaseException] = []
        reported = asyncio.Event()

        def on_error(exc: BaseException) -> None:
            errors.append(exc)
            reported.set()

        beats = asyncio.Event()
        seen: list[Msg] = []

        def on_beat(m: Msg) -> None:
            if m.status == 100:
                seen.append(m)
                if len(seen) >= 3:
                    beats.set()

        async with _push(consumer.messages(error_cb=on_error)) as it:
            spy = await nc.subscribe(consumer.cached_info.config.deliver_subject, cb=on_beat)
            await asyncio.wait_for(beats.wait(), 15)  # heartbeats flow: nothing to report
            await spy.unsubscribe()
            assert errors == []
            nats_server.pause()
            try:
                await asyncio.wait_for(reported.wait(), 15)
            finally:
                nats_server.resume()
            assert isinstance(errors[0], NoHeartbeatError)
            assert consumer.name in str(errors[0])
            # The stream goes on once the server is back.
            await js.publish("push.after", b"back")
            msg = await it.next(timeout=15)
            assert msg.data == b"back"
            await msg.ack()


async def test_bind_to_an_existing_durable_push_consumer(nats_url: str) -> None:
    async with jetstream.connect(nats_url) as admin:
        ajs = admin.jetstream()
        stream = await _stream(ajs)
        await stream.create_consumer(
            ConsumerConfig(durable_name="pushd", deliver_subject="deliver.pushd")
        )
        await _publish(ajs, "push.bind", 5)
    async with jetstream.connect(nats_url) as nc:
        js = nc.jetstream()
        consumer = await (await js.stream("PUSH")).consumer("pushd")
        assert consumer.is_push and consumer.name == "pushd"
        async with _push(consumer.messages()) as it:
            assert it.subject == "deliver.pushd"
            for i in range(5):
                msg = await it.next(timeout=10)
                assert msg.data == str(i).encode()
                assert msg.metadata.consumer == "pushd"
                await msg.ack_sync()
        info = await consumer.info()
        assert info.ack_floor.stream_seq == 5 and info.num_pending == 0


async def test_consume_handler_on_a_push_consumer(nc: Client, js: JetStream) -> None:
    stream = await _stream(js)
    consumer = await stream.create_consumer(
        ConsumerConfig(durable_name="handler", deliver_subject=nc.new_inbox())
    )
    seen: list[bytes] = []
    done = asyncio.Event()

    async def handler(msg: JsMsg) -> None:
        seen.append(msg.data)
        await msg.ack()
        if len(seen) == 20:
            done.set()

    errors: list[BaseException] = []
    async with await consumer.consume(handler, error_cb=errors.append) as ctx:
        await nc.flush()
        await _publish(js, "push.handled", 20)
        await asyncio.wait_for(done.wait(), 15)
        running = not ctx.closed
    assert running and ctx.closed
    assert seen == [str(i).encode() for i in range(20)]
    assert errors == []
    await eventually(consumer, lambda i: i.num_ack_pending == 0 and i.num_pending == 0)
