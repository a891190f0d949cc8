"""Continuous consumption (messages(), consume()) and ordered consumers, across failures."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

import jetstream
from jetstream import (
    Client,
    ConsumerConfig,
    ConsumerDeletedError,
    JetStream,
    JsMsg,
    NoHeartbeatError,
    StreamConfig,
    StreamNotFoundError,
)
from jetstream.api import StorageType
from jetstream.embedded import NatsServer
from tests.faults.proxy import FaultProxy
from tests.integration._consumer import eventually
from tests.integration._feed import feed, msg, sid_of

pytestmark = pytest.mark.asyncio

FAST = {"reconnect_time_wait": 0.1, "max_reconnect_attempts": -1}


@pytest_asyncio.fixture
async def nc(nats_url: str) -> AsyncIterator[Client]:
    async with jetstream.connect(nats_url, **FAST) as client:
        yield client


async def publish_many(js: JetStream, subject: str, n: int, start: int = 0) -> None:
    futs = [await js.publish_async(subject, str(i).encode()) for i in range(start, start + n)]
    await asyncio.gather(*futs)


async def test_messages_iterates_with_refills(js: JetStream, nc: Client) -> None:
    s = await js.create_stream(StreamConfig(name="M", subjects=["m"]))
    await publish_many(js, "m", 1000)
    c = await s.create_consumer(ConsumerConfig(durable_name="m"))
    pulls = await nc.subscribe("$JS.API.CONSUMER.MSG.NEXT.M.m")  # watch the pull requests
    await nc.flush()
    got: list[int] = []
    async with c.messages(max_messages=100) as it:
        async for msg in it:
            got.append(int(msg.data))
            await msg.ack()
            if len(got) == 1000:
                break
    assert got == list(range(1000))
    # refills at the threshold, not a request per message
    assert 10 <= pulls.pending_msgs <= 40
    # the acks are not confirmed: wait until the server has processed them all
    await eventually(c, lambda i: i.num_ack_pending == 0)


async def test_buffer_stays_bounded_for_a_slow_reader(js: JetStream) -> None:
    s = await js.create_stream(StreamConfig(name="SL", subjects=["sl"]))
    await publish_many(js, "sl", 500)
    c = await s.create_consumer(ConsumerConfig(durable_name="sl"))
    async with c.messages(max_messages=50) as it:
        first = await it.next(timeout=5)
        await first.ack()
        await asyncio.sleep(1.0)  # the reader dawdles; the client must not keep pulling
        assert it.pending <= 50
        info = await c.info()
        assert info.num_ack_pending <= 51


async def test_consume_handler_in_order(js: JetStream) -> None:
    s = await js.create_stream(StreamConfig(name="C", subjects=["c.*"]))
    await publish_many(js, "c.x", 300)
    c = await s.create_consumer(ConsumerConfig(durable_name="c"))
    got: list[int] = []
    done = asyncio.Event()
    errors: list[BaseException] = []

    async def handler(msg: JsMsg) -> None:
        got.append(int(msg.data))
        if int(msg.data) == 7:
            raise RuntimeError("handler failure goes to error_cb")
        await msg.ack()
        if len(got) == 300:
            done.set()

    async with await c.consume(handler, max_messages=64, error_cb=errors.append) as ctx:
        async with asyncio.timeout(20):
            await done.wait()
    assert ctx.closed
    assert got == list(range(300))
    assert any(isinstance(e, RuntimeError) for e in errors)


async def test_heartbeats_never_reach_user_and_statuses_are_handled(js: JetStream) -> None:
    s = await js.create_stream(StreamConfig(name="HB", subjects=["hb"]))
    c = await s.create_consumer(ConsumerConfig(durable_name="hb"))
    errors: list[BaseException] = []
    async with c.messages(expires=2, heartbeat=0.5, error_cb=errors.append) as it:
        # several expiries (408) and many heartbeats (100) pass with nothing to deliver
        with pytest.raises(jetstream.TimeoutError):
            await it.next(timeout=5)
        await js.publish("hb", b"after")
        msg = await it.next(timeout=5)
        assert msg.data == b"after" and msg.metadata.sequence.stream == 1
    assert errors == []


async def test_consumer_deleted_ends_messages(js: JetStream) -> None:
    s = await js.create_stream(StreamConfig(name="DEL", subjects=["del"]))
    c = await s.create_consumer(ConsumerConfig(durable_name="del"))
    async with c.messages(expires=5, heartbeat=1) as it:
        reader = asyncio.create_task(it.next(timeout=30))
        await asyncio.sleep(0.3)
        await s.delete_consumer("del")
        with pytest.raises(ConsumerDeletedError):
            await reader


async def test_missed_heartbeats_reported_then_resumes(nats_server: NatsServer) -> None:
    errors: list[BaseException] = []
    async with jetstream.connect(nats_server.url, ping_interval=60, **FAST) as nc:
        js = nc.jetstream()
        s = await js.create_stream(StreamConfig(name="MH", subjects=["mh"]))
        c = await s.create_consumer(ConsumerConfig(durable_name="mh"))
        await js.publish("mh", b"before")
        async with c.messages(expires=4, heartbeat=0.5, error_cb=errors.append) as it:
            m = await it.next(timeout=5)
            await m.ack_sync()
            nats_server.pause()
            try:
                async with asyncio.timeout(15):
                    while not any(isinstance(e, NoHeartbeatError) for e in errors):
                        await asyncio.sleep(0.1)
            finally:
                nats_server.resume()
            await js.publish("mh", b"after")
            m = await it.next(timeout=15)
            assert m.data == b"after"


async def test_messages_survive_server_restart(nats_server: NatsServer) -> None:
    errors: list[BaseException] = []
    async with jetstream.connect(nats_server.url, **FAST) as nc:
        js = nc.jetstream()
        s = await js.create_stream(StreamConfig(name="RS", subjects=["rs"]))
        c = await s.create_consumer(ConsumerConfig(durable_name="rs"))
        await publish_many(js, "rs", 200)
        seen: set[int] = set()
        async with c.messages(
            max_messages=20, expires=3, heartbeat=1, error_cb=errors.append
        ) as it:
            async for msg in it:
                seen.add(int(msg.data))
                await msg.ack()
                if len(seen) == 100:
                    break
            await asyncio.to_thread(nats_server.restart)
            await publish_many(js, "rs", 200, start=200)
            async with asyncio.timeout(60):
                async for msg in it:
                    seen.add(int(msg.data))
                    await msg.ack()
                    if len(seen) == 400:
                        break
        assert seen == set(range(400))


async def test_ordered_consumer_in_order_exactly_once(js: JetStream) -> None:
    s = await js.create_stream(StreamConfig(name="O", subjects=["o.*"]))
    await publish_many(js, "o.a", 500)
    oc = await s.ordered_consumer(filter_subjects=["o.a"])
    got: list[int] = []
    async with oc.messages() as it:
        async for msg in it:
            got.append(int(msg.data))
            if len(got) == 500:
                break
    assert got == list(range(500))
    # next() and fetch() keep the order too
    await publish_many(js, "o.a", 5, start=500)
    assert int((await oc.next(timeout=5)).data) == 500
    assert [int(m.data) for m in await oc.fetch(4, expires=5)] == [501, 502, 503, 504]


class Noted(jetstream.Msg):
    """A message class of a reader's own (the KeyValue watcher's entries are one)."""

    @property
    def number(self) -> int:
        return int(self.data)


@pytest.mark.parametrize("push", [False, True], ids=["pull", "push"])
async def test_ordered_messages_of_a_class_of_ones_own(js: JetStream, push: bool) -> None:
    """``messages(msg_type=...)``: the parser makes the deliveries of that class, in
    order, across a reset of the consumer."""
    s = await js.create_stream(StreamConfig(name=f"OT{int(push)}", subjects=[f"ot{int(push)}"]))
    await publish_many(js, f"ot{int(push)}", 300)
    oc = await s.ordered_consumer(push=push, heartbeat=0.5)
    got: list[int] = []
    async with oc.messages(max_messages=100, msg_type=Noted) as it:
        async for msg in it:
            assert isinstance(msg, Noted) and not isinstance(msg, jetstream.JsMsg)
            got.append(msg.number)
            if len(got) == 150:
                assert oc.consumer is not None
                await s.delete_consumer(oc.consumer.name)  # made again, same class
                await publish_many(js, f"ot{int(push)}", 100, start=300)
            if len(got) == 400:
                break
    assert got == list(range(400))
    assert oc.resets >= 1


async def test_ordered_consumer_recreates_after_consumer_deleted(js: JetStream) -> None:
    s = await js.create_stream(StreamConfig(name="OD", subjects=["od"]))
    await publish_many(js, "od", 100)
    oc = await s.ordered_consumer()
    got: list[int] = []
    async with oc.messages(max_messages=10, expires=2, heartbeat=0.5) as it:
        async for msg in it:
            got.append(int(msg.data))
            if len(got) == 50:
                assert oc.consumer is not None
                await s.delete_consumer(oc.consumer.name)
            if len(got) == 100:
                break
    assert got == list(range(100))
    assert oc.resets >= 1


async def test_ordered_consumer_ends_when_stream_deleted(js: JetStream) -> None:
    s = await js.create_stream(StreamConfig(name="OG", subjects=["og"]))
    await publish_many(js, "og", 5)
    oc = await s.ordered_consumer()
    async with oc.messages(expires=2, heartbeat=0.5) as it:
        for _ in range(5):
            await it.next(timeout=5)
        await js.delete_stream("OG")
        with pytest.raises(StreamNotFoundError):
            await it.next(timeout=30)


async def test_ordered_consumer_across_server_restart(nats_server: NatsServer) -> None:
    total = 100_000
    async with jetstream.connect(nats_server.url, **FAST) as nc:
        js = nc.jetstream()
        s = await js.create_stream(
            StreamConfig(name="OR", subjects=["or"], storage=StorageType.FILE)
        )
        await publish_many(js, "or", total)
        oc = await s.ordered_consumer()
        got: list[int] = []
        async with oc.messages(max_messages=500, expires=3, heartbeat=1) as it:
            async with asyncio.timeout(120):
                async for msg in it:
                    got.append(int(msg.data))
                    if len(got) == total // 2:
                        await asyncio.to_thread(nats_server.restart)
                    if len(got) == total:
                        break
        assert got == list(range(total))


async def test_push_ordered_consumer(js: JetStream) -> None:
    s = await js.create_stream(StreamConfig(name="PO", subjects=["po.*"]))
    await publish_many(js, "po.a", 1500)
    errors: list[BaseException] = []
    oc = await s.ordered_consumer(
        filter_subjects=["po.a"], push=True, heartbeat=0.5, error_cb=errors.append
    )
    assert oc.consumer is not None and oc.consumer.is_push
    got: list[int] = []
    async with oc.messages() as it:
        async for msg in it:
            got.append(int(msg.data))
            if len(got) == 1500:
                # gone: missed heartbeats bring it back from the next sequence
                await s.delete_consumer(oc.consumer.name)
                await publish_many(js, "po.a", 1500, start=1500)
            if len(got) == 3000:
                break
    assert got == list(range(3000))
    assert oc.resets >= 1
    assert any(isinstance(e, NoHeartbeatError) for e in errors)
    with pytest.raises(TypeError, match="a push-based ordered consumer is read with messages"):
        await oc.next(timeout=1)


async def test_push_ordered_consumer_asks_again_for_the_consumer_that_landed(
    nats_server: NatsServer,
) -> None:
    """A making of the consumer whose answer is lost (a leader killed under it) may have
    landed: the next attempt asks for the same name, so it must ask for the same inbox,
    or the server refuses it as another consumer of that name (10148), at every retry.

    Real events: the fault proxy cuts the connection (the reconnect makes the consumer
    again) and drops the server's answer to that making, which did land."""
    lost: list[bytes] = []

    def first_answer_to_a_making(line: bytes, payload: bytes) -> bool:
        if lost or b'"type":"io.nats.jetstream.api.v1.consumer_create_response"' not in payload:
            return False
        lost.append(payload)  # stored by the server, the answer never comes
        return True

    async with (
        FaultProxy(nats_server.port) as proxy,
        jetstream.connect(proxy.url, reconnect_time_wait=0.1) as nc,
    ):
        js = nc.jetstream()
        s = await js.create_stream(StreamConfig(name="PL", subjects=["pl"]))
        await publish_many(js, "pl", 20)
        oc = await s.ordered_consumer(push=True, heartbeat=0.5)
        got: list[int] = []
        async with oc.messages() as it:
            async with asyncio.timeout(30):
                async for msg in it:
                    got.append(int(msg.data))
                    if len(got) == 5:
                        proxy.drop_op = first_answer_to_a_making
                        proxy.cut()  # made again from the sixth, once reconnected
                        while nc.stats.reconnects < 1:
                            await asyncio.sleep(0.01)
                        assert oc.resets == 0
                    if len(got) == 20:
                        break
        assert got == list(range(20))
        assert len(lost) == 1 and b'"error"' not in lost[0]  # a making that landed
        assert oc.resets == 1 and nc.stats.reconnects == 1


