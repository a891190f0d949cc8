"""Priority groups of pull consumers (ADR-42) and CONSUMER.RESET, against a real server.

- ``overflow``: a pull with ``min_pending=N`` (or ``min_ack_pending``) is served only
  while the consumer has at least that many messages pending;
- ``pinned_client``: one client of the group gets everything; it carries the
  ``Nats-Pin-Id`` the server gave it on its later pulls; after an unpin, pulls with
  the old id get a 423 status that the client handles by pulling without it;
- ``prioritized``: among waiting pulls the lowest ``priority`` value is served first.
"""

from __future__ import annotations

import asyncio

import pytest
import pytest_asyncio

import jetstream
from jetstream import Client, ConsumerConfig, JetStream, StreamConfig
from jetstream.api import PriorityPolicy
from jetstream.consumer import Consumer, MessageStream
from jetstream.core.message import Msg
from jetstream.message import JsMsg
from jetstream.stream import Stream
from tests.integration._consumer import eventually

pytestmark = pytest.mark.asyncio

PIN = "Nats-Pin-Id"


@pytest_asyncio.fixture
async def stream(js: JetStream) -> Stream:
    return await js.create_stream(StreamConfig(name="PRIO", subjects=["prio.>"]))


async def _publish(js: JetStream, count: int, start: int = 0) -> None:
    for i in range(start, start + count):
        await js.publish("prio.job", str(i).encode())


def _pull(it: object) -> MessageStream:
    assert isinstance(it, MessageStream)
    return it


def _data(msgs: list[JsMsg]) -> list[int]:
    return [int(m.data) for m in msgs]


# --------------------------------------------------------------------------- overflow


async def test_overflow_min_pending(js: JetStream, stream: Stream) -> None:
    consumer = await stream.create_consumer(
        ConsumerConfig(
            durable_name="overflow",
            priority_groups=["A"],
            priority_policy=PriorityPolicy.OVERFLOW,
        )
    )
    await _publish(js, 5)
    # 5 pending < 10: the pull waits and ends empty.
    assert await consumer.fetch(1, group="A", min_pending=10, expires=1.5) == []
    # A pull without the condition is served at once.
    first = await consumer.fetch(1, group="A", expires=5)
    assert _data(first) == [0]
    await first[0].ack()

    # A waiting overflow pull is served once num_pending reaches the minimum.
    waiting = asyncio.create_task(consumer.fetch(2, group="A", min_pending=10, expires=10))
    await eventually(consumer, lambda i: i.num_waiting == 1)
    await _publish(js, 3, start=5)  # 7 pending: still not enough
    await asyncio.sleep(0.5)
    assert not waiting.done()
    await _publish(js, 4, start=8)  # 11 pending
    got = await asyncio.wait_for(waiting, 15)
    assert _data(got) == [1, 2]
    for m in got:
        await m.ack_sync()

    # min_ack_pending: served only while enough messages await their ack.
    assert await consumer.fetch(1, group="A", min_ack_pending=3, expires=1.5) == []
    unacked = await consumer.fetch(3, group="A", expires=5)
    assert _data(unacked) == [3, 4, 5]
    more = await consumer.fetch(1, group="A", min_ack_pending=3, expires=5)
    assert _data(more) == [6]


async def test_overflow_message_stream_with_min_pending(js: JetStream, stream: Stream) -> None:
    consumer = await stream.create_consumer(
        ConsumerConfig(
            durable_name="overflow_stream",
            priority_groups=["A"],
            priority_policy=PriorityPolicy.OVERFLOW,
        )
    )
    await _publish(js, 3)
    errors: list[BaseException] = []
    async with _pull(
        consumer.messages(
            group="A", min_pending=5, max_messages=1, expires=2, error_cb=errors.append
        )
    ) as it:
        with pytest.raises(jetstream.errors.TimeoutError):
            await it.next(timeout=2.5)
        await _publish(js, 3, start=3)  # 6 pending
        msg = await it.next(timeout=10)
        assert int(msg.data) == 0 and msg.metadata.num_pending >= 4
        await msg.ack()
    assert errors == []


# --------------------------------------------------------------------------- pinned_client


async def _pinned_consumer(stream: Stream, name: str) -> Consumer:
    return await stream.create_consumer(
        ConsumerConfig(
            durable_name=name,
            priority_groups=["A"],
            priority_policy=PriorityPolicy.PINNED_CLIENT,
            priority_timeout=120.0,  # no switch by timeout during the test
        )
    )


