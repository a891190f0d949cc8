"""Reconnect, failover, discovery, lame duck, stale links and permission errors, on real servers."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import jetstream
from jetstream import EventKind, Msg
from jetstream.embedded import NatsCluster, NatsServer
from jetstream.errors import (
    AuthorizationError,
    NoServersError,
    PermissionsError,
    ReconnectBufferFullError,
)

pytestmark = pytest.mark.asyncio

FAST = {"reconnect_time_wait": 0.1, "reconnect_jitter": 0.05, "connect_timeout": 2.0}


async def wait_for(pred: Any, timeout: float = 20.0, step: float = 0.02) -> None:
    async with asyncio.timeout(timeout):
        while not pred():
            await asyncio.sleep(step)


async def test_server_restart_resumes_subscriptions_and_flushes_buffer(
    nats_server: NatsServer,
) -> None:
    events: list[EventKind] = []
    nc = await jetstream.connect(
        nats_server.url,
        max_reconnect_attempts=-1,
        disconnected_cb=lambda: events.append(EventKind.DISCONNECTED),
        reconnected_cb=lambda: events.append(EventKind.RECONNECTED),
        **FAST,
    )
    other = await jetstream.connect(nats_server.url, max_reconnect_attempts=-1, **FAST)
    try:
        sub = await nc.subscribe("stream.*")
        qsub = await nc.subscribe("stream.*", queue="q", max_msgs=1000)
        await nc.flush()
        for i in range(50):
            await nc.publish(f"stream.{i}", b"before")
        await nc.flush()
        await asyncio.to_thread(nats_server.stop)
        await wait_for(lambda: not nc.is_connected)
        # published while disconnected: kept in the reconnect buffer
        for i in range(50, 100):
            await nc.publish(f"stream.{i}", b"during")
        await asyncio.to_thread(nats_server.start)
        await wait_for(lambda: nc.is_connected and other.is_connected)
        assert events == [EventKind.DISCONNECTED, EventKind.RECONNECTED]
        assert nc.stats.reconnects == 1
        # the subscription was re-made before the buffer was flushed: all 100 arrive
        await nc.flush()
        got = [(await sub.next_msg(timeout=5)).subject for _ in range(100)]
        assert got == [f"stream.{i}" for i in range(100)]
        # and it keeps working for another client's messages
        await other.publish("stream.after", b"after")
        assert (await sub.next_msg(timeout=5)).subject == "stream.after"
        await nc.flush()  # the queue subscription's copy came before the PONG
        assert qsub.received == 101
    finally:
        await nc.close()
        await other.close()


async def test_reconnect_buffer_is_bounded(nats_server: NatsServer) -> None:
    nc = await jetstream.connect(
        nats_server.url, reconnect_buf_size=10_000, max_reconnect_attempts=-1, **FAST
    )
    try:
        await asyncio.to_thread(nats_server.stop)
        await wait_for(lambda: not nc.is_connected)
        for _ in range(9):
            await nc.publish("buf", b"x" * 1000)
        with pytest.raises(ReconnectBufferFullError):
            await nc.publish("buf", b"x" * 2000)
    finally:
        await nc.close()


async def test_gives_up_after_max_reconnect_attempts(nats_server: NatsServer) -> None:
    closed = asyncio.Event()
    nc = await jetstream.connect(
        nats_server.url, max_reconnect_attempts=2, closed_cb=closed.set, **FAST
    )
    await asyncio.to_thread(nats_server.stop)
    async with asyncio.timeout(20):
        await closed.wait()
    assert nc.is_closed
    assert isinstance(nc.last_error, NoServersError)


async def test_retry_on_failed_connect(nats_server: NatsServer) -> None:
    await asyncio.to_thread(nats_server.stop)
    nc = await jetstream.connect(
        nats_server.url, retry_on_failed_connect=True, max_reconnect_attempts=-1, **FAST
    )
    try:
        assert not nc.is_connected
        sub = await nc.subscribe("late")
        await nc.publish("late", b"queued before the server existed")
        await asyncio.to_thread(nats_server.start)
        msg = await sub.next_msg(timeout=20)
        assert msg.data == b"queued before the server existed"
    finally:
        await nc.close()


async def test_stale_connection_detected_by_pings(nats_server: NatsServer) -> None:
    lost = asyncio.Event()
    nc = await jetstream.connect(
        nats_server.url,
        ping_interval=0.2,
        max_outstanding_pings=2,
        max_reconnect_attempts=-1,
        disconnected_cb=lost.set,
        **FAST,
    )
    try:
        nats_server.pause()
        try:
            async with asyncio.timeout(10):
                await lost.wait()
            assert isinstance(nc.last_error, jetstream.errors.StaleConnectionError)
        finally:
            nats_server.resume()
        await wait_for(lambda: nc.is_connected)
        await nc.flush(timeout=5)
    finally:
        await nc.close()


async def test_force_reconnect_and_server_hook(nats_server: NatsServer) -> None:
    picks: list[list[str]] = []

    def choose(servers: list[str], info: Any) -> tuple[str, float]:
        picks.append(servers)
        return servers[0], 0.0

    nc = await jetstream.connect(nats_server.url, reconnect_to_server_cb=choose, **FAST)
    try:
        sub = await nc.subscribe("fr")
        await nc.flush()
        await nc.force_reconnect()
        await wait_for(lambda: nc.stats.reconnects == 1 and nc.is_connected)
        assert picks and picks[0] == [nats_server.url]
        await nc.publish("fr", b"ok")
        assert (await sub.next_msg(timeout=5)).data == b"ok"
        nc.set_servers([nats_server.url, "nats://127.0.0.1:1"])
        assert len(nc.servers) == 2
    finally:
        await nc.close()


async def test_publish_right_after_a_dropped_socket_waits_for_the_reconnect(
    nats_server: NatsServer,
) -> None:
    # The socket is aborted, but the loss is only noticed on a later loop iteration:
    # what is written in between (here a subscribe whose flush is already scheduled,
    # then a publish) must stay in the buffer for the new connection, not go to the
    # dead socket.
    nc = await jetstream.connect(nats_server.url, **FAST)
    try:
        sub = await nc.subscribe("gap")
        await nc.force_reconnect()
        await nc.publish("gap", b"kept")
        assert (await sub.next_msg(timeout=10)).data == b"kept"
        assert nc.stats.reconnects == 1
        # the SUB kept in the buffer and the re-made one are one subscription
        await nc.flush()
        with pytest.raises(jetstream.errors.TimeoutError):
            await sub.next_msg(timeout=0.3)
    finally:
        await nc.close()


async def test_permission_error_ends_only_that_subscription() -> None:
    auth = """
