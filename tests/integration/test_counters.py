"""Distributed counters (ADR-49) against a real nats-server: totals of any size, many
concurrent writers, a restart, reads one by one and in batches (past the server's 1,024
subjects a batch), the totals of sourced streams, and the refusals of a non-counter
stream."""

from __future__ import annotations

import asyncio
import random

import pytest

from jetstream import (
    BadSubjectError,
    Client,
    CounterDisabledError,
    CounterEntry,
    CounterNotFoundError,
    CounterRefusedError,
    JetStream,
    NatsError,
    StreamConfig,
)
from jetstream.api import StorageType, StreamSource, SubjectTransformConfig
from jetstream.counter import Counter
from jetstream.embedded import NatsServer

pytestmark = pytest.mark.asyncio


async def _counter(js: JetStream, name: str = "HITS", *, direct: bool = True) -> Counter:
    prefix = name.lower()
    await js.create_stream(
        StreamConfig(
            name=name, subjects=[f"{prefix}.>"], allow_msg_counter=True, allow_direct=direct
        )
    )
    return await js.counter(name)


async def test_add_and_get(js: JetStream) -> None:
    c = await _counter(js)
    assert repr(c) == "<Counter 'HITS'>"
    assert await c.add("hits.home", 1) == 1
    assert await c.add("hits.home", 41) == 42
    assert await c.add("hits.home", -50) == -8
    assert await c.add("hits.home", 0) == -8
    big = 10**40 + 7
    assert await c.add("hits.big", big) == big
    assert await c.add("hits.big", big) == 2 * big
    assert await c.get("hits.home") == -8
    assert await c.get("hits.big") == 2 * big
    entry = await c.get_entry("hits.home")
    assert (entry.subject, entry.value, entry.increment, entry.sources) == ("hits.home", -8, 0, {})
    assert entry.seq == 4 and entry.time is not None
    with pytest.raises(CounterNotFoundError, match=r"no counter on 'hits\.none'"):
        await c.get("hits.none")
    # what is stored is the ADR's layout: the total in the body, the increment in a header
    raw = await c.stream.get_msg(last_by_subject="hits.big")
    assert raw.data == b'{"val":"%d"}' % (2 * big)
    assert raw.headers["Nats-Incr"] == f"+{big}"


async def test_eight_writers_of_random_signed_sizes(js: JetStream) -> None:
    c = await _counter(js)
    rng = random.Random(49)
    plans = [[rng.randint(-(10**12), 10**12) for _ in range(1000)] for _ in range(8)]

    async def writer(steps: list[int]) -> list[int]:
        return [await c.add("hits.all", n, timeout=30) for n in steps]

    async with asyncio.timeout(240):
        totals = await asyncio.gather(*(writer(p) for p in plans))
    expected = sum(map(sum, plans))
    assert await c.get("hits.all") == expected
    # every add saw a total no other add saw, and the last of them is the sum
    seen = [t for ts in totals for t in ts]
    assert len(seen) == 8000 and expected in seen
    assert (await c.stream.info()).state.messages == 8000


async def test_a_counter_survives_a_restart(nats_server: NatsServer, nc: Client) -> None:
    js = nc.jetstream()
    await js.create_stream(
        StreamConfig(
            name="DURABLE",
            subjects=["durable.>"],
            storage=StorageType.FILE,
            allow_msg_counter=True,
            allow_direct=True,
        )
    )
    c = await js.counter("DURABLE")
    for n in (5, 10**25, -3):
        await c.add("durable.x", n)
    await c.add("durable.y", 7)
    await nats_server.restart_async()
    async with asyncio.timeout(30):
        while True:
            try:
                after = await c.get("durable.x")
                break
            except NatsError:  # reconnecting, JetStream recovering
                await asyncio.sleep(0.2)
    assert after == 10**25 + 2
    assert await c.add("durable.x", 1, timeout=20) == 10**25 + 3
    assert await (await js.counter("DURABLE")).get_many() == {
        "durable.y": 7,
        "durable.x": 10**25 + 3,
    }


async def test_a_stream_that_is_not_a_counter_refuses(js: JetStream) -> None:
    await js.create_stream(StreamConfig(name="PLAIN", subjects=["plain.>"]))
    with pytest.raises(CounterDisabledError) as made:
        await js.counter("PLAIN")
    assert made.value.err_code == 10168 and "allow_msg_counter" in str(made.value)
    # the server says the same of a Nats-Incr publish
    with pytest.raises(CounterDisabledError) as sent:
        await js.publish("plain.a", b"", headers={"Nats-Incr": "+1"})
    assert (sent.value.err_code, sent.value.code) == (10168, 400)
    assert (await (await js.stream("PLAIN")).info()).state.messages == 0