async def test_pinned_client_message_streams(nc: Client, js: JetStream, stream: Stream) -> None:
    await _pinned_consumer(stream, "pinned")
    # Two clients of the group: two handles, two message streams.
    c1 = await stream.consumer("pinned")
    c2 = await stream.consumer("pinned")
    errors: list[BaseException] = []
    got: dict[int, list[JsMsg]] = {1: [], 2: []}
    statuses: list[Msg] = []
    s1 = _pull(c1.messages(group="A", max_messages=4, expires=10, error_cb=errors.append))
    s2 = _pull(c2.messages(group="A", max_messages=4, expires=10, error_cb=errors.append))

    async def read(k: int, it: MessageStream) -> None:
        async for msg in it:
            got[k].append(msg)
            await msg.ack()

    async with s1, s2:
        # What the server sends to each inbox, status messages included.
        spies = [
            await nc.subscribe(s.subject, cb=lambda m: statuses.append(m) if m.status else None)
            for s in (s1, s2)
        ]
        tasks = [asyncio.create_task(read(1, s1)), asyncio.create_task(read(2, s2))]
        try:
            await eventually(c1, lambda i: i.num_waiting >= 2)
            await _publish(js, 20)
            await eventually(c1, lambda i: i.ack_floor.stream_seq == 20)
            await asyncio.sleep(0.3)
            # Only the pinned one received, all 20 over several pulls: it carried the pin.
            pinned, other = (1, 2) if got[1] else (2, 1)
            assert len(got[pinned]) == 20 and got[other] == []
            pin_ids = {m.headers.get(PIN) for m in got[pinned]}
            assert len(pin_ids) == 1 and None not in pin_ids
            (old_pin,) = pin_ids
            info = await c1.info()
            assert [g.group for g in info.priority_groups] == ["A"]
            assert info.priority_groups[0].pinned_client_id == old_pin

            # Unpin: the old pin id is refused with 423 (handled inside the stream), a
            # new client is pinned with a new id, and nothing surfaces to user code.
            await c1.unpin("A")
            await _publish(js, 20, start=20)
            await eventually(c1, lambda i: i.ack_floor.stream_seq == 40)
            await asyncio.sleep(0.3)
            later = [m for k in (1, 2) for m in got[k] if int(m.data) >= 20]
            assert sorted(_data(later)) == list(range(20, 40))
            new_pins = {m.headers.get(PIN) for m in later}
            assert len(new_pins) == 1 and None not in new_pins and old_pin not in new_pins
            # Everything after the unpin went to one client.
            assert sum(1 for k in (1, 2) if any(int(m.data) >= 20 for m in got[k])) == 1
            assert any(m.status == 423 for m in statuses), "no stale pin was refused"
            assert errors == []
            info = await c1.info()
            assert info.priority_groups[0].pinned_client_id in new_pins
        finally:
            s1.stop()
            s2.stop()
            await asyncio.gather(*tasks)
            for spy in spies:
                await spy.unsubscribe()
    assert all(len(set(_data(got[k]))) == len(got[k]) for k in (1, 2))


async def test_pinned_client_fetches_carry_the_pin(js: JetStream, stream: Stream) -> None:
    await _pinned_consumer(stream, "pinned_fetch")
    c1 = await stream.consumer("pinned_fetch")
    c2 = await stream.consumer("pinned_fetch")
    await _publish(js, 12)

    first = await c1.fetch(3, group="A", expires=5)
    assert _data(first) == [0, 1, 2]
    pin = first[0].headers.get(PIN)
    assert pin and all(m.headers.get(PIN) == pin for m in first)

    # The other client is not served while c1 holds the pin.
    assert await c2.fetch(1, group="A", expires=1.5) == []

    # The same handle pulls again with its pin id and is served (Go's jetstream keeps
    # the pin on the consumer; a fresh fetch must not forget it).
    second = await c1.fetch(3, group="A", expires=5)
    assert _data(second) == [3, 4, 5]
    assert all(m.headers.get(PIN) == pin for m in second)

    # After an unpin, c1's pin is stale: its next pull gets the 423 status, which must not
    # raise; at the latest the pull after that is served with a new pin id.
    await c1.unpin("A")
    third = await c1.fetch(3, group="A", expires=3)
    if not third:
        third = await c1.fetch(3, group="A", expires=5)
    assert _data(third) == [6, 7, 8]
    new_pin = third[0].headers.get(PIN)
    assert new_pin and new_pin != pin
    for m in first + second + third:
        await m.ack()


# --------------------------------------------------------------------------- prioritized


async def test_prioritized_lower_value_is_served_first(js: JetStream, stream: Stream) -> None:
    consumer = await stream.create_consumer(
        ConsumerConfig(
            durable_name="prioritized",
            priority_groups=["A"],
            priority_policy=PriorityPolicy.PRIORITIZED,
        )
    )
    # The low-priority pull waits first, the high-priority one arrives after it.
    low = asyncio.create_task(consumer.fetch(2, group="A", priority=5, expires=8))
    await eventually(consumer, lambda i: i.num_waiting == 1)
    high = asyncio.create_task(consumer.fetch(5, group="A", priority=1, expires=8))
    await eventually(consumer, lambda i: i.num_waiting == 2)

    await _publish(js, 5)
    got_high = await asyncio.wait_for(high, 15)
    assert _data(got_high) == [0, 1, 2, 3, 4]
    assert not low.done()
    # With the high-priority pull gone, the low one is served.
    await _publish(js, 2, start=5)
    got_low = await asyncio.wait_for(low, 15)
    assert _data(got_low) == [5, 6]
    for m in got_high + got_low:
        await m.ack()


# --------------------------------------------------------------------------- reset


async def test_reset_redelivers_from_a_sequence(js: JetStream, stream: Stream) -> None:
    consumer = await stream.create_consumer(ConsumerConfig(durable_name="resettable"))
    await _publish(js, 5)
    msgs = await consumer.fetch(5, expires=5)
    assert _data(msgs) == [0, 1, 2, 3, 4]
    for m in msgs:
        await m.ack_sync()
    info = await consumer.info()
    assert info.ack_floor.stream_seq == 5 and info.num_pending == 0
    assert await consumer.fetch_no_wait(5) == []

    reset = await consumer.reset(1)
    assert reset.reset_seq == 1
    assert reset.num_pending == 5
    again = await consumer.fetch(5, expires=5)
    assert [m.metadata.sequence.stream for m in again] == [1, 2, 3, 4, 5]
    for m in again:
        await m.ack_sync()

    reset = await consumer.reset(4)
    assert reset.reset_seq == 4
    tail = await consumer.fetch(5, expires=2)
    assert [m.metadata.sequence.stream for m in tail] == [4, 5]
    for m in tail:
        await m.ack()
