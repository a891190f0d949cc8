"""KeyValue benchmarks, jetstream and nats-py (and natsio and nats-core where they are
installed, see ``benchmarks/_peers.py``) side by side in one process run.

Workloads (one embedded nats-server, a memory-storage bucket):

- put: N puts, each waiting for its PubAck;
- get: N gets of distinct keys, one after the other (ours reads with a direct get,
  nats-py through the JSON message-get API, its default);
- watch: a watcher over a bucket of N keys, from its start until it reports that
  every current value has been delivered (the up-to-date marker);
- the bucket's stream, ordered push: ours only, the same bucket read through the consumer a watcher
  reads through (push-based, ordered, filtered to the bucket's keys, the last value of
  each), its messages taken one by one, without entries, from its making until the
  last; the watch row over this one, both timed in this run, says what a watch costs
  beyond its consumer (printed at the end).

Run: ``.venv/bin/python -m benchmarks.bench_kv [--count N] [--loop uvloop]``.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import AsyncExitStack
from typing import Any

import nats
from nats.js.api import KeyValueConfig as NKeyValueConfig
from nats.js.api import StorageType as NStorageType

import jetstream
from benchmarks import _peers
from benchmarks._floor import FLOOR, round_trips
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
from jetstream.api import DeliverPolicy, StorageType
from jetstream.embedded import NatsServer

VALUE = b"v" * 64
BUCKET = "BENCH"
ORDERED = "the bucket's stream, ordered push"


def _keys(n: int) -> list[str]:
    return [f"k.{i}" for i in range(n)]


class Ours:
    name = "jetstream"

    def __init__(self, url: str) -> None:
        self.url = url

    async def __aenter__(self) -> Ours:
        self.nc = await jetstream.connect(self.url)
        self.js = self.nc.jetstream()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.nc.close()

    async def fresh(self, n_keys: int) -> Any:
        try:
            await self.js.delete_key_value(BUCKET)
        except jetstream.errors.BucketNotFoundError:
            pass
        kv = await self.js.create_key_value(bucket=BUCKET, storage=StorageType.MEMORY)
        if n_keys:
            futs = [await self.js.publish_async(f"$KV.{BUCKET}.{k}", VALUE) for k in _keys(n_keys)]
            await asyncio.gather(*futs)
        return kv

    async def put(self, n: int) -> float:
        kv = await self.fresh(0)
        keys = _keys(n)
        t0 = start()
        for k in keys:
            await kv.put(k, VALUE)
        return time.perf_counter() - t0

    async def get(self, n: int) -> float:
        kv = await self.fresh(n)
        keys = _keys(n)
        t0 = start()
        for k in keys:
            await kv.get(k)
        return time.perf_counter() - t0

    async def watch(self, n: int) -> float:
        kv = await self.fresh(n)
        t0 = start()
        got = 0
        async with kv.watch_all() as w:
            async for entry in w:
                if entry is None:
                    break
                got += 1
        assert got == n, got
        return time.perf_counter() - t0

    async def ordered_push(self, n: int) -> float:
        await self.fresh(n)
        stream = await self.js.stream(f"KV_{BUCKET}")
        t0 = start()
        oc = await stream.ordered_consumer(
            push=True,
            filter_subjects=[f"$KV.{BUCKET}.>"],
            deliver_policy=DeliverPolicy.LAST_PER_SUBJECT,
        )
        got = 0
        async with oc.messages() as it:
            async for _ in it:
                got += 1
                if got == n:
                    break
        return time.perf_counter() - t0


class Theirs:
    name = "nats-py"

    def __init__(self, url: str) -> None:
        self.url = url

    async def __aenter__(self) -> Theirs:
        self.nc = await nats.connect(self.url)
        self.js = self.nc.jetstream()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.nc.close()

    async def fresh(self, n_keys: int) -> Any:
        try:
            await self.js.delete_key_value(BUCKET)
        except Exception:
            pass
        kv = await self.js.create_key_value(
            NKeyValueConfig(bucket=BUCKET, storage=NStorageType.MEMORY)
        )
        if n_keys:
            for k in _keys(n_keys):
                await self.js.publish_async(f"$KV.{BUCKET}.{k}", VALUE)
            await self.js.publish_async_completed()
        return kv

    async def put(self, n: int) -> float:
        kv = await self.fresh(0)
        keys = _keys(n)
        t0 = start()
        for k in keys:
            await kv.put(k, VALUE)
        return time.perf_counter() - t0

    async def get(self, n: int) -> float:
        kv = await self.fresh(n)
        keys = _keys(n)
        t0 = start()
        for k in keys:
            await kv.get(k)
        return time.perf_counter() - t0

    async def watch(self, n: int) -> float:
        kv = await self.fresh(n)
        t0 = start()
        got = 0
        w = await kv.watchall()
        async for entry in w:
            # Counted to n, its marker skipped: nats-py can give the marker before any
            # value, when its push consumer delivers every value before the consumer
            # info it asks for comes back (pending 0, none handed to its callback yet).
            # Its values still follow.
            if entry is not None:
                got += 1
                if got == n:
                    break
        await w.stop()
        assert got == n, got
        return time.perf_counter() - t0


async def main_async(args: Any) -> list[Measurement]:
    n = args.count
    mods = _peers.load(not args.no_peers)
    with NatsServer() as server:
        impls: list[Any] = [Ours(server.url), Theirs(server.url)]
        keys = _keys(n)
        peers = [m.KV(server.url, BUCKET, VALUE) for m in mods]
        async with AsyncExitStack() as stack:
            for impl in [*impls, *peers]:
                await stack.enter_async_context(impl)

            def workloads(impl: Any) -> list[Workload]:
                if impl in peers:
                    return [
                        ("put", n, lambda: impl.put(keys)),
                        ("get", n, lambda: impl.get(keys)),
                        ("watch (until up to date)", n, lambda: impl.watch(keys)),
                        (ORDERED, n, None),  # ours only
                    ]
                ours = isinstance(impl, Ours)
                return [
                    ("put", n, lambda: impl.put(n)),
                    ("get", n, lambda: impl.get(n)),
                    ("watch (until up to date)", n, lambda: impl.watch(n)),
                    (ORDERED, n, (lambda: impl.ordered_push(n)) if ours else None),
                ]

            every = {impl.name: workloads(impl) for impl in [*impls, *peers]}
            if args.cpu:
                every = with_cpu_all(every, server.pid or 0)
            results = await race_workloads(
                every,
                repeat=args.repeat,
                only=args.only,
                unit="ops/s",
            )
        _watch_share(results)
        if not args.only:
            results += await _floors(server.url, keys, args.repeat)
        return results


def _watch_share(results: list[Measurement]) -> None:
    """Print our watch's rate over our ordered replay by push of the same stream."""
    ours = {m.workload: m for m in results if m.impl == Ours.name}
    watch, ordered = ours.get("watch (until up to date)"), ours.get(ORDERED)
    if watch is not None and ordered is not None:
        share = ordered.seconds / watch.seconds
        print(f"watch / {ORDERED} (ours, the watch's consumer, same run): {share:.2f}")