async def _miss_heartbeats(proxy: FaultProxy, it: Any, errors: list[BaseException]) -> None:
    """A blackhole of the fault proxy until the stream has missed its heartbeats and
    pulled again on a fresh inbox (held by the blackhole until it heals)."""
    proxy.blackhole = True
    try:
        async with asyncio.timeout(20):
            while not any(isinstance(e, NoHeartbeatError) for e in errors):
                await asyncio.sleep(0.01)
    finally:
        proxy.blackhole = False


async def test_requests_from_before_a_reset_do_not_count_against_the_new_ones(
    nats_server: NatsServer,
) -> None:
    """After a reset (missed heartbeat, reconnect) the old pull requests may still be alive
    on the server: their expiry must not make the stream pull past its bound, and the
    messages they deliver are still handed over. Real event: the heartbeats are missed
    behind a blackhole of the fault proxy."""
    errors: list[BaseException] = []
    async with (
        FaultProxy(nats_server.port) as proxy,
        jetstream.connect(proxy.url, ping_interval=60) as nc,
    ):
        js = nc.jetstream()
        s = await js.create_stream(StreamConfig(name="RST", subjects=["rst"]))
        c = await s.create_consumer(ConsumerConfig(durable_name="r"))
        pulls = await nc.subscribe("$JS.API.CONSUMER.MSG.NEXT.RST.r")
        await nc.flush()
        before = nc.subscription_count
        opts: dict[str, Any] = {"max_messages": 10, "expires": 10.0, "heartbeat": 1.0}
        async with c.messages(**opts, error_cb=errors.append) as it:
            it.__aiter__()  # starts it: the first pull
            first = await pulls.next_msg(timeout=5)
            old_inbox = first.reply
            await _miss_heartbeats(proxy, it, errors)  # pulls again, on a fresh inbox
            second = await pulls.next_msg(timeout=10)
            assert second.reply != old_inbox
            # Both requests expire 10 s after they were made, the old one first (by the
            # blackhole's 2-4 s): only the new one's 408 leads to a pull, and the next
            # one is 10 s after that.
            third = await pulls.next_msg(timeout=30)
            assert third.reply == second.reply
            with pytest.raises(jetstream.TimeoutError):  # no extra pull for the old 408
                await pulls.next_msg(timeout=6)
            assert it.outstanding == 10
            # Messages the old requests deliver are kept too (here: the new ones answer).
            await publish_many(js, "rst", 5)
            got = [int((await it.next(timeout=5)).data) for _ in range(5)]
            assert got == list(range(5))
        await nc.flush()  # the PONG after the stream's UNSUBs: its inboxes are gone
        assert nc.subscription_count == before + 1  # + the inbox of publish_many's window


