"""Cancelling every call that waits leaves nothing behind, in the client or on the server.

Each awaiting call is cancelled at several moments: at once (before its request is
written), after one turn of the loop (the request buffered or just written), while it
waits for an answer (the server is paused with SIGSTOP, so that no answer can come), and
mid-stream where the call reads a stream of messages; a call that retries is cancelled
in its backoff between two attempts, and a core publish while it waits for a socket that
takes nothing more (backpressure). After each: no subscription of the client and no
request waiting for a reply is left (``Client.subscription_count``,
``Client.pending_requests``; the leaked-task check of the conftest covers the tasks), no
``publish_async`` future is pending; no ephemeral consumer of the client is left on the
server (deleted at once where the code deletes it, else once its ``inactive_threshold``
has passed); for consumers with acks the messages that were in flight are not stranded
(given back at once: nothing awaits an ack long before the 30 s ack_wait); and the client
still works.

Every event is a real one: a cancel, a paused server, messages the server delivered, a
fault proxy that holds the bytes back or loses an answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import pytest_asyncio

import jetstream
from jetstream import (
    AckPolicy,
    Client,
    Consumer,
    ConsumerConfig,
    JetStream,
    JsMsg,
    StreamConfig,
)
from jetstream.embedded import NatsServer
from tests.faults.proxy import FaultProxy
from tests.integration._consumer import eventually
from tests.integration._wait import until

pytestmark = pytest.mark.asyncio

MOMENTS = ["at once", "buffered", "waiting"]
ACK_WAIT = 30.0


@pytest_asyncio.fixture
async def nc(nats_url: str) -> AsyncIterator[Client]:
    # pings far apart: a paused server must not be taken for a dead one
    async with jetstream.connect(nats_url, ping_interval=60) as client:
        yield client


def leftovers(nc: Client, subs: int) -> list[str]:
    """What the client holds beyond the ``subs`` subscriptions it had before."""
    left = []
    if nc.subscription_count != subs:
        left.append(f"{nc.subscription_count} subscriptions, not {subs}")
    if nc.pending_requests:
        left.append(f"{nc.pending_requests} requests waiting for a reply")
    return left


async def settled(nc: Client, subs: int) -> None:
    """Wait (10 s at most) until the client holds nothing beyond ``subs``."""
    deadline = asyncio.get_running_loop().time() + 10
    while leftovers(nc, subs) and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.01)
    assert leftovers(nc, subs) == []


async def ephemerals(js: JetStream) -> list[str]:
    """The ephemeral consumers on the server, of every stream (``stream/name``): each
    test has a server of its own, so all are the client's."""
    found: list[str] = []
    async for info in js.streams():
        stream = await js.stream(info.config.name)
        found += [
            f"{info.config.name}/{c.name}"
            async for c in stream.consumers()
            if not isinstance(c.config.durable_name, str)
        ]
    return found


async def none_on_server(js: JetStream, within: float = 10.0) -> None:
    """No ephemeral consumer is left on the server within ``within`` seconds.

    The default is well under the inactive threshold of every consumer the library
    makes (30 s for an object's read, 300 s for the rest): met, the consumer was
    deleted at once. A test that leaves one to expire waits for its threshold."""
    deadline = asyncio.get_running_loop().time() + within
    while (left := await ephemerals(js)) and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.1)
    assert left == [], f"left on the server after {within:g} s"


@contextmanager
def paused(server: NatsServer) -> Iterator[None]:
    server.pause()
    try:
        yield
    finally:
        server.resume()


async def cancel(coro: Coroutine[Any, Any, Any], moment: str, server: NatsServer) -> None:
    """Run ``coro`` in a task and cancel it at ``moment``; it ends cancelled."""
    if moment == "waiting":
        with paused(server):
            task = asyncio.create_task(coro)
            await asyncio.sleep(0.2)  # written, and no answer can come
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        return
    task = asyncio.create_task(coro)
    if moment == "buffered":
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def baseline(nc: Client) -> int:
    """The client's subscriptions once its request inbox is made (it stays)."""

    async def echo(msg: jetstream.Msg) -> None:
        if msg.reply:
            await nc.publish(msg.reply, msg.data)

    await nc.subscribe("echo", cb=echo)
    assert (await nc.request("echo", b"up", timeout=5)).data == b"up"
    return nc.subscription_count


