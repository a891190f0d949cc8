"""Publishing with message ids through the kill -9 of an R3 stream's leader.

The application's loop is the plain one: ``await js.publish(..., msg_id=..., timeout=20)``
per message, from a few tasks at once. The client owns the retries (no responders
while a new leader is elected, lost connections, unanswered attempts), so nothing
reaches the application, and the stream's deduplication keeps every id stored once.

A publish waiting out the election is sent again as soon as the stream's new leader is
announced, not at its next backoff tick: with a backoff made 30 - 60 s long, the
publish must still complete well within that. A stream that exists but that nothing
serves (its only node is down) is waited for, not refused with ``NoStreamError``.
``kill_round`` measures the pause between the announcement and publishing resuming
(``make faults-report``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

import jetstream
from jetstream import Client, JetStream, StreamConfig
from jetstream.core import Msg
from jetstream.embedded import NatsCluster
from tests.faults.placing import placed

pytestmark = pytest.mark.asyncio

N = 20_000
TASKS = 8


@pytest.fixture(scope="module")
def cluster() -> Iterator[NatsCluster]:
    with NatsCluster(size=3) as c:
        yield c


async def test_msg_id_publishes_see_no_error_across_a_leader_kill(cluster: NatsCluster) -> None:
    killed: list[int] = []
    try:
        async with jetstream.connect(
            cluster.urls, reconnect_time_wait=0.1, max_reconnect_attempts=-1
        ) as nc:
            js = nc.jetstream()
            stream = await placed(
                lambda: js.create_stream(
                    StreamConfig(name="EL", subjects=["el"], num_replicas=3, duplicate_window=300)
                )
            )
            info = await stream.info()
            assert info.cluster is not None and info.cluster.leader
            leader = next(
                i for i, s in enumerate(cluster.servers) if s.server_name == info.cluster.leader
            )
            errors: list[BaseException] = []
            done = 0
            seqs: set[int] = set()

            async def publisher(k: int) -> None:
                nonlocal done
                for i in range(k, N, TASKS):
                    try:
                        ack = await js.publish("el", b"%d" % i, msg_id=f"el-{i}", timeout=20)
                    except jetstream.NatsError as exc:  # what the application would see
                        errors.append(exc)
                        continue
                    seqs.add(ack.seq)
                    done += 1

            tasks = [asyncio.create_task(publisher(k)) for k in range(TASKS)]
            async with asyncio.timeout(240):
                while done < N // 4:
                    await asyncio.sleep(0.05)
                at_kill = done
                killed.append(leader)
                await asyncio.to_thread(cluster.kill, leader)
                await asyncio.gather(*tasks)
            assert at_kill < N  # the kill came in the middle of the run
            assert errors == [], f"{len(errors)} errors reached the application: {errors[:3]}"
            assert done == N
            state = (await (await js.stream("EL")).info()).state
            assert state.messages == N  # nothing lost, nothing stored twice
            assert len(seqs) == N
            after = await (await js.stream("EL")).info()
            assert after.cluster is not None and after.cluster.leader != info.cluster.leader
    finally:  # the next test gets the whole cluster back, whatever happened here
        for i in killed:
            await asyncio.to_thread(cluster.restart, i)


async def _leader_index(js: JetStream, name: str) -> int:
    info = await (await js.stream(name)).info()
    assert info.cluster is not None and info.cluster.leader
    return int(info.cluster.leader[1:]) - 1  # NatsCluster names its servers n1..nN


async def _heard(nc: Client, stream: str) -> list[float]:
    """When this connection hears each leader election of ``stream`` (loop time)."""
    loop = asyncio.get_running_loop()
    times: list[float] = []

    def note(_: Msg) -> None:
        times.append(loop.time())

    await nc.subscribe(f"$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.{stream}", cb=note)
    await nc.flush(timeout=5)
    return times


async def test_a_waiting_publish_goes_at_once_when_the_new_leader_is_announced(
    cluster: NatsCluster,
) -> None:
    async with jetstream.connect(cluster.urls) as admin:
        ajs = admin.jetstream()
        await placed(
            lambda: ajs.create_stream(StreamConfig(name="ELW", subjects=["elw"], num_replicas=3))
        )
        leader = await _leader_index(ajs, "ELW")
    others = [u for i, u in enumerate(cluster.urls) if i != leader]
    try:
        async with jetstream.connect(others, max_reconnect_attempts=-1) as nc:
            js = nc.jetstream()
            await js.publish("elw", b"before", msg_id="w-0", timeout=30)
            heard = await _heard(nc, "ELW")
            loop = asyncio.get_running_loop()
            await asyncio.to_thread(cluster.kill, leader)
            t0 = loop.time()
            # the first backoff of this publish is 30 - 60 s: only the announcement of
            # the new leader can end it sooner
            task = asyncio.create_task(
                js.publish("elw", b"w", msg_id="w-1", timeout=120, retry_wait=60)
            )
            # several, on jittered backoffs: not all can be in flight when the news comes
            futs = [
                await js.publish_async("elw", b"a", msg_id=f"w-a{i}", timeout=120) for i in range(5)
            ]
            async with asyncio.timeout(100):
                ack = await task
                took = loop.time() - t0
                acks = await asyncio.gather(*futs)
            assert js._streams.lookups >= 1  # it met a 503 and asked for the stream
            assert js._streams.woken >= 1  # and heard the election
            assert js._publisher.woken >= 1  # publish_async too
            assert heard, "no leader election heard"
            assert took < 30, (took, [h - t0 for h in heard])
            assert ack.stream == "ELW" and not ack.duplicate
            assert {a.stream for a in acks} == {"ELW"}
            state = (await (await js.stream("ELW")).info()).state
            assert state.messages == 7
    finally:
        await asyncio.to_thread(cluster.restart, leader)


async def test_a_stream_whose_node_is_down_is_waited_for_not_refused(
    cluster: NatsCluster,
) -> None:
    """An R1 stream on a killed node: the meta leader still knows it, so the 503s of a
    publish to it are retried (no NoStreamError) until the node is back."""
    async with jetstream.connect(cluster.urls) as admin:
        ajs = admin.jetstream()
        await placed(
            lambda: ajs.create_stream(StreamConfig(name="ONE", subjects=["one.>"], num_replicas=1))
        )
        node = await _leader_index(ajs, "ONE")
    others = [u for i, u in enumerate(cluster.urls) if i != node]
    try:
        async with jetstream.connect(others, max_reconnect_attempts=-1) as nc:
            js = nc.jetstream()
            await asyncio.to_thread(cluster.kill, node)
            task = asyncio.create_task(js.publish("one.a", b"x", msg_id="one-1", timeout=90))
            fut = await js.publish_async("one.b", b"y", msg_id="one-2", timeout=90)
            async with asyncio.timeout(60):  # the meta leader may have died with the node
                while js._streams.stream_of("one.a") != "ONE":
                    await asyncio.sleep(0.1)
            await asyncio.sleep(1.0)  # a NoStreamError would have come by now
            assert not task.done() and not fut.done()
            await asyncio.to_thread(cluster.restart, node)
            async with asyncio.timeout(80):
                ack, ack2 = await task, await fut
            assert ack.stream == ack2.stream == "ONE"
            assert (await (await js.stream("ONE")).info()).state.messages == 2
    finally:
        if not cluster[node].running:
            await asyncio.to_thread(cluster.restart, node)


# -- measured by `make faults-report` ---------------------------------------------------


@dataclass
class Round:
    """One kill -9 of the stream's leader under msg-id publishes, as the client saw it."""

    election: float  # from the kill to the new leader's announcement, heard
    unavailable: float  # the longest time without an ack, around the kill
    pause: float  # from the announcement to the end of that time (publishing resumed)
    acked: int = 0
    errors: list[BaseException] = field(default_factory=list)


