"""A durable consumer's fetch goes on through what ends its pull request on the server.

A 409 Leadership Change or Server Shutdown (the consumer's leader moved or its server
is going away) and a reconnect end the request but not the fetch: it pulls again and
returns what comes within its ``expires``. A fetch of a consumer that does not exist
still fails at once with ``ConsumerNotFoundError``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

import jetstream
from jetstream import Client, ConsumerConfig, JetStream, StreamConfig
from jetstream._fetch import _Fetch
from jetstream.errors import ConsumerNotFoundError
from jetstream.protocol.ops import Msg as MsgOp

pytestmark = pytest.mark.asyncio


@pytest_asyncio.fixture
async def nc(nats_url: str) -> AsyncIterator[Client]:
    async with jetstream.connect(nats_url, reconnect_time_wait=0.1) as client:
        yield client


async def _running_fetch(nc: Client) -> _Fetch:
    async with asyncio.timeout(10):
        while True:
            for sub in nc._subs.values():
                if isinstance(sub, _Fetch):
                    return sub
            await asyncio.sleep(0.01)


@pytest.mark.parametrize("desc", [b"Leadership Change", b"Server Shutdown"])
async def test_a_status_that_ends_the_request_does_not_end_the_fetch(
    nc: Client, js: JetStream, desc: bytes
) -> None:
    s = await js.create_stream(StreamConfig(name="F", subjects=["f"]))
    c = await s.create_consumer(ConsumerConfig(durable_name="d"))
    task = asyncio.create_task(c.fetch(1, expires=20))
    pull = await _running_fetch(nc)
    pull._deliver(MsgOp(pull.subject, 0, None, b"", b"NATS/1.0 409 %s\r\n\r\n" % desc, 409))
    await asyncio.sleep(0.2)
    assert not task.done()  # still waiting: it pulled again
    await js.publish("f", b"after")
    msgs = await asyncio.wait_for(task, 20)
    assert [m.data for m in msgs] == [b"after"]


async def test_a_reconnect_pulls_again(nc: Client, js: JetStream) -> None:
    s = await js.create_stream(StreamConfig(name="G", subjects=["g"]))
    c = await s.create_consumer(ConsumerConfig(durable_name="d"))
    task = asyncio.create_task(c.fetch(1, expires=20))
    await _running_fetch(nc)
    await nc.force_reconnect()
    await asyncio.sleep(0.5)
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
    nats_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pull request the server never ends (here: never heard of) gives up at the
    fetch's deadline, its ``expires`` plus the connect timeout and a second, returning
    what came, and leaves no inbox, timer or hook behind."""
    async with jetstream.connect(nats_url, connect_timeout=1.0) as nc:
        js = nc.jetstream()
        s = await js.create_stream(StreamConfig(name="G", subjects=["g"]))
        c = await s.create_consumer(ConsumerConfig(durable_name="d"))
        hooks = list(nc._reconnect_hooks)
        monkeypatch.setattr(_Fetch, "_pull", lambda self, *a, **k: None)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        task = asyncio.create_task(c.fetch(5, expires=0.5))
        pull = await _running_fetch(nc)
        msg = MsgOp("g", pull._sid, None, b"came", None, 0)
        pull._deliver(msg)  # one message before the silence
        msgs = await asyncio.wait_for(task, 30)
        took = loop.time() - t0
        assert [m.data for m in msgs] == [b"came"]
        assert took >= 2.4  # 0.5 + 1.0 + 1.0: not before the deadline
        assert not [sub for sub in nc._subs.values() if isinstance(sub, _Fetch)]
        assert nc._reconnect_hooks == hooks
        assert pull._done.done()
