"""Core NATS benchmarks, jetstream and nats-py (and natsio and nats-core where they are
installed, see ``benchmarks/_peers.py``) side by side in one process run.

Workloads (against one embedded nats-server):

- publish: N messages of 16 B and 1 KiB, ending with a flush (a PING/PONG round trip);
- pub->sub: N messages from one connection to a subscriber on another, both in
  this process; timed until the subscriber has all of them (each client reading the
  fastest way it has: ours ``take_many``, nats-py a callback);
- request/reply: sequential requests to a responder on another connection;
  p50 and p99 latency (the ratio column compares p50s; lower is better there);
  then the socket floor (``benchmarks/_floor.py``): the same request/reply relayed by
  the server between two bare blocking sockets, with no client library at all.

Run: ``.venv/bin/python -m benchmarks.bench_core [--count N] [--loop uvloop]``; ``--cpu``
prints where the CPU of each publish and pub->sub run went per message (this process's
user and system time, the server's), for ours and nats-py.
"""

from __future__ import annotations

import asyncio
import math
import statistics
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import nats
import nats.errors

import jetstream
from benchmarks import _peers
from benchmarks._floor import FLOOR, socket_floor
from benchmarks._report import (
    Measurement,
    arg_parser,
    race_async,
    report,
    run_on_loop,
    start,
    with_cpu,
)
from jetstream.embedded import NatsServer
from jetstream.errors import NoRespondersError

BIG = 1 << 30


# ----------------------------------------------------------------------------- publish


async def pub_ours(url: str, n: int, payload: bytes) -> float:
    async with jetstream.connect(url) as nc:
        publish = nc.publish
        t0 = start()
        for _ in range(n):
            await publish("bench.pub", payload)
        await nc.flush(timeout=60)
        return time.perf_counter() - t0


async def pub_natspy(url: str, n: int, payload: bytes) -> float:
    nc = await nats.connect(url)
    try:
        publish = nc.publish
        t0 = start()
        for _ in range(n):
            await publish("bench.pub", payload)
        await nc.flush(timeout=60)
        return time.perf_counter() - t0
    finally:
        await nc.close()


# ----------------------------------------------------------------------------- pub -> sub


async def pubsub_ours(url: str, n: int, payload: bytes) -> float:
    async with jetstream.connect(url) as sc, jetstream.connect(url) as pc:
        sub = await sc.subscribe("bench.ps", pending_msgs_limit=BIG, pending_bytes_limit=BIG)
        await sc.flush()

        async def reader() -> None:
            # take_many: every message queued at once, not an async-for step a message
            count = 0
            while count < n:
                for _ in await sub.take_many(timeout=60):
                    count += 1

        t0 = start()
        task = asyncio.create_task(reader())
        publish = pc.publish
        for _ in range(n):
            await publish("bench.ps", payload)
        await pc.flush(timeout=60)
        await asyncio.wait_for(task, 120)
        return time.perf_counter() - t0


async def pubsub_natspy(url: str, n: int, payload: bytes) -> float:
    """nats-py's pub->sub; a run that loses messages is not counted and is run again
    (up to three tries), so that one bad spell of a loaded machine leaves a figure."""
    for attempt in range(1, 4):
        seconds, lost = await _pubsub_natspy_once(url, n, payload)
        if not lost:
            return seconds
        again = ", trying again" if attempt < 3 else ""
        print(f"nats-py pub->sub: {lost}; run not counted{again}", flush=True)
    return math.inf


async def _pubsub_natspy_once(url: str, n: int, payload: bytes) -> tuple[float, str]:
    """Seconds, and why messages were lost ("" when every one came)."""
    done = asyncio.get_running_loop().create_future()
    events: list[str] = []

    async def lost(what: object) -> None:
        # the server cut the subscriber off (a slow consumer), or nats-py dropped
        # messages itself: what is gone does not come back, so stop waiting
        events.append(repr(what))
        if not done.done():
            done.set_result(None)

    async def disconnected() -> None:
        await lost("subscriber disconnected")

    sc = await nats.connect(url, error_cb=lost, disconnected_cb=disconnected)
    pc = await nats.connect(url)
    try:
        count = 0

        async def cb(msg: Any) -> None:
            nonlocal count
            count += 1
            if count == n and not done.done():
                done.set_result(None)

        await sc.subscribe("bench.ps", cb=cb, pending_msgs_limit=BIG, pending_bytes_limit=BIG)
        await sc.flush()
        t0 = start()
        publish = pc.publish
        for _ in range(n):
            await publish("bench.ps", payload)
        await pc.flush(timeout=60)
        try:
            await asyncio.wait_for(done, 60)
        except TimeoutError:
            events.append("nothing more within 60 s")
        seconds = time.perf_counter() - t0
        if count == n:
            return seconds, ""
        return seconds, f"the subscriber got {count} of {n} messages ({', '.join(events)})"
    finally:
        await pc.close()
        await sc.close()


# ----------------------------------------------------------------------------- request