async def test_a_late_message_on_a_retired_inbox_is_delivered(nats_server: NatsServer) -> None:
    """Real event: the heartbeats are missed behind a blackhole of the fault proxy; the
    server keeps the first request, alive for 30 s, beside the new one."""
    errors: list[BaseException] = []
    async with (
        FaultProxy(nats_server.port) as proxy,
        jetstream.connect(proxy.url, ping_interval=60) as nc,
        jetstream.connect(nats_server.url) as observer,
    ):
        js = nc.jetstream()
        s = await js.create_stream(StreamConfig(name="LATE", subjects=["late"]))
        c = await s.create_consumer(ConsumerConfig(durable_name="l"))
        before = nc.subscription_count
        opts: dict[str, Any] = {"max_messages": 10, "expires": 30.0, "heartbeat": 1.0}
        async with c.messages(**opts, error_cb=errors.append) as it:
            it.__aiter__()
            await nc.flush()
            old_inbox = it.subject
            # what the server sends to the old inbox, seen by another connection too
            via_old = await observer.subscribe(old_inbox)
            await observer.flush()
            await _miss_heartbeats(proxy, it, errors)
            await nc.flush(timeout=10)
            # pulled again on a new inbox; the old one is still subscribed beside it
            assert it.subject != old_inbox and nc.subscription_count == before + 2
            out_before = it.outstanding
            # The server still holds both requests and serves them in turn.
            await publish_many(js, "late", 3)
            got = [int((await it.next(timeout=5)).data) for _ in range(3)]
            assert got == [0, 1, 2]
            await observer.flush()  # after what the server sent to the old inbox
            # its heartbeats go there too: count only the messages
            old = [m for m in await via_old.take_many(timeout=5) if not m.status]
            assert old  # some came through the old inbox...
            assert it.outstanding == out_before - (3 - len(old))  # ...and are not counted
        # Unsubscribed with the stream; kept to give back what was in flight until the PONG.
        await nc.flush()
        assert nc.subscription_count == before + 1  # + the inbox of publish_many's window


