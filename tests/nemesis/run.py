"""One nemesis run: a 3-node cluster, the workload through fault proxies, the nemesis,
the heal, the read-back, the leak checks; everything into the history file.

``nemesis_run(seconds, seed, path)`` writes the history and returns; ``tests.nemesis.checker``
reads it. The steps:

1. a 3-node cluster (``jetstream.testing``), an R3 stream ``NEM`` (``nem.>``), an R3
   bucket ``nem`` and the two R3 durable consumers; a proxy per client and node, each
   client connected through its proxy of one node (its home, ``CLIENTS`` spread over
   the nodes) and moving to the others through its proxies of them when it reconnects;
2. the workload (``tests.nemesis.workload``) and the loop monitor for ``seconds``, the
   nemesis applying its schedule (``tests.nemesis.schedule``) after a quiet start;
3. the workload stops, the nemesis heals everything (every node up, every group led and
   current) and the readers are given ``DRAIN_BOUND`` seconds to read the stream to its
   end; a heal or a drain that does not come is written down (``healed``, ``drained``):
   the checker fails such a run;
4. the read-back, by an admin connection of its own, straight to the servers: the
   whole stream (sequence and id of each message) and each key's kept revisions;
5. the client itself: subscriptions beyond each client's own, pending requests and
   publish_async acks, the memory (RSS after a warm-up and at the end), and, once every
   connection is closed, tasks still pending; then the ``end`` line.

The bucket's stream answers no direct get unless ``direct_gets``: ``kv.get`` then asks
the stream's leader. A direct get may be answered by any replica, one behind the others
included (a node just continued after SIGSTOP answers with the state it was stopped
with): the server promises no read-after-write for it (ADR-53), and the nemesis found
such reads (the reliability page has the history lines).

The loop monitor wakes every 20 ms: a wake-up that comes late by ``lag`` while the
loop's thread used ``cpu`` seconds of processor meanwhile blocked the loop for at most
``min(lag, cpu)``: a process that the machine did not run (a loaded CI host) is late
without using the processor, and is not counted as a block. Each second's largest
figures are one ``loop`` event.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec

import jetstream
from jetstream import AckPolicy, Client, ConsumerConfig, StreamConfig
from jetstream.embedded import NatsCluster
from tests.faults.placing import placed
from tests.faults.proxy import FaultProxy
from tests.faults.soak import _left_subs, _through, rss_mb
from tests.leaks import settle_and_describe
from tests.nemesis.history import History
from tests.nemesis.schedule import Nemesis, make_schedule
from tests.nemesis.workload import (
    BUCKET,
    CLIENTS,
    CONSUMERS,
    KEYS,
    KV_TIMEOUT,
    PUB_TIMEOUT,
    STREAM,
    Workload,
    cancel_all,
)

__all__ = ["DRAIN_BOUND", "GROUPS", "nemesis_run", "quiet_for", "run_for"]

#: the raft groups a step-down may hit
GROUPS = (
    f"stream:{STREAM}",
    f"stream:KV_{BUCKET}",
    *(f"consumer:{STREAM}/{name}" for name, _ in CONSUMERS),
)
#: seconds the readers get, once healed, to read every stored message
DRAIN_BOUND = 90.0
#: seconds the processes get to finish the operation they are in once told to stop
FINISH_BOUND = 60.0
#: the durable consumers' ack_wait: a delivery lost in a fault comes again this soon
ACK_WAIT = 10.0
#: a dead link is found within (1 + MAX_PINGS) * PING_INTERVAL seconds
PING_INTERVAL = 2.0
MAX_PINGS = 2
ADMIN = {"reconnect_time_wait": 0.1, "max_reconnect_attempts": -1}


def quiet_for(seconds: float) -> float:
    """The quiet start of a run of ``seconds``: 5 s, 10 s from two minutes on."""
    return 5.0 if seconds < 120 else 10.0


class LoopMonitor:
    """The event loop's lateness and blocks (see the module docstring)."""

    INTERVAL = 0.02

    def __init__(self, history: History) -> None:
        self.h = history
        #: set while the run itself blocks the loop on purpose (a full collection)
        self.excused = False
        self.max_lag = 0.0
        self.max_block = 0.0

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        window, lag_s, block_s = loop.time(), 0.0, 0.0
        while True:
            t0, c0 = loop.time(), time.thread_time()
            await asyncio.sleep(self.INTERVAL)
            lag = max(loop.time() - t0 - self.INTERVAL, 0.0)
            block = min(lag, time.thread_time() - c0)
            if not self.excused:
                lag_s, block_s = max(lag_s, lag), max(block_s, block)
            if loop.time() - window >= 1.0:
                self.h.event("monitor", "loop", lag=round(lag_s, 4), block=round(block_s, 4))
                self.max_lag, self.max_block = (
                    max(self.max_lag, lag_s),
                    max(self.max_block, block_s),
                )
                window, lag_s, block_s = loop.time(), 0.0, 0.0

    def rss(self) -> float:
        """``rss_mb()`` (a full collection first), not counted as a block."""
        self.excused = True
        try:
            return rss_mb()
        finally:
            self.excused = False


