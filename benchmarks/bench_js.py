"""JetStream benchmarks, jetstream and nats-py (and natsio and nats-core where they are
installed, see ``benchmarks/_peers.py``) side by side in one process run.

Workloads (one embedded nats-server, memory storage):

- sync publish: N publishes each waiting for its PubAck;
- publish_async: N pipelined publishes with at most ``WINDOW`` (256) acks outstanding,
  then waiting for every ack;
- fetch+ack: N stored messages pulled in batches of 100 and 500, each acked with one
  ``await msg.ack()`` a message, as users write it: the headline rows, the same code for
  every client (nats.go's ``m.Ack()`` a message too);
- fetch+ack_all: the same, ours only, each batch acked by ``jetstream.ack_all(msgs)`` (the
  batch's acks formatted together into one buffered write); the other clients have no
  such call (nats.go neither), so they are n/a there;
- fetch+ack_sync batch 500: the same in batches of 500, each message acked with a
  confirmed ack, the 500 confirmations awaited together, as users write it: one
  ``ack_sync()`` a message, gathered (``asyncio.gather``; nats.go: a goroutine a
  message); fetch+ack_sync_all batch 500 beside it, ours only: a batch's confirmed acks
  in one ``ack_sync_all`` (one wait for the batch);
- messages()+ack: N stored messages through continuous pull (nats-py: fetch loop);
- ordered replay: N stored messages through an ordered consumer: ours pull-based (the
  default), asking for ``--pull`` (500) messages a pull, as natsio and nats-core do (the
  latter's default is 100 a pull: it is given 500 here), then push-based with flow
  control; nats-py's is push-based in both rows;
- ack_sync: M messages acked with a confirmed ack, one after the other (bound by the
  round-trip time to the server), and 100 at a time (bound by the client's own work;
  awaited together as in fetch+ack_sync).

At the end, the socket floor (``benchmarks/_floor.py``): a PING/PONG round trip on a
bare blocking socket, the most sequential ``ack_sync`` calls a second could reach here;
the sync publish and ``ack_sync`` round trips, and fetch+ack at batch 100 and 500, on
bare sockets.

Run: ``.venv/bin/python -m benchmarks.bench_js [--count N] [--loop uvloop]``; ``--cpu`` prints
where the CPU went per message (client user and system time, server), ``--profile`` runs
ours alone under cProfile (with ``--only WORKLOAD``).
"""

from __future__ import annotations

import asyncio
import cProfile
import pstats
import sys
import time
from contextlib import AsyncExitStack
from functools import partial
from typing import Any

import nats
from nats.js.api import AckPolicy as NAckPolicy
from nats.js.api import ConsumerConfig as NConsumerConfig
from nats.js.api import StorageType as NStorageType
from nats.js.api import StreamConfig as NStreamConfig

import jetstream
from benchmarks import _peers
from benchmarks._floor import FLOOR, fetch_ack, round_trips, socket_floor
from benchmarks._report import (
    Measurement,
    Workload,
    arg_parser,
    race_workloads,
    report,
    run_on_loop,
    start,
    with_cpu_all,
)
from jetstream import ConsumerConfig, StreamConfig
from jetstream.api import StorageType
from jetstream.embedded import NatsServer

PAYLOAD = b"x" * 128
#: outstanding acks of publish_async, the same for every client
WINDOW = 256


