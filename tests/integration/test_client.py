"""The core client against a real nats-server: publish, subscribe, request, flush, drain."""

from __future__ import annotations

import asyncio

import pytest

import jetstream
import jetstream.core
from jetstream import (
    BadHeaderError,
    BadSubjectError,
    ConnectionClosedError,
    MaxPayloadError,
    Msg,
    NoRespondersError,
    SlowConsumerError,
)
from jetstream import TimeoutError as NatsTimeoutError
from jetstream.embedded import NatsServer

pytestmark = pytest.mark.asyncio
BOTH_LOOPS = True  # run every test here on asyncio and on uvloop


async def test_publish_subscribe_iterate(nats_url: str) -> None:
    async with jetstream.connect(nats_url) as nc:
        sub = await nc.subscribe("greet.*")
        await nc.flush()
        for i in range(5):
            await nc.publish(f"greet.{i}", f"hello {i}".encode(), headers={"k": str(i)})
        got = [await sub.next_msg(timeout=5) for _ in range(5)]
        assert [m.subject for m in got] == [f"greet.{i}" for i in range(5)]
        assert [m.data for m in got] == [f"hello {i}".encode() for i in range(5)]
        assert [m.headers["k"] for m in got] == [str(i) for i in range(5)]
        assert nc.stats.out_msgs == 5
        assert nc.stats.in_msgs == 5
    assert nc.is_closed


async def test_await_connect_and_close(nats_url: str) -> None:
    nc = await jetstream.connect(nats_url, name="plain")
    assert nc.is_connected
    assert nc.server_info is not None and nc.server_info.headers
    assert nc.connected_url == nats_url
    await nc.close()
    assert nc.is_closed
    with pytest.raises(ConnectionClosedError):
        await nc.publish("x", b"")


async def test_connect_hands_out_the_layers_composed(nats_url: str) -> None:
    # jetstream.connect: the client with jetstream(), whose context has the bucket
    # management; jetstream.core.connect: the core client alone, which works by itself.
    async with jetstream.connect(nats_url) as nc:
        assert type(nc) is jetstream.Client
        js = nc.jetstream()
        assert type(js) is jetstream.JetStream
        assert js.client is nc
        assert (await js.account_info()).streams == 0
    core = await jetstream.core.connect(nats_url)
    try:
        assert type(core) is jetstream.core.Client
        assert not isinstance(core, jetstream.Client)
        assert not hasattr(core, "jetstream")
        sub = await core.subscribe("core.*")
        await core.publish("core.1", b"alone")
        msg = await sub.next_msg(timeout=5)
        assert (msg.subject, msg.data) == ("core.1", b"alone")
    finally:
        await core.close()


async def test_empty_binary_and_multi_value_headers(nats_url: str) -> None:
    async with jetstream.connect(nats_url) as nc:
        sub = await nc.subscribe("bin")
        payload = bytes(range(256)) * 4 + b"\r\nMSG x 1 2\r\n"
        await nc.publish("bin", b"")
        await nc.publish("bin", payload, headers={"a": ["1", "2"], "B-Key": "x y"})
        m1 = await sub.next_msg(timeout=5)
        m2 = await sub.next_msg(timeout=5)
        assert m1.data == b"" and not m1.headers
        assert m2.data == payload
        assert m2.headers.get_all("a") == ["1", "2"]
        assert m2.headers["B-Key"] == "x y"


async def test_queue_group_splits_messages(nats_url: str) -> None:
    async with jetstream.connect(nats_url) as nc:
        a = await nc.subscribe("work", queue="q")
        b = await nc.subscribe("work", queue="q")
        await nc.flush()
        for i in range(200):
            await nc.publish("work", str(i).encode())
        await nc.flush()
        seen: list[bytes] = []
        for sub in (a, b):
            while sub.pending_msgs:
                seen.append((await sub.next_msg(timeout=1)).data)
        # every message to exactly one member, and both got some
        assert sorted(seen, key=int) == [str(i).encode() for i in range(200)]
        assert a.received > 0 and b.received > 0