async def test_what_a_counter_stream_refuses(js: JetStream) -> None:
    c = await _counter(js)
    with pytest.raises(TypeError, match=r"a counter adds an int, not float 1\.5"):
        await c.add("hits.a", 1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="a counter adds an int, not bool True"):
        await c.add("hits.a", True)
    with pytest.raises(BadSubjectError, match=r"does not store 'other\.a'"):
        await c.add("other.a", 1)
    with pytest.raises(BadSubjectError, match=r"'hits\.\*': contains the wildcard token"):
        await c.add("hits.*", 1)
    for headers, payload, err_code in (
        ({"Nats-Incr": "+1"}, b"x", 10170),
        ({}, b"", 10169),
        ({"Nats-Incr": "1.5"}, b"", 10171),
        ({"Nats-Incr": "+1", "Nats-Expected-Last-Sequence": "0"}, b"", 10171),
    ):
        with pytest.raises(CounterRefusedError) as info:
            await js.publish("hits.a", payload, headers=headers or None)
        assert info.value.err_code == err_code
    assert (await c.stream.info()).state.messages == 0
    # the config the server refuses with counters
    for config in (
        StreamConfig(name="C1", subjects=["c1"], allow_msg_counter=True, allow_msg_ttl=True),
        StreamConfig(name="C2", subjects=["c2"], allow_msg_counter=True, retention="workqueue"),  # type: ignore[arg-type]
    ):
        with pytest.raises(Exception, match="counter stream"):
            await js.create_stream(config)


async def test_an_increment_with_a_msg_id_counts_once(js: JetStream) -> None:
    c = await _counter(js)
    await c.add("hits.a", 10)
    assert await c.add("hits.a", 5, msg_id="click-1") == 15
    await c.add("hits.a", 100)
    # the repeat is not counted, and answers with the total it made
    assert await c.add("hits.a", 5, msg_id="click-1") == 15
    assert await c.get("hits.a") == 115


@pytest.mark.parametrize("direct", [True, False])
async def test_get_many(js: JetStream, direct: bool) -> None:
    c = await _counter(js, direct=direct)
    for subject, n in (("hits.a.x", 1), ("hits.b.x", 2), ("hits.a.y", 3), ("hits.a.x", 4)):
        await c.add(subject, n)
    assert await c.get_many("hits.a.*") == {"hits.a.y": 3, "hits.a.x": 5}
    assert await c.get_many("hits.*.x", "hits.a.y") == {"hits.b.x": 2, "hits.a.y": 3, "hits.a.x": 5}
    assert await c.get_many() == {"hits.b.x": 2, "hits.a.y": 3, "hits.a.x": 5}
    assert await c.get_many("hits.none.>") == {}
    entries = [e async for e in c.entries("hits.a.>")]
    assert all(isinstance(e, CounterEntry) for e in entries)
    assert [(e.subject, e.value, e.increment) for e in entries] == [
        ("hits.a.y", 3, 3),
        ("hits.a.x", 5, 4),
    ]


@pytest.mark.parametrize("direct", [True, False])
async def test_get_many_past_the_servers_batch_limit(js: JetStream, direct: bool) -> None:
    """The server reads the last messages of at most 1,024 subjects in one batch (413 Too
    Many Results past that): the counters are listed, then read in chunks; without
    direct gets, one by one. Either way in stream order."""
    c = await _counter(js, direct=direct)
    n = 1100
    futures = [
        await js.publish_async(f"hits.k{i}", b"", headers={"Nats-Incr": f"+{i}"}) for i in range(n)
    ]
    await js.publish_async_complete(timeout=60)
    assert all(f.result().val == str(i) for i, f in enumerate(futures))
    got = await c.get_many("hits.>", timeout=30)
    assert got == {f"hits.k{i}": i for i in range(n)}
    assert list(got) == [f"hits.k{i}" for i in range(n)]


async def test_an_aggregate_of_sourced_counters(js: JetStream) -> None:
    """Two regions count on their own subjects; a third stream sources both into one
    subject and holds the sum, and each region's last total."""
    eu = await _counter(js, "EU")
    us = await _counter(js, "US")
    await eu.add("eu.hits", 10)
    await us.add("us.hits", 5)
    await js.create_stream(
        StreamConfig(
            name="GLOBAL",
            allow_msg_counter=True,
            allow_direct=True,
            sources=[
                StreamSource(
                    name=region,
                    subject_transforms=[
                        SubjectTransformConfig(src=f"{region.lower()}.>", dest="global.>")
                    ],
                )
                for region in ("EU", "US")
            ],
        )
    )
    total = await js.counter("GLOBAL")
    await eu.add("eu.hits", 1)
    await us.add("us.hits", -2)
    async with asyncio.timeout(30):
        while True:
            try:
                entry = await total.get_entry("global.hits")
            except CounterNotFoundError:
                entry = None
            if entry is not None and entry.value == 14 and len(entry.sources) == 2:
                break
            await asyncio.sleep(0.1)
    assert entry.sources == {"EU": {"eu.hits": 11}, "US": {"us.hits": 3}}
    assert await total.get_many() == {"global.hits": 14}
    # the aggregate stores no subject of its own: it is read, not added to
    with pytest.raises(BadSubjectError, match="only sources others"):
        await total.add("global.hits", 1)