class Ours:
    name = "jetstream"

    def __init__(self, url: str) -> None:
        self.url = url

    async def __aenter__(self) -> Ours:
        self.nc = await jetstream.connect(self.url)
        self.js = self.nc.jetstream(publish_async_max_pending=WINDOW)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.nc.close()

    async def fresh_stream(self, n_stored: int) -> None:
        try:
            await self.js.delete_stream("BENCH")
        except jetstream.StreamNotFoundError:
            pass
        await self.js.create_stream(
            StreamConfig(name="BENCH", subjects=["bench"], storage=StorageType.MEMORY)
        )
        if n_stored:
            futs = [await self.js.publish_async("bench", PAYLOAD) for _ in range(n_stored)]
            await asyncio.gather(*futs)

    async def sync_publish(self, n: int) -> float:
        await self.fresh_stream(0)
        t0 = start()
        for _ in range(n):
            await self.js.publish("bench", PAYLOAD)
        return time.perf_counter() - t0

    async def async_publish(self, n: int) -> float:
        await self.fresh_stream(0)
        t0 = start()
        for _ in range(n):
            await self.js.publish_async("bench", PAYLOAD)
        await self.js.publish_async_complete(timeout=120)
        return time.perf_counter() - t0

    async def fetch_ack(
        self, n: int, batch: int, confirmed: bool = False, ack_all: bool = False
    ) -> float:
        """Fetch ``n`` messages ``batch`` at a time and ack each: one ``await msg.ack()``
        a message (the headline), with ``ack_all`` a ``jetstream.ack_all`` a batch, with
        ``confirmed`` an ``ack_sync()`` a message gathered, with both a
        ``jetstream.ack_sync_all`` a batch."""
        await self.fresh_stream(n)
        stream = await self.js.stream("BENCH")
        c = await stream.create_consumer(ConsumerConfig(durable_name="b", max_ack_pending=-1))
        t0 = start()
        got = 0
        while got < n:
            msgs = await c.fetch(min(batch, n - got), expires=5)
            if confirmed and ack_all:
                await jetstream.ack_sync_all(msgs)
            elif confirmed:
                await asyncio.gather(*(m.ack_sync() for m in msgs))
            elif ack_all:
                await jetstream.ack_all(msgs)
            else:
                for m in msgs:
                    await m.ack()
            got += len(msgs)
        await self.nc.flush()
        return time.perf_counter() - t0

    async def messages_ack(self, n: int) -> float:
        await self.fresh_stream(n)
        stream = await self.js.stream("BENCH")
        c = await stream.create_consumer(ConsumerConfig(durable_name="m"))
        t0 = start()
        got = 0
        async with c.messages(max_messages=500) as it:
            async for m in it:
                await m.ack()
                got += 1
                if got == n:
                    break
        await self.nc.flush()
        return time.perf_counter() - t0

    async def ordered(self, n: int, pull: int, push: bool = False) -> float:
        await self.fresh_stream(n)
        stream = await self.js.stream("BENCH")
        t0 = start()
        oc = await stream.ordered_consumer(push=push)
        got = 0
        async with oc.messages(max_messages=pull) as it:
            async for _ in it:
                got += 1
                if got == n:
                    break
        return time.perf_counter() - t0

    async def ack_sync(self, n: int, concurrent: int = 0) -> float:
        await self.fresh_stream(n)
        stream = await self.js.stream("BENCH")
        c = await stream.create_consumer(ConsumerConfig(durable_name="s", max_ack_pending=n + 1))
        msgs = []
        while len(msgs) < n:
            msgs += await c.fetch(min(500, n - len(msgs)), expires=5)
        t0 = start()
        if concurrent:
            for i in range(0, n, concurrent):
                await jetstream.ack_sync_all(msgs[i : i + concurrent])
        else:
            for m in msgs:
                await m.ack_sync()
        return time.perf_counter() - t0