async def test_callbacks_run_in_order_sync_and_async(nats_url: str) -> None:
    async with jetstream.connect(nats_url) as nc:
        sync_seen: list[int] = []
        async_seen: list[int] = []
        done = asyncio.Event()

        def on_sync(msg: Msg) -> None:
            sync_seen.append(int(msg.data))

        async def on_async(msg: Msg) -> None:
            await asyncio.sleep(0)
            async_seen.append(int(msg.data))
            if len(async_seen) == 100:
                done.set()

        await nc.subscribe("cb", cb=on_sync)
        await nc.subscribe("cb", cb=on_async)
        await nc.flush()
        for i in range(100):
            await nc.publish("cb", str(i).encode())
        async with asyncio.timeout(10):
            await done.wait()
        await nc.flush()
        assert sync_seen == list(range(100))
        assert async_seen == list(range(100))


async def test_async_callbacks_keep_order_and_run_one_at_a_time(nats_url: str) -> None:
    """Handlers that finish without waiting and handlers that wait, errors raised before
    and after a wait: still in order, never two at once, every error reported."""
    errors: list[BaseException] = []
    async with jetstream.connect(nats_url, error_cb=errors.append) as nc:
        seen: list[int] = []
        active = 0
        most = 0
        done = asyncio.Event()

        async def handler(msg: Msg) -> None:
            nonlocal active, most
            i = int(msg.data)
            active += 1
            most = max(most, active)
            try:
                if i % 7 == 3:
                    raise ValueError(f"bad {i}")  # before any wait: on the receive path
                if i % 5 == 0:
                    await asyncio.sleep(0.002)  # waits: the task carries it on
                    if i % 10 == 0:
                        raise ValueError(f"late {i}")  # after a wait: inside the task
                seen.append(i)
            finally:
                active -= 1
                if i == 199:
                    done.set()

        sub = await nc.subscribe("eager", cb=handler)
        await nc.flush()
        for i in range(200):
            await nc.publish("eager", str(i).encode())
            if i % 3 == 0:
                await nc.flush()  # some arrive while the task is idle, some in bursts
        async with asyncio.timeout(10):
            await done.wait()
        expected = [i for i in range(200) if i % 7 != 3 and i % 10 != 0]
        assert seen == expected
        assert most == 1
        bad = sorted(str(e) for e in errors if isinstance(e, ValueError))
        assert bad == sorted(
            [f"bad {i}" for i in range(200) if i % 7 == 3]
            + [f"late {i}" for i in range(200) if i % 10 == 0 and i % 7 != 3]
        )
        assert sub.received == 200


async def test_async_handler_has_a_task_and_may_close_the_client(nats_url: str) -> None:
    """An async handler runs inside a task: asyncio.timeout() works in it, and it may
    close the client it was called from."""
    errors: list[BaseException] = []
    nc = await jetstream.connect(nats_url, error_cb=errors.append)
    steps: list[str] = []

    async def handler(msg: Msg) -> None:
        async with asyncio.timeout(5):
            steps.append(msg.data.decode())
            if msg.reply:
                await msg.respond(b"ok")
        if msg.data == b"stop":
            await nc.close()
            steps.append("closed")

    await nc.subscribe("svc.task", cb=handler)
    await nc.flush()
    reply = await nc.request("svc.task", b"one", timeout=5)
    assert reply.data == b"ok"
    await nc.publish("svc.task", b"stop")
    async with asyncio.timeout(10):
        while "closed" not in steps:  # the handler goes on after close() returns
            await asyncio.sleep(0.01)
    assert nc.is_closed
    assert steps == ["one", "stop", "closed"]
    assert errors == []


async def test_close_while_a_handler_waits(nats_url: str) -> None:
    finished: list[str] = []
    nc = await jetstream.connect(nats_url)
    started = asyncio.Event()

    async def handler(msg: Msg) -> None:
        started.set()
        try:
            await asyncio.sleep(30)
            finished.append("slept")
        finally:
            finished.append("finally")

    await nc.subscribe("hang", cb=handler)
    await nc.flush()
    await nc.publish("hang", b"x")
    async with asyncio.timeout(5):
        await started.wait()
    await nc.close()
    assert finished == ["finally"]  # cancelled, not left suspended
    assert not [t for t in asyncio.all_tasks() if t.get_name().startswith("jetstream-")]


async def test_max_msgs_auto_unsubscribes(nats_url: str) -> None:
    async with jetstream.connect(nats_url) as nc:
        before = nc.subscription_count
        sub = await nc.subscribe("limited", max_msgs=3)
        assert nc.subscription_count == before + 1
        await nc.flush()
        for i in range(10):
            await nc.publish("limited", str(i).encode())
        got = [m.data async for m in sub]
        assert got == [b"0", b"1", b"2"]
        assert sub.closed
        # the client forgot it too
        await nc.flush()
        assert nc.subscription_count == before