def _reporter(h: History, name: str) -> Callable[[BaseException], None]:
    """An error callback writing what a client reports to the history."""

    def reported(exc: BaseException) -> None:
        h.event(name, "client-error", error=f"{type(exc).__name__}: {exc}"[:300])

    return reported


async def _connect(h: History, name: str, proxies: list[FaultProxy], home: int) -> Client:
    """A client on its proxy of node ``home``, moving through its other proxies; what
    it reports to its error callback goes to the history."""
    order = proxies[home:] + proxies[:home]
    return await jetstream.connect(
        [p.url for p in order],
        name=name,
        error_cb=_reporter(h, name),
        dont_randomize=True,
        reconnect_to_server_cb=_through(order),
        max_reconnect_attempts=-1,
        ping_interval=PING_INTERVAL,
        max_outstanding_pings=MAX_PINGS,
    )


async def _setup(admin: jetstream.JetStream, push_inbox: str, direct_gets: bool) -> None:
    """The stream, the bucket and the durable consumers, all R3. Unless
    ``direct_gets``, the bucket's stream answers no direct get: ``kv.get`` then asks
    the stream's leader (see the module docstring)."""
    s = await placed(
        lambda: admin.create_stream(StreamConfig(name=STREAM, subjects=["nem.>"], num_replicas=3))
    )
    kv = await placed(lambda: admin.create_key_value(bucket=BUCKET, replicas=3, history=64))
    if not direct_gets:
        kv_config = msgspec.structs.replace((await kv.stream.info()).config, allow_direct=False)
        await placed(lambda: admin.update_stream(kv_config))
    for name, push in CONSUMERS:
        config = ConsumerConfig(
            durable_name=name, ack_policy=AckPolicy.EXPLICIT, ack_wait=ACK_WAIT, num_replicas=3
        )
        if push:
            config.deliver_subject = push_inbox
            config.flow_control = True
            config.idle_heartbeat = 2.0
        await placed(lambda config=config: s.create_consumer(config))


async def nemesis_run(
    seconds: float, seed: int, path: str | Path, *, direct_gets: bool = False
) -> None:
    """Run the workload for ``seconds`` under the schedule of ``seed``; the history goes
    to ``path`` (see the module docstring)."""
    h = History(path)
    quiet = quiet_for(seconds)
    nodes = ["n1", "n2", "n3"]
    schedule = make_schedule(
        seed, seconds, quiet=quiet, nodes=nodes, clients=CLIENTS, groups=GROUPS
    )
    h.meta(
        seed=seed,
        seconds=seconds,
        quiet=quiet,
        schedule=[f.describe() for f in schedule],
        clients=list(CLIENTS),
        keys=list(KEYS),
        direct_gets=direct_gets,
    )
    try:
        await _run(h, seconds, seed, schedule, direct_gets)
    finally:
        h.close()


