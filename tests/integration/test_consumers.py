"""Consumers against a real server: management, pulls, every kind of ack, the seed demo."""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest
import pytest_asyncio

import jetstream
from jetstream import (
    AckPolicy,
    Client,
    ConsumerConfig,
    ConsumerNotFoundError,
    DeliverPolicy,
    JetStream,
    MsgAlreadyAckedError,
    Stream,
    StreamConfig,
)
from jetstream.demo import confirmed_ack
from jetstream.errors import BadNameError, ConsumerDoesNotExistError, ConsumerExistsError
from tests.integration._consumer import eventually

pytestmark = pytest.mark.asyncio


@pytest_asyncio.fixture
async def stream(js: JetStream) -> Stream:
    s = await js.create_stream(StreamConfig(name="S", subjects=["s.>"]))
    for i in range(10):
        await js.publish(f"s.{i % 2}", str(i).encode())
    return s


async def test_confirmed_ack_demo_table(nc: Client) -> None:
    lines: list[str] = []
    table = await confirmed_ack(nc, out=lines.append)
    c1, c2 = table["Consumer 1"], table["Consumer 2"]
    assert c1[0] == ("Start", 2, 0)
    assert c1[1] == ("After received but before ack", 1, 1)
    assert c1[2][0:2] == ("After ack", 1)  # a plain ack may not be processed yet
    assert c2 == [
        ("Start", 2, 0),
        ("After received but before ack", 1, 1),
        ("After ack", 1, 0),
    ]
    assert lines[0] == "Consumer 1"
    assert lines[-1] == "    # messages with ack pending: 0"


async def test_ack_sync_is_confirmed_every_time(js: JetStream) -> None:
    s = await js.create_stream(StreamConfig(name="ACKS", subjects=["acks"]))
    for _ in range(50):
        await js.publish("acks", b"x")
    consumer = await s.create_consumer(ConsumerConfig(durable_name="c"))
    for i in range(50):
        msg = await consumer.next(timeout=5)
        await msg.ack_sync(timeout=5)
        info = await consumer.info()
        assert info.num_ack_pending == 0, f"repetition {i}"
        assert info.num_pending == 49 - i


async def test_an_ack_the_server_no_longer_counts_says_so(js: JetStream) -> None:
    """A consumer made again under the same name (as a server back from a kill -9 may
    hold its consumer's state of a moment before) ignores the ack of a delivery it does
    not count, without an answer: the timeout says what that means, and the message
    comes again."""
    s = await js.create_stream(StreamConfig(name="FORGOT", subjects=["forgot"]))
    await js.publish("forgot", b"x")
    config = ConsumerConfig(durable_name="f", ack_wait=60)
    consumer = await s.create_consumer(config)
    msg = await consumer.next(timeout=5)
    await s.delete_consumer("f")
    consumer = await s.create_consumer(config)
    with pytest.raises(jetstream.TimeoutError, match="may no longer count that delivery"):
        await msg.ack_sync(timeout=1)
    assert not msg.acked
    again = await consumer.next(timeout=5)
    assert again.data == b"x" and again.metadata.num_delivered == 1
    await again.ack_sync(timeout=5)