async def test_unsubscribe_ends_iteration(nats_url: str) -> None:
    async with jetstream.connect(nats_url) as nc:
        sub = await nc.subscribe("u")
        await nc.publish("u", b"1")
        await nc.flush()
        await sub.unsubscribe()
        await nc.publish("u", b"2")
        await nc.flush()
        assert [m.data async for m in sub] == [b"1"]
        with pytest.raises(ConnectionClosedError):
            await sub.next_msg(timeout=0.1)


async def test_take_many_hands_over_what_is_queued_at_once(nats_url: str) -> None:
    async with jetstream.connect(nats_url) as nc:
        sub = await nc.subscribe("many")
        await nc.flush()
        for i in range(300):
            await nc.publish("many", b"%d" % i)
        await nc.flush()
        got: list[bytes] = []
        while len(got) < 300:
            batch = await sub.take_many(timeout=5)
            assert batch  # at least one, never an empty list
            got += [m.data for m in batch]
        assert got == [b"%d" % i for i in range(300)]
        assert sub.pending_msgs == 0 and sub.pending_bytes == 0
        # waits for the next one; nothing within the timeout is a TimeoutError
        waiting = asyncio.create_task(sub.take_many(timeout=5))
        await asyncio.sleep(0.05)
        await nc.publish("many", b"late")
        assert [m.data for m in await waiting] == [b"late"]
        with pytest.raises(NatsTimeoutError):
            await sub.take_many(timeout=0.1)
        # what was queued is still handed over after the end, then the end
        await nc.publish("many", b"last")
        await nc.flush()
        await sub.unsubscribe()
        assert [m.data for m in await sub.take_many(timeout=1)] == [b"last"]
        with pytest.raises(ConnectionClosedError):
            await sub.take_many(timeout=1)
        with_cb = await nc.subscribe("cb", cb=lambda m: None)
        with pytest.raises(TypeError, match="a subscription with a callback cannot be read"):
            await with_cb.take_many()


async def test_a_long_publish_burst_gives_the_loop_a_turn_at_every_write(
    nats_url: str,
) -> None:
    from jetstream.core._base import FLUSH_THRESHOLD

    async with jetstream.connect(nats_url) as nc:
        sub = await nc.subscribe("burst")
        await nc.flush()
        turns = 0
        running = True

        async def ticker() -> None:
            nonlocal turns
            while running:
                turns += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        start = turns
        # four full write buffers of messages, published without any other await
        data = b"x" * 1000
        count = 4 * FLUSH_THRESHOLD // 1000
        headers = {"n": "1"}
        for i in range(count):
            # the fast path and the general one (a header) alike
            await nc.publish("burst", data, headers=headers if i % 2 else None)
        during = turns - start
        running = False
        await task
        assert during >= 3, during
        # and nothing was lost or reordered on the way
        await nc.flush()
        got = 0
        while got < count:
            got += len(await sub.take_many(timeout=5))
        assert got == count


async def test_publish_waits_for_a_socket_that_takes_nothing_more(
    nats_server: NatsServer,
) -> None:
    """Backpressure holds for a publisher whose loop turns between publishes, so that
    its buffer goes out at every turn and never fills up: once the socket takes
    nothing more (the server is paused), ``publish`` waits, and what the client holds
    stays small; it goes on once the server reads again."""
    async with jetstream.connect(nats_server.url, ping_interval=60) as nc:
        payload = b"x" * 60_000
        await nc.publish("bp", payload)
        await nc.flush()
        sent, budget = 0, (256 << 20) // len(payload)
        nats_server.pause()
        try:
            async with asyncio.timeout(60):
                while True:
                    task = asyncio.create_task(nc.publish("bp", payload))
                    done, _ = await asyncio.wait({task}, timeout=1.0)  # the loop turns
                    if not done:
                        break  # it waits
                    await task
                    sent += 1
                    assert sent < budget, "publish never waited"
            assert 0 < nc.buffered_bytes < 4 << 20  # the kernel holds the rest
        finally:
            nats_server.resume()
        async with asyncio.timeout(30):
            await task
        await nc.flush(timeout=30)
        assert nc.buffered_bytes == 0


