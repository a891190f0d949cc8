"""A pull parked on a consumer leader that dies goes on with the new leader.

The client is connected to a node that stays up, so no reconnect tells it anything,
and the heartbeats are made long (25 s), so missing them would take 50 s. The
next message must still come within that, and no missed heartbeat may be reported:
the fetch and the continuous stream pull again when the new consumer leader is
announced (the election advisory), and the server hands the new leader what was
waiting. The bound counts from the kill and leaves room for slow elections (each
round waits a random 4 - 9 s, and a loaded machine may need more than one);
`make faults-report` measures how long after the election the message comes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

import jetstream
from jetstream import ConsumerConfig, StreamConfig
from jetstream.embedded import NatsCluster
from jetstream.errors import NoHeartbeatError
from tests.faults.placing import placed

pytestmark = pytest.mark.asyncio

BOUND = 45.0  # seconds from the kill to the delivery (missed heartbeats: 50 s)


@pytest.fixture(scope="module")
def cluster() -> Iterator[NatsCluster]:
    with NatsCluster(size=3) as c:
        yield c


async def _leader_index(consumer: jetstream.Consumer) -> int:
    info = await consumer.info()
    assert info.cluster is not None and info.cluster.leader
    return int(info.cluster.leader[1:]) - 1  # NatsCluster names its servers n1..nN


@pytest.mark.parametrize("mode", ["fetch", "messages"])
async def test_a_pull_moves_to_the_new_consumer_leader(cluster: NatsCluster, mode: str) -> None:
    name = f"LM{mode.upper()}"
    async with jetstream.connect(cluster.urls[0]) as admin:
        js = admin.jetstream()
        stream = await placed(
            lambda: js.create_stream(
                StreamConfig(name=name, subjects=[name.lower()], num_replicas=3)
            )
        )
        consumer = await placed(
            lambda: stream.create_consumer(
                ConsumerConfig(durable_name="c", num_replicas=3, ack_wait=30)
            )
        )
        leader = await _leader_index(consumer)
    # connected to a node that is not the consumer's leader, and no other in the pool
    other = next(i for i in range(3) if i != leader)
    errors: list[BaseException] = []
    async with jetstream.connect(
        cluster.urls[other], max_reconnect_attempts=-1, error_cb=errors.append
    ) as nc:
        js = nc.jetstream(timeout=10)
        consumer = await (await js.stream(name)).consumer("c")
        got: asyncio.Queue[bytes] = asyncio.Queue()

        async def read() -> None:
            if mode == "fetch":
                while True:
                    for m in await consumer.fetch(1, expires=60, heartbeat=25):
                        await m.ack()
                        await got.put(m.data)
            else:
                async with consumer.messages(expires=60, heartbeat=25) as it:
                    async for m in it:
                        await m.ack()
                        await got.put(m.data)

        reader = asyncio.create_task(read())
        killed = False
        try:
            await js.publish(name.lower(), b"before")
            assert await asyncio.wait_for(got.get(), 30) == b"before"
            await asyncio.sleep(0.5)  # the next pull is parked on the leader
            killed = True
            await asyncio.to_thread(cluster.kill, leader)
            deadline = asyncio.get_running_loop().time() + BOUND
            # the publish retries while the stream may elect too (deadline 60 s)
            await js.publish(name.lower(), b"after", msg_id="after", timeout=60)
            async with asyncio.timeout_at(deadline):
                assert await got.get() == b"after"
            # nothing but the election told the reader
            assert nc.stats.reconnects == 0
            assert not [e for e in errors if isinstance(e, NoHeartbeatError)], errors
        finally:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
            if killed:  # the next test gets the whole cluster back, whatever happened here
                await asyncio.to_thread(cluster.restart, leader)