async def test_consumer_management(stream: Stream) -> None:
    durable = await stream.create_consumer(
        ConsumerConfig(
            durable_name="dur",
            description="d",
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=3,
            ack_wait=7.5,
            max_deliver=4,
            backoff=[1, 2],
            filter_subjects=["s.0", "s.1"],
            max_waiting=16,
            max_ack_pending=100,
            max_batch=50,
            max_expires=60,
            max_bytes=1 << 20,
            metadata={"owner": "tests"},
            headers_only=False,
        )
    )
    cfg = durable.cached_info.config
    # with a backoff list the server takes ack_wait from its first step
    assert cfg.ack_wait == 1.0 and list(cfg.backoff) == [1.0, 2.0]  # type: ignore[arg-type]
    assert cfg.filter_subjects == ["s.0", "s.1"] and cfg.max_expires == 60
    assert cfg.metadata is not None and cfg.metadata.get("owner") == "tests"
    assert durable.cached_info.num_pending == 8
    with pytest.raises(ConsumerExistsError):
        await stream.create_consumer(ConsumerConfig(durable_name="dur", max_deliver=9))
    updated = await stream.update_consumer(
        ConsumerConfig(
            durable_name="dur",
            description="changed",
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=3,
            ack_wait=7.5,
            max_deliver=4,
            backoff=[1, 2],
            filter_subjects=["s.0", "s.1"],
            max_waiting=16,
            max_ack_pending=100,
            max_batch=50,
            max_expires=60,
            max_bytes=1 << 20,
        )
    )
    assert updated.cached_info.config.description == "changed"
    with pytest.raises(ConsumerDoesNotExistError):
        await stream.update_consumer(ConsumerConfig(durable_name="nope"))
    eph = await stream.create_or_update_consumer(ConsumerConfig(inactive_threshold=30))
    assert eph.name and not eph.cached_info.config.durable_name
    assert eph.cached_info.config.inactive_threshold == 30
    names = sorted([n async for n in stream.consumer_names()])
    assert names == sorted(["dur", eph.name])
    infos = [c.name async for c in stream.consumers()]
    assert sorted(infos) == names
    got = await stream.consumer("dur")
    assert got.cached_info.config.description == "changed"
    assert await stream.delete_consumer("dur")
    with pytest.raises(ConsumerNotFoundError):
        await stream.consumer("dur")
    with pytest.raises(BadNameError):
        await stream.create_consumer(ConsumerConfig(durable_name="a.b"))


async def test_consumer_listing_walks_pages(stream: Stream) -> None:
    await asyncio.gather(
        *(stream.create_consumer(ConsumerConfig(durable_name=f"c{i:03d}")) for i in range(300))
    )
    assert len([n async for n in stream.consumer_names()]) == 300
    assert len([c async for c in stream.consumers()]) == 300


async def test_pause_and_resume(stream: Stream) -> None:
    c = await stream.create_consumer(ConsumerConfig(durable_name="p"))
    until = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
    resp = await c.pause(until)
    assert resp.paused
    assert await c.fetch_no_wait(5) == []
    resp = await c.resume()
    assert not resp.paused
    assert len(await c.fetch(5, expires=5)) == 5


async def test_ephemeral_consumer_goes_away(stream: Stream) -> None:
    eph = await stream.create_consumer(ConsumerConfig(inactive_threshold=0.5))
    # it is there first, with the threshold asked for
    assert (await eph.info()).config.inactive_threshold == 0.5
    async with asyncio.timeout(30):
        while True:
            try:
                await eph.info()
            except ConsumerNotFoundError:
                break
            await asyncio.sleep(0.25)


async def test_next_fetch_and_fetch_no_wait(stream: Stream) -> None:
    c = await stream.create_consumer(ConsumerConfig(durable_name="f"))
    first = await c.next(timeout=5)
    assert first.data == b"0" and first.subject == "s.0"
    md = first.metadata
    assert (md.stream, md.consumer) == ("S", "f")
    assert (md.sequence.stream, md.sequence.consumer, md.num_delivered) == (1, 1, 1)
    assert md.num_pending == 9
    assert abs((md.timestamp - dt.datetime.now(dt.UTC)).total_seconds()) < 60
    await first.ack()
    batch = await c.fetch(4, expires=5)
    assert [m.data for m in batch] == [b"1", b"2", b"3", b"4"]
    for m in batch:
        await m.ack()
    # fewer than asked: returns when the request expires, with what there is
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    rest = await c.fetch(100, expires=1)
    assert [m.data for m in rest] == [b"5", b"6", b"7", b"8", b"9"]
    assert loop.time() - t0 >= 0.9
    for m in rest:
        await m.ack()
    assert await c.fetch_no_wait(10) == []
    with pytest.raises(jetstream.TimeoutError):
        await c.next(timeout=0.5)


async def test_fetch_max_bytes(js: JetStream) -> None:
    s = await js.create_stream(StreamConfig(name="MB", subjects=["mb"]))
    for _ in range(10):
        await js.publish("mb", b"x" * 1000)
    c = await s.create_consumer(ConsumerConfig(durable_name="mb"))
    got = await c.fetch(10, max_bytes=3500, expires=2)
    assert 1 <= len(got) <= 3


