"""JetStream on a real 3-node cluster while its stream leader is killed."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

import jetstream
from jetstream import ConsumerConfig, PubAck, StreamConfig
from jetstream.embedded import NatsCluster
from tests.faults.placing import placed

pytestmark = pytest.mark.asyncio

N = 50_000


@pytest.fixture(scope="module")
def cluster() -> Iterator[NatsCluster]:
    with NatsCluster(size=3) as c:
        yield c


async def test_r3_leader_killed_during_publish_async(cluster: NatsCluster) -> None:
    killed: list[int] = []
    try:
        async with jetstream.connect(
            cluster.urls, reconnect_time_wait=0.1, max_reconnect_attempts=-1, connect_timeout=2
        ) as nc:
            js = nc.jetstream(timeout=3, publish_async_max_pending=2000)
            stream = await placed(
                lambda: js.create_stream(
                    StreamConfig(name="R3", subjects=["r3"], num_replicas=3, duplicate_window=300)
                )
            )
            info = await stream.info()
            assert info.cluster is not None and info.cluster.leader
            leader = next(
                i for i, s in enumerate(cluster.servers) if s.server_name == info.cluster.leader
            )

            acked: dict[int, PubAck] = {}
            failures = 0

            async def publish(ids: list[int]) -> list[int]:
                """Publish ids with their msg ids; return those that did not get an ack."""
                nonlocal failures
                futs: dict[int, asyncio.Future[PubAck]] = {}
                missing: list[int] = []
                for i in ids:
                    try:
                        futs[i] = await js.publish_async("r3", b"%d" % i, msg_id=f"id-{i}")
                    except jetstream.NatsError:
                        missing.append(i)  # the window stalled during the election: later
                    if i == ids[0] + 10_000 and leader is not None and len(ids) == N:
                        killed.append(leader)
                    await asyncio.to_thread(cluster.kill, leader)
                for i, fut in futs.items():
                    try:
                        acked[i] = await fut
                    except jetstream.NatsError:
                        missing.append(i)
                failures += len(missing)
                return missing

            todo = await publish(list(range(N)))
            rounds = 0
            while todo:
                rounds += 1
                assert rounds < 60, f"{len(todo)} still not acked after {rounds} rounds"
                await asyncio.sleep(0.25)
                todo = await publish(todo)

            # every id acked (futures with a msg id are sent again until their deadline; what
            # still failed was published again above), each stored once
            assert len(acked) == N
            info = await (await js.stream("R3")).info()
            assert info.state.messages == N  # no loss, no duplicate
            assert (
                info.cluster is not None
                and info.cluster.leader != cluster.servers[leader].server_name
            )
            seqs = sorted(a.seq for a in acked.values())
            assert len(set(seqs)) == N
    finally:  # the next test gets the whole cluster back, whatever happened here
        for i in killed:
            await asyncio.to_thread(cluster.restart, i)


async def test_consume_survives_the_consumer_leader_killed(cluster: NatsCluster) -> None:
    total = 3000
    errors: list[BaseException] = []
    killed: list[int] = []
    try:
        async with jetstream.connect(
            cluster.urls, reconnect_time_wait=0.1, max_reconnect_attempts=-1, connect_timeout=2
        ) as nc:
            js = nc.jetstream(timeout=3)
            stream = await placed(
                lambda: js.create_stream(
                    StreamConfig(name="R3C", subjects=["r3c"], num_replicas=3, duplicate_window=300)
                )
            )

            async def publish(lo: int, hi: int) -> None:
                for i in range(lo, hi):
                    for _ in range(100):  # across an election: retried with the same msg id
                        try:
                            await js.publish("r3c", b"%d" % i, msg_id=f"c-{i}", retry_attempts=5)
                            break
                        except jetstream.NatsError:
                            await asyncio.sleep(0.1)
                    else:
                        raise AssertionError(f"publish {i} never acked")

            await publish(0, total // 2)
            consumer = await placed(
                lambda: stream.create_consumer(
                    ConsumerConfig(durable_name="w", num_replicas=3, ack_wait=5)
                )
            )
            seen: set[int] = set()
            done = asyncio.Event()

            async def handler(msg: jetstream.JsMsg) -> None:
                seen.add(int(msg.data))
                await msg.ack()
                if len(seen) == total:
                    done.set()

            async with await consumer.consume(
                handler, max_messages=100, expires=2, heartbeat=0.5, error_cb=errors.append
            ):
                async with asyncio.timeout(30):
                    while len(seen) < total // 4:
                        await asyncio.sleep(0.05)
                info = await consumer.info()
                assert info.cluster is not None and info.cluster.leader
                victim = next(
                    i for i, s in enumerate(cluster.servers) if s.server_name == info.cluster.leader
                )
                killed.append(victim)
                await asyncio.to_thread(cluster.kill, victim)
                await publish(total // 2, total)
                async with asyncio.timeout(90):
                    await done.wait()
            assert seen == set(range(total))
    finally:  # the next test gets the whole cluster back, whatever happened here
        for i in killed:
            await asyncio.to_thread(cluster.restart, i)


async def test_an_id_still_being_stored_is_asked_again(cluster: NatsCluster) -> None:
    """The same msg id published many times at once to an R3 stream: while the first is
    being replicated the stream answers the others with 10158 ("duplicate message id is
    in process"). Both publish and publish_async ask again and get the stored message's
    ack: one stored, every other call a duplicate of it, nothing raised."""
    async with jetstream.connect(cluster.urls) as nc:
        js = nc.jetstream(timeout=10)
        stream = await placed(
            lambda: js.create_stream(StreamConfig(name="DUP", subjects=["dup.>"], num_replicas=3))
        )
        for n in range(10):
            acks = await asyncio.gather(
                *(js.publish("dup.a", b"x", msg_id=f"a{n}") for _ in range(30))
            )
            assert sorted(a.duplicate for a in acks) == [False] + [True] * 29
            assert len({a.seq for a in acks}) == 1
            futs = [await js.publish_async("dup.b", b"y", msg_id=f"b{n}") for _ in range(30)]
            acks = list(await asyncio.gather(*futs))
            assert sorted(a.duplicate for a in acks) == [False] + [True] * 29
            assert len({a.seq for a in acks}) == 1
        assert (await stream.info()).state.messages == 20
        await js.delete_stream("DUP")