async def _warm(request: Callable[[], Awaitable[Any]], no_responders: type[Exception]) -> None:
    """A first request, tried again while the responder's interest is not yet seen
    (one nats-py run got no responders right after its responder's flush)."""
    for _ in range(50):
        try:
            await request()
            return
        except no_responders:
            await asyncio.sleep(0.1)
    await request()


async def req_ours(url: str, n: int) -> list[float]:
    async with jetstream.connect(url) as svc, jetstream.connect(url) as nc:

        async def echo(msg: jetstream.Msg) -> None:
            await msg.respond(msg.data)

        await svc.subscribe("bench.req", cb=echo)
        await svc.flush()
        await _warm(partial(nc.request, "bench.req", b"warm", timeout=5), NoRespondersError)
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            await nc.request("bench.req", b"x" * 16, timeout=5)
            out.append(time.perf_counter() - t0)
        return out


async def req_natspy(url: str, n: int) -> list[float]:
    svc = await nats.connect(url)
    nc = await nats.connect(url)
    try:

        async def echo(msg: Any) -> None:
            await msg.respond(msg.data)

        await svc.subscribe("bench.req", cb=echo)
        await svc.flush()
        await _warm(
            partial(nc.request, "bench.req", b"warm", timeout=5), nats.errors.NoRespondersError
        )
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            await nc.request("bench.req", b"x" * 16, timeout=5)
            out.append(time.perf_counter() - t0)
        return out
    finally:
        await nc.close()
        await svc.close()


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


async def main_async(args: Any) -> list[Measurement]:
    results: list[Measurement] = []
    peers = _peers.load(not args.no_peers)
    with NatsServer(jetstream=False) as server:
        url = server.url
        n = args.count
        for kind, count, ours, theirs, attr in (
            ("publish", n, pub_ours, pub_natspy, "pub"),
            ("pub->sub", n // 4, pubsub_ours, pubsub_natspy, "pubsub"),
        ):
            for size, label in ((16, "16 B"), (1024, "1 KiB")):
                p = b"x" * size
                runs: dict[str, Callable[[], Awaitable[float]]] = {
                    "jetstream": partial(ours, url, count, p),
                    "nats-py": partial(theirs, url, count, p),
                }
                if args.cpu:  # ours and nats-py note the CPU after their setup (start())
                    pid = server.pid or 0
                    runs = {
                        impl: with_cpu(run, f"{kind} {label}", impl, count, pid)
                        for impl, run in runs.items()
                    }
                for peer in peers:
                    runs[peer.NAME] = partial(getattr(peer, attr), url, count, p)
                cpu: dict[str, tuple[float, float]] = {}
                best = await race_async(runs, args.repeat, cpu)
                for impl, s in best.items():
                    if math.isinf(s):
                        print(f"{impl} {kind} {label}: no run completed, no figure")
                        continue
                    results.append(
                        Measurement(
                            f"{kind} {label}",
                            impl,
                            s,
                            count,
                            count * size,
                            *cpu.get(impl, (None, None)),
                        )
                    )
        # requests in rounds, taking turns, so that a busy spell hits both clients
        rounds = max(1, args.repeat)
        k = max(1, args.requests // rounds)
        reqs = {"jetstream": req_ours, "nats-py": req_natspy}
        reqs.update({peer.NAME: peer.req for peer in peers})
        lats: dict[str, list[float]] = {name: [] for name in reqs}
        for _ in range(rounds):
            for name, req in reqs.items():
                lats[name] += await req(url, k)
        for impl, lat in lats.items():
            p50, p99 = _pct(lat, 0.5), _pct(lat, 0.99)
            # ops = 1 so ops/s shows requests/s at that percentile
            results.append(Measurement("request p50 (1/latency)", impl, p50, 1))
            results.append(Measurement("request p99 (1/latency)", impl, p99, 1))
            print(
                f"{impl}: request p50 {p50 * 1e6:.0f} us, p99 {p99 * 1e6:.0f} us, "
                f"mean {statistics.fmean(lat) * 1e6:.0f} us"
            )
        floor = socket_floor(url, rounds=max(100, args.requests))
        print(
            f"socket floor (blocking sockets, no client): request p50 "
            f"{floor['request'] * 1e6:.0f} us, PING/PONG p50 {floor['ping'] * 1e6:.0f} us"
        )
        results.append(Measurement("request p50 (1/latency)", FLOOR, floor["request"], 1))
    return results


def main() -> None:
    parser = arg_parser("core NATS: publish, pub->sub, request/reply vs nats-py")
    parser.add_argument("--count", type=int, default=1_000_000, help="messages per publish run")
    parser.add_argument("--requests", type=int, default=5000, help="requests for latency")
    parser.add_argument("--no-peers", action="store_true", help="only jetstream and nats-py")
    parser.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio")
    parser.add_argument("--cpu", action="store_true", help="client/server CPU per message")
    args = parser.parse_args()
    results = run_on_loop(main_async(args), args.loop)
    report(
        results, title=f"core NATS ({args.loop} loop, best of {args.repeat})", json_output=args.json
    )


if __name__ == "__main__":
    main()
