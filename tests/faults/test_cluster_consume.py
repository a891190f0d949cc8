"""``consume()`` on an R3 consumer of a 3-node cluster through node failures.

Issue 9, scenario 7, while a publisher keeps publishing with msg ids: a rolling restart
(each node stopped by SIGTERM or SIGKILL, restarted and caught up, one after the other,
the consumer's leader first); the consumer's leader, which the consuming client is
connected to, put in lame-duck mode (SIGUSR2); the consumer's leader frozen for 10 s
(SIGSTOP) and then a leader step-down. Invariants: every acknowledged publish is consumed
(redeliveries are allowed and counted), consumption resumes after each step, and nothing
stalls at the end. The bounds here are generous (a loaded CI machine); ``make
faults-report`` runs the same scenarios and prints the resume times against the bar
(election + 1 s).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

import jetstream
from jetstream import ConsumerConfig, JsMsg, StreamConfig
from jetstream.consumer import MessageStream
from jetstream.embedded import NatsCluster
from tests.faults.placing import placed
from tests.integration._feed import feed, hmsg, sid_of

pytestmark = pytest.mark.asyncio

CONNECT: dict[str, Any] = {
    "reconnect_time_wait": 0.1,
    "reconnect_jitter": 0.05,
    "max_reconnect_attempts": -1,
    "connect_timeout": 2,
}
#: continuous pull options: a missed leader is noticed after two 0.5 s heartbeats
PULL: dict[str, Any] = {"max_messages": 100, "expires": 4, "heartbeat": 0.5}
#: seconds each step gets to show progress, and the end to consume everything
STEP_BOUND = 30.0
END_BOUND = 60.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[NatsCluster]:
    with NatsCluster(size=3) as c:
        yield c


@dataclass
class Step:
    """One fault, in seconds after it: when a message published after it was consumed
    (``resume``), when the raft groups of the stream and the consumer had leaders on live
    nodes again (``election``), and when the first such message was acked (``publish``).
    The consumer is on time when ``resume`` is within 1 s of ``bar_from``."""

    what: str
    resume: float
    election: float
    publish: float

    @property
    def bar_from(self) -> float:
        """The later of election and publish: there is nothing to consume before both."""
        return max(self.election, self.publish)


@dataclass
class Flow:
    """A publisher with msg ids and a consuming handler, and what each of them saw."""

    js: jetstream.JetStream
    #: the scenario's stream (``_setup``'s), whose leaders ``fault`` waits for
    stream: str
    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.get_running_loop)
    #: loop time each id's first publish attempt began
    started: list[float] = field(default_factory=list)
    acked: set[int] = field(default_factory=set)
    #: loop time each id was acked
    acked_at: list[float] = field(default_factory=list)
    #: loop time each id was first consumed
    first: dict[int, float] = field(default_factory=dict)
    deliveries: int = 0
    publish_errors: int = 0

    @property
    def subject(self) -> str:
        """The stream's one subject, as ``_setup`` makes it."""
        return self.stream.lower()

    @property
    def duplicates(self) -> int:
        return self.deliveries - len(self.first)

    async def publish(self, stop: asyncio.Event) -> None:
        """Publish ids 0, 1, ... until ``stop``; an id is retried (same msg id) until acked."""
        i = 0
        while not stop.is_set():
            self.started.append(self.loop.time())
            while True:
                try:
                    # A short timeout: a publish lost with a dead leader is retried soon.
                    await self.js.publish(
                        self.subject, b"%d" % i, msg_id=f"{self.subject}-{i}", timeout=1
                    )
                    break
                except jetstream.NatsError:
                    self.publish_errors += 1
                    if stop.is_set():
                        return  # never acked: not part of the invariant
                    await asyncio.sleep(0.1)
            self.acked.add(i)
            self.acked_at.append(self.loop.time())
            i += 1
            await asyncio.sleep(0.005)

    async def handle(self, msg: JsMsg) -> None:
        i = int(msg.data)
        self.deliveries += 1
        self.first.setdefault(i, self.loop.time())
        await msg.ack()

    def resumed_since(self, mark: int, t: float) -> float | None:
        """Seconds from ``t`` to the first consumption of an id published from ``mark`` on
        (an upper bound of the consumer's own recovery: it includes the publisher's)."""
        times = [self.first[i] for i in range(mark, len(self.started)) if i in self.first]
        return min(times) - t if times else None

    async def wait_consumed(self, count: int, bound: float) -> None:
        async with asyncio.timeout(bound):
            while len(self.first) < count:
                await asyncio.sleep(0.05)

    async def fault(
        self, cluster: NatsCluster, what: str, down: str, bound: float, moved: str | None = None
    ) -> Step:
        """Measure one fault that has just hit server ``down``: wait until an id published
        after it is consumed and until the stream and the consumer have live leaders
        (see ``_leaders_live``)."""
        t = self.loop.time()
        mark = len(self.started)
        resume: float | None = None
        election: float | None = None
        try:
            async with asyncio.timeout(bound):
                while resume is None or election is None or len(self.acked_at) <= mark:
                    if election is None and await asyncio.to_thread(
                        _leaders_live, cluster, self.stream, down, moved
                    ):
                        election = self.loop.time() - t
                    if resume is None:
                        resume = self.resumed_since(mark, t)
                    await asyncio.sleep(0.05)
        except TimeoutError:
            raise AssertionError(
                f"{what}: after {bound:g} s resumed={resume}, leaders elected={election}; "
                f"{len(self.started)} published, {len(self.first)} consumed"
            ) from None
        publish = self.acked_at[mark] - t  # the first id published after the fault
        return Step(what, resume, election, publish)

    async def finish(self, stop: asyncio.Event, publisher: asyncio.Task[None]) -> None:
        """Stop publishing; every acked id must then be consumed within ``END_BOUND``."""
        stop.set()
        async with asyncio.timeout(STEP_BOUND):
            await publisher
        try:
            async with asyncio.timeout(END_BOUND):
                while not self.acked <= self.first.keys():
                    await asyncio.sleep(0.05)
        except TimeoutError:
            missing = sorted(self.acked - self.first.keys())
            raise AssertionError(
                f"{len(missing)} acked publishes never consumed (stalled): {missing[:20]}"
            ) from None


