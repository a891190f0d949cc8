"""An ordered consumer recovers from a server restart the same way in every read mode.

``fetch``, ``next``, ``messages`` and ``consume`` read half of a stream, the server
is killed and restarted (file store: the stream survives, the ordered consumer's
memory-stored consumer does not), more is published, and the rest is read: every
message once, in order, and no error raised to the reader.
"""

from __future__ import annotations

import asyncio

import pytest

import jetstream
from jetstream import JsMsg, StreamConfig
from jetstream.embedded import NatsServer

pytestmark = pytest.mark.asyncio

FAST = {"reconnect_time_wait": 0.1, "reconnect_jitter": 0.05, "max_reconnect_attempts": -1}
N = 40


async def _read(oc: jetstream.OrderedConsumer, mode: str, got: list[int]) -> None:
    """Read with ``mode`` until ``N`` messages came, appending their stream sequences
    to ``got``; the reader stays in its mode (one iterator) across the restart."""

    async def take(msg: JsMsg) -> None:
        got.append(msg.metadata.sequence.stream)

    if mode == "fetch":
        while len(got) < N:
            for m in await oc.fetch(7, expires=2):
                await take(m)
    elif mode == "next":
        while len(got) < N:
            try:
                await take(await oc.next(timeout=2))
            except jetstream.TimeoutError:
                continue
    elif mode == "messages":
        async with oc.messages(max_messages=5, expires=2) as it:
            async for m in it:
                await take(m)
                if len(got) >= N:
                    break
    else:
        done = asyncio.Event()

        async def handler(m: JsMsg) -> None:
            await take(m)
            if len(got) >= N:
                done.set()

        async with await oc.consume(handler, max_messages=5, expires=2):
            await done.wait()


@pytest.mark.parametrize("mode", ["fetch", "next", "messages", "consume"])
async def test_every_read_mode_recovers_from_a_restart(nats_server: NatsServer, mode: str) -> None:
    errors: list[BaseException] = []
    async with jetstream.connect(nats_server.url, error_cb=errors.append, **FAST) as nc:
        js = nc.jetstream()
        s = await js.create_stream(StreamConfig(name="ORD", subjects=["ord.>"]))
        for i in range(N // 2):
            await js.publish("ord.a", b"%d" % i)
        oc = await s.ordered_consumer()
        got: list[int] = []
        reader = asyncio.create_task(_read(oc, mode, got))
        async with asyncio.timeout(60):
            while len(got) < N // 2:
                await asyncio.sleep(0.01)
            nats_server.kill()
            await nats_server.restart_async()
            for i in range(N // 2, N):
                await js.publish("ord.a", b"%d" % i, timeout=20)
            await reader  # raises what reached the reader, if anything did
        assert got == list(range(1, N + 1)), got  # all, once, in order
        assert oc.resets >= 1  # the consumer was made again after the restart
        await oc.delete()
    # what went wrong on the way went to the error callback, not to the reader
    assert all(isinstance(e, jetstream.NatsError) for e in errors)
