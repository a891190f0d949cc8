"""Shared helpers of the benchmarks: timing, comparison tables, ``--json`` output.

A benchmark measures each workload once per implementation, in the same
process run, and hands the results to ``report``::

    from benchmarks._report import Measurement, arg_parser, race, report

    args = arg_parser("parser throughput").parse_args()
    best = race({"jetstream": ours, "nats-py": theirs}, repeat=args.repeat)
    results = [
        Measurement("MSG 16 B", impl, seconds, ops=200_000, nbytes=len(stream))
        for impl, seconds in best.items()
    ]
    report(results, title="parser", json_output=args.json)

The table has one row per workload, throughput columns per implementation
(ops/s, and MB/s when ``nbytes`` is set) and a ratio column ``ours / baseline``
(above 1 means ours is faster). ``--json`` prints the raw measurements instead,
one JSON object per line, for machine comparison between runs.

Timings are the best of N runs (``time.perf_counter``, garbage collector
paused): the minimum is the run least disturbed by the rest of the machine.
``race`` interleaves the contenders' runs so that a busy machine slows them
alike. These are not timed tests; nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

__all__ = [
    "Measurement",
    "Workload",
    "arg_parser",
    "best_of",
    "best_of_async",
    "format_table",
    "race",
    "race_async",
    "race_workloads",
    "report",
    "proc_cpu",
    "run_on_loop",
    "start",
    "with_cpu",
    "with_cpu_all",
]

OURS = "jetstream"
BASELINE = "nats-py"


@dataclass(frozen=True)
class Measurement:
    """One workload timed for one implementation.

    Attributes:
        workload: what was measured, e.g. ``"MSG 16 B"``; rows are grouped by it.
        impl: who was measured, e.g. ``"jetstream"`` or ``"nats-py"``.
        seconds: the best wall time of one run of the workload.
        ops: operations (messages) done by one run.
        nbytes: bytes processed by one run; 0 leaves the MB/s column empty.
        client_cpu: with ``--cpu``, the CPU seconds (user + system) the benchmark's
            process spent in that best run; None when not measured.
        server_cpu: the same for the nats-server.
    """

    workload: str
    impl: str
    seconds: float
    ops: int
    nbytes: int = 0
    client_cpu: float | None = None
    server_cpu: float | None = None

    @property
    def ops_per_s(self) -> float:
        return self.ops / self.seconds if self.seconds > 0 else float("inf")

    @property
    def mb_per_s(self) -> float:
        return self.nbytes / self.seconds / 1e6 if self.seconds > 0 else float("inf")


def best_of(
    fn: Callable[[], object], *, repeat: int = 5, setup: Callable[[], object] | None = None
) -> float:
    """Run ``fn`` ``repeat`` times and return the shortest wall time, in seconds.

    ``setup`` (untimed) runs before each run, e.g. to build a fresh parser.
    The garbage collector is paused during each timed run, as ``timeit`` does.
    """
    best = float("inf")
    for _ in range(max(1, repeat)):
        if setup is not None:
            setup()
        gc.collect()
        gc.disable()
        try:
            start = time.perf_counter()
            fn()
            elapsed = time.perf_counter() - start
        finally:
            gc.enable()
        best = min(best, elapsed)
    return best


def race(fns: Mapping[str, Callable[[], object]], *, repeat: int = 5) -> dict[str, float]:
    """Time each of ``fns`` ``repeat`` times, taking turns; return the best seconds of each.

    Taking turns (a, b, a, b, ...) rather than running all of a then all of b
    spreads the load of a shared machine over every contender alike, which
    keeps the ratios honest when absolute times wander.
    """
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(max(1, repeat)):
        for name, fn in fns.items():
            best[name] = min(best[name], best_of(fn, repeat=1))
    return best


def _rate(value: float) -> str:
    if value >= 1e6:
        return f"{value / 1e6:.2f}M"
    if value >= 1e3:
        return f"{value / 1e3:.1f}k"
    return f"{value:.1f}"


def format_table(
    results: Sequence[Measurement], *, ours: str = OURS, baseline: str = BASELINE
) -> str:
    """Render ``results`` as a text table with a ``ours/baseline`` ratio column.

    Implementations appear as column groups in order of first appearance;
    workloads as rows in order of first appearance. The ratio compares ops/s
    and is left blank when either side is missing from a workload.
    """
    impls = list(dict.fromkeys(m.impl for m in results))
    workloads = list(dict.fromkeys(m.workload for m in results))
    cell = {(m.workload, m.impl): m for m in results}
    header = ["workload"]
    for impl in impls:
        header += [f"{impl} ops/s", f"{impl} MB/s"]
    header.append(f"{ours}/{baseline}")
    rows = [header]
    for w in workloads:
        row = [w]
        for impl in impls:
            m = cell.get((w, impl))
            if m is None:
                row += ["-", "-"]
            else:
                row += [_rate(m.ops_per_s), f"{m.mb_per_s:.1f}" if m.nbytes else "-"]
        a, b = cell.get((w, ours)), cell.get((w, baseline))
        row.append(f"{b.seconds / a.seconds:.2f}x" if a and b and a.seconds > 0 else "-")
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = []
    for k, r in enumerate(rows):
        cells = [r[0].ljust(widths[0])] + [
            c.rjust(wd) for c, wd in zip(r[1:], widths[1:], strict=True)
        ]
        lines.append("  ".join(cells))
        if k == 0:
            lines.append("  ".join("-" * wd for wd in widths))
    return "\n".join(lines)


def report(
    results: Sequence[Measurement],
    *,
    title: str,
    json_output: bool = False,
    ours: str = OURS,
    baseline: str = BASELINE,
) -> None:
    """Print ``results``: a titled table, or one JSON object per measurement."""
    if json_output:
        for m in results:
            print(json.dumps({**asdict(m), "ops_per_s": m.ops_per_s, "mb_per_s": m.mb_per_s}))
        return
    print(title)
    print(format_table(results, ours=ours, baseline=baseline))


def arg_parser(description: str) -> argparse.ArgumentParser:
    """The common command line, ``--json`` and ``--repeat N`` (best of N, default 5).

    A benchmark adds its own options to the returned parser, then calls
    ``parse_args()`` on it.
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--json", action="store_true", help="print JSON lines, not a table")
    parser.add_argument("--repeat", type=int, default=5, help="runs per measurement (best kept)")
    return parser