def _leaders_live(cluster: NatsCluster, stream: str, down: str, moved: str | None = None) -> bool:
    """True when ``stream`` and each of its consumers have a leader on a live server
    other than ``down`` and, if given, each consumer a leader other than ``moved`` (from
    /jsz: a leader is a server that names itself; one that cannot answer counts as none).
    Other streams are not looked at: one left by an earlier scenario may be led anywhere."""
    groups: set[str] = set()
    led: set[str] = set()
    for s in cluster.servers:
        if not s.running or s.paused or s.server_name == down:
            continue
        try:
            jsz = s.monitor("jsz", accounts=True, streams=True, consumers=True)
        except (OSError, ValueError):
            continue
        for account in jsz.get("account_details") or []:
            for st in account.get("stream_detail") or []:
                if st["name"] != stream:
                    continue
                groups.add(st["name"])
                if (st.get("cluster") or {}).get("leader") == s.server_name:
                    led.add(st["name"])
                for c in st.get("consumer_detail") or []:
                    key = f"{st['name']} > {c['name']}"
                    groups.add(key)
                    leader = (c.get("cluster") or {}).get("leader")
                    if leader == s.server_name and leader != moved:
                        led.add(key)
    return bool(groups) and led == groups


async def _wait_current(
    stream: jetstream.Stream, consumer: jetstream.Consumer, bound: float
) -> None:
    """Wait until the stream and the consumer each have a leader and two current replicas."""
    last: object = None
    try:
        async with asyncio.timeout(bound):
            while True:
                try:
                    groups = [(await stream.info()).cluster, (await consumer.info()).cluster]
                except jetstream.NatsError as exc:
                    last = exc
                else:
                    last = groups
                    if all(
                        g is not None
                        and g.leader
                        and len(g.replicas) == 2
                        and all(p.current and not p.offline for p in g.replicas)
                        for g in groups
                    ):
                        return
                await asyncio.sleep(0.2)
    except TimeoutError:
        raise AssertionError(f"replicas not current after {bound:g} s: {last}") from None