class Theirs:
    name = "nats-py"

    def __init__(self, url: str) -> None:
        self.url = url

    async def __aenter__(self) -> Theirs:
        self.nc = await nats.connect(self.url)
        self.js = self.nc.jetstream(publish_async_max_pending=WINDOW)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.nc.close()

    async def fresh_stream(self, n_stored: int) -> None:
        try:
            await self.js.delete_stream("BENCH")
        except Exception:
            pass
        await self.js.add_stream(
            NStreamConfig(name="BENCH", subjects=["bench"], storage=NStorageType.MEMORY)
        )
        if n_stored:
            for _ in range(n_stored):
                await self.js.publish_async("bench", PAYLOAD)
            await self.js.publish_async_completed()

    async def sync_publish(self, n: int) -> float:
        await self.fresh_stream(0)
        t0 = start()
        for _ in range(n):
            await self.js.publish("bench", PAYLOAD)
        return time.perf_counter() - t0

    async def async_publish(self, n: int) -> float:
        await self.fresh_stream(0)
        t0 = start()
        for _ in range(n):
            await self.js.publish_async("bench", PAYLOAD)
        await asyncio.wait_for(self.js.publish_async_completed(), 120)
        return time.perf_counter() - t0

    async def fetch_ack(self, n: int, batch: int, confirmed: bool = False) -> float:
        await self.fresh_stream(n)
        psub = await self.js.pull_subscribe(
            "bench",
            "b",
            config=NConsumerConfig(ack_policy=NAckPolicy.EXPLICIT, max_ack_pending=-1),
        )
        t0 = start()
        got = 0
        while got < n:
            msgs = await psub.fetch(min(batch, n - got), timeout=5)
            if confirmed:
                await asyncio.gather(*(m.ack_sync() for m in msgs))
            else:
                for m in msgs:
                    await m.ack()
            got += len(msgs)
        await self.nc.flush()
        el = time.perf_counter() - t0
        await psub.unsubscribe()
        return el

    async def messages_ack(self, n: int) -> float:
        # nats-py has no continuous pull: its idiom is a fetch loop with large batches
        return await self.fetch_ack(n, 500)

    async def ordered(self, n: int, pull: int = 0, push: bool = True) -> float:
        # nats-py's ordered consumer is push-based only
        await self.fresh_stream(n)
        t0 = start()
        done = asyncio.get_running_loop().create_future()
        got = 0

        async def cb(msg: Any) -> None:
            nonlocal got
            got += 1
            if got == n and not done.done():
                done.set_result(None)

        sub = await self.js.subscribe("bench", cb=cb, ordered_consumer=True)
        await asyncio.wait_for(done, 300)
        el = time.perf_counter() - t0
        await sub.unsubscribe()
        return el

    async def ack_sync(self, n: int, concurrent: int = 0) -> float:
        await self.fresh_stream(n)
        psub = await self.js.pull_subscribe(
            "bench", "s", config=NConsumerConfig(max_ack_pending=n + 1)
        )
        msgs: list[Any] = []
        while len(msgs) < n:
            msgs += await psub.fetch(min(500, n - len(msgs)), timeout=5)
        t0 = start()
        if concurrent:
            for i in range(0, n, concurrent):
                await asyncio.gather(*(m.ack_sync() for m in msgs[i : i + concurrent]))
        else:
            for m in msgs:
                await m.ack_sync()
        el = time.perf_counter() - t0
        await psub.unsubscribe()
        return el