T = TypeVar("T")


async def best_of_async(run: Callable[[], Awaitable[float]], repeat: int) -> float:
    """The shortest of ``repeat`` runs of an async workload that times itself (seconds)."""
    best = float("inf")
    for _ in range(max(1, repeat)):
        gc.collect()
        best = min(best, await run())
    return best


#: (label, operations per run, a run that times itself and returns seconds; None where
#: the client has no such feature: the workload is then left out for it, reported n/a)
Workload = tuple[str, int, Callable[[], Awaitable[float]] | None]


async def race_async(
    runs: Mapping[str, Callable[[], Awaitable[float]]],
    repeat: int,
    cpu: dict[str, tuple[float, float]] | None = None,
) -> dict[str, float]:
    """``race`` for async workloads that time themselves: each of ``runs`` ``repeat``
    times, taking turns, and the best seconds of each. Into ``cpu``, for a run wrapped
    by ``with_cpu``: the (client, server) CPU seconds of its best run."""
    global _last_cpu
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(max(1, repeat)):
        for name, run in runs.items():
            gc.collect()
            _last_cpu = None
            seconds = await run()
            if seconds < best[name]:
                best[name] = seconds
                if cpu is not None and _last_cpu is not None:
                    cpu[name] = _last_cpu
    return best


async def race_workloads(
    impls: Mapping[str, Sequence[Workload]],
    *,
    repeat: int,
    only: str = "",
    unit: str = "ops/s",
) -> list[Measurement]:
    """Time the same workloads of several implementations, taking turns within each
    workload (ours, theirs, ours, ...), so that a machine busy for a while slows every
    contender alike; prints each best rate as it comes. The implementations must list
    the same workload labels, in the same order. ``only``: the workloads whose label
    has it, or one of its ``|``-separated parts."""
    lists = list(impls.values())
    labels = {name: [w[0] for w in wl] for name, wl in impls.items()}
    first = labels[next(iter(impls))]
    for name, theirs in labels.items():
        if theirs != first:
            raise ValueError(
                f"{name} lists the workloads {theirs}, not {first}: every implementation "
                "lists the same labels in the same order (None where it has no such call)"
            )
    out: list[Measurement] = []
    for k, (label, ops, _) in enumerate(lists[0]):
        if only and not any(part in label for part in only.split("|")):
            continue
        runs = {name: wl[k][2] for name, wl in impls.items() if wl[k][2] is not None}
        for name in impls:
            if name not in runs:
                print(f"  {name:9s} {label:26s} {'n/a':>12s}", flush=True)
        cpu: dict[str, tuple[float, float]] = {}
        for name, seconds in (await race_async(runs, repeat, cpu)).items():
            out.append(Measurement(label, name, seconds, ops, 0, *cpu.get(name, (None, None))))
            print(f"  {name:9s} {label:26s} {ops / seconds:12,.0f} {unit}", flush=True)
    return out


def proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) used so far by process ``pid`` (Linux ``/proc``), or 0."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


#: the server whose CPU ``start`` notes (set by ``with_cpu``), and what it noted
_cpu_pid = 0
_cpu0: tuple[float, float, float] = (0.0, 0.0, 0.0)
#: this process's CPU seconds at that moment, in nanoseconds' resolution (``os.times``
#: counts in clock ticks, 10 ms)
_cpu0_fine = 0.0
#: the (client, server) CPU seconds of the last run ``with_cpu`` timed, for ``race_async``
_last_cpu: tuple[float, float] | None = None


def start() -> float:
    """A run's time zero, after its setup (``time.perf_counter()``); also notes the CPU
    used so far, which ``with_cpu`` reports from (the setup is not counted)."""
    global _cpu0, _cpu0_fine
    if _cpu_pid:
        t = os.times()
        _cpu0 = (t.user, t.system, proc_cpu(_cpu_pid))
        _cpu0_fine = time.process_time()
    return time.perf_counter()


def with_cpu(
    run: Callable[[], Awaitable[float]],
    label: str,
    impl: str,
    ops: int,
    server_pid: int,
    whole: bool = False,
) -> Callable[[], Awaitable[float]]:
    """``run``, printing (stderr) where its CPU went per operation: this process's user
    and system time and the server's. The two processes share the machine's cores, so
    whichever is busier bounds the rate; each run's figures are printed. With ``whole``
    the CPU is counted from the call on (for runs that do not call ``start``)."""

    async def timed() -> float:
        global _cpu_pid, _last_cpu
        _cpu_pid = server_pid
        if whole:
            start()
        seconds = await run()
        fine, t1, s1 = time.process_time(), os.times(), proc_cpu(server_pid)
        u0, k0, s0 = _cpu0
        _last_cpu = (fine - _cpu0_fine, s1 - s0)
        us = 1e6 / ops
        print(
            f"  cpu {impl:9s} {label:26s} client user {(t1.user - u0) * us:5.2f}"
            f" sys {(t1.system - k0) * us:5.2f}, server {(s1 - s0) * us:5.2f} us/op",
            file=sys.stderr,
            flush=True,
        )
        return seconds

    return timed


def with_cpu_all(
    every: Mapping[str, Sequence[Workload]], server_pid: int
) -> dict[str, list[Workload]]:
    """``every`` (per implementation, its workloads) with each run wrapped by
    ``with_cpu`` (a workload the implementation lacks stays None)."""
    return {
        name: [
            (label, ops, run and with_cpu(run, label, name, ops, server_pid))
            for label, ops, run in workloads
        ]
        for name, workloads in every.items()
    }


def run_on_loop(coro: Coroutine[Any, Any, T], loop: str) -> T:
    """Run ``coro`` on the default asyncio loop or, with ``loop="uvloop"``, on uvloop."""
    if loop == "uvloop":
        import uvloop

        return uvloop.run(coro)
    import asyncio

    return asyncio.run(coro)