async def _until_current(js: JetStream, name: str, bound: float = 60.0) -> None:
    """Until the stream has a leader and two current replicas."""
    async with asyncio.timeout(bound):
        while True:
            with contextlib.suppress(jetstream.NatsError):
                c = (await (await js.stream(name)).info()).cluster
                if (
                    c is not None
                    and c.leader
                    and len(c.replicas) == 2
                    and all(p.current and not p.offline for p in c.replicas)
                ):
                    return
            await asyncio.sleep(0.2)


async def kill_round(cluster: NatsCluster, name: str, tasks: int = TASKS) -> Round:
    """Publish from ``tasks`` tasks with msg ids (``timeout=30``), kill -9 the leader of
    the R3 stream ``name`` after a second, go on for 2 s after publishing resumed, and
    restart the killed node (the stream is current again when this returns)."""
    async with jetstream.connect(
        cluster.urls, reconnect_time_wait=0.1, max_reconnect_attempts=-1
    ) as nc:
        js = nc.jetstream()
        subject = name.lower()
        await placed(
            lambda: js.create_stream(
                StreamConfig(name=name, subjects=[subject], num_replicas=3, duplicate_window=300)
            )
        )
        await _until_current(js, name)
        leader = await _leader_index(js, name)
        heard = await _heard(nc, name)
        loop = asyncio.get_running_loop()
        acks: list[float] = []
        errors: list[BaseException] = []
        stop = asyncio.Event()
        ids = f"{loop.time():.3f}"  # of this round: the stream outlives it

        async def publisher(k: int) -> None:
            i = 0
            while not stop.is_set():
                i += 1
                try:
                    await js.publish(subject, b"x", msg_id=f"{ids}-{k}-{i}", timeout=30)
                except jetstream.NatsError as exc:
                    errors.append(exc)
                else:
                    acks.append(loop.time())

        running = [asyncio.create_task(publisher(k)) for k in range(tasks)]
        try:
            await asyncio.sleep(1.0)
            killed = loop.time()
            await asyncio.to_thread(cluster.kill, leader)
            async with asyncio.timeout(90):
                while not (told := [t for t in heard if t >= killed]) or acks[-1] < told[0] + 2:
                    await asyncio.sleep(0.05)
        finally:
            stop.set()
            async with asyncio.timeout(40):
                await asyncio.gather(*running, return_exceptions=True)
            await asyncio.to_thread(cluster.restart, leader)
        await _until_current(js, name)
    announced = told[0]
    times = sorted(a for a in acks if a >= killed - 1.0)
    start, end = max(itertools.pairwise(times), key=lambda g: g[1] - g[0])
    return Round(announced - killed, end - start, end - announced, len(acks), errors)
