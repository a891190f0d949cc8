"""The dead-letter pattern of the consumers documentation, against a real server.

A consumer with ``max_deliver`` gives up on a message it delivered that many times and
publishes a MAX_DELIVERIES advisory; ``term()`` publishes a MSG_TERMINATED advisory with
the reason. Either names the stream sequence, so the message can be read back by
sequence, from the stream itself or, for a work queue that already removed it, from a
mirror that keeps messages a while longer.
"""

from __future__ import annotations

import asyncio

import pytest

from jetstream import ConsumerConfig, JetStream, MessageNotFoundError, StreamConfig
from jetstream.advisories import AdvisoryStream, MaxDeliveriesAdvisory, TerminatedAdvisory
from jetstream.api import AckPolicy, RetentionPolicy, StreamSource
from jetstream.errors import TimeoutError

pytestmark = pytest.mark.asyncio


async def test_max_deliveries_advisory_and_the_message(js: JetStream) -> None:
    stream = await js.create_stream(StreamConfig(name="ORDERS", subjects=["orders.>"]))
    consumer = await stream.create_consumer(
        ConsumerConfig(
            durable_name="worker",
            ack_policy=AckPolicy.EXPLICIT,
            max_deliver=2,
            ack_wait=0.5,
        )
    )
    async with js.dead_letters("ORDERS", "worker") as letters:
        assert isinstance(letters, AdvisoryStream)
        await js.publish("orders.new", b"fine")
        await js.publish("orders.new", b"poison", headers={"k": "v"})
        fine = await consumer.next(timeout=5)
        assert fine.data == b"fine"
        await fine.ack()
        # Delivered twice and never acked.
        first = await consumer.next(timeout=5)
        assert first.data == b"poison" and first.metadata.num_delivered == 1
        second = await consumer.next(timeout=10)
        assert second.data == b"poison" and second.metadata.num_delivered == 2
        # No third delivery. (The server notices the limit when it would redeliver,
        # i.e. once a pull is waiting after ack_wait: this pull is what triggers it.)
        with pytest.raises(TimeoutError):
            await consumer.next(timeout=2)

        adv = await letters.next(timeout=15)
        assert isinstance(adv, MaxDeliveriesAdvisory)
        assert adv.stream == "ORDERS" and adv.consumer == "worker"
        assert adv.stream_seq == 2
        assert adv.deliveries == 2
        assert adv.type == "io.nats.jetstream.advisory.v1.max_deliver"
        assert adv.id and adv.timestamp is not None

        msg = await js.dead_letter_message(adv)
        assert msg.seq == 2 and msg.subject == "orders.new"
        assert msg.data == b"poison" and msg.headers.get("k") == "v"

        with pytest.raises(TimeoutError):
            await consumer.next(timeout=1)
        with pytest.raises(TimeoutError):
            await letters.next(timeout=0.5)


async def test_terminated_advisory_carries_the_reason(js: JetStream) -> None:
    stream = await js.create_stream(StreamConfig(name="ORDERS", subjects=["orders.>"]))
    consumer = await stream.create_consumer(
        ConsumerConfig(durable_name="worker", ack_policy=AckPolicy.EXPLICIT, max_deliver=5)
    )
    # Only the terminated kind: a max-deliveries advisory would be skipped.
    async with js.dead_letters("ORDERS", "worker", max_deliveries=False) as letters:
        await js.publish("orders.new", b"first")
        await js.publish("orders.bad", b"{not json")
        ok = await consumer.next(timeout=5)
        await ok.ack()
        bad = await consumer.next(timeout=5)
        assert bad.data == b"{not json"
        await bad.term("bad input")

        adv = await letters.next(timeout=15)
        assert isinstance(adv, TerminatedAdvisory)
        assert adv.stream == "ORDERS" and adv.consumer == "worker"
        assert adv.stream_seq == 2 and adv.consumer_seq == 2
        assert adv.deliveries == 1
        assert adv.reason == "bad input"
        msg = await js.dead_letter_message(adv)
        assert msg.subject == "orders.bad" and msg.data == b"{not json"


async def test_dead_letters_iterates_both_kinds_for_any_consumer(js: JetStream) -> None:
    stream = await js.create_stream(StreamConfig(name="JOBS", subjects=["jobs.>"]))
    a = await stream.create_consumer(ConsumerConfig(durable_name="a", max_deliver=1, ack_wait=0.5))
    b = await stream.create_consumer(ConsumerConfig(durable_name="b"))
    seen: list[MaxDeliveriesAdvisory | TerminatedAdvisory] = []
    async with js.dead_letters() as letters:  # every stream, every consumer
        await js.publish("jobs.1", b"x")
        first = await a.next(timeout=5)  # max_deliver=1: never redelivered
        assert first.metadata.num_delivered == 1
        got_b = await b.next(timeout=5)
        await got_b.term()
        # A pull after ack_wait finds the limit reached: no second delivery.
        assert await a.fetch(1, expires=1.5) == []

        async def collect() -> None:
            async for adv in letters:
                seen.append(adv)
                if len(seen) == 2:
                    return

        await asyncio.wait_for(collect(), 15)
    kinds = {(type(x).__name__, x.consumer) for x in seen}
    assert kinds == {("MaxDeliveriesAdvisory", "a"), ("TerminatedAdvisory", "b")}
    assert all(x.stream == "JOBS" and x.stream_seq == 1 for x in seen)
    term = next(x for x in seen if isinstance(x, TerminatedAdvisory))
    assert term.reason == ""


async def test_dead_letters_needs_a_kind(js: JetStream) -> None:
    with pytest.raises(ValueError, match="ask for max_deliveries, terminated or both"):
        js.dead_letters("S", "C", max_deliveries=False, terminated=False)


async def test_dead_letter_read_from_a_mirror(js: JetStream) -> None:
    # A work queue removes a terminated message at once; a mirror still has it.
    await js.create_stream(
        StreamConfig(name="WQ", subjects=["wq.>"], retention=RetentionPolicy.WORK_QUEUE)
    )
    mirror = await js.create_stream(
        StreamConfig(name="WQ_DLQ", mirror=StreamSource(name="WQ"), max_age=600.0)
    )
    wq = await js.stream("WQ")
    consumer = await wq.create_consumer(ConsumerConfig(durable_name="proc"))
    async with js.dead_letters("WQ", "proc") as letters:
        await js.publish("wq.job", b"payload-1")
        await js.publish("wq.job", b"payload-2")
        deadline = asyncio.get_running_loop().time() + 15
        while (await mirror.info()).state.messages < 2:
            assert asyncio.get_running_loop().time() < deadline, "mirror did not catch up"
            await asyncio.sleep(0.05)

        good = await consumer.next(timeout=5)
        await good.ack()
        bad = await consumer.next(timeout=5)
        await bad.term("cannot process")
        adv = await letters.next(timeout=15)
    assert isinstance(adv, TerminatedAdvisory) and adv.stream_seq == 2

    deadline = asyncio.get_running_loop().time() + 10
    while (await wq.info()).state.messages:
        assert asyncio.get_running_loop().time() < deadline, "work queue kept the message"
        await asyncio.sleep(0.05)
    with pytest.raises(MessageNotFoundError):
        await js.dead_letter_message(adv)
    msg = await js.dead_letter_message(adv, from_stream="WQ_DLQ")
    assert msg.seq == 2 and msg.subject == "wq.job" and msg.data == b"payload-2"