async def works(nc: Client, js: JetStream) -> None:
    assert (await nc.request("echo", b"still", timeout=5)).data == b"still"
    ack = await js.publish("cx.check", b"ok", timeout=5)
    assert ack.stream == "CX"


@pytest_asyncio.fixture
async def js(nc: Client) -> JetStream:
    js = nc.jetstream(timeout=5)
    await js.create_stream(StreamConfig(name="CX", subjects=["cx.>"]))
    return js


async def durable(js: JetStream, name: str, n: int) -> Consumer:
    stream = await js.stream("CX")
    for i in range(n):
        await js.publish(f"cx.{name}", b"%d" % i)
    return await stream.create_consumer(
        ConsumerConfig(
            durable_name=name,
            filter_subject=f"cx.{name}",
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=ACK_WAIT,
        )
    )


async def nothing_stranded(c: Consumer, given_back: list[bytes]) -> None:
    """The messages ``given_back`` are delivered again at once (a nak'd message counts as
    awaiting its ack on the server until then): a fetch gets them well before ack_wait;
    acked, nothing awaits an ack any more."""
    got: list[JsMsg] = []
    async with asyncio.timeout(ACK_WAIT / 3):
        while len(got) < len(given_back):
            got += await c.fetch(len(given_back) - len(got), expires=2)
    assert sorted(m.data for m in got) == sorted(given_back)
    for msg in got:
        await msg.ack_sync()
    await eventually(c, lambda i: i.num_ack_pending == 0 and i.num_pending == 0)


# --------------------------------------------------------------------------- core


@pytest.mark.parametrize("moment", MOMENTS)
async def test_request(nc: Client, js: JetStream, nats_server: NatsServer, moment: str) -> None:
    subs = await baseline(nc)
    await nc.subscribe("silent", cb=lambda m: None)  # takes requests, never answers
    subs += 1
    await cancel(nc.request("silent", b"?", timeout=30), moment, nats_server)
    await settled(nc, subs)
    await none_on_server(js)
    await works(nc, js)


@pytest.mark.parametrize("moment", MOMENTS)
async def test_next_msg(nc: Client, js: JetStream, nats_server: NatsServer, moment: str) -> None:
    """A cancelled ``next_msg`` leaves its subscription as it was: the next message
    goes to the next call."""
    sub = await nc.subscribe("nm")
    subs = await baseline(nc)
    await cancel(sub.next_msg(timeout=30), moment, nats_server)
    await settled(nc, subs)
    await nc.publish("nm", b"next")
    assert (await sub.next_msg(timeout=5)).data == b"next"
    assert sub.pending_msgs == 0 and not sub.closed
    await works(nc, js)


@pytest.mark.parametrize("moment", MOMENTS)
async def test_request_many(
    nc: Client, js: JetStream, nats_server: NatsServer, moment: str
) -> None:
    """``request_many`` gathers on an inbox of its own: cancelled while it waits for
    the first reply, or between two, its inbox is gone."""
    subs = await baseline(nc)

    async def twice(msg: jetstream.Msg) -> None:  # one reply now, none after
        if msg.reply:
            await nc.publish(msg.reply, b"one")

    await nc.subscribe("many", cb=twice)
    subs += 1
    await cancel(nc.request_many("many", b"?", timeout=30), moment, nats_server)
    await settled(nc, subs)
    # between two replies: the first came, the second never does
    task = asyncio.create_task(nc.request_many("many", b"?", timeout=30, stall=30))
    await until(lambda: nc.subscription_count == subs + 1, "the gatherer's inbox made")
    await nc.flush()
    await asyncio.sleep(0.2)  # its first reply in
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await settled(nc, subs)
    assert [m.data for m in await nc.request_many("many", b"?", timeout=1)] == [b"one"]
    await works(nc, js)