async def _floors(url: str, keys: list[str], repeat: int) -> list[Measurement]:
    """put and get on bare sockets (``_floor.round_trips``), best of ``repeat`` runs: a
    publish of each key to a fresh bucket, then a direct get of each."""
    async with jetstream.connect(url) as nc:
        js = nc.jetstream()
        puts, gets = [], []
        for _ in range(repeat):
            try:
                await js.delete_key_value("FLOOR")
            except jetstream.errors.BucketNotFoundError:
                pass
            await js.create_key_value(bucket="FLOOR", storage=StorageType.MEMORY)
            puts.append(round_trips(url, [f"$KV.FLOOR.{k}" for k in keys], VALUE))
            direct = [f"$JS.API.DIRECT.GET.KV_FLOOR.$KV.FLOOR.{k}" for k in keys]
            gets.append(round_trips(url, direct, b""))
        await js.delete_key_value("FLOOR")
    n = len(keys)
    print(
        f"socket floor: put {min(puts) / n * 1e6:.0f} us, get {min(gets) / n * 1e6:.0f} us "
        "(mean round trip)"
    )
    return [Measurement("put", FLOOR, min(puts), n), Measurement("get", FLOOR, min(gets), n)]


def main() -> None:
    parser = arg_parser("KeyValue put, get and watch vs nats-py")
    parser.add_argument("--count", type=int, default=20_000, help="keys per workload")
    parser.add_argument("--only", default="", help="run only workloads whose name has this")
    parser.add_argument("--no-peers", action="store_true", help="only jetstream and nats-py")
    parser.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio")
    parser.add_argument("--cpu", action="store_true", help="client/server CPU per operation")
    args = parser.parse_args()
    results = run_on_loop(main_async(args), args.loop)
    title = f"KeyValue ({args.loop} loop, best of {args.repeat})"
    report(results, title=title, json_output=args.json)


if __name__ == "__main__":
    main()