async def _consumer_leader(consumer: jetstream.Consumer) -> int:
    """The index of the consumer's leader (NatsCluster names its servers n1..nN)."""
    info = await consumer.info()
    assert info.cluster is not None and info.cluster.leader
    return int(info.cluster.leader[1:]) - 1


async def _step_down(js: jetstream.JetStream, stream: str, consumer: str) -> None:
    """Ask the consumer's leader to step down (retried while JetStream is unavailable)."""
    subject = js.api_subject(f"CONSUMER.LEADER.STEPDOWN.{stream}.{consumer}")
    last: object = None
    try:
        async with asyncio.timeout(STEP_BOUND):
            while True:
                try:
                    reply = await js.client.request(subject, timeout=5)
                except jetstream.NatsError as exc:
                    last = exc
                else:
                    if b'"success":true' in reply.data:
                        return
                    last = reply.data
                await asyncio.sleep(0.5)
    except TimeoutError:
        raise AssertionError(f"no step-down after {STEP_BOUND:g} s: {last!r}") from None


async def _setup(js: jetstream.JetStream, name: str) -> tuple[jetstream.Stream, jetstream.Consumer]:
    """The scenario's R3 stream and durable R3 consumer, with replicas current."""
    stream = await placed(
        lambda: js.create_stream(
            StreamConfig(name=name, subjects=[name.lower()], num_replicas=3, duplicate_window=300)
        )
    )
    consumer = await placed(
        lambda: stream.create_consumer(
            ConsumerConfig(durable_name=name.lower(), num_replicas=3, ack_wait=5)
        )
    )
    await _wait_current(stream, consumer, STEP_BOUND)
    return stream, consumer


async def rolling_restart(cluster: NatsCluster) -> tuple[list[Step], Flow, int]:
    """Stop and restart each node in turn under ``consume()`` and a publisher: the consumer's
    leader (and the client's server) first, then the leader again if it is on a node not yet
    restarted; the second stop is a SIGKILL, the others a SIGTERM."""
    errors: list[BaseException] = []
    steps: list[Step] = []
    async with jetstream.connect(cluster.urls, **CONNECT) as admin:
        _, consumer = await _setup(admin.jetstream(timeout=2), "ROLL")
        first = await _consumer_leader(consumer)
    # The client starts on the consumer's leader: the first stop hits both.
    urls = [cluster.urls[first]] + [u for i, u in enumerate(cluster.urls) if i != first]
    async with jetstream.connect(urls, dont_randomize=True, **CONNECT) as nc:
        js = nc.jetstream(timeout=2)
        stream = await js.stream("ROLL")
        consumer = await stream.consumer("roll")
        flow = Flow(js, "ROLL")
        stop = asyncio.Event()
        publisher = asyncio.create_task(flow.publish(stop))
        try:
            async with await consumer.consume(flow.handle, error_cb=errors.append, **PULL):
                await flow.wait_consumed(100, STEP_BOUND)
                todo = list(range(len(cluster)))
                for k in range(len(cluster)):
                    # The consumer's leader whenever it is on a node still to restart.
                    leader = await _consumer_leader(consumer)
                    i = next((j for j in todo if j == leader), todo[0])
                    todo.remove(i)
                    server = cluster.servers[i]
                    name = str(server.server_name)
                    if k == 1:
                        await asyncio.to_thread(server.kill)
                        how = "SIGKILL"
                    else:
                        server._terminate()  # SIGTERM now; the exit is awaited below
                        how = "SIGTERM"
                    what = f"{name} {how}" + (" (consumer leader)" if i == leader else "")
                    steps.append(await flow.fault(cluster, what, name, STEP_BOUND))
                    await server.stop_async()
                    await cluster.restart_async(i)
                    await _wait_current(stream, consumer, STEP_BOUND)
                await flow.finish(stop, publisher)
        finally:
            stop.set()
            publisher.cancel()
            await asyncio.gather(publisher, return_exceptions=True)
        await js.delete_stream("ROLL")
        reconnects = nc.stats.reconnects
    return steps, flow, reconnects