async def test_request_reply_and_no_responders(nats_url: str) -> None:
    async with jetstream.connect(nats_url) as nc:

        async def echo(msg: Msg) -> None:
            await msg.respond(b"re:" + msg.data, headers={"h": "v"})

        await nc.subscribe("svc", cb=echo)
        await nc.flush()
        replies = await asyncio.gather(
            *(nc.request("svc", str(i).encode(), timeout=5) for i in range(50))
        )
        assert [r.data for r in replies] == [f"re:{i}".encode() for i in range(50)]
        assert replies[0].headers["h"] == "v"
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        with pytest.raises(NoRespondersError, match=r"nobody\.here"):
            await nc.request("nobody.here", b"x", timeout=10)
        assert loop.time() - t0 < 5  # at once, not after the timeout
        assert nc.pending_requests == 0


async def test_request_timeout_and_cancel_leave_nothing(nats_url: str) -> None:
    async with jetstream.connect(nats_url) as nc:
        await nc.subscribe("blackhole")  # a subscriber that never answers
        await nc.flush()
        with pytest.raises(NatsTimeoutError, match="blackhole"):
            await nc.request("blackhole", b"", timeout=0.2)
        with pytest.raises(asyncio.TimeoutError):  # also the builtin
            await nc.request("blackhole", b"", timeout=0.2)
        task = asyncio.create_task(nc.request("blackhole", b"", timeout=30))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert nc.pending_requests == 0
        # still usable
        await nc.flush()


async def test_requests_of_mixed_timeouts_each_expire_on_time(nats_url: str) -> None:
    """One timer serves every request: a shorter timeout made later must still fire
    first, and the longer one after it."""
    async with jetstream.connect(nats_url) as nc:
        await nc.subscribe("silent")  # someone listens, nobody answers
        await nc.flush()
        loop = asyncio.get_running_loop()
        t0 = loop.time()

        async def timed(timeout: float) -> float:
            with pytest.raises(NatsTimeoutError):
                await nc.request("silent", b"", timeout=timeout)
            return loop.time() - t0

        long = asyncio.create_task(timed(2.0))
        await asyncio.sleep(0.01)
        short = asyncio.create_task(timed(0.3))
        answered = asyncio.create_task(nc.request("echo.none", b"", timeout=5.0))
        t_short = await short
        t_long = await long
        assert 0.3 <= t_short < t_long - 0.5
        assert t_long >= 2.0
        with pytest.raises(NoRespondersError):
            await answered
        assert nc.pending_requests == 0


async def test_request_many(nats_url: str) -> None:
    async with jetstream.connect(nats_url) as nc:
        for i in range(3):

            async def answer(msg: Msg, i: int = i) -> None:
                await msg.respond(str(i).encode())

            await nc.subscribe("many", cb=answer)
        await nc.flush()
        got = await nc.request_many("many", b"", timeout=5, max_msgs=3)
        assert sorted(m.data for m in got) == [b"0", b"1", b"2"]
        got = await nc.request_many("many", b"", timeout=5, stall=0.2)
        assert len(got) == 3
        with pytest.raises(NoRespondersError):
            await nc.request_many("many.none", b"", timeout=1)


