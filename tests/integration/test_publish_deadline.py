"""``js.publish`` and ``publish_async`` end at a deadline, not after a count of tries.

Against a real server: a stream that appears after the publish started, a server
restarted in the middle of a publish with a message id, the attempts and the last
cause in the error at the deadline, and the optional cap of ``retry_attempts``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

import jetstream
from jetstream import Client, JetStream, StreamConfig
from jetstream.embedded import NatsServer
from jetstream.errors import DisconnectedError, NoRespondersError

pytestmark = pytest.mark.asyncio

FAST = {"reconnect_time_wait": 0.1, "reconnect_jitter": 0.05, "max_reconnect_attempts": -1}


@pytest_asyncio.fixture
async def nc(nats_url: str) -> AsyncIterator[Client]:
    async with jetstream.connect(nats_url, **FAST) as client:
        yield client


async def test_a_publish_waits_for_a_stream_made_after_it_started(js: JetStream) -> None:
    task = asyncio.create_task(js.publish("late.a", b"x", timeout=10))
    await asyncio.sleep(1.5)
    assert not task.done()  # still retrying: no stream answered yet
    await js.create_stream(StreamConfig(name="LATE", subjects=["late.>"]))
    ack = await asyncio.wait_for(task, 10)
    assert (ack.stream, ack.seq) == ("LATE", 1)


async def test_publish_async_waits_for_a_stream_made_after_it_started(js: JetStream) -> None:
    fut = await js.publish_async("late.b", b"y", timeout=10)
    await asyncio.sleep(1.0)
    assert not fut.done()
    await js.create_stream(StreamConfig(name="LATE2", subjects=["late.>"]))
    ack = await asyncio.wait_for(fut, 10)
    assert (ack.stream, ack.seq) == ("LATE2", 1)
    assert js.publish_async_pending == 0


async def test_the_deadline_error_says_how_many_attempts_and_why(js: JetStream) -> None:
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    with pytest.raises(NoRespondersError) as info:
        await js.publish("nowhere", b"", timeout=1.0)
    took = loop.time() - t0
    assert 0.9 <= took < 5.0  # the whole call's deadline, not one attempt's
    assert info.value.attempts >= 3  # backoff from about 50 ms: several in a second
    assert f"{info.value.attempts} attempt(s)" in str(info.value)
    assert "'nowhere'" in str(info.value)
    assert isinstance(info.value.__cause__, NoRespondersError)


async def test_retry_attempts_still_caps_the_retries(js: JetStream) -> None:
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    with pytest.raises(NoRespondersError, match="2 attempt") as info:
        await js.publish("nowhere", b"", retry_attempts=1, retry_wait=0.1, timeout=30)
    assert info.value.attempts == 2
    # one backoff between the two: half to all of retry_wait (jitter), never the deadline
    assert 0.04 <= loop.time() - t0 < 5.0
    with pytest.raises(NoRespondersError) as info:
        await js.publish("nowhere", b"", retry_attempts=0)
    assert info.value.attempts == 1


async def test_publish_async_gives_up_at_its_deadline(js: JetStream) -> None:
    fut = await js.publish_async("nowhere", b"", timeout=0.8)
    with pytest.raises(NoRespondersError) as info:
        await asyncio.wait_for(fut, 10)
    assert info.value.attempts >= 2
    assert js.publish_async_pending == 0


async def test_a_publish_with_an_id_goes_through_a_server_restart(
    nats_server: NatsServer, nc: Client, js: JetStream
) -> None:
    await js.create_stream(StreamConfig(name="R", subjects=["r.>"]))
    await js.publish("r.a", b"before", msg_id="m-0")
    nats_server.kill()
    task = asyncio.create_task(js.publish("r.a", b"during", msg_id="m-1", timeout=20))
    fut = await js.publish_async("r.a", b"async", msg_id="m-2", timeout=20)
    await asyncio.sleep(1.0)
    assert not task.done() and not fut.done()
    await nats_server.restart_async()
    ack = await asyncio.wait_for(task, 25)
    ack2 = await asyncio.wait_for(fut, 25)
    assert ack.stream == ack2.stream == "R"
    info = await js.stream("R")
    state = (await info.info()).state
    assert state.messages == 3  # each stored once
    got = sorted([(await info.get_msg(seq)).data for seq in (1, 2, 3)])
    assert got == [b"async", b"before", b"during"]


async def test_without_an_id_a_lost_connection_is_not_retried(
    nats_server: NatsServer, nc: Client, js: JetStream
) -> None:
    await js.create_stream(StreamConfig(name="N", subjects=["n.>"]))
    # A subscriber that never answers stands in for a stream that stored the message
    # but whose ack was lost: the connection is cut while the publish waits.
    blocker = await nc.subscribe("hold")
    await nc.flush()
    task = asyncio.create_task(js.publish("hold", b"x", timeout=20))
    await asyncio.sleep(0.3)
    nats_server.kill()
    with pytest.raises(DisconnectedError):
        await asyncio.wait_for(task, 10)
    await nats_server.restart_async()
    await blocker.unsubscribe()