async def lame_duck(cluster: NatsCluster) -> tuple[list[Step], Flow, list[BaseException]]:
    """Put the consumer's leader, which is also the server the consuming connection is on,
    in lame-duck mode (SIGUSR2) under ``consume()`` and a publisher."""
    errors: list[BaseException] = []
    async with jetstream.connect(cluster.urls, **CONNECT) as admin:
        js = admin.jetstream(timeout=2)
        stream, consumer = await _setup(js, "LAME")
        victim = await _consumer_leader(consumer)
        target = cluster.servers[victim]
        urls = [target.url] + [s.url for s in cluster.servers if s is not target]
        flow = Flow(js, "LAME")
        stop = asyncio.Event()
        publisher = asyncio.create_task(flow.publish(stop))
        try:
            async with jetstream.connect(urls, dont_randomize=True, **CONNECT) as nc:
                assert nc.connected_url == target.url
                c = await (await nc.jetstream(timeout=2).stream("LAME")).consumer("lame")
                async with await c.consume(flow.handle, error_cb=errors.append, **PULL):
                    await flow.wait_consumed(100, STEP_BOUND)
                    target.lame_duck()
                    name = str(target.server_name)
                    step = await flow.fault(cluster, f"{name} lame duck", name, STEP_BOUND)
                    # the ldm INFO comes after the server handed its leaderships over
                    async with asyncio.timeout(STEP_BOUND):
                        while nc.connected_url in (None, target.url):
                            await asyncio.sleep(0.05)
                    await flow.finish(stop, publisher)
        finally:
            stop.set()
            publisher.cancel()
            await asyncio.gather(publisher, return_exceptions=True)
            await cluster.restart_async(victim)  # lame duck ends with the process gone
        await _wait_current(stream, consumer, STEP_BOUND)
        await js.delete_stream("LAME")
    return [step], flow, errors


async def freeze_and_step_down(
    cluster: NatsCluster, freeze: float = 10.0
) -> tuple[list[Step], Flow, list[BaseException]]:
    """SIGSTOP the consumer's leader for ``freeze`` seconds, then ask the (new) leader to
    step down, under ``consume()`` and a publisher on another node."""
    errors: list[BaseException] = []
    steps: list[Step] = []
    async with jetstream.connect(cluster.urls, **CONNECT) as admin:
        js = admin.jetstream(timeout=2)
        await _setup(js, "FREEZE")
        victim = await _consumer_leader(await (await js.stream("FREEZE")).consumer("freeze"))
    target = cluster.servers[victim]
    others = [s.url for s in cluster.servers if s is not target]
    # On other nodes: the frozen leader holds no connection of the client (a frozen peer
    # is a matter of pings, not of this scenario).
    async with jetstream.connect(others, dont_randomize=True, **CONNECT) as nc:
        js = nc.jetstream(timeout=2)
        stream = await js.stream("FREEZE")
        consumer = await stream.consumer("freeze")
        flow = Flow(js, "FREEZE")
        stop = asyncio.Event()
        publisher = asyncio.create_task(flow.publish(stop))
        thaw: asyncio.TimerHandle | None = None
        try:
            async with await consumer.consume(flow.handle, error_cb=errors.append, **PULL):
                await flow.wait_consumed(100, STEP_BOUND)
                name = str(target.server_name)
                await asyncio.to_thread(target.pause)
                thaw = flow.loop.call_later(freeze, target.resume)
                what = f"{name} SIGSTOP {freeze:g} s (consumer leader)"
                steps.append(await flow.fault(cluster, what, name, STEP_BOUND))
                async with asyncio.timeout(freeze + STEP_BOUND):
                    while target.paused:
                        await asyncio.sleep(0.05)
                await _wait_current(stream, consumer, STEP_BOUND)
                old = await _consumer_leader(consumer)
                name = str(cluster.servers[old].server_name)
                await _step_down(js, "FREEZE", "freeze")
                what = f"{name} consumer leader step-down"
                steps.append(await flow.fault(cluster, what, "", STEP_BOUND, moved=name))
                await flow.finish(stop, publisher)
        finally:
            stop.set()
            publisher.cancel()
            await asyncio.gather(publisher, return_exceptions=True)
            if thaw is not None:
                thaw.cancel()
            if target.paused:
                target.resume()
        await js.delete_stream("FREEZE")
    return steps, flow, errors


