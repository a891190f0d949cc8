"""Cancelling every call that waits leaves nothing behind.

Each awaiting call is cancelled at several moments: at once (before its request is
written), after one turn of the loop (the request buffered or just written), while it
waits for an answer (the server is paused with SIGSTOP, so that no answer can come), and
mid-stream where the call reads a stream of messages. After each: no subscription or
request-inbox entry of the client is left (the leaked-task check of the conftest covers
the tasks), no ``publish_async`` future is pending; for consumers with acks the messages
that were in flight are not stranded (given back at once: nothing awaits an ack long
before the 30 s ack_wait); and the client still works.

The client's subscription table and request mux are read to count what is left; every
event is a real one (a cancel, a paused server, messages the server delivered).
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
from jetstream._pubasync import AsyncPublisher
from jetstream.embedded import NatsServer
from tests.integration._consumer import eventually

pytestmark = pytest.mark.asyncio

MOMENTS = ["at once", "buffered", "waiting"]
ACK_WAIT = 30.0


@pytest_asyncio.fixture
async def nc(nats_url: str) -> AsyncIterator[Client]:
    # pings far apart: a paused server must not be taken for a dead one
    async with jetstream.connect(nats_url, ping_interval=60) as client:
        yield client


def leftovers(nc: Client, subs: set[int]) -> list[str]:
    """What the client holds beyond the subscriptions ``subs`` it had before."""
    left = [
        f"subscription {sid}: {nc._subs[sid]!r}"
        for sid in set(nc._subs) - subs
        # the reply inbox of the publish_async window is made once and kept, as the mux's
        if not isinstance(nc._subs[sid], AsyncPublisher)
    ]
    # the message class a consumer's inbox registered goes with its subscription
    left += [f"message class of sid {sid}" for sid in set(nc._sid_types) - set(nc._subs)]
    if nc._mux is not None and nc._mux.waiters:
        left.append(f"request waiters: {list(nc._mux.waiters)}")
    return left


async def settled(nc: Client, subs: set[int]) -> None:
    """Wait (10 s at most) until the client holds nothing beyond ``subs``."""
    deadline = asyncio.get_running_loop().time() + 10
    while leftovers(nc, subs) and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.01)
    assert leftovers(nc, subs) == []


async def until(cond: Callable[[], bool], what: str) -> None:
    """Wait (10 s at most) until ``cond()`` holds in the client."""
    deadline = asyncio.get_running_loop().time() + 10
    while not cond():
        assert asyncio.get_running_loop().time() < deadline, what
        await asyncio.sleep(0.01)


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


async def baseline(nc: Client) -> set[int]:
    """The client's subscriptions once its request inbox is made (it stays)."""

    async def echo(msg: jetstream.Msg) -> None:
        if msg.reply:
            await nc.publish(msg.reply, msg.data)

    await nc.subscribe("echo", cb=echo)
    assert (await nc.request("echo", b"up", timeout=5)).data == b"up"
    return set(nc._subs)


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
    subs = set(nc._subs)
    await cancel(nc.request("silent", b"?", timeout=30), moment, nats_server)
    await settled(nc, subs)
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
    await works(nc, js)


@pytest.mark.parametrize("moment", ["buffered", "waiting"])
async def test_publish_async_future(
    nc: Client, js: JetStream, nats_server: NatsServer, moment: str
) -> None:
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
    assert nc.stats.stranded_naks == 3
    await nothing_stranded(c, [b"0", b"1", b"2"])
    await works(nc, js)


@pytest.mark.parametrize("moment", MOMENTS)
async def test_next(nc: Client, js: JetStream, nats_server: NatsServer, moment: str) -> None:
    c = await durable(js, "nx", 0)
    subs = await baseline(nc)
    await cancel(c.next(timeout=20), moment, nats_server)
    await settled(nc, subs)
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
    assert len(handled) == 3 and nc.stats.stranded_naks == 7
    await handled[2].nak()
    await nothing_stranded(c, [b"%d" % i for i in range(2, 10)])
    await works(nc, js)


@pytest.mark.parametrize("call", ["next", "messages"])
async def test_ordered_consumer(
    nc: Client, js: JetStream, nats_server: NatsServer, call: str
) -> None:
    for i in range(10):
        await js.publish("cx.ord", b"%d" % i)
    subs = await baseline(nc)
    stream = await js.stream("CX")
    oc = await stream.ordered_consumer(filter_subjects=["cx.ord"])
    if call == "next":
        assert (await oc.next(timeout=5)).data == b"0"
        for moment in MOMENTS:
            await cancel(oc.next(timeout=20), moment, nats_server)
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
    again = await stream.ordered_consumer(filter_subjects=["cx.ord"])
    assert [int((await again.next(timeout=5)).data) for _ in range(10)] == list(range(10))
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
    assert await obs.get_bytes("o") == b"x" * 1000
    await works(nc, js)
