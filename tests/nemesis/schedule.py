"""The nemesis: a seeded schedule of faults, and what applies them to the cluster.

``make_schedule(seed, seconds)`` draws, after a quiet start, a fault every 2 to 8 s, the
kinds taken from a shuffled bag of all seven (so every kind comes once in any seven
faults in a row), each with its target and duration:

* ``kill``: SIGKILL of a node, restarted on its store 1 to 8 s later;
* ``pause``: SIGSTOP of a node, SIGCONT 1 to 15 s later;
* ``lameduck``: a node put in lame-duck mode, waited for to exit, restarted;
* ``stepdown``: a leader step-down of the stream, the bucket's stream or a durable
  consumer, through the JetStream API;
* ``cut``: every connection of one client's proxies dropped (an RST);
* ``blackhole``: one client's proxies stop forwarding for 1 to 15 s (sockets kept open);
* ``latency``: 20 to 400 ms added to each read of one client's proxies for 1 to 15 s.

The same seed and length give the same schedule. ``Nemesis`` applies it: a fault
starts at its time, but a node fault waits until the one before has healed (one node
down at a time, so the R3 groups keep a quorum) and a client fault until that client's
previous one has ended; each start and end is an operation of the ``nemesis`` process
in the history. ``heal()`` ends what is still going on and waits until the cluster and
every raft group of the workload have a leader with every replica current.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import jetstream
from jetstream.api import ClusterInfo
from jetstream.embedded import NatsCluster
from tests.faults.proxy import FaultProxy
from tests.nemesis.history import History

__all__ = ["KINDS", "Fault", "Nemesis", "make_schedule"]

KINDS = ("kill", "pause", "lameduck", "stepdown", "cut", "blackhole", "latency")
NODE_KINDS = frozenset({"kill", "pause", "lameduck"})
#: seconds between two faults
GAP = (2.0, 8.0)
#: seconds a killed node stays down, a paused one frozen, a client link faulty
DOWN = (1.0, 8.0)
HOLD = (1.0, 15.0)
#: seconds added to each read of a client's proxies
LATENCY = (0.02, 0.4)
#: seconds a lame-duck node gets to exit before it is killed
LAME_DUCK_EXIT = 60.0
#: seconds the heal may take (every node up, every group led and current)
HEAL_BOUND = 120.0


@dataclass(frozen=True)
class Fault:
    """One scheduled fault: when (seconds from the start), what, on what, how long."""

    at: float
    kind: str
    target: str
    seconds: float = 0.0
    latency: float = 0.0

    def describe(self) -> dict[str, object]:
        out = {k: v for k, v in asdict(self).items() if v or k == "at"}
        out["at"] = round(self.at, 3)
        return out


def make_schedule(
    seed: int,
    seconds: float,
    *,
    quiet: float,
    nodes: Sequence[str],
    clients: Sequence[str],
    groups: Sequence[str],
) -> list[Fault]:
    """The faults of a run of ``seconds``, the first after ``quiet`` seconds."""
    rng = random.Random(seed)
    out: list[Fault] = []
    bag: list[str] = []
    t = quiet
    while True:
        t += rng.uniform(*GAP)
        if t >= seconds:
            return out
        if not bag:
            bag = list(KINDS)
            rng.shuffle(bag)
        kind = bag.pop()
        if kind == "kill":
            out.append(Fault(t, kind, rng.choice(nodes), round(rng.uniform(*DOWN), 2)))
        elif kind == "pause":
            out.append(Fault(t, kind, rng.choice(nodes), round(rng.uniform(*HOLD), 2)))
        elif kind == "lameduck":
            out.append(Fault(t, kind, rng.choice(nodes)))
        elif kind == "stepdown":
            out.append(Fault(t, kind, rng.choice(groups)))
        elif kind == "cut":
            out.append(Fault(t, kind, rng.choice(clients)))
        elif kind == "blackhole":
            out.append(Fault(t, kind, rng.choice(clients), round(rng.uniform(*HOLD), 2)))
        else:
            hold = round(rng.uniform(*HOLD), 2)
            lat = round(rng.uniform(*LATENCY), 3)
            out.append(Fault(t, kind, rng.choice(clients), hold, lat))


class Nemesis:
    """Applies a schedule to a cluster and to the clients' proxies (see the module)."""

    def __init__(
        self,
        cluster: NatsCluster,
        proxies: dict[str, list[FaultProxy]],
        admin: jetstream.JetStream,
        history: History,
    ) -> None:
        self.cluster, self.proxies, self.admin, self.h = cluster, proxies, admin, history
        self.stop = asyncio.Event()
        self._node_lock = asyncio.Lock()
        self._client_locks = {name: asyncio.Lock() for name in proxies}
        self._tasks: list[asyncio.Task[None]] = []
        #: faults applied, by kind
        self.counts: dict[str, int] = dict.fromkeys(KINDS, 0)

    def _node(self, name: str) -> int:
        return next(i for i, s in enumerate(self.cluster.servers) if s.server_name == name)

    async def _hold(self, seconds: float) -> None:
        """Sleep ``seconds``, or less once the run stops."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self.stop.wait()

    async def run(self, schedule: Sequence[Fault]) -> None:
        """Start each fault at its time, until the schedule ends or ``stop`` is set."""
        for fault in schedule:
            await self._hold(fault.at - self.h.now())
            if self.stop.is_set():
                return
            self._tasks.append(asyncio.create_task(self._apply(fault), name="nemesis fault"))

    async def _apply(self, fault: Fault) -> None:
        lock = self._node_lock if fault.kind in NODE_KINDS else None
        if fault.kind in ("cut", "blackhole", "latency"):
            lock = self._client_locks[fault.target]
        async with lock or contextlib.nullcontext():
            if self.stop.is_set():
                return
            op = self.h.invoke("nemesis", fault.kind, fault.describe())
            try:
                result = await getattr(self, "_" + fault.kind)(fault)
            except (jetstream.NatsError, OSError) as exc:
                self.h.complete(op, "nemesis", fault.kind, "fail", error=exc)
            else:
                self.counts[fault.kind] += 1
                self.h.complete(op, "nemesis", fault.kind, "ok", result)

    # ------------------------------------------------------------------------- the faults

    async def _kill(self, fault: Fault) -> dict[str, object]:
        i = self._node(fault.target)
        await asyncio.to_thread(self.cluster.servers[i].kill)
        await self._hold(fault.seconds)
        await self.cluster.restart_async(i)
        return {"restarted": True}

    async def _pause(self, fault: Fault) -> None:
        server = self.cluster.servers[self._node(fault.target)]
        await asyncio.to_thread(server.pause)
        try:
            await self._hold(fault.seconds)
        finally:
            server.resume()

    async def _lameduck(self, fault: Fault) -> dict[str, object]:
        i = self._node(fault.target)
        server = self.cluster.servers[i]
        loop = asyncio.get_running_loop()
        start = loop.time()
        server.lame_duck()
        try:
            await server.wait_exit_async(LAME_DUCK_EXIT)
            exited = True
        except jetstream.NatsError:  # EmbeddedServerError: still running
            exited = False
            await asyncio.to_thread(server.kill)
        took = round(loop.time() - start, 3)
        await self.cluster.restart_async(i)
        return {"exited": exited, "exit_seconds": took}

    async def _stepdown(self, fault: Fault) -> dict[str, object]:
        kind, _, name = fault.target.partition(":")
        if kind == "stream":
            what = f"STREAM.LEADER.STEPDOWN.{name}"
        else:
            stream, _, consumer = name.partition("/")
            what = f"CONSUMER.LEADER.STEPDOWN.{stream}.{consumer}"
        reply = await self.admin.client.request(self.admin.api_subject(what), b"", timeout=5)
        body = json.loads(reply.data or b"{}")
        if not body.get("success"):
            raise jetstream.NatsError(f"{what}: {reply.data[:200]!r}")
        return {"success": True}

    async def _cut(self, fault: Fault) -> dict[str, object]:
        return {"links": sum(p.cut() for p in self.proxies[fault.target])}

    async def _blackhole(self, fault: Fault) -> None:
        for p in self.proxies[fault.target]:
            p.blackhole = True
        try:
            await self._hold(fault.seconds)
        finally:
            for p in self.proxies[fault.target]:
                p.blackhole = False

    async def _latency(self, fault: Fault) -> None:
        for p in self.proxies[fault.target]:
            p.latency = fault.latency
        try:
            await self._hold(fault.seconds)
        finally:
            for p in self.proxies[fault.target]:
                p.latency = 0.0

    # ------------------------------------------------------------------------- the heal

    async def heal(self, streams: Sequence[str], consumers: Sequence[tuple[str, str]]) -> None:
        """End every fault, bring every node back, and wait until every group of
        ``streams`` and ``consumers`` has a leader and all its replicas current.

        Raises:
            TimeoutError: not healed within ``HEAL_BOUND`` seconds.
        """
        self.stop.set()
        async with asyncio.timeout(HEAL_BOUND):
            await asyncio.gather(*self._tasks, return_exceptions=True)
            for proxies in self.proxies.values():
                for p in proxies:
                    p.blackhole, p.latency = False, 0.0
            for i, server in enumerate(self.cluster.servers):
                if server.paused:
                    server.resume()
                if not server.running:
                    await self.cluster.restart_async(i)
            await self.cluster.wait_for_leader_async()
            for stream in streams:
                await self._current(stream, None)
            for stream, consumer in consumers:
                await self._current(stream, consumer)

    async def _current(self, stream: str, consumer: str | None) -> None:
        """Until the group has a leader and every replica is current."""
        while True:
            try:
                s = await self.admin.stream(stream)
                info = await (await s.consumer(consumer)).info() if consumer else await s.info()
            except jetstream.NatsError:
                await asyncio.sleep(0.2)
                continue
            if _current(info.cluster, len(self.cluster)):
                return
            await asyncio.sleep(0.2)


def _current(c: ClusterInfo | None, size: int) -> bool:
    """A group of ``size`` peers has a leader and every other replica is current."""
    if c is None or not c.leader or len(c.replicas) != size - 1:
        return False
    return all(r.current and not r.offline for r in c.replicas)
