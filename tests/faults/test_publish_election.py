"""Publishing with message ids through the kill -9 of an R3 stream's leader.

The application's loop is the plain one: ``await js.publish(..., msg_id=..., timeout=20)``
per message, from a few tasks at once. The client owns the retries (no responders
while a new leader is elected, lost connections, unanswered attempts), so nothing
reaches the application, and the stream's deduplication keeps every id stored once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

import jetstream
from jetstream import StreamConfig
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
    await asyncio.to_thread(cluster.restart, leader)