def _renumbered(reply: str, tail_dots: int, sseq: int, cseq: int) -> str:
    """An ack subject like ``reply`` with the stream and consumer sequences given."""
    tokens = reply.split(".")
    at = len(tokens) - tail_dots  # the consumer sequence; the stream's is before it
    tokens[at - 1], tokens[at] = str(sseq), str(cseq)
    return ".".join(tokens)


@pytest.mark.parametrize("push", [False, True], ids=["pull", "push"])
async def test_ordered_stream_checks_a_run_at_once_and_cuts_it_at_a_gap(
    js: JetStream, push: bool
) -> None:
    """The reader is handed the messages buffered in one run, their order checked from
    the first and the last; a run with a consumer sequence missing inside it is handed
    over up to the gap, and the consumer is made again from the stream sequence after
    the last message handed over: every message still comes once, in order."""
    nc = js.client
    s = await js.create_stream(StreamConfig(name="OGAP", subjects=["ogap"]))
    await publish_many(js, "ogap", 30)
    pulls = await nc.subscribe("$JS.API.CONSUMER.MSG.NEXT.OGAP.*")  # sees the pulls
    oc = await s.ordered_consumer(push=push, heartbeat=0.5)
    seqs: list[int] = []
    async with oc.messages(max_messages=10) as it:
        async with asyncio.timeout(30):
            run = await it.take_many(5.0)
            assert run and all(isinstance(m, JsMsg) for m in run)
            seqs += [m.metadata.sequence.stream for m in run]
            assert oc.stream_seq == seqs[-1]
            # a run comes in with consumer sequence c + 2 missing, in one read. Injected
            # (tests/integration/_feed.py): a real server never skips a consumer
            # sequence, and a gap made on the way (the fault proxy's drops,
            # test_proxy_faults) does not land inside one read's run on demand, which is
            # the case under test
            if push:
                assert oc.consumer is not None
                inbox = oc.consumer.cached_info.config.deliver_subject
            else:
                inbox = (await pulls.take_many(timeout=5))[-1].reply
            assert isinstance(inbox, str)
            reply = run[-1].reply
            assert reply is not None
            n = reply.count(".") + 1
            k = 3 if n == 9 else n - 8  # tokens after the consumer sequence (v1, v2)
            c, last = run[-1].metadata.sequence.consumer, seqs[-1]
            sid = sid_of(nc, inbox)
            fake = [
                msg("ogap", sid, b"", _renumbered(reply, k, last + d, c + d)) for d in (1, 3, 4)
            ]
            feed(nc, b"".join(fake))
            cut = await it.take_many(5.0)
            assert [m.metadata.sequence.stream for m in cut] == [last + 1]
            seqs.append(last + 1)
            await publish_many(js, "ogap", 30, start=30)
            async for m in it:
                seqs.append(m.metadata.sequence.stream)
                if seqs[-1] == 60:
                    break
    assert seqs == list(range(1, 61))
    assert oc.resets == 1
    assert oc.stream_seq == 60