async def test_publish_under_backpressure(nats_server: NatsServer) -> None:
    """A core ``publish`` waits while the socket takes nothing more (the server reads
    nothing: a blackhole of the fault proxy). Cancelled there, it leaves nothing behind,
    and its message, buffered before the wait, is sent with the rest once the peer
    reads again: every message arrives once, in order."""
    payload = b"x" * 65536
    async with (
        FaultProxy(nats_server.port) as proxy,
        jetstream.connect(proxy.url, ping_interval=60) as nc,
        jetstream.connect(nats_server.url) as receiver,
    ):
        sub = await receiver.subscribe("bp", pending_bytes_limit=1 << 30)
        await receiver.flush()
        js = nc.jetstream(timeout=5)
        await js.create_stream(StreamConfig(name="CX", subjects=["cx.>"]))
        subs = await baseline(nc)
        proxy.blackhole = True
        sent = 0
        async with asyncio.timeout(120):
            while True:  # until a publish waits: the kernel's buffers are full
                task = asyncio.create_task(nc.publish("bp", b"%d." % sent + payload))
                done, _ = await asyncio.wait({task}, timeout=1.0)
                sent += 1
                if not done:
                    break
                await task
        assert nc.buffered_bytes > len(payload)  # held for the socket, which takes none
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await settled(nc, subs)
        assert nc.is_connected
        proxy.blackhole = False
        await nc.flush(timeout=60)
        got = []
        async with asyncio.timeout(60):
            while len(got) < sent:
                got.append((await sub.next_msg(timeout=30)).data.partition(b".")[0])
        assert got == [b"%d" % i for i in range(sent)]
        await nc.flush()
        assert sub.pending_msgs == 0  # none twice
        assert nc.buffered_bytes == 0
        await works(nc, js)


async def test_drain(nats_url: str, nc: Client, js: JetStream) -> None:
    """A drain cancelled while a callback still runs: the connection still closes, and
    no task is left (the conftest's check); the other client is unaffected."""
    other = await jetstream.connect(nats_url)
    release = asyncio.Event()
    got: list[bytes] = []

    async def slow(msg: jetstream.Msg) -> None:
        got.append(msg.data)
        await release.wait()

    await other.subscribe("drained", cb=slow)
    await other.flush()
    await nc.publish("drained", b"1")
    await nc.flush()
    async with asyncio.timeout(10):
        while not got:
            await asyncio.sleep(0.01)
    task = asyncio.create_task(other.drain(timeout=30))
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    release.set()
    await other.close()
    assert other.is_closed
    await baseline(nc)
    await works(nc, js)


# --------------------------------------------------------------------------- publishing


@pytest.mark.parametrize("moment", MOMENTS)
async def test_js_publish(nc: Client, js: JetStream, nats_server: NatsServer, moment: str) -> None:
    subs = await baseline(nc)
    await cancel(js.publish("cx.pub", b"x", timeout=30), moment, nats_server)
    await settled(nc, subs)
    await none_on_server(js)
    await works(nc, js)


async def test_js_publish_in_its_backoff(
    nc: Client, js: JetStream, nats_server: NatsServer
) -> None:
    """A publish with a message id whose attempt went unanswered (the server is paused)
    waits out a backoff before it asks again, 30 - 60 s here: cancelled there, between
    two requests, it leaves nothing behind."""
    subs = await baseline(nc)
    with paused(nats_server):
        task = asyncio.create_task(
            js.publish("cx.retry", b"r", msg_id="r-1", timeout=120, retry_wait=60)
        )
        await until(lambda: nc.pending_requests == 1, "the first attempt sent")
        await until(lambda: nc.pending_requests == 0, "the first attempt given up on")
        assert not task.done()  # in its backoff
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await settled(nc, subs)
    await none_on_server(js)
    await works(nc, js)


@pytest.mark.parametrize("moment", ["buffered", "waiting"])
async def test_publish_async_future(
    nc: Client, js: JetStream, nats_server: NatsServer, moment: str
) -> None:
    # the window's reply inbox, made by the first publish_async, is kept: made before
    assert (await (await js.publish_async("cx.pa", b"first"))).stream == "CX"
    subs = await baseline(nc)
    with paused(nats_server) if moment == "waiting" else _nothing():
        fut = await js.publish_async("cx.pa", b"x")
        waiter = asyncio.ensure_future(fut)
        if moment == "waiting":
            await asyncio.sleep(0.2)
        else:
            await asyncio.sleep(0)
        waiter.cancel()  # cancelling what awaits the future cancels the future
        with pytest.raises(asyncio.CancelledError):
            await waiter
    assert fut.cancelled()
    async with asyncio.timeout(10):
        while js.publish_async_pending:
            await asyncio.sleep(0.01)
    await settled(nc, subs)
    await none_on_server(js)
    more = await js.publish_async("cx.pa", b"y")
    await js.publish_async_complete(timeout=10)
    assert (await more).stream == "CX"
    await works(nc, js)


