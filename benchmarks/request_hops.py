"""Where a request's round trip goes, ours against two bare protocols on the same loop.

bench_core's request row times ``await nc.request()`` to an echo responder in the same
process (an async callback that awaits ``msg.respond``), one connection each. This
splits each round trip into seven parts, by the time of every write and read on the
two connections:

1. the requester's work until its write (``request()`` up to the socket);
2. the write of the request (the syscall; on loopback the kernel hands the bytes to
   the server within it);
3. until the responder reads it (the server's turn, and the loop woken from ``epoll``);
4. the responder's work from the read to its write (parse, the callback's task, the
   reply);
5. the write of the reply;
6. until the requester reads the reply (the server again, and the loop woken);
7. the requester's work from the read until ``request()`` returns.

The same parts are timed for ``benchmarks._floor.loop_floor``'s two bare ``asyncio``
protocols (the responder answers from ``data_received``, the requester awaits a
future; a payload of 1 byte there, of 16 here as in bench_core): parts 1, 4 and 7 are
then what any client on this event loop spends, 2, 3, 5 and 6 what none can change.
Each part is the median over the rounds; the rows after them are medians of each
round's sum (the client's work: 1 + 4 + 7; the writes: 2 + 5; the server and the
wake-ups: 3 + 6). A round with any other read or write in it (a PING) is left out.

Ours is timed by wrapping two methods of the client's connection class
(``_Connection.write`` and ``data_received``) for the length of its run: a diagnostic
of this client, like ``benchmarks.fetch_rounds``.

Run: ``.venv/bin/python -m benchmarks.request_hops [--rounds 5000] [--repeat 3]
[--loop uvloop]``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from typing import Any

import jetstream
from benchmarks import _floor
from benchmarks._report import run_on_loop
from jetstream.core import _connection
from jetstream.embedded import NatsServer

PARTS = (
    "1. requester, until its write",
    "2. write of the request",
    "3. to the responder (server, wake-up)",
    "4. responder, read to write",
    "5. write of the reply",
    "6. back to the requester (server, wake-up)",
    "7. requester, read to return",
)
#: the sums of parts reported after them, and the parts (0-based) each adds up
SUMS = {
    "the client's work (1 + 4 + 7)": (0, 3, 6),
    "the writes (2 + 5)": (1, 4),
    "the server and the wake-ups (3 + 6)": (2, 5),
    "the round trip": (0, 1, 2, 3, 4, 5, 6),
}
IMPLS = ("jetstream", "bare protocols")
SUBJECT = "bench.hops"
PAYLOAD = b"x" * 16
WARMUP = 200

#: one read or write on a connection: its kind ("w" or "r"), the connection's id, and
#: when it started and ended (a read: when ``data_received`` was called, twice)
Mark = tuple[str, int, float, float]


def split(rounds: Sequence[tuple[float, float]], log: Sequence[Mark]) -> list[list[float]]:
    """The seven parts (seconds) of each round (its start and end) from the marks in
    ``log`` (in time order); a round whose marks are not a write, a read on another
    connection, a write on that one and a read on the first is left out."""
    out: list[list[float]] = []
    j = 0
    for start, end in rounds:
        while j < len(log) and log[j][2] < start:
            j += 1
        k = j
        while k < len(log) and log[k][2] <= end:
            k += 1
        inner = log[j:k]
        j = k
        if len(inner) != 4 or [m[0] for m in inner] != ["w", "r", "w", "r"]:
            continue
        w1, r1, w2, r2 = inner
        if not (w1[1] == r2[1] and r1[1] == w2[1] and w1[1] != r1[1]):
            continue
        out.append(
            [
                w1[2] - start,
                w1[3] - w1[2],
                r1[2] - w1[3],
                w2[2] - r1[2],
                w2[3] - w2[2],
                r2[2] - w2[3],
                end - r2[2],
            ]
        )
    return out


async def rounds_ours(url: str, rounds: int) -> tuple[list[tuple[float, float]], list[Mark]]:
    """``rounds`` requests to an echo responder, as bench_core's request row makes them,
    with every write and read of the client's connections marked."""
    log: list[Mark] = []
    conn_class = _connection._Connection
    write, received = conn_class.write, conn_class.data_received
    clock = time.perf_counter

    def marked_write(self: Any, data: bytes | bytearray) -> None:
        t = clock()
        write(self, data)
        log.append(("w", id(self), t, clock()))

    def marked_received(self: Any, data: bytes) -> None:
        t = clock()
        log.append(("r", id(self), t, t))
        received(self, data)

    # Wrapped before connecting: the event loop may keep the bound ``data_received`` of
    # a protocol it made (uvloop does); the warm-up's marks are dropped.
    conn_class.write = marked_write  # type: ignore[method-assign]
    conn_class.data_received = marked_received  # type: ignore[method-assign]
    try:
        async with jetstream.connect(url) as svc, jetstream.connect(url) as nc:

            async def echo(msg: jetstream.Msg) -> None:
                await msg.respond(msg.data)

            await svc.subscribe(SUBJECT, cb=echo)
            await svc.flush()
            for _ in range(WARMUP):
                await nc.request(SUBJECT, PAYLOAD, timeout=5)
            log.clear()
            times: list[tuple[float, float]] = []
            for _ in range(rounds):
                t0 = clock()
                await nc.request(SUBJECT, PAYLOAD, timeout=5)
                times.append((t0, clock()))
    finally:
        conn_class.write = write  # type: ignore[method-assign]
        conn_class.data_received = received  # type: ignore[method-assign]
    return times, log


