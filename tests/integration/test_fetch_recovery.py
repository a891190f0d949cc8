"""A durable consumer's fetch goes on through what ends its pull request on the server.

A 409 Server Shutdown (its server is going away; the 409 Leadership Change of a leader
that moved is in tests/faults/test_cluster_consume.py) and a reconnect end the request
but not the fetch: it pulls again and
returns what comes within its ``expires``. A fetch of a consumer that does not exist
still fails at once with ``ConsumerNotFoundError``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

import jetstream
from jetstream import Client, ConsumerConfig, JetStream, Msg, StreamConfig, Subscription
from jetstream.embedded import NatsServer
from jetstream.errors import ConsumerNotFoundError
from tests.integration._feed import feed, hmsg, sid_of
from tests.integration._wait import until

pytestmark = pytest.mark.asyncio


@pytest_asyncio.fixture
async def nc(nats_url: str) -> AsyncIterator[Client]:
    async with jetstream.connect(nats_url, reconnect_time_wait=0.1) as client:
        yield client


async def _pulls(nc: Client, stream: str, consumer: str) -> Subscription:
    """A subscription of ``nc`` that sees the consumer's pull requests as the server
    gets them (a request's reply subject is its fetch's inbox)."""
    sub = await nc.subscribe(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}")
    await nc.flush()
    return sub


async def _statuses(url: str, found: list[bytes]) -> Client:
    """A second connection subscribed to every inbox: it sees the status messages the
    server sends to the fetch's inbox (their header blocks go to ``found``, from the read
    loop itself: a plain callback runs as the bytes are parsed, not in a task that the
    connection's close may cancel first)."""
    watcher = await jetstream.connect(url, max_reconnect_attempts=0)

    def seen(msg: Msg) -> None:
        if msg.raw_headers:
            found.append(bytes(msg.raw_headers))

    await watcher.subscribe("_INBOX.>", cb=seen)
    await watcher.flush()
    return watcher


async def test_a_server_shutdown_does_not_end_the_fetch(nats_server: NatsServer) -> None:
    """A server stopping (SIGTERM) ends its consumers' pull requests with a real 409
    Server Shutdown before it closes the connection. The fetch pulls again, across the
    server's restart, and returns what comes within its ``expires``. (The 409 Leadership
    Change of a consumer leader that moved is in tests/faults/test_cluster_consume.py.)"""
    found: list[bytes] = []
    url = nats_server.url
    async with jetstream.connect(url, reconnect_time_wait=0.1, max_reconnect_attempts=-1) as nc:
        watcher = await _statuses(url, found)
        js = nc.jetstream()
        s = await js.create_stream(StreamConfig(name="F", subjects=["f"]))
        c = await s.create_consumer(ConsumerConfig(durable_name="d"))
        pulls = await _pulls(nc, "F", "d")
        task = asyncio.create_task(c.fetch(1, expires=30))
        try:
            await pulls.next_msg(timeout=10)  # the server has the request
            await nats_server.stop_async()
            # The server sent the 409 before it exited; the watcher's loop reads it a
            # moment later (on a loaded machine, after stop_async has returned).
            await until(lambda: any(b"409 Server Shutdown" in h for h in found), "the 409 seen")
            assert not task.done()  # still waiting: it pulled again
            await asyncio.to_thread(nats_server.start)
            await js.publish("f", b"after", timeout=20)
            msgs = await asyncio.wait_for(task, 30)
            assert [m.data for m in msgs] == [b"after"]
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await watcher.close()


async def test_a_leadership_change_status_alone_does_not_end_the_fetch(
    nc: Client, js: JetStream
) -> None:
    """The 409 Leadership Change on its own, delivered to the fetch by hand.

    Injected because no real server sends it without also announcing the election: a
    single server never changes leader, and in a cluster the step-down's leader advisory
    makes the fetch pull again by itself, whatever the 409 does (the real step-down is
    test_cluster_consume's test_a_leadership_change_does_not_end_the_fetch, which cannot
    tell the two apart)."""
    s = await js.create_stream(StreamConfig(name="F", subjects=["f"]))
    c = await s.create_consumer(ConsumerConfig(durable_name="d"))
    pulls = await _pulls(nc, "F", "d")
    task = asyncio.create_task(c.fetch(1, expires=20))
    inbox = (await pulls.next_msg(timeout=10)).reply
    assert inbox is not None
    hdr = b"NATS/1.0 409 Leadership Change\r\n\r\n"
    feed(nc, hmsg(inbox, sid_of(nc, inbox), hdr))
    await pulls.next_msg(timeout=10)  # it pulled again
    assert not task.done()  # still waiting
    await js.publish("f", b"after")
    msgs = await asyncio.wait_for(task, 20)
    assert [m.data for m in msgs] == [b"after"]


async def test_a_reconnect_pulls_again(nc: Client, js: JetStream) -> None:
    s = await js.create_stream(StreamConfig(name="G", subjects=["g"]))
    c = await s.create_consumer(ConsumerConfig(durable_name="d"))
    pulls = await _pulls(nc, "G", "d")
    task = asyncio.create_task(c.fetch(1, expires=20))
    await pulls.next_msg(timeout=10)
    await nc.force_reconnect()
    await pulls.next_msg(timeout=10)  # it pulled again, once reconnected
    assert not task.done()
    await js.publish("g", b"after")
    msgs = await asyncio.wait_for(task, 20)
    assert [m.data for m in msgs] == [b"after"]
    assert nc.stats.reconnects == 1


async def test_a_missing_consumer_fails_at_once(js: JetStream) -> None:
    s = await js.create_stream(StreamConfig(name="H", subjects=["h"]))
    c = await s.create_consumer(ConsumerConfig(durable_name="gone"))
    await s.delete_consumer("gone")
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    with pytest.raises(ConsumerNotFoundError):
        await c.fetch(1, expires=20)
    assert loop.time() - t0 < 10


async def test_a_request_the_server_never_closes_ends_the_fetch_with_what_came(
    nats_server: NatsServer,
) -> None:
    """A pull request the server never ends (here: its server froze, SIGSTOP, after one
    message) gives up at the fetch's deadline, its ``expires`` plus the connect timeout
    and a second, returning what came, and leaves no timer or hook behind, nor its inbox
    once its request has ended."""
    async with jetstream.connect(nats_server.url, connect_timeout=1.0) as nc:
        js = nc.jetstream()
        s = await js.create_stream(StreamConfig(name="G", subjects=["g"]))
        c = await s.create_consumer(ConsumerConfig(durable_name="d"))
        await js.publish("g", b"came")
        inboxes = await nc.subscribe("_INBOX.>")  # sees what the fetch's inbox gets
        await nc.flush()
        before = nc.subscription_count
        hooks = list(nc._reconnect_hooks)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        task = asyncio.create_task(c.fetch(5, expires=3.0))
        try:
            async with asyncio.timeout(10):  # one message before the silence
                while (await inboxes.next_msg(timeout=10)).data != b"came":
                    pass
            await nc.flush()  # after it: the fetch has it too
            nats_server.pause()  # well before the request's 3 s expiry
            assert loop.time() - t0 < 2.5, "too slow to freeze the server before the expiry"
            msgs = await asyncio.wait_for(task, 30)
        finally:
            nats_server.resume()
        took = loop.time() - t0
        assert [m.data for m in msgs] == [b"came"]
        assert took >= 4.9  # 3.0 + 1.0 + 1.0: not before the deadline
        async with asyncio.timeout(10):  # its inbox lingers until its request has ended
            while nc.subscription_count != before:
                await asyncio.sleep(0.01)
        assert nc._reconnect_hooks == hooks