async def main_async(args: Any) -> list[Measurement]:
    n, pull = args.count, args.pull
    mods = _peers.load(not args.no_peers)
    with NatsServer() as server:
        impls: list[Any] = [Ours(server.url), Theirs(server.url)]
        peers = [m.JS(server.url, PAYLOAD, WINDOW) for m in mods]
        async with AsyncExitStack() as stack:
            for impl in [*impls, *peers]:
                await stack.enter_async_context(impl)

            def workloads(impl: Any) -> list[Workload]:
                has = partial(hasattr, impl)
                push = isinstance(impl, Ours | Theirs)
                ours = isinstance(impl, Ours)
                return [
                    ("sync publish", n // 10, lambda: impl.sync_publish(n // 10)),
                    (
                        "publish_async",
                        n,
                        (lambda: impl.async_publish(n)) if has("async_publish") else None,
                    ),
                    # the headline: one ``await msg.ack()`` a message, every client
                    ("fetch+ack batch 100", n, lambda: impl.fetch_ack(n, 100)),
                    ("fetch+ack batch 500", n, lambda: impl.fetch_ack(n, 500)),
                    # beside it, ours only: a batch's acks in one ``ack_all``
                    (
                        "fetch+ack_all batch 100",
                        n,
                        (lambda: impl.fetch_ack(n, 100, ack_all=True)) if ours else None,
                    ),
                    (
                        "fetch+ack_all batch 500",
                        n,
                        (lambda: impl.fetch_ack(n, 500, ack_all=True)) if ours else None,
                    ),
                    # one ``ack_sync()`` a message, gathered, every client; then ours in
                    # one ``ack_sync_all`` a batch
                    ("fetch+ack_sync batch 500", n, lambda: impl.fetch_ack(n, 500, True)),
                    (
                        "fetch+ack_sync_all batch 500",
                        n,
                        (lambda: impl.fetch_ack(n, 500, True, True)) if ours else None,
                    ),
                    ("messages()+ack", n, lambda: impl.messages_ack(n)),
                    ("ordered replay", n, lambda: impl.ordered(n, pull)),
                    (
                        "ordered replay, push",
                        n,
                        (lambda: impl.ordered(n, pull, push=True)) if push else None,
                    ),
                    ("ack_sync", n // 20, lambda: impl.ack_sync(n // 20)),
                    ("ack_sync 100 at a time", n // 10, lambda: impl.ack_sync(n // 10, 100)),
                ]

            every = {impl.name: workloads(impl) for impl in [*impls, *peers]}
            if args.profile:  # ours alone, under cProfile
                every = {Ours.name: every[Ours.name]}
            if args.cpu or args.profile:
                every = with_cpu_all(every, server.pid or 0)
            prof = cProfile.Profile() if args.profile else None
            if prof is not None:
                prof.enable()
            results = await race_workloads(
                every,
                repeat=args.repeat,
                only=args.only,
                unit="msg/s",
            )
            if prof is not None:
                prof.disable()
                pstats.Stats(prof, stream=sys.stderr).sort_stats("tottime").print_stats(30)
        # one ack_sync is one round trip: this is the fastest any client could go
        ping = socket_floor(server.url, rounds=max(100, n // 100))["ping"]
        print(
            f"socket floor (blocking sockets, no client): PING/PONG p50 {ping * 1e6:.0f} us, "
            f"at most {1 / ping:,.0f} sequential round trips/s"
        )
        if not args.only and not args.profile:
            results += await _floors(server.url, max(100, n // 50), args.repeat, n)
        return results


async def _floors(url: str, rounds: int, repeat: int, n: int) -> list[Measurement]:
    """The round-trip workloads on bare sockets (``_floor.round_trips``), best of
    ``repeat`` runs: a sync publish to a memory stream, and an ``ack_sync`` of a
    delivered message (the messages are fetched, unacknowledged, with our client); then
    fetch+ack of ``n`` stored messages at batch 100 and 500 (``_floor.fetch_ack``)."""
    async with jetstream.connect(url) as nc:
        js = nc.jetstream()
        await js.create_stream(
            StreamConfig(name="FLOOR", subjects=["floor"], storage=StorageType.MEMORY)
        )
        try:
            # each run stores ``rounds`` messages: then each ``ack_sync`` run acks its own
            pub = min(round_trips(url, ["floor"] * rounds, PAYLOAD) for _ in range(repeat))
            stream = await js.stream("FLOOR")
            c = await stream.create_consumer(ConsumerConfig(durable_name="f", max_ack_pending=-1))
            acks = []
            for _ in range(repeat):
                msgs: list[jetstream.JsMsg] = []
                while len(msgs) < rounds:
                    msgs += await c.fetch(min(500, rounds - len(msgs)), expires=5)
                acks.append(round_trips(url, [m.reply or "" for m in msgs], b"+ACK"))
            await js.delete_stream("FLOOR")
            stream = await js.create_stream(
                StreamConfig(name="FLOOR", subjects=["floor"], storage=StorageType.MEMORY)
            )
            futs = [await js.publish_async("floor", PAYLOAD) for _ in range(n)]
            await asyncio.gather(*futs)
            fetched: dict[int, float] = {}
            for batch in (100, 500):
                for i in range(repeat):
                    name = f"fa{batch}_{i}"
                    await stream.create_consumer(
                        ConsumerConfig(durable_name=name, max_ack_pending=-1)
                    )
                    secs = fetch_ack(url, "FLOOR", name, n, batch)
                    fetched[batch] = min(fetched.get(batch, secs), secs)
                    await stream.delete_consumer(name)
        finally:
            await js.delete_stream("FLOOR")
    print(
        f"socket floor: sync publish {pub / rounds * 1e6:.0f} us, "
        f"ack_sync {min(acks) / rounds * 1e6:.0f} us (mean round trip); fetch+ack "
        + ", ".join(f"batch {b} {n / s:,.0f} msgs/s" for b, s in fetched.items())
    )
    return [
        Measurement("sync publish", FLOOR, pub, rounds),
        Measurement("ack_sync", FLOOR, min(acks), rounds),
        *(Measurement(f"fetch+ack batch {b}", FLOOR, s, n) for b, s in fetched.items()),
    ]


def main() -> None:
    parser = arg_parser("JetStream publish and consume vs nats-py")
    parser.add_argument("--count", type=int, default=200_000, help="messages per workload")
    parser.add_argument("--only", default="", help="run only workloads whose name has this")
    parser.add_argument("--pull", type=int, default=500, help="ordered consumers: msgs a pull")
    parser.add_argument("--no-peers", action="store_true", help="only jetstream and nats-py")
    parser.add_argument("--cpu", action="store_true", help="client/server CPU per message")
    parser.add_argument("--profile", action="store_true", help="ours alone, under cProfile")
    parser.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio")
    args = parser.parse_args()
    results = run_on_loop(main_async(args), args.loop)
    title = f"JetStream ({args.loop} loop, best of {args.repeat})"
    report(results, title=title, json_output=args.json)


if __name__ == "__main__":
    main()