@contextmanager
def _nothing() -> Iterator[None]:
    yield


# --------------------------------------------------------------------------- pull consumers


@pytest.mark.parametrize("moment", MOMENTS)
async def test_fetch_waiting(
    nc: Client, js: JetStream, nats_server: NatsServer, moment: str
) -> None:
    c = await durable(js, "fw", 0)
    subs = await baseline(nc)
    await cancel(c.fetch(10, expires=20), moment, nats_server)
    await settled(nc, subs)
    await none_on_server(js)
    await js.publish("cx.fw", b"late")  # would go to a pull nobody waits for
    await nothing_stranded(c, [b"late"])
    await works(nc, js)


async def test_fetch_mid_stream(nc: Client, js: JetStream) -> None:
    """Three messages delivered to a fetch of ten that still waits: cancelled, they are
    given back at once, not left to ack_wait."""
    c = await durable(js, "fm", 3)
    subs = await baseline(nc)
    task = asyncio.create_task(c.fetch(10, expires=20))
    await eventually(c, lambda i: i.num_ack_pending == 3)  # all three with the fetch
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # the server may have sent them before the client read them: those still on the
    # way are given back as they come, by the time the cut inbox is dropped
    await settled(nc, subs)
    await none_on_server(js)
    assert nc.stats.stranded_naks == 3
    await nothing_stranded(c, [b"0", b"1", b"2"])
    await works(nc, js)


@pytest.mark.parametrize("moment", MOMENTS)
async def test_next(nc: Client, js: JetStream, nats_server: NatsServer, moment: str) -> None:
    c = await durable(js, "nx", 0)
    subs = await baseline(nc)
    await cancel(c.next(timeout=20), moment, nats_server)
    await settled(nc, subs)
    await none_on_server(js)
    await js.publish("cx.nx", b"late")
    await nothing_stranded(c, [b"late"])
    await works(nc, js)


async def read_then_wait(
    source: Callable[[], Any], taken: list[JsMsg], ack: int, forever: asyncio.Event
) -> None:
    """Read from ``source()`` (an async context manager of messages), ack the first
    ``ack``, then keep the next one unacked and wait."""
    async with source() as it:
        async for msg in it:
            taken.append(msg)
            if len(taken) <= ack:
                await msg.ack()
            else:
                await forever.wait()


async def test_messages_mid_stream(nc: Client, js: JetStream) -> None:
    c = await durable(js, "ms", 10)
    subs = await baseline(nc)
    taken: list[JsMsg] = []
    task = asyncio.create_task(
        read_then_wait(lambda: c.messages(max_messages=100), taken, 2, asyncio.Event())
    )
    await eventually(c, lambda i: i.num_pending == 0 and i.num_ack_pending == 8)
    await until(lambda: len(taken) == 3, "the third message in hand")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # the one the application holds unacked is its own; the seven buffered (or still on
    # the way when it stopped) are given back by the time its inbox is dropped
    await settled(nc, subs)
    await none_on_server(js)
    assert nc.stats.stranded_naks == 7
    await taken[2].nak()
    await nothing_stranded(c, [b"%d" % i for i in range(2, 10)])
    await works(nc, js)


async def test_consume_mid_stream(nc: Client, js: JetStream) -> None:
    c = await durable(js, "cs", 10)
    subs = await baseline(nc)
    handled: list[JsMsg] = []
    forever = asyncio.Event()

    async def handler(msg: JsMsg) -> None:
        handled.append(msg)
        if len(handled) <= 2:
            await msg.ack()
        else:
            await forever.wait()

    async def run() -> None:
        async with await c.consume(handler, max_messages=100):
            await forever.wait()

    task = asyncio.create_task(run())
    await eventually(c, lambda i: i.num_pending == 0 and i.num_ack_pending == 8)
    await until(lambda: len(handled) == 3, "the third message in hand")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # the handler was cancelled with the third in hand; the seven buffered (or still on
    # the way) are given back by the time its inbox is dropped
    await settled(nc, subs)
    await none_on_server(js)
    assert len(handled) == 3 and nc.stats.stranded_naks == 7
    await handled[2].nak()
    await nothing_stranded(c, [b"%d" % i for i in range(2, 10)])
    await works(nc, js)


#: the inactive threshold of the ordered consumers whose expiry a test waits for
THRESHOLD = 3.0