async def test_take_runs_reads_a_stream_of_runs_only(js: JetStream) -> None:
    from jetstream.bulk import ordered_runs, take_runs
    from jetstream.protocol.ops import Msg, MsgRun

    s = await js.create_stream(StreamConfig(name="ORAW", subjects=["oraw"]))
    await publish_many(js, "oraw", 3)
    oc = await s.ordered_consumer()
    async with oc.messages() as it:
        with pytest.raises(
            TypeError, match="take_runs\\(\\) reads an ordered stream made with runs=True"
        ):
            await take_runs(it, 1.0)
    async with ordered_runs(oc, max_messages=10, expires=5.0) as runs:
        with pytest.raises(
            TypeError, match=r"an ordered stream of runs is read with jetstream\.bulk\.take_runs"
        ):
            await runs.take_many(1.0)
        got: list[MsgRun] = []
        async with asyncio.timeout(10):
            while sum(map(len, got)) < 3:
                got += await take_runs(runs, 5.0)
        assert all(isinstance(run, MsgRun) for run in got)
        assert [op.payload for run in got for op in run.ops(Msg)] == [b"0", b"1", b"2"]
        assert runs.pending == 0
    push = await s.ordered_consumer(push=True)
    with pytest.raises(TypeError, match="a push-based ordered consumer is not read in runs"):
        async with ordered_runs(push) as runs:
            await take_runs(runs, 1.0)