def _check(steps: list[Step], flow: Flow) -> None:
    for step in steps:
        # Generous: the bar is 1 s (reported by `make faults-report`).
        assert step.resume < step.bar_from + 15, step
    assert len(flow.acked) > 100
    assert flow.acked <= flow.first.keys()


async def test_consume_through_a_rolling_restart(cluster: NatsCluster) -> None:
    steps, flow, reconnects = await rolling_restart(cluster)
    assert [s.what.split()[1] for s in steps] == ["SIGTERM", "SIGKILL", "SIGTERM"]
    assert "consumer leader" in steps[0].what
    assert {s.what.split()[0] for s in steps} == {"n1", "n2", "n3"}
    _check(steps, flow)
    assert reconnects >= 1  # the client's own server was restarted too


async def test_consume_through_a_lame_duck_leader(cluster: NatsCluster) -> None:
    steps, flow, _ = await lame_duck(cluster)
    _check(steps, flow)


async def test_consume_through_a_frozen_leader_and_a_step_down(cluster: NatsCluster) -> None:
    steps, flow, errors = await freeze_and_step_down(cluster)
    _check(steps, flow)
    # the frozen leader's heartbeats were missed, and the stream pulled again
    assert any(isinstance(e, jetstream.NoHeartbeatError) for e in errors)


async def test_a_leadership_change_does_not_end_the_fetch(cluster: NatsCluster) -> None:
    """The consumer's leader steps down under a fetch: the old leader ends the pull
    request with a real 409 Leadership Change, and the fetch pulls again (from the new
    leader) and returns what comes within its ``expires``."""
    found: list[bytes] = []

    def seen(msg: jetstream.Msg) -> None:
        if msg.raw_headers:
            found.append(bytes(msg.raw_headers))

    async with (
        jetstream.connect(cluster.urls, **CONNECT) as nc,
        jetstream.connect(cluster.urls, **CONNECT) as watcher,
    ):
        # a second connection sees the statuses the servers send to the fetch's inbox
        await watcher.subscribe("_INBOX.>", cb=seen)
        await watcher.flush()
        js = nc.jetstream(timeout=5)
        _, consumer = await _setup(js, "FLC")
        task = asyncio.create_task(consumer.fetch(1, expires=60))
        try:
            async with asyncio.timeout(10):  # the pull request reached the consumer
                while (await consumer.info()).num_waiting < 1:
                    await asyncio.sleep(0.05)
            await _step_down(js, "FLC", "flc")
            async with asyncio.timeout(STEP_BOUND):
                while not any(b"409 Leadership Change" in h for h in found):
                    await asyncio.sleep(0.01)
            await asyncio.sleep(0.2)
            assert not task.done()  # still waiting: it pulled again
            await js.publish("flc", b"after", timeout=STEP_BOUND)
            msgs = await asyncio.wait_for(task, STEP_BOUND)
            assert [m.data for m in msgs] == [b"after"]
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        await js.delete_stream("FLC")


async def test_a_leadership_change_ends_the_503_backoff(cluster: NatsCluster) -> None:
    """A reconnect during an election meets 503 (no leader yet) and backs off 0.5 s; the
    409 Leadership Change from the new leader then pulls at once instead of waiting.

    The two statuses are handed to the stream's inbox as reads (tests/integration/
    _feed.py): a real election gives both, but no server can be made to send the 503 and
    then the 409 within the same 0.5 s backoff on demand, so the order under test is
    injected. The real 409 Leadership Change of a step-down is
    test_a_leadership_change_does_not_end_the_fetch's.
    """
    async with jetstream.connect(cluster.urls, **CONNECT) as nc:
        js = nc.jetstream(timeout=2)
        _, consumer = await _setup(js, "LC")
        it = consumer.messages(**PULL)
        assert isinstance(it, MessageStream)
        async with it:
            it.__aiter__()  # starts it: the first pull
            sid = sid_of(nc, it.subject)
            feed(nc, hmsg(it.subject, sid, b"NATS/1.0 503\r\n\r\n"))
            assert it.outstanding == 0  # backing off: no pull for 0.5 s
            feed(nc, hmsg(it.subject, sid, b"NATS/1.0 409 Leadership Change\r\n\r\n"))
            assert it.outstanding == PULL["max_messages"]  # pulled again, now
        await js.delete_stream("LC")
