"""A whole feed for one subscription is handed over in one call; the result must be the
same as delivering op by op. Crafted server bytes are fed to a live connection as one
read (``tests/integration/_feed.py``), so the composition of each feed is known exactly.

Injected on purpose: what is under test is the content of one read (these ops, in this
order, in one ``data_received``), and no server, real or behind the fault proxy, can be
made to put a given run of messages, a heartbeat among them or a PING, into one TCP
segment on demand: its writes and the kernel decide where reads split. The same feeds
arriving split differently must give the same result, which tests/unit's split
properties check for the parser."""

from __future__ import annotations

import asyncio

import pytest

import jetstream
from jetstream import ConsumerConfig, SlowConsumerError, StreamConfig
from tests.integration._feed import feed, hmsg, msg, sid_of

pytestmark = pytest.mark.asyncio

HB = b"NATS/1.0 100 Idle Heartbeat\r\n\r\n"


def status(sid: int, hdr: bytes) -> bytes:
    return hmsg("inbox", sid, hdr)


async def test_one_feed_for_one_subscription(nats_url: str) -> None:
    async with jetstream.connect(nats_url) as nc:
        sub = await nc.subscribe("bulk")
        await nc.flush()
        before = nc.stats.in_msgs
        feed(nc, b"".join(msg("bulk", sub.sid, b"%d" % i) for i in range(20)))
        assert sub.pending_msgs == 20
        assert sub.pending_bytes == sum(len(b"%d" % i) for i in range(20))
        assert nc.stats.in_msgs == before + 20
        got = [(await sub.next_msg(timeout=1)).data for _ in range(20)]
        assert got == [b"%d" % i for i in range(20)]


async def test_feed_over_the_pending_limit_drops_like_op_by_op(nats_url: str) -> None:
    errors: list[BaseException] = []
    async with jetstream.connect(nats_url, error_cb=errors.append) as nc:
        sub = await nc.subscribe("bulk", pending_msgs_limit=10)
        await nc.flush()
        feed(nc, b"".join(msg("bulk", sub.sid, b"%d" % i) for i in range(25)))
        assert sub.pending_msgs == 10
        assert sub.dropped == 15
        assert sum(isinstance(e, SlowConsumerError) for e in errors) == 1
        got = [(await sub.next_msg(timeout=1)).data for _ in range(10)]
        assert got == [b"%d" % i for i in range(10)]


async def test_feed_past_max_msgs_ends_the_subscription(nats_url: str) -> None:
    async with jetstream.connect(nats_url) as nc:
        sub = await nc.subscribe("bulk", max_msgs=5)
        await nc.flush()
        feed(nc, b"".join(msg("bulk", sub.sid, b"%d" % i) for i in range(12)))
        got = [m.data async for m in sub]
        assert got == [b"%d" % i for i in range(5)]


async def test_feed_for_two_subscriptions_and_a_ping(nats_url: str) -> None:
    async with jetstream.connect(nats_url) as nc:
        a = await nc.subscribe("a")
        b = await nc.subscribe("b")
        await nc.flush()
        ops = [msg("a", a.sid, b"a%d" % i) for i in range(6)]
        ops += [msg("b", b.sid, b"b%d" % i) for i in range(6)]
        ops.insert(3, b"PING\r\n")
        feed(nc, b"".join(ops))
        assert [(await a.next_msg(timeout=1)).data for _ in range(6)] == [
            b"a%d" % i for i in range(6)
        ]
        assert [(await b.next_msg(timeout=1)).data for _ in range(6)] == [
            b"b%d" % i for i in range(6)
        ]
        await nc.flush()  # the PING was answered and the connection is fine
        assert nc.is_connected