@pytest.mark.parametrize("call", ["next", "messages"])
async def test_ordered_consumer(
    nc: Client, js: JetStream, nats_server: NatsServer, call: str
) -> None:
    """A cancelled read leaves the ordered consumer to read on from where it was: its
    consumer is kept (the next read uses it), and expires once no read came for its
    inactive threshold, a short one here."""
    for i in range(10):
        await js.publish("cx.ord", b"%d" % i)
    subs = await baseline(nc)
    stream = await js.stream("CX")
    oc = await stream.ordered_consumer(filter_subjects=["cx.ord"], inactive_threshold=THRESHOLD)
    if call == "next":
        assert (await oc.next(timeout=5)).data == b"0"
        for moment in MOMENTS:
            await cancel(oc.next(timeout=5), moment, nats_server)
    else:
        taken: list[JsMsg] = []
        task = asyncio.create_task(read_then_wait(oc.messages, taken, 0, asyncio.Event()))
        async with asyncio.timeout(10):
            while not taken:
                await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    await settled(nc, subs)
    assert (await oc.next(timeout=5)).data == b"1"  # read on, in order
    await none_on_server(js, within=THRESHOLD + 20)  # expired, unread
    again = await stream.ordered_consumer(filter_subjects=["cx.ord"])
    assert [int((await again.next(timeout=5)).data) for _ in range(10)] == list(range(10))
    await works(nc, js)


async def test_ordered_consumer_in_its_backoff(
    nc: Client, js: JetStream, nats_server: NatsServer
) -> None:
    """The ordered consumer's consumer is gone and the server paused: its making again
    gets no answer within an attempt's wait, is reported, and backs off before the
    next. Cancelled in that pause (by the report, made just before it), the consumer
    its attempt asked for, made once the server reads on, is deleted at once (its
    inactive threshold is 300 s)."""
    await js.publish("cx.rb", b"0")
    subs = await baseline(nc)
    stream = await js.stream("CX")
    reported: list[BaseException] = []
    task: asyncio.Task[JsMsg] | None = None

    def on_error(exc: BaseException) -> None:
        reported.append(exc)
        if task is not None:
            task.cancel()

    oc = await stream.ordered_consumer(filter_subjects=["cx.rb"], error_cb=on_error)
    assert (await oc.next(timeout=5)).data == b"0"
    await oc.delete()
    with paused(nats_server):
        task = asyncio.create_task(oc.next(timeout=30))
        with pytest.raises(asyncio.CancelledError):
            await task
    assert len(reported) == 1 and isinstance(reported[0], TimeoutError), reported
    await settled(nc, subs)
    await none_on_server(js)
    await js.publish("cx.rb", b"1")
    assert (await oc.next(timeout=5)).data == b"1"  # reads on
    await oc.delete()
    await none_on_server(js)
    await works(nc, js)


def _making_answer(lost: list[bytes]) -> Callable[[bytes, bytes], bool]:
    """A ``drop_op`` of the fault proxy: drops the answers to consumer makings."""

    def drop(line: bytes, payload: bytes) -> bool:
        if b'"type":"io.nats.jetstream.api.v1.consumer_create_response"' not in payload:
            return False
        lost.append(payload)
        return True

    return drop


@pytest.mark.parametrize("call", ["ordered consumer", "object get", "kv watch"])
async def test_unanswered_consumer_making(nats_server: NatsServer, call: str) -> None:
    """The making of an ordered consumer (of the reader's own, of an object's read, of
    a watch) landed, and its answer is lost on the way (dropped by the fault proxy):
    cancelled while it waits, the consumer that only the making knew of is deleted at
    once."""
    lost: list[bytes] = []
    async with (
        FaultProxy(nats_server.port) as proxy,
        jetstream.connect(proxy.url, ping_interval=60) as nc,
    ):
        js = nc.jetstream(timeout=30)  # the making waits for its answer until cancelled
        stream = await js.create_stream(StreamConfig(name="CX", subjects=["cx.>"]))
        kv = await js.create_key_value(bucket="CXM")
        await kv.put("k", b"v")
        obs = await js.create_object_store(bucket="CXM")
        await obs.put("o", b"x" * 1000)
        subs = await baseline(nc)

        async def watch() -> None:
            async with kv.watch("k") as w:
                await w.next(timeout=30)

        coro: Coroutine[Any, Any, Any] = (
            stream.ordered_consumer()
            if call == "ordered consumer"
            else obs.get_bytes("o")
            if call == "object get"
            else watch()
        )
        proxy.drop_op = _making_answer(lost)
        task = asyncio.create_task(coro)
        await until(lambda: bool(lost), "the making's answer dropped")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        proxy.drop_op = None
        assert b'"error"' not in lost[0]  # it was made
        await settled(nc, subs)
        await none_on_server(js)
        await works(nc, js)


