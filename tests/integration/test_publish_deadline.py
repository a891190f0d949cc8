"""``js.publish`` and ``publish_async`` end at a deadline, not after a count of tries.

Against a real server: a subject that no stream stores (``NoStreamError`` at once, worded
alike by both), a server restarted in the middle of a publish with a message id, and,
while the JetStream API does not answer (as during a meta leader's election), a 503
retried until the deadline: the attempts and the last cause in the error at the
deadline, and the optional cap of ``retry_attempts``. (A stream that exists but has no
leader is retried too: ``tests/faults/test_publish_election.py``, on a cluster.)
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

import jetstream
from jetstream import Client, JetStream, StreamConfig
from jetstream.embedded import NatsServer
from jetstream.errors import DisconnectedError, NoRespondersError, NoStreamError

pytestmark = pytest.mark.asyncio

FAST = {"reconnect_time_wait": 0.1, "reconnect_jitter": 0.05, "max_reconnect_attempts": -1}


@pytest_asyncio.fixture
async def nc(nats_url: str) -> AsyncIterator[Client]:
    async with jetstream.connect(nats_url, **FAST) as client:
        yield client


def unanswered(nc: Client) -> JetStream:
    """A context whose API nobody answers, as during a meta leader's election: whether a
    stream stores a subject cannot be known, so a 503 is retried until the deadline."""
    return nc.jetstream(api_prefix="NOBODY.API")


async def test_a_publish_to_a_subject_no_stream_stores_fails_at_once(js: JetStream) -> None:
    """Not at the deadline (30 s here): the first 503 asks whether a stream stores the
    subject, and none does. (Before: the publish waited for a stream made later.)"""
    loop = asyncio.get_running_loop()
    await js.create_stream(StreamConfig(name="OTHER", subjects=["other.>"]))
    t0 = loop.time()
    with pytest.raises(NoStreamError) as info:
        await js.publish("late.a", b"x", timeout=30)
    assert loop.time() - t0 < 10  # generous for a loaded machine; the deadline is 30 s
    exc = info.value
    assert isinstance(exc, NoRespondersError)  # existing handlers still catch it
    assert exc.subject == "late.a"
    assert "no stream stores subject 'late.a'" in str(exc)
    assert "jetstream stream ls" in str(exc) and "js.find_stream" in str(exc)
    assert isinstance(exc.__cause__, NoRespondersError)
    # asked again at once: still none (the answer is kept a moment: no second question)
    with pytest.raises(NoStreamError):
        await js.publish("late.a", b"x", timeout=30)
    assert js._streams.lookups == 1
    # the application makes its stream first: the context forgets what it was told
    await js.create_stream(StreamConfig(name="LATE", subjects=["late.>"]))
    ack = await js.publish("late.a", b"x", timeout=30)
    assert (ack.stream, ack.seq) == ("LATE", 1)


async def test_publish_async_fails_at_once_worded_as_publish(js: JetStream) -> None:
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    futs = [await js.publish_async("late.b", b"y", timeout=30) for _ in range(50)]
    errors = await asyncio.wait_for(asyncio.gather(*futs, return_exceptions=True), 20)
    assert loop.time() - t0 < 10  # not at the futures' deadline (30 s)
    assert all(isinstance(e, NoStreamError) for e in errors), errors
    assert js.publish_async_pending == 0
    with pytest.raises(NoStreamError) as info:
        await js.publish("late.b", b"y", timeout=30)
    assert {str(e) for e in errors} == {str(info.value)}  # one wording
    await js.create_stream(StreamConfig(name="LATE2", subjects=["late.>"]))
    ack = await asyncio.wait_for(await js.publish_async("late.b", b"y", timeout=30), 20)
    assert (ack.stream, ack.seq) == ("LATE2", 1)


async def test_the_deadline_error_says_how_many_attempts_and_why(nc: Client) -> None:
    js = unanswered(nc)
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
    assert not isinstance(info.value, NoStreamError)  # not known: retried


async def test_retry_attempts_still_caps_the_retries(nc: Client) -> None:
    js = unanswered(nc)
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


async def test_publish_async_gives_up_at_its_deadline(nc: Client) -> None:
    js = unanswered(nc)
    fut = await js.publish_async("nowhere", b"", timeout=0.8)
    with pytest.raises(NoRespondersError) as info:
        await asyncio.wait_for(fut, 10)
    assert not isinstance(info.value, NoStreamError)
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


async def test_kv_writes_fail_at_once_without_their_stream(js: JetStream) -> None:
    """A write to a bucket whose stream is gone is a publish to a subject no stream
    stores: through ``publish`` (put, create) and ``publish_async`` (delete) alike."""
    kv = await js.create_key_value(bucket="gone")
    await kv.put("k", b"v")
    await js.delete_stream("KV_gone")
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    with pytest.raises(NoStreamError, match=r"'\$KV\.gone\.k'"):
        await kv.put("k", b"v")
    with pytest.raises(NoStreamError, match=r"'\$KV\.gone\.new'"):
        await kv.create("new", b"v")
    with pytest.raises(NoStreamError, match=r"'\$KV\.gone\.k'"):
        await kv.delete("k")
    assert loop.time() - t0 < 10  # three writes, each with the context's 5 s deadline