async def rounds_bare(url: str, rounds: int) -> tuple[list[tuple[float, float]], list[Mark]]:
    """``loop_floor``'s round trips, with every write and read of its two protocols
    marked."""
    log: list[Mark] = []
    clock = time.perf_counter

    class MarkedWire(_floor._LoopWire):
        def write(self, data: bytes) -> None:
            t = clock()
            super().write(data)
            log.append(("w", id(self), t, clock()))

        def data_received(self, data: bytes) -> None:
            t = clock()
            log.append(("r", id(self), t, t))
            super().data_received(data)

    await _floor.loop_rounds(url, WARMUP)
    times = await _floor.loop_rounds(url, rounds, MarkedWire)
    return times, log


def medians(parts: list[list[float]]) -> dict[str, float]:
    """The median of each part and of each sum in ``SUMS`` (seconds)."""
    out = {name: statistics.median(p[i] for p in parts) for i, name in enumerate(PARTS)}
    for name, idx in SUMS.items():
        out[name] = statistics.median(sum(p[i] for i in idx) for p in parts)
    return out


async def hops(url: str, rounds: int, repeat: int = 1) -> dict[str, dict[str, float]]:
    """Each implementation's medians (``medians``), the median of ``repeat`` runs taking
    turns (ours, bare, ours, ...), each of ``rounds`` round trips.

    Raises:
        RuntimeError: more than a tenth of a run's rounds were left out.
    """
    runs: dict[str, list[dict[str, float]]] = {impl: [] for impl in IMPLS}
    for _ in range(repeat):
        for impl, run in zip(IMPLS, (rounds_ours, rounds_bare), strict=True):
            times, log = await run(url, rounds)
            parts = split(times, log)
            if len(parts) < rounds * 0.9:
                raise RuntimeError(
                    f"{impl}: only {len(parts)} of {rounds} rounds had one write and one "
                    "read a side"
                )
            runs[impl].append(medians(parts))
    return {
        impl: {name: statistics.median(r[name] for r in rs) for name in rs[0]}
        for impl, rs in runs.items()
    }


async def main_async(args: Any) -> dict[str, dict[str, float]]:
    with NatsServer() as server:
        return await hops(server.url, args.rounds, args.repeat)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    ap.add_argument("--rounds", type=int, default=5000, help="round trips a run")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each, taking turns")
    ap.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio")
    args = ap.parse_args(argv)
    result = run_on_loop(main_async(args), args.loop)
    ours, bare = (result[impl] for impl in IMPLS)
    print(
        f"a request's round trip in parts, {args.loop} loop, medians in us "
        f"({args.repeat} x {args.rounds} rounds each)"
    )
    print(f"  {'':46s} {IMPLS[0]:>10s} {IMPLS[1]:>15s}")
    for name in (*PARTS, *SUMS):
        print(f"  {name:46s} {ours[name] * 1e6:10.1f} {bare[name] * 1e6:15.1f}")


if __name__ == "__main__":
    main()