async def _run(
    h: History, seconds: float, seed: int, schedule: list[Any], direct_gets: bool
) -> None:
    leaks: dict[str, Any] = {}
    async with (
        NatsCluster(3, lame_duck_duration=30, lame_duck_grace_period=1) as cluster,
        contextlib.AsyncExitStack() as stack,
    ):
        proxies = {
            name: [await stack.enter_async_context(FaultProxy(s.port)) for s in cluster]
            for name in CLIENTS
        }
        admin_nc = await stack.enter_async_context(
            jetstream.connect(cluster.urls, error_cb=_reporter(h, "admin"), **ADMIN)
        )
        admin = admin_nc.jetstream()
        clients: dict[str, Client] = {}
        for i, name in enumerate(CLIENTS):
            clients[name] = await _connect(h, name, proxies[name], i % len(cluster))
            stack.push_async_callback(clients[name].close)
        await _setup(admin, clients["push"].new_inbox(), direct_gets)
        h.event("run", "phase", value="setup done", servers=cluster.urls)
        leaks = await _work(h, cluster, proxies, admin, clients, seconds, seed, schedule)
    # Every connection, proxy and server is closed: what is still pending leaked.
    leaks["tasks"] = await settle_and_describe()
    h.event("run", "leaks", **leaks)
    h.end()


async def _work(
    h: History,
    cluster: NatsCluster,
    proxies: dict[str, list[FaultProxy]],
    admin: jetstream.JetStream,
    clients: dict[str, Client],
    seconds: float,
    seed: int,
    schedule: list[Any],
) -> dict[str, Any]:
    w = Workload(h, seed, clients)
    monitor = LoopMonitor(h)
    nemesis = Nemesis(cluster, proxies, admin, h)
    js = {name: nc.jetstream(timeout=PUB_TIMEOUT) for name, nc in clients.items()}
    kv_js = {name: clients[name].jetstream(timeout=KV_TIMEOUT) for name in ("kv-a", "kv-b")}
    kv = {name: await ctx.key_value(BUCKET) for name, ctx in kv_js.items()}
    stream_of = {name: await js[name].stream(STREAM) for name in ("pull", "push")}
    pull = await stream_of["pull"].consumer("nem-pull")
    push = await stream_of["push"].consumer("nem-push")
    ordered = await stream_of["pull"].ordered_consumer()
    ordered_push = await stream_of["push"].ordered_consumer(push=True)
    svc = await w.service(clients["svc"])

    def task(aw: Awaitable[Any], name: str) -> asyncio.Task[Any]:
        return asyncio.create_task(aw, name=f"nemesis {name}")  # type: ignore[arg-type]

    readers = [
        task(w.pull_reader(pull), "pull"),
        task(w.push_reader(push), "push"),
        task(w.ordered_reader("ordered", ordered), "ordered"),
        task(w.ordered_reader("ordered-push", ordered_push), "ordered-push"),
        task(w.watcher(kv["kv-a"]), "watch"),
    ]
    async with asyncio.timeout(30):  # the watch sees every revision
        await w.watching.wait()
    ops = [
        task(w.publisher("pub-0", js["pub"]), "pub-0"),
        task(w.publisher("pub-1", js["pub"]), "pub-1"),
        task(w.async_publisher("apub-0", js["apub"]), "apub-0"),
        task(w.kv_process("kv-0", kv["kv-a"]), "kv-0"),
        task(w.kv_process("kv-1", kv["kv-a"]), "kv-1"),
        task(w.kv_process("kv-2", kv["kv-b"]), "kv-2"),
        task(w.kv_process("kv-3", kv["kv-b"]), "kv-3"),
        task(w.caller("req-0", clients["req"]), "req-0"),
        task(w.caller("req-1", clients["req"]), "req-1"),
    ]
    watch = task(monitor.run(), "monitor")
    faults = task(nemesis.run(schedule), "schedule")
    h.event("run", "phase", value="workload started")
    warmup = min(60.0, seconds / 4)
    await asyncio.sleep(max(warmup - h.now(), 0))
    rss_base = monitor.rss()
    h.event("monitor", "rss", mb=round(rss_base, 2), what="after the warm-up")
    await asyncio.sleep(max(seconds - h.now(), 0))

    # The end: the processes stop, everything heals, the readers read to the end.
    w.stop.set()
    h.event("run", "phase", value="stop")
    healed = True
    try:
        await nemesis.heal([STREAM, f"KV_{BUCKET}"], [(STREAM, c) for c, _ in CONSUMERS])
    except (TimeoutError, jetstream.NatsError) as exc:
        healed = False
        h.event("run", "healed", ok=False, error=f"{type(exc).__name__}: {exc}"[:2000])
    else:
        h.event("run", "healed", ok=True)
    faults.cancel()
    _, unfinished = await asyncio.wait(ops, timeout=FINISH_BOUND)
    await cancel_all(list(unfinished))
    h.event("run", "finished", ok=not unfinished, unfinished=[t.get_name() for t in unfinished])
    drained = healed and await _drain(h, w, admin)
    await cancel_all(readers)
    await svc.stop()
    if healed:
        try:
            await _read_back(h, admin)
        except (TimeoutError, jetstream.NatsError) as exc:
            h.event("final", "failed", error=f"{type(exc).__name__}: {exc}"[:2000])
    for nc in clients.values():  # what a stopped reader gave back is through
        with contextlib.suppress(jetstream.NatsError):
            await nc.flush(timeout=10)
    rss_end = monitor.rss()
    h.event("monitor", "rss", mb=round(rss_end, 2), what="at the end")
    await cancel_all([watch, faults])
    h.event("monitor", "loop-max", lag=round(monitor.max_lag, 4), block=round(monitor.max_block, 4))
    h.event("run", "faults", counts=nemesis.counts, drained=drained)
    return {
        "subs": _left_subs(*clients.values()),
        "requests": sum(nc.pending_requests for nc in clients.values()),
        "async_pending": sum(ctx.publish_async_pending for ctx in js.values()),
        "rss_base": round(rss_base, 2),
        "rss_end": round(rss_end, 2),
    }


