"""Core NATS benchmarks, jetstream and nats-py (and natsio and nats-core where they are
installed, see ``benchmarks/_peers.py``) side by side in one process run.

Workloads (against one embedded nats-server):

- publish: N messages of 16 B and 1 KiB, ending with a flush (a PING/PONG round trip);
- pub->sub: N messages from one connection to a subscriber on another, both in
  this process; timed until the subscriber has all of them (each client reading the
  fastest way it has: ours ``take_many``, nats-py a callback);
- request/reply: sequential requests to an echo responder of the same client, written
  as users write one (an async callback that awaits its reply's publish: ours and
  nats-py ``await msg.respond(msg.data)``), p50 and p99 latency (the ratio column
  compares p50s; lower is better there), in two rows: the responder in this process on
  a connection of its own (``request p50 (1/latency)``: requester and responder share
  one event loop, as the Go program's share one process), and in a second process the
  benchmark starts (``request p50, responder in another process (1/latency)``: each
  side has a loop of its own; ``benchmarks/responder.py``); natsio's responder is an
  async callback publishing the reply, nats-core's a task reading its subscription;
  then the socket floor (``benchmarks/_floor.py``): the same request/reply relayed by
  the server between two bare blocking sockets, with no client library at all; and the
  event-loop floor, the client floor of this row: the same again through two bare
  protocols on this benchmark's event loop, the least a client on one loop waits.

Then the same pub->sub and request rows (``... over WebSocket``) through the server's
``websocket {}`` listener, ours (``ws://``, the ``ws`` extra) beside nats-py's (``ws://``
through aiohttp), and a line a row giving ours over WebSocket as a share of ours over
TCP, the TCP runs timed again in turn with the WebSocket ones (``--no-ws`` leaves them
out; they are left out, saying so, where wsproto or aiohttp is not installed).

Run: ``.venv/bin/python -m benchmarks.bench_core [--count N] [--loop uvloop]``; ``--cpu``
prints where the CPU of each publish and pub->sub run went per message (this process's
user and system time, the server's), for ours and nats-py.
"""

from __future__ import annotations

import asyncio
import importlib.util
import math
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from functools import partial
from types import ModuleType
from typing import Any

import nats
import nats.errors

import jetstream
from benchmarks import _peers
from benchmarks._floor import CLIENT_FLOOR, FLOOR, loop_floor, socket_floor
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

#: the request rows (``q``: p50 or p99): the responder in this process, on a connection
#: of its own, and in a second process (``benchmarks.responder``); each an async callback
#: of the same client that publishes the reply, as users write one
HERE = "request {q} (1/latency)"
APART = "request {q}, responder in another process (1/latency)"
#: the subject of the responder in this process; one in another process adds its client's
SUBJECT = "bench.req"


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


@asynccontextmanager
async def responder_ours(url: str, subject: str) -> AsyncIterator[None]:
    """An echo responder on a connection of its own, as users write one: an async
    callback that awaits ``msg.respond``; serving once the server has its interest."""
    async with jetstream.connect(url) as svc:

        async def echo(msg: jetstream.Msg) -> None:
            await msg.respond(msg.data)

        await svc.subscribe(subject, cb=echo)
        await svc.flush()
        yield


async def requests_ours(url: str, subject: str, n: int) -> list[float]:
    """``n`` sequential requests to ``subject``, each one's latency (seconds)."""
    async with jetstream.connect(url) as nc:
        await _warm(partial(nc.request, subject, b"warm", timeout=5), NoRespondersError)
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            await nc.request(subject, b"x" * 16, timeout=5)
            out.append(time.perf_counter() - t0)
        return out


@asynccontextmanager
async def responder_natspy(url: str, subject: str) -> AsyncIterator[None]:
    """nats-py's echo responder: an async callback that awaits ``msg.respond``."""
    svc = await nats.connect(url)
    try:

        async def echo(msg: Any) -> None:
            await msg.respond(msg.data)

        await svc.subscribe(subject, cb=echo)
        await svc.flush()
        yield
    finally:
        await svc.close()


async def requests_natspy(url: str, subject: str, n: int) -> list[float]:
    nc = await nats.connect(url)
    try:
        await _warm(partial(nc.request, subject, b"warm", timeout=5), nats.errors.NoRespondersError)
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            await nc.request(subject, b"x" * 16, timeout=5)
            out.append(time.perf_counter() - t0)
        return out
    finally:
        await nc.close()


