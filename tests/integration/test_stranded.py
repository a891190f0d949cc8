"""Nothing stranded: a message the server delivers for a pull that nobody waits for any
more comes back at once, never after the consumer's ``ack_wait``.

Every consumer here has an ``ack_wait`` of 30 s or more and every bound is far below it:
a message left to ``ack_wait`` fails the test, however loaded the machine.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

import jetstream
from jetstream import Client, Consumer, ConsumerConfig, JetStream, JsMsg, StreamConfig
from jetstream.embedded import NatsServer
from tests.integration._consumer import eventually
from tests.integration._wait import until

pytestmark = pytest.mark.asyncio

ACK_WAIT = 30.0
#: far below ACK_WAIT: what comes back at once comes within it on a loaded machine
SOON = 10.0


@pytest_asyncio.fixture
async def nc(nats_url: str) -> AsyncIterator[Client]:
    async with jetstream.connect(nats_url, reconnect_time_wait=0.1) as client:
        yield client


async def _consumer(js: JetStream, name: str) -> Consumer:
    s = await js.create_stream(StreamConfig(name=name, subjects=[name.lower()]))
    return await s.create_consumer(ConsumerConfig(durable_name="d", ack_wait=ACK_WAIT))


async def _publish_together(js: JetStream, subject: str, n: int, start: int = 0) -> None:
    """``n`` messages written in one go: the server serves them before it reads what
    the client does about the first."""
    futures = [await js.publish_async(subject, b"%d" % (start + i)) for i in range(n)]
    await asyncio.gather(*futures)


async def _waiting(c: Consumer, n: int) -> None:
    """Until the consumer holds ``n`` pull requests (asked again across a reconnect)."""
    last: object = None
    async with asyncio.timeout(SOON):
        while True:
            try:
                last = (await c.info()).num_waiting
            except jetstream.NatsError as exc:
                last = exc
            if last == n:
                return
            await asyncio.sleep(0.05)


async def _two_pulls(nc: Client, c: Consumer) -> asyncio.Task[JsMsg]:
    """A ``next()`` whose first pull is alive on the server when a reconnect makes it
    pull again (the server keeps a request while its inbox has interest: the reconnect
    subscribes it again)."""
    task = asyncio.create_task(c.next(timeout=SOON * 2))
    await _waiting(c, 1)
    await nc.force_reconnect()
    await _waiting(c, 2)
    return task


@pytest.mark.parametrize("call", ["next", "fetch"])
async def test_a_loop_started_as_the_server_comes_back_gets_every_message_at_once(
    nats_server: NatsServer, call: str
) -> None:
    """The issue's loop: after a restart, a ``next()`` (or ``fetch(10)``) made while the
    client still reconnects waits in the reconnect buffer; every message comes within
    seconds, none after ``ack_wait``, and none is left pending."""
    # one reconnect attempt every 3 s (2 s by default): the loop surely starts before it
    async with jetstream.connect(nats_server.url, reconnect_time_wait=3.0) as nc:
        js = nc.jetstream()
        c = await _consumer(js, "R")
        await _publish_together(js, "r", 300)
        for _ in range(100):
            await (await c.next(timeout=5)).ack_sync()
        await nats_server.stop_async()
        await asyncio.sleep(0.5)
        await nats_server.start_async()
        loop = asyncio.get_running_loop()
        back = loop.time()
        seen: set[int] = set()
        async with asyncio.timeout(SOON * 2):
            while len(seen) < 200:
                try:
                    if call == "next":
                        msgs = [await c.next(timeout=3)]
                    else:
                        msgs = await c.fetch(10, expires=3)
                except jetstream.TimeoutError:
                    continue
                for m in msgs:
                    seen.add(int(m.data))
                    await m.ack_sync()
        assert seen == set(range(100, 300))
        assert loop.time() - back < SOON
        await eventually(c, lambda i: i.num_ack_pending == 0 and i.num_pending == 0)


async def test_a_pull_made_while_reconnecting_is_not_made_again(
    nats_server: NatsServer, nc: Client, js: JetStream
) -> None:
    c = await _consumer(js, "B")
    await nats_server.stop_async()
    await until(lambda: not nc.is_connected, "disconnected")
    task = asyncio.create_task(c.next(timeout=SOON * 2))
    await asyncio.sleep(0.1)  # the pull is in the reconnect buffer
    await nats_server.start_async()
    await until(lambda: nc.is_connected, "reconnected")
    await _waiting(c, 1)
    await asyncio.sleep(0.5)
    assert (await c.info()).num_waiting == 1  # the reconnect hook did not pull again
    await js.publish("b", b"x")
    assert (await asyncio.wait_for(task, SOON)).data == b"x"
    assert nc.stats.stranded_naks == 0


async def test_what_a_second_live_pull_brings_is_given_back(nc: Client, js: JetStream) -> None:
    """Two pulls of one ``next()`` served at once: it returns the first message; the
    second is given back with a nak at once and the next call gets it."""
    c = await _consumer(js, "T")
    task = await _two_pulls(nc, c)
    await _publish_together(js, "t", 2)
    first = await asyncio.wait_for(task, SOON)
    assert first.data == b"0"
    m = await c.next(timeout=SOON)
    assert m.data == b"1" and m.metadata.num_delivered == 2
    assert nc.stats.stranded_naks == 1
    await jetstream.ack_sync_all([first, m])
    await eventually(c, lambda i: i.num_ack_pending == 0 and i.num_waiting == 0)


async def test_a_fetch_that_returned_keeps_its_other_pull_until_it_delivers(
    nc: Client, js: JetStream
) -> None:
    """A ``next()`` returns while its other pull is still alive: the inbox stays
    subscribed (it lingers) until that pull has delivered, and gives the message back."""
    c = await _consumer(js, "L")
    before = nc.subscription_count
    task = await _two_pulls(nc, c)
    await js.publish("l", b"0")
    first = await asyncio.wait_for(task, SOON)
    assert first.data == b"0"
    assert nc.subscription_count == before + 1  # its inbox lingers
    await js.publish("l", b"1")  # to the lingering pull, the only one waiting
    await until(lambda: nc.stats.stranded_naks == 1, "given back")
    assert nc.subscription_count == before  # all it owed came: gone
    m = await c.next(timeout=SOON)
    assert m.data == b"1" and m.metadata.num_delivered == 2
    await jetstream.ack_sync_all([first, m])
    await eventually(c, lambda i: i.num_ack_pending == 0 and i.num_waiting == 0)


async def test_a_cancelled_fetch_gives_back_what_it_had(nc: Client, js: JetStream) -> None:
    c = await _consumer(js, "C")
    await _publish_together(js, "c", 3)
    before = nc.subscription_count
    task = asyncio.create_task(c.fetch(10, expires=SOON * 2))
    await eventually(c, lambda i: i.num_ack_pending == 3)  # all three with the fetch
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    msgs = await c.fetch(3, expires=SOON)
    assert sorted(m.data for m in msgs) == [b"0", b"1", b"2"]
    assert all(m.metadata.num_delivered == 2 for m in msgs)
    assert nc.stats.stranded_naks == 3
    await nc.flush()
    assert nc.subscription_count == before  # its inbox is gone too


async def test_a_stopped_iterator_gives_back_its_buffer(nc: Client, js: JetStream) -> None:
    c = await _consumer(js, "I")
    await _publish_together(js, "i", 10)
    before = nc.subscription_count
    async with c.messages(max_messages=10, expires=SOON * 2) as it:
        first = await it.next(timeout=SOON)
        await first.ack_sync()
        await until(lambda: it.pending == 9, "the buffer filled")
    msgs = await c.fetch(9, expires=SOON)
    assert sorted(int(m.data) for m in msgs) == list(range(1, 10))
    assert nc.stats.stranded_naks == 9
    await jetstream.ack_sync_all(msgs)
    await eventually(c, lambda i: i.num_ack_pending == 0)
    await nc.flush()
    assert nc.subscription_count == before