# --------------------------------------------------------------------------- KV and objects


@pytest.mark.parametrize("moment", MOMENTS)
@pytest.mark.parametrize("call", ["put", "get"])
async def test_kv_put_get(
    nc: Client, js: JetStream, nats_server: NatsServer, moment: str, call: str
) -> None:
    kv = await js.create_key_value(bucket="CXKV")
    await kv.put("k", b"v1")
    subs = await baseline(nc)
    coro: Awaitable[Any] = kv.put("k", b"v2") if call == "put" else kv.get("k")
    await cancel(coro, moment, nats_server)  # type: ignore[arg-type]
    await settled(nc, subs)
    await none_on_server(js)
    await kv.put("k", b"v3")
    assert (await kv.get("k")).value == b"v3"
    await works(nc, js)


async def test_kv_watch_mid_stream(nc: Client, js: JetStream) -> None:
    kv = await js.create_key_value(bucket="CXW")
    for i in range(5):
        await kv.put(f"k.{i}", b"%d" % i)
    subs = await baseline(nc)
    seen: list[str] = []

    async def watch() -> None:
        async with kv.watch("k.*") as w:
            async for entry in w:
                if entry is not None:
                    seen.append(entry.key)
                    if len(seen) == 2:
                        await asyncio.Event().wait()

    task = asyncio.create_task(watch())
    async with asyncio.timeout(10):
        while len(seen) < 2:
            await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await settled(nc, subs)
    await none_on_server(js)
    async with kv.watch("k.*") as w:
        keys = []
        async for entry in w:
            if entry is None:
                break
            keys.append(entry.key)
    assert sorted(keys) == [f"k.{i}" for i in range(5)]
    await works(nc, js)


async def test_object_put_mid_stream(nc: Client, js: JetStream) -> None:
    obs = await js.create_object_store(bucket="CXO")
    await obs.put("small", b"s")  # makes the reply inbox of the put's window (it stays)
    subs = await baseline(nc)
    sent = asyncio.Event()

    async def source() -> AsyncIterator[bytes]:
        yield b"a" * 200_000
        yield b"b" * 200_000
        sent.set()
        await asyncio.Event().wait()  # the rest never comes
        yield b""

    task = asyncio.create_task(obs.put("big", source()))
    async with asyncio.timeout(10):
        await sent.wait()
    await asyncio.sleep(0.2)  # its chunks published and acked meanwhile
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await settled(nc, subs)
    await none_on_server(js)
    info = await obs.put("big", b"whole")
    assert await obs.get_bytes("big") == b"whole" and info.size == 5
    await works(nc, js)


async def test_object_get_mid_stream(nc: Client, js: JetStream) -> None:
    obs = await js.create_object_store(bucket="CXG")
    data = bytes(range(256)) * 4096  # 1 MiB: several chunks
    await obs.put("big", data)
    subs = await baseline(nc)
    chunks: list[bytes] = []

    async def read() -> None:
        async with obs.get("big") as reader:
            async for chunk in reader:
                chunks.append(chunk)
                await asyncio.Event().wait()

    task = asyncio.create_task(read())
    async with asyncio.timeout(10):
        while not chunks:
            await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await settled(nc, subs)
    await none_on_server(js)
    assert await obs.get_bytes("big") == data
    await works(nc, js)


@pytest.mark.parametrize("moment", ["at once", "buffered"])
async def test_object_get_early(
    nc: Client, js: JetStream, nats_server: NatsServer, moment: str
) -> None:
    obs = await js.create_object_store(bucket="CXE")
    await obs.put("o", b"x" * 1000)
    subs = await baseline(nc)
    await cancel(obs.get_bytes("o"), moment, nats_server)
    await settled(nc, subs)
    await none_on_server(js)
    assert await obs.get_bytes("o") == b"x" * 1000
    await works(nc, js)