async def test_cancelled_next_and_fetch_leave_nothing_behind(stream: Stream, nc: Client) -> None:
    c = await stream.create_consumer(ConsumerConfig(durable_name="x", filter_subject="s.none"))
    before = nc.subscription_count
    for coro in (c.next(timeout=30), c.fetch(10, expires=30)):
        task = asyncio.create_task(coro)
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    await nc.flush()
    assert nc.subscription_count == before
    # and the consumer still works
    await stream.js.publish("s.none", b"late")
    assert (await c.next(timeout=5)).data == b"late"


async def test_double_ack_raises_and_sends_nothing(stream: Stream, nc: Client) -> None:
    c = await stream.create_consumer(ConsumerConfig(durable_name="d"))
    msg = await c.next(timeout=5)
    await msg.ack()
    out = nc.stats.out_msgs
    for again in (msg.ack(), msg.nak(), msg.term(), msg.ack_sync()):
        with pytest.raises(MsgAlreadyAckedError):
            await again
    assert nc.stats.out_msgs == out
    assert msg.acked


async def test_acks_of_a_batch_land_and_refusals_send_nothing(
    stream: Stream, nc: Client, nats_url: str
) -> None:
    """Plain acks go into the write buffer: a batch of them reaches the server (nothing
    left pending); an ack that cannot be sent (no reply subject, a closed client)
    raises and leaves the message unacknowledged."""
    for i in range(20):
        await stream.js.publish("s.batch", b"%d" % i)
    c = await stream.create_consumer(ConsumerConfig(durable_name="ab", filter_subject="s.batch"))
    msgs = await c.fetch(20, expires=5)
    assert len(msgs) == 20
    out = nc.stats.out_msgs
    for m in msgs:
        await m.ack()
    assert nc.stats.out_msgs == out + 20
    assert all(m.acked for m in msgs)
    await nc.flush()
    info = await eventually(c, lambda i: i.num_ack_pending == 0)  # plain acks: awaited
    assert info.num_ack_pending == 0 and info.num_pending == 0
    bare = nc.msg_class(jetstream.JsMsg)("s.batch", 0, None, b"x")
    with pytest.raises(jetstream.NatsError, match="no reply subject"):
        await bare.ack()
    assert not bare.acked
    other = await jetstream.connect(nats_url)
    await stream.js.publish("s.batch", b"late")
    late = await (await other.jetstream().stream(stream.name)).consumer("ab")
    msg = await late.next(timeout=5)
    await other.close()
    with pytest.raises(jetstream.ConnectionClosedError):
        await msg.ack()
    assert not msg.acked


async def test_redelivery_after_ack_wait_and_nak_delay(js: JetStream) -> None:
    s = await js.create_stream(StreamConfig(name="RD", subjects=["rd"]))
    await js.publish("rd", b"1")
    c = await s.create_consumer(ConsumerConfig(durable_name="rd", ack_wait=1))
    loop = asyncio.get_running_loop()
    # Timed from before the first pull: the server's ack_wait starts when it delivers,
    # which may be a while before the client has the message on a loaded machine.
    t0 = loop.time()
    first = await c.next(timeout=5)
    again = await c.next(timeout=10)  # not acked: back after ack_wait
    assert loop.time() - t0 >= 0.8
    assert again.metadata.num_delivered == 2
    await again.nak(delay=2)
    t1 = loop.time()
    third = await c.next(timeout=10)
    assert loop.time() - t1 >= 1.8
    assert third.metadata.num_delivered == 3
    await third.nak()  # no delay: right back
    fourth = await c.next(timeout=5)
    assert fourth.metadata.num_delivered == 4
    await fourth.ack_sync()
    assert first.data == fourth.data == b"1"