async def test_bad_input_is_refused_before_sending(nats_url: str) -> None:
    async with jetstream.connect(nats_url) as nc:
        sub = await nc.subscribe(">")
        await nc.flush()
        before = nc.stats.out_msgs
        for bad in ["", "a b", "a\tb", "a\r\nb", "a..b", ".a", "a.", "a.*", "a.>", "a\x00b"]:
            with pytest.raises(BadSubjectError):
                await nc.publish(bad, b"x")
        with pytest.raises(BadSubjectError):
            await nc.publish("ok", b"x", reply="bad reply")
        for key, value in [("bad key", "v"), ("k:x", "v"), ("k", "a\r\nb"), ("k", "a\nb")]:
            with pytest.raises(BadHeaderError):
                await nc.publish("ok", b"x", headers={key: value})
        assert nc.server_info is not None
        with pytest.raises(MaxPayloadError):
            await nc.publish("ok", b"x" * (nc.server_info.max_payload + 1))
        with pytest.raises(MaxPayloadError):
            await nc.publish("ok", b"x" * (nc.server_info.max_payload - 5), headers={"k": "value"})
        for bad in ["a b", "a..b", "a.>.b", "", "a\nb"]:
            with pytest.raises(BadSubjectError):
                await nc.subscribe(bad)
        with pytest.raises(BadSubjectError):
            await nc.subscribe("ok", queue="bad queue")
        # requests check the same before anything is written, and leave no waiter
        with pytest.raises(BadSubjectError):
            await nc.request("a..b", b"x", timeout=5)
        with pytest.raises(BadHeaderError):
            await nc.request("ok", b"x", timeout=5, headers={"k": "a\r\nb"})
        with pytest.raises(MaxPayloadError):
            await nc.request("ok", b"x" * (nc.server_info.max_payload + 1), timeout=5)
        # data that is not bytes: a TypeError, and no half-written message left behind
        await nc.publish("typed", b"")  # a subject seen before takes the inline path
        before += 1
        for data in ["text", [104, 105], 7]:
            # data without a length fails at len() already, before anything is written
            refused = (
                f"message data must be bytes, bytearray or memoryview, not {type(data).__name__}$"
                if hasattr(data, "__len__")
                else f"object of type '{type(data).__name__}' has no len"
            )
            with pytest.raises(TypeError, match=refused):
                await nc.publish("typed", data)  # type: ignore[arg-type]
            with pytest.raises(TypeError, match=refused):
                await nc.publish("typed.new", data)  # type: ignore[arg-type]
            with pytest.raises(TypeError, match=refused):
                await nc.publish("typed", data, reply="r")  # type: ignore[arg-type]
            with pytest.raises(TypeError, match=refused):
                await nc.publish("typed", data, headers={"k": "v"})  # type: ignore[arg-type]
            with pytest.raises(TypeError, match=refused):
                await nc.request("typed", data, timeout=5)  # type: ignore[arg-type]
        assert (await sub.next_msg(timeout=5)).subject == "typed"
        assert nc.pending_requests == 0
        assert nc.stats.out_msgs == before
        # the connection stays up and nothing was sent
        await nc.publish("after", b"ok")
        msg = await sub.next_msg(timeout=5)
        assert msg.subject == "after"
        assert nc.is_connected


async def test_slow_consumer_drops_and_reports_once(nats_url: str) -> None:
    errors: list[BaseException] = []
    async with jetstream.connect(nats_url, error_cb=errors.append) as nc:
        sub = await nc.subscribe("fast", pending_msgs_limit=100, pending_bytes_limit=1 << 20)
        await nc.flush()
        for _ in range(1000):
            await nc.publish("fast", b"x" * 100)
        await nc.flush()
        assert sub.pending_msgs == 100
        assert sub.dropped == 900
        slow = [e for e in errors if isinstance(e, SlowConsumerError)]
        assert len(slow) == 1
        # reading everything ends the episode; a new overflow is reported again
        while sub.pending_msgs:
            await sub.next_msg(timeout=1)
        for _ in range(150):
            await nc.publish("fast", b"y")
        await nc.flush()
        assert len([e for e in errors if isinstance(e, SlowConsumerError)]) == 2


async def test_slow_consumer_bytes_limit(nats_url: str) -> None:
    errors: list[BaseException] = []
    async with jetstream.connect(nats_url, error_cb=errors.append) as nc:
        sub = await nc.subscribe("big", pending_bytes_limit=10_000)
        await nc.flush()
        for _ in range(100):
            await nc.publish("big", b"z" * 1000)
        await nc.flush()
        assert sub.pending_bytes <= 10_000
        assert sub.pending_msgs == 10
        assert any(isinstance(e, SlowConsumerError) for e in errors)


async def test_no_echo(nats_url: str) -> None:
    async with (
        jetstream.connect(nats_url, no_echo=True) as quiet,
        jetstream.connect(nats_url) as other,
    ):
        mine = await quiet.subscribe("echo")
        theirs = await other.subscribe("echo")
        await quiet.flush()
        await other.flush()
        await quiet.publish("echo", b"from quiet")
        await quiet.flush()
        assert (await theirs.next_msg(timeout=5)).data == b"from quiet"
        with pytest.raises(NatsTimeoutError):
            await mine.next_msg(timeout=0.3)


async def test_flush_rtt_and_stats(nats_url: str) -> None:
    async with jetstream.connect(nats_url) as nc:
        rtt = await nc.rtt()
        assert 0 <= rtt < 5
        await nc.publish("s", b"12345")
        await nc.flush()
        assert nc.stats.out_bytes == 5