async def _drain(h: History, w: Workload, admin: jetstream.JetStream) -> bool:
    """Until every reader has every stored message (``DRAIN_BOUND`` at most)."""
    last = (await (await admin.stream(STREAM)).info()).state.last_seq
    kv_last = (await (await admin.stream(f"KV_{BUCKET}")).info()).state.last_seq

    def behind() -> dict[str, int]:
        out = {p: t.missing_count(last + 1) - 1 for p, t in w.seen.items()}
        out = {p: n for p, n in out.items() if n}
        if w.watched < kv_last:
            out["watch"] = kv_last - w.watched
        return out

    loop = asyncio.get_running_loop()
    deadline = loop.time() + DRAIN_BOUND
    while (left := behind()) and loop.time() < deadline:
        await asyncio.sleep(0.1)
    h.event("run", "drained", ok=not left, last_seq=last, kv_last_seq=kv_last, behind=left)
    return not left


async def _read_back(h: History, admin: jetstream.JetStream) -> None:
    """The whole stream and each key's kept revisions, read from the servers."""
    stream = await admin.stream(STREAM)
    info = await stream.info()
    last = info.state.last_seq
    h.event("final", "stream-info", last_seq=last, messages=info.state.messages)
    oc = await stream.ordered_consumer()
    try:
        seq = 0
        async with asyncio.timeout(120):
            while seq < last:
                batch = await oc.fetch(1000, expires=5)
                if batch:
                    msgs = [[m.metadata.sequence.stream, m.data.decode()] for m in batch]
                    seq = msgs[-1][0]
                    h.event("final", "stream", msgs=msgs)
    finally:
        await oc.delete()
    kv = await admin.key_value(BUCKET)
    kv_info = await kv.stream.info()
    h.event("final", "kv-info", last_seq=kv_info.state.last_seq)
    for key in KEYS:
        try:
            entries = await kv.history(key)
        except jetstream.KeyNotFoundError:
            entries = []
        revs = [
            [e.revision, e.operation.name, e.value.decode() if e.operation.name == "PUT" else None]
            for e in entries
        ]
        h.event("final", "kv", key=key, revs=revs)
    h.event("final", "done")


def run_for(seconds: float, seed: int, path: str | Path, *, direct_gets: bool = False) -> None:
    """``nemesis_run`` on a loop of its own (the command line's way)."""
    asyncio.run(nemesis_run(seconds, seed, path, direct_gets=direct_gets))