async def test_backoff_schedule_followed(js: JetStream) -> None:
    s = await js.create_stream(StreamConfig(name="BO", subjects=["bo"]))
    await js.publish("bo", b"x")
    c = await s.create_consumer(
        ConsumerConfig(durable_name="bo", backoff=[0.5, 30.0], max_deliver=4)
    )
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    first = await c.next(timeout=10)
    again = await c.next(timeout=10)
    # The steps run from the server's deliveries, which the client may get a while later
    # on a loaded machine: the lower bound counts from before the first pull (0.5 s to
    # the first redelivery; the step as measured is scenario B of make faults-report)
    assert loop.time() - t0 >= 0.45
    # the second pull got the message again (within its 10 s, so after the first step and
    # not the second's 30 s): a redelivery of the same stream message
    assert (first.metadata.num_delivered, again.metadata.num_delivered) == (1, 2)
    assert first.metadata.sequence.stream == again.metadata.sequence.stream == 1
    # the steps as the server holds them: what the client sent, in seconds
    assert list((await c.info()).config.backoff) == [0.5, 30.0]
    # the second step holds the message back: not redelivered within the next 3 s
    with pytest.raises(jetstream.TimeoutError):
        await c.next(timeout=3)


async def test_in_progress_extends_ack_wait(js: JetStream) -> None:
    s = await js.create_stream(StreamConfig(name="WP", subjects=["wp"]))
    await js.publish("wp", b"x")
    c = await s.create_consumer(ConsumerConfig(durable_name="wp", ack_wait=1.5))
    msg = await c.next(timeout=5)
    for _ in range(12):  # 3 s of work, ack_wait is 1.5 s: kept alive every 0.25 s
        await asyncio.sleep(0.25)
        await msg.in_progress()
    assert await c.fetch_no_wait(1) == []  # not redelivered meanwhile
    await msg.ack_sync()
    assert (await c.info()).num_ack_pending == 0


async def test_term_stops_redelivery(js: JetStream) -> None:
    s = await js.create_stream(StreamConfig(name="TM", subjects=["tm"]))
    await js.publish("tm", b"x")
    c = await s.create_consumer(ConsumerConfig(durable_name="tm", ack_wait=0.5))
    msg = await c.next(timeout=5)
    await msg.term("bad")
    # terminated: nothing is pending on the consumer, so nothing can come again after
    # ack_wait (0.5 s), nor came in the meantime
    info = await eventually(c, lambda i: i.num_ack_pending == 0)
    assert info.num_redelivered == 0
    assert await c.fetch_no_wait(1) == []


async def test_ack_policy_all(js: JetStream) -> None:
    s = await js.create_stream(StreamConfig(name="AA", subjects=["aa"]))
    for i in range(10):
        await js.publish("aa", str(i).encode())
    c = await s.create_consumer(ConsumerConfig(durable_name="all", ack_policy=AckPolicy.ALL))
    msgs = await c.fetch(10, expires=5)
    assert (await c.info()).num_ack_pending == 10
    await msgs[6].ack_sync()  # acks 0..6
    info = await c.info()
    assert info.num_ack_pending == 3
    assert info.ack_floor.stream_seq == 7


async def test_ack_policy_none_has_no_acks(js: JetStream) -> None:
    s = await js.create_stream(StreamConfig(name="AN", subjects=["an"]))
    await js.publish("an", b"x")
    c = await s.create_consumer(ConsumerConfig(durable_name="none", ack_policy=AckPolicy.NONE))
    msg = await c.next(timeout=5)
    assert msg.metadata.sequence.stream == 1
    assert (await c.info()).num_ack_pending == 0


async def test_ack_next_acks_and_pulls_in_one_go(stream: Stream, nc: Client) -> None:
    c = await stream.create_consumer(ConsumerConfig(durable_name="nxt"))
    msg = await c.next(timeout=5)
    seen = [msg.data]
    for _ in range(9):
        msg = await c.ack_next(msg, timeout=5)
        seen.append(msg.data)
    assert seen == [str(i).encode() for i in range(10)]
    with pytest.raises(jetstream.TimeoutError):
        await c.ack_next(msg, timeout=1)  # acks the last one; nothing more to get
    assert msg.acked
    with pytest.raises(MsgAlreadyAckedError):
        await c.ack_next(msg, timeout=1)
    # the last ack is not confirmed: wait until the server has processed it
    info = await eventually(c, lambda i: i.num_ack_pending == 0)
    assert info.num_ack_pending == 0 and info.ack_floor.stream_seq == 10