async def test_stats_count_every_publish_at_once_whichever_path_wrote_it(nats_url: str) -> None:
    """Publish's fast path (a subject and size seen before) notes the sizes and counts
    them when its buffer goes out; the statistics count them before that too, and once
    only after it."""
    async with jetstream.connect(nats_url) as nc:
        sub = await nc.subscribe("s.>")
        await nc.flush()
        for _ in range(3):  # the first takes the checked path, the next two the fast one
            await nc.publish("s.a", b"x" * 300)
        await nc.publish("s.b", b"y", headers={"k": "v"})  # never the fast path
        before = nc.stats  # nothing written yet: this loop iteration has not ended
        hdr = len(b"NATS/1.0\r\nk: v\r\n\r\n")
        assert (before.out_msgs, before.out_bytes) == (4, 900 + 1 + hdr)
        for _ in range(2000):  # 2 MB: four full write buffers go out on the way
            await nc.publish("s.a", b"z" * 1024)
        await nc.flush()
        after = nc.stats
        assert after.out_msgs - before.out_msgs == 2000
        assert after.out_bytes - before.out_bytes == 2000 * 1024
        assert nc.stats == after  # read twice, counted once
        got = 0
        while got < 2004:
            got += len(await sub.take_many(timeout=10))
        assert nc.stats.out_msgs == after.out_msgs


async def test_many_subjects_and_sizes_publish_intact_with_bounded_caches(nats_url: str) -> None:
    # publish's fast path caches a head per subject and size: past its bounds (64 sizes
    # a subject, 1024 subjects; every cache emptied at 4096 subjects) every message
    # must still go out as it was given, and the caches stay within those bounds.
    async with jetstream.connect(nats_url) as nc:
        sub = await nc.subscribe("many.>", pending_msgs_limit=100_000)
        await nc.flush()
        sent = []
        for i in range(5000):
            subject = f"many.{i % 4500}"
            data = bytes([i % 251]) * (i % 150)
            await nc.publish(subject, data)
            sent.append((subject, data))
        for size in range(200):  # one subject, more sizes than it keeps heads for
            data = b"s" * size
            await nc.publish("many.sizes", data)
            sent.append(("many.sizes", data))
        await nc.flush()
        got = [await sub.next_msg(timeout=10) for _ in range(len(sent))]
        assert [(m.subject, m.data) for m in got] == sent
        assert nc.stats.out_msgs == len(sent)
        assert nc.stats.out_bytes == sum(len(d) for _, d in sent)
        assert len(nc._pub_heads) <= 1024
        assert all(len(h) <= 64 for h in nc._pub_heads.values())
        assert len(nc._pub_prefixes) <= 4096


async def test_drain_lets_handlers_finish(nats_url: str) -> None:
    handled: list[int] = []
    nc = await jetstream.connect(nats_url)

    async def slow(msg: Msg) -> None:
        await asyncio.sleep(0.01)
        handled.append(int(msg.data))

    await nc.subscribe("d", cb=slow)
    sub = await nc.subscribe("d")
    await nc.flush()
    for i in range(20):
        await nc.publish("d", str(i).encode())
    await nc.flush()
    await nc.drain(timeout=10)
    assert handled == list(range(20))
    assert [m.data async for m in sub] == [str(i).encode() for i in range(20)]
    assert nc.is_closed


async def test_close_ends_iterators_and_fails_waiters(nats_url: str) -> None:
    nc = await jetstream.connect(nats_url)
    sub = await nc.subscribe("c")
    await nc.subscribe("blackhole")
    await nc.flush()
    reader = asyncio.create_task(sub.__anext__())
    request = asyncio.create_task(nc.request("blackhole", b"", timeout=30))
    await asyncio.sleep(0.05)
    await nc.close()
    with pytest.raises(StopAsyncIteration):
        await reader
    with pytest.raises(ConnectionClosedError):
        await request


async def test_events_iterator(nats_server: NatsServer) -> None:
    nc = await jetstream.connect(nats_server.url, reconnect_time_wait=0.05)
    kinds: list[jetstream.EventKind] = []
    async with nc.events() as events:
        await nc.close()
        kinds = [ev.kind async for ev in events]
    assert kinds == [jetstream.EventKind.CLOSED]


async def test_connect_refused_raises_no_servers() -> None:
    server = NatsServer()  # not started: its port is free
    try:
        with pytest.raises(jetstream.NoServersError):
            await jetstream.connect(server.url, connect_timeout=1)
    finally:
        server.close()


async def test_large_payload_round_trip(nats_url: str) -> None:
    async with jetstream.connect(nats_url) as nc:
        sub = await nc.subscribe("large")
        await nc.flush()
        assert nc.server_info is not None
        data = bytes(range(256)) * (nc.server_info.max_payload // 256)
        await nc.publish("large", data)
        got = await sub.next_msg(timeout=10)
        assert got.data == data