def _delivered(server: NatsServer, stream: str, consumer: str) -> int:
    """How many messages the server has delivered to ``consumer``, read from its
    monitoring endpoint: no event loop needed, so it can be read while the loop is held."""
    jsz = server.monitor("jsz", accounts=True, streams=True, consumers=True)
    for account in jsz.get("account_details", []):
        for info in account.get("stream_detail", []):
            for c in info.get("consumer_detail", []) if info["name"] == stream else []:
                if c["name"] == consumer:
                    return int(c["delivered"]["consumer_seq"])
    return 0


async def test_a_refill_goes_out_while_the_reader_still_takes_from_its_buffer(
    js: JetStream, nats_server: NatsServer
) -> None:
    # A reader working through its buffer does not give the loop a turn. The pull that
    # tops the buffer up must be on the wire at once, not when the reader next waits,
    # or the server sits idle for a round trip at every refill.
    s = await js.create_stream(StreamConfig(name="RF", subjects=["rf"]))
    await publish_many(js, "rf", 300)
    c = await s.create_consumer(ConsumerConfig(durable_name="rf"))
    async with c.messages(max_messages=100) as it:
        first = await it.next(timeout=10)
        async with asyncio.timeout(10):
            while it.pending < 99:
                await asyncio.sleep(0.01)
        # past the refill threshold (half the batch), with no wait
        got = [first, *[await it.__anext__() for _ in range(59)]]
        assert it.pending == 40
        # the loop is held on purpose: only a pull already written is answered meanwhile,
        # and the server says when it has sent the 50 of the refill
        deadline = time.monotonic() + 10
        while _delivered(nats_server, "RF", "rf") < 150 and time.monotonic() < deadline:
            time.sleep(0.02)  # noqa: ASYNC251
        assert _delivered(nats_server, "RF", "rf") == 150
        # the 40 left, and the 50 the refill asked for when 50 were left, once read
        async with asyncio.timeout(10):
            while it.pending < 90:
                await asyncio.sleep(0.01)
        assert it.pending == 90
        assert [int(m.data) for m in got] == list(range(60))