#: per client: its echo responder (an async context manager serving ``subject``) and its
#: requester (``n`` timed requests to ``subject``); the optional peers add theirs
Responder = Callable[[str, str], AbstractAsyncContextManager[None]]
Requester = Callable[[str, str, int], Awaitable[list[float]]]
CLIENTS: dict[str, tuple[Responder, Requester]] = {
    "jetstream": (responder_ours, requests_ours),
    "nats-py": (responder_natspy, requests_natspy),
}


def clients(peers: list[ModuleType]) -> dict[str, tuple[Responder, Requester]]:
    """Every client's responder and requester: ours, nats-py's, then the peers'."""
    return {**CLIENTS, **{peer.NAME: (peer.responder, peer.requests) for peer in peers}}


async def req_here(url: str, n: int, responder: Responder, requester: Requester) -> list[float]:
    """Requests to a responder of the same client in this process (its own connection)."""
    async with responder(url, SUBJECT):
        return await requester(url, SUBJECT, n)


@asynccontextmanager
async def responder_process(impl: str, url: str, subject: str, loop: str) -> AsyncIterator[None]:
    """The echo responder of ``impl`` in a second process (``benchmarks.responder``, on
    the same event loop), serving ``subject`` until the block ends."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "benchmarks.responder",
        impl,
        url,
        subject,
        "--loop",
        loop,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), 60)
        if line.strip() != b"ready":
            raise RuntimeError(
                f"the {impl} responder process did not start (exit {proc.returncode})"
            )
        yield
    finally:
        proc.stdin.close()  # its end of input: it closes its connection and exits
        try:
            await asyncio.wait_for(proc.wait(), 30)
        except TimeoutError:
            proc.kill()
            await proc.wait()


#: what a WebSocket row adds to the TCP row's name
WS = " over WebSocket"


#: ours over TCP again, taking turns with the WebSocket runs: the share printed compares
#: runs of the same spell of a shared machine (not a row of the table)
TCP_AGAIN = "jetstream over TCP"


async def websocket_rows(server: NatsServer, args: Any) -> list[Measurement]:
    """pub->sub and request rows through the server's websocket {} listener, ours and
    nats-py's; prints ours over WebSocket as a share of ours over TCP, timed in turn."""
    missing = [m for m in ("wsproto", "aiohttp") if importlib.util.find_spec(m) is None]
    if missing:
        print(f"WebSocket rows left out: {' and '.join(missing)} not installed (the ws extra)")
        return []
    url = server.ws_url
    results: list[Measurement] = []
    tcp: dict[str, float] = {}
    count = args.count // 4
    for size, label in ((16, "16 B"), (1024, "1 KiB")):
        p = b"x" * size
        row = f"pub->sub {label}{WS}"
        runs: dict[str, Callable[[], Awaitable[float]]] = {
            "jetstream": partial(pubsub_ours, url, count, p),
            "nats-py": partial(pubsub_natspy, url, count, p),
        }
        if args.cpu:
            pid = server.pid or 0
            runs = {impl: with_cpu(run, row, impl, count, pid) for impl, run in runs.items()}
        runs[TCP_AGAIN] = partial(pubsub_ours, server.url, count, p)
        cpu: dict[str, tuple[float, float]] = {}
        best = await race_async(runs, args.repeat, cpu)
        tcp[row] = best.pop(TCP_AGAIN)
        for impl, s in best.items():
            if not math.isinf(s):
                m = Measurement(row, impl, s, count, count * size, *cpu.get(impl, (None, None)))
                results.append(m)
    rounds = max(1, args.repeat)
    k = max(1, args.requests // rounds)
    lats: dict[str, list[float]] = {name: [] for name in [*CLIENTS, TCP_AGAIN]}
    for _ in range(rounds):
        for name, (responder, requester) in CLIENTS.items():
            lats[name] += await req_here(url, k, responder, requester)
        lats[TCP_AGAIN] += await req_here(server.url, k, responder_ours, requests_ours)
    p50 = f"request p50{WS} (1/latency)"
    tcp[p50] = _pct(lats.pop(TCP_AGAIN), 0.5)
    for impl, lat in lats.items():
        for q, value in (("p50", _pct(lat, 0.5)), ("p99", _pct(lat, 0.99))):
            results.append(Measurement(f"request {q}{WS} (1/latency)", impl, value, 1))
    seconds = {(m.workload, m.impl): m.seconds for m in results}
    for row, tcp_ours in tcp.items():
        ours, theirs = seconds.get((row, "jetstream")), seconds.get((row, "nats-py"))
        if ours and theirs and not math.isinf(tcp_ours):
            print(
                f"jetstream {row}: {tcp_ours / ours:.2f} of its rate over TCP (timed in "
                f"turn), {theirs / ours:.2f}x nats-py's over WebSocket"
            )
    return results


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


async def main_async(args: Any) -> list[Measurement]:
    results: list[Measurement] = []
    peers = _peers.load(not args.no_peers)
    with NatsServer(jetstream=False, websocket=not args.no_ws) as server:
        url = server.url
        n = args.count
        for kind, count, ours, theirs, attr in (
            ("publish", n, pub_ours, pub_natspy, "pub"),
            ("pub->sub", n // 4, pubsub_ours, pubsub_natspy, "pubsub"),
        ):
            for size, label in ((16, "16 B"), (1024, "1 KiB")):
                if args.only not in f"{kind} {label}":
                    continue
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
        if args.only and args.only not in HERE + APART:
            return results
        # requests in rounds, taking turns, so that a busy spell hits every client; the
        # responder in this process, then in a second process started once for all rounds
        rounds = max(1, args.repeat)
        k = max(1, args.requests // rounds)
        every = clients(peers)
        lats: dict[str, dict[str, list[float]]] = {
            row: {name: [] for name in every} for row in (HERE, APART)
        }
        for _ in range(rounds):
            for name, (responder, requester) in every.items():
                lats[HERE][name] += await req_here(url, k, responder, requester)
        async with AsyncExitStack() as stack:
            for name in every:
                subject = f"{SUBJECT}.{name}"
                await stack.enter_async_context(responder_process(name, url, subject, args.loop))
            for _ in range(rounds):
                for name, (_, requester) in every.items():
                    lats[APART][name] += await requester(url, f"{SUBJECT}.{name}", k)
        for row, by_impl in lats.items():
            for impl, lat in by_impl.items():
                p50, p99 = _pct(lat, 0.5), _pct(lat, 0.99)
                # ops = 1 so ops/s shows requests/s at that percentile
                results.append(Measurement(row.format(q="p50"), impl, p50, 1))
                results.append(Measurement(row.format(q="p99"), impl, p99, 1))
                print(
                    f"{impl}: {row.format(q='p50')} {p50 * 1e6:.0f} us, p99 {p99 * 1e6:.0f} us, "
                    f"mean {statistics.fmean(lat) * 1e6:.0f} us"
                )
        floor = socket_floor(url, rounds=max(100, args.requests))
        print(
            f"socket floor (blocking sockets, no client): request p50 "
            f"{floor['request'] * 1e6:.0f} us, PING/PONG p50 {floor['ping'] * 1e6:.0f} us"
        )
        results.append(Measurement("request p50 (1/latency)", FLOOR, floor["request"], 1))
        on_loop = await loop_floor(url, rounds=max(100, args.requests))
        print(
            f"event-loop floor (two bare protocols on this loop, no client): request p50 "
            f"{on_loop * 1e6:.0f} us"
        )
        results.append(Measurement("request p50 (1/latency)", CLIENT_FLOOR, on_loop, 1))
        if not args.no_ws and not args.only:
            results += await websocket_rows(server, args)
    return results


def main() -> None:
    parser = arg_parser("core NATS: publish, pub->sub, request/reply vs nats-py")
    parser.add_argument("--count", type=int, default=1_000_000, help="messages per publish run")
    parser.add_argument("--requests", type=int, default=5000, help="requests for latency")
    parser.add_argument("--no-peers", action="store_true", help="only jetstream and nats-py")
    parser.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio")
    parser.add_argument("--cpu", action="store_true", help="client/server CPU per message")
    parser.add_argument("--no-ws", action="store_true", help="no rows over WebSocket")
    parser.add_argument(
        "--only", default="", help="only the publish and pub->sub rows whose name has this"
    )
    args = parser.parse_args()
    results = run_on_loop(main_async(args), args.loop)
    report(
        results, title=f"core NATS ({args.loop} loop, best of {args.repeat})", json_output=args.json
    )


if __name__ == "__main__":
    main()