authorization {
  users = [
    {user: limited, password: pw, permissions: {subscribe: {deny: ["secret.>"]},
                                                publish: {deny: ["nopub.>"]}}}
  ]
}
"""
    errors: list[BaseException] = []
    async with NatsServer(auth_config=auth) as server:
        nc = await jetstream.connect(
            server.url, user="limited", password="pw", error_cb=errors.append
        )
        try:
            ok = await nc.subscribe("public.>")
            denied = await nc.subscribe("secret.x")
            await nc.flush()
            with pytest.raises(PermissionsError, match="secret"):
                await denied.next_msg(timeout=5)
            await nc.publish("nopub.x", b"no")
            await nc.flush()
            await wait_for(
                lambda: any(isinstance(e, PermissionsError) and "nopub" in str(e) for e in errors),
                timeout=5,
            )
            assert nc.is_connected
            await nc.publish("public.y", b"yes")
            assert (await ok.next_msg(timeout=5)).data == b"yes"
        finally:
            await nc.close()


async def test_repeated_auth_error_stops_reconnecting() -> None:
    async with NatsServer(user="u", password="one") as server:
        closed = asyncio.Event()
        nc = await jetstream.connect(
            server.url,
            user="u",
            password="one",
            max_reconnect_attempts=-1,
            closed_cb=closed.set,
            **FAST,
        )
        server.password = "two"
        await asyncio.to_thread(server.restart)
        async with asyncio.timeout(20):
            await closed.wait()
        assert isinstance(nc.last_error, AuthorizationError)
        assert "one" not in str(nc.last_error)


async def test_events_stream_reports_disconnect_and_reconnect(nats_server: NatsServer) -> None:
    nc = await jetstream.connect(nats_server.url, max_reconnect_attempts=-1, **FAST)
    events = nc.events()
    try:
        await asyncio.to_thread(nats_server.restart)
        kinds: list[EventKind] = []
        async with asyncio.timeout(20):
            async for ev in events:
                if ev.kind is EventKind.ERROR:
                    continue
                kinds.append(ev.kind)
                if ev.kind is EventKind.RECONNECTED:
                    break
        assert kinds == [EventKind.DISCONNECTED, EventKind.RECONNECTED]
    finally:
        events.close()
        await nc.close()


@pytest.fixture(scope="module")
def cluster() -> Any:
    with NatsCluster(size=3) as c:
        yield c


async def test_cluster_discovery_and_failover(cluster: NatsCluster) -> None:
    first = cluster.servers[0]
    discovered = asyncio.Event()
    nc = await jetstream.connect(
        first.url,
        dont_randomize=True,
        discovered_server_cb=discovered.set,
        max_reconnect_attempts=-1,
        **FAST,
    )
    sub_client = await jetstream.connect(cluster.servers[2].url, **FAST)
    try:
        await wait_for(lambda: len(nc.servers) == 3)
        assert sorted(nc.servers) == sorted(cluster.urls)
        async with asyncio.timeout(10):  # the servers it learnt were told to the application
            await discovered.wait()
        sub = await sub_client.subscribe("fail.over")
        await sub_client.flush()
        await asyncio.to_thread(cluster.kill, 0)
        await wait_for(lambda: nc.is_connected and nc.connected_url != first.url)
        await nc.flush()

        async def delivered() -> Msg:
            # routes may need a moment to carry the interest; publish until it arrives
            while True:
                await nc.publish("fail.over", b"moved")
                try:
                    return await sub.next_msg(timeout=0.5)
                except jetstream.TimeoutError:
                    continue

        async with asyncio.timeout(20):
            msg = await delivered()
        assert msg.data == b"moved"
    finally:
        await nc.close()
        await sub_client.close()
        await asyncio.to_thread(cluster.restart, 0)


async def test_lame_duck_moves_to_another_server(cluster: NatsCluster) -> None:
    target = cluster.servers[1]
    lame = asyncio.Event()
    nc = await jetstream.connect(
        target.url, dont_randomize=True, lame_duck_cb=lame.set, max_reconnect_attempts=-1, **FAST
    )
    try:
        await wait_for(lambda: len(nc.servers) == 3)
        target.lame_duck()
        async with asyncio.timeout(20):
            await lame.wait()
        await wait_for(lambda: nc.is_connected and nc.connected_url != target.url)
        # moved while the old server was still in lame duck, not after it died
        assert target.running
        await nc.flush()
    finally:
        await nc.close()
        await asyncio.to_thread(target.wait_exit, 60)
        await asyncio.to_thread(cluster.restart, 1)


async def test_remaining_max_msgs_survives_reconnect(nats_server: NatsServer) -> None:
    nc = await jetstream.connect(nats_server.url, max_reconnect_attempts=-1, **FAST)
    try:
        sub = await nc.subscribe("cap", max_msgs=10)
        await nc.flush()
        for i in range(4):
            await nc.publish("cap", str(i).encode())
        await nc.flush()
        await asyncio.to_thread(nats_server.restart)
        await wait_for(lambda: nc.is_connected)
        await nc.flush()
        for i in range(4, 20):
            await nc.publish("cap", str(i).encode())
        got = [m.data async for m in sub]
        assert got == [str(i).encode() for i in range(10)]
    finally:
        await nc.close()


async def test_publish_waits_instead_of_growing_without_end(nats_server: NatsServer) -> None:
    """A server that stops reading: publish() blocks (backpressure); memory stays bounded."""
    nc = await jetstream.connect(
        nats_server.url, ping_interval=60, max_reconnect_attempts=-1, **FAST
    )
    try:
        nats_server.pause()
        payload = b"x" * 60_000
        sent = 0

        async def flood() -> None:
            nonlocal sent
            while True:
                await nc.publish("flood", payload)
                sent += 1

        task = asyncio.create_task(flood())
        await asyncio.sleep(2.0)
        assert not task.done()
        buffered = nc.buffered_bytes
        # the kernel takes some megabytes; our own buffers stay small
        assert buffered < 4 * 1024 * 1024, buffered
        assert sent * len(payload) < 256 * 1024 * 1024
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    finally:
        nats_server.resume()
        await nc.close()