async def test_the_message_before_a_run_goes_to_its_own_subscription(nats_url: str) -> None:
    # A feed the parser says is one run goes whole to its subscription; the ops before
    # the run (a message whose payload began in the feed before) go each to its own.
    async with jetstream.connect(nats_url) as nc:
        a = await nc.subscribe("run.a")
        b = await nc.subscribe("run.b")
        await nc.flush()
        in_msgs, in_bytes = nc.stats.in_msgs, nc.stats.in_bytes
        lone = msg("run.b", b.sid, b"for b, begun in the feed before")
        run = b"".join(msg("run.a", a.sid, b"a%02d" % i) for i in range(30))
        lead = msg("run.a", a.sid, b"for a, begun in the feed before")
        # 1: one message for a, then b's cut in its payload; 2: the rest of b's, then a
        # run of 30 for a (the parser's run: b's message leads it); 3: b's message whole
        # before a run of a's (the loop parses it, the batch the rest), then one for a
        # cut in its payload; 4: its rest before a run of a's, which it leads.
        first = msg("run.a", a.sid, b"first") + lone[:-10]
        for one_read in [first, lone[-10:] + run, lone + run + lead[:-4], lead[-4:] + run]:
            feed(nc, one_read)
        got_a = [m.data for m in await a.take_many(timeout=1)]
        got_b = [m.data for m in await b.take_many(timeout=1)]
        each = [b"a%02d" % i for i in range(30)]
        assert got_a == [b"first", *each, *each, b"for a, begun in the feed before", *each]
        assert got_b == [b"for b, begun in the feed before"] * 2
        assert nc.stats.in_msgs == in_msgs + 94
        assert nc.stats.in_bytes == in_bytes + 5 + 31 * 3 + 30 * 3 * 3


async def test_pull_feed_with_a_heartbeat_inside(nats_url: str) -> None:
    async with jetstream.connect(nats_url) as nc:
        js = nc.jetstream()
        s = await js.create_stream(StreamConfig(name="BULK", subjects=["bulk"]))
        c = await s.create_consumer(ConsumerConfig(durable_name="d"))
        async with c.messages(max_messages=50) as it:
            sid = sid_of(nc, it.subject)

            def js_msg(i: int) -> bytes:
                return msg("bulk", sid, b"%d" % i, f"$JS.ACK.BULK.d.1.{i + 1}.{i + 1}.0.0")

            plain = b"".join(js_msg(i) for i in range(12))
            feed(nc, plain)
            assert it.pending == 12
            mixed = [js_msg(i) for i in range(12, 24)]
            mixed.insert(6, status(sid, HB))
            feed(nc, b"".join(mixed))
            assert it.pending == 24  # the heartbeat never reaches the reader
            got = [await it.next(timeout=1) for _ in range(24)]
        assert [m.data for m in got] == [b"%d" % i for i in range(24)]
        assert [m.metadata.sequence.stream for m in got] == list(range(1, 25))


async def test_push_feed_with_a_heartbeat_inside(nats_url: str) -> None:
    async with jetstream.connect(nats_url) as nc:
        js = nc.jetstream()
        s = await js.create_stream(StreamConfig(name="BULKP", subjects=["bulkp"]))
        inbox = nc.new_inbox()
        c = await s.create_consumer(ConsumerConfig(deliver_subject=inbox, idle_heartbeat=5.0))
        assert c.is_push
        it = c.messages()
        async with it:
            await nc.flush()
            sid = sid_of(nc, inbox)
            ops = [
                msg("bulkp", sid, b"%d" % i, f"$JS.ACK.BULKP.p.1.{i}.{i}.0.0") for i in range(10)
            ]
            ops.insert(4, status(sid, HB))
            feed(nc, b"".join(ops))
            assert it.pending == 10
            got = [(await it.next(timeout=1)).data for _ in range(10)]
        assert got == [b"%d" % i for i in range(10)]


async def test_fetch_feed_with_a_heartbeat_inside(nats_url: str) -> None:
    async with jetstream.connect(nats_url) as nc:
        js = nc.jetstream()
        s = await js.create_stream(StreamConfig(name="BULKF", subjects=["bulkf"]))
        c = await s.create_consumer(ConsumerConfig(durable_name="f"))
        pulls = await nc.subscribe("$JS.API.CONSUMER.MSG.NEXT.BULKF.f")  # sees the request
        await nc.flush()
        before = nc.subscription_count
        task = asyncio.create_task(c.fetch(10, expires=5.0))
        sid = sid_of(nc, (await pulls.next_msg(timeout=5)).reply)  # the fetch's inbox
        ops = [
            msg("bulkf", sid, b"%d" % i, f"$JS.ACK.BULKF.f.1.{i + 1}.{i + 1}.0.0")
            for i in range(10)
        ]
        ops.insert(6, status(sid, HB))
        feed(nc, b"".join(ops))
        got = await asyncio.wait_for(task, 5)
        assert [m.data for m in got] == [b"%d" % i for i in range(10)]
        assert nc.subscription_count == before  # the batch is complete: the inbox is gone
