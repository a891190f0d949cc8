"""The performance page's chart and table: ours against each peer and the Go client.

Reads the JSON lines the benchmarks print with ``--json`` (one measurement per line:
workload, impl, seconds, ops), or makes them first with ``--run``, and draws for each
workload one bar per peer: our throughput divided by that peer's, so 2 means twice as
fast (for a latency, the peer's time divided by ours, the same reading). Against the
native anchor (``nats.go``, ``benchmarks/bench_native.py``) the same ratio reads as the
fraction of the Go client reached. A line marks 1x. The caption names the machine (CPU
count, load), Python, the event loop, nats-server and the peers' versions.

It also prints a Markdown table: per workload, each client's rate, our ratio to each
Python peer and to the best of them, and the fraction of nats.go.

Regenerate the committed chart (some twenty minutes; run it with the Python of
``.venv-bench``, which has every peer and matplotlib; Go for the native column)::

    .venv-bench/bin/python -m benchmarks.chart --run --svg docs/assets/speedup.svg

``--run`` writes the measurements beside the SVG (``.jsonl``, with ``.caption`` and the
table as ``.txt``), so the chart can be drawn again from them without running anything
(``--from FILE``).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks._floor import CLIENT_FLOOR, FLOOR

OURS = "jetstream"
NATIVE = "nats.go"
#: the Python peers, in the order of the columns (a peer not installed is left out)
PEERS = ("nats-py", "natsio", "nats-core")

#: the benchmarks run by ``--run``, with options that keep the whole run to minutes
RUNS: tuple[tuple[str, ...], ...] = (
    ("benchmarks.bench_core", "--repeat", "3", "--count", "300000", "--requests", "2000"),
    ("benchmarks.bench_js", "--repeat", "3", "--count", "100000"),
    ("benchmarks.bench_kv", "--repeat", "3", "--count", "5000"),
    ("benchmarks.bench_objectstore", "--size", "32"),
)
#: every run also notes the CPU of its client and of the server (``--cpu``: two reads of
#: /proc around each timed run), for the table of what bounds each rate
#: the native anchor's run, the same sizes (it takes no --loop)
NATIVE_RUN = (
    "benchmarks.bench_native",
    "--repeat",
    "3",
    "--count",
    "300000",
    "--requests",
    "2000",
    "--js-count",
    "100000",
    "--kv-count",
    "5000",
    "--size",
    "32",
)


@dataclass(frozen=True)
class Ratio:
    workload: str
    peer: str
    times: float  # ours vs the peer: above 1, ours is faster


def _measurements(lines: Iterable[str]) -> tuple[list[str], dict[tuple[str, str], dict[str, Any]]]:
    """The workloads in order of appearance, and per (workload, impl) the JSON object of
    its fastest measurement (a workload measured twice keeps its faster run)."""
    best: dict[tuple[str, str], dict[str, Any]] = {}
    order: list[str] = []
    for line in lines:
        line = line.strip()
        if not line.startswith("{"):
            continue
        m = json.loads(line)
        w, impl = m["workload"], m["impl"]
        if w not in order:
            order.append(w)
        before = best.get((w, impl))
        if before is None or m["seconds"] / m["ops"] < before["seconds"] / before["ops"]:
            best[(w, impl)] = m
    return order, best


def _rates(lines: Iterable[str]) -> tuple[list[str], dict[tuple[str, str], tuple[float, int]]]:
    """The workloads in order of appearance, and (seconds, ops) per (workload, impl)."""
    order, best = _measurements(lines)
    return order, {k: (float(m["seconds"]), int(m["ops"])) for k, m in best.items()}


def ratios(lines: Iterable[str]) -> list[Ratio]:
    """Our speed over each peer's, per workload, from benchmark JSON lines (a
    workload measured twice keeps its faster run)."""
    order, seconds = _rates(lines)
    out: list[Ratio] = []
    for w in order:
        ours = seconds.get((w, OURS))
        if ours is None or ours[0] <= 0:
            continue
        for (w2, impl), (secs, ops) in seconds.items():
            if w2 != w or impl in (OURS, FLOOR, CLIENT_FLOOR) or secs <= 0:
                continue
            # ops per second, ours over theirs (equal ops: their seconds over ours)
            out.append(Ratio(w, impl, (ours[1] / ours[0]) / (ops / secs)))
    return out


def _fmt_rate(workload: str, secs: float, ops: int) -> str:
    if "latency" in workload:
        return f"{secs * 1e6:.0f} µs"
    rate = ops / secs
    if rate >= 1e6:
        return f"{rate / 1e6:.2f}M"
    if rate >= 1e3:
        return f"{rate / 1e3:.1f}k"
    return f"{rate:.1f}"


def _best_peer(
    seconds: dict[tuple[str, str], tuple[float, int]], workload: str
) -> tuple[str, tuple[float, int]] | None:
    """The fastest Python peer at ``workload`` and its (seconds, ops), if any ran it."""
    peers = [(p, seconds[(workload, p)]) for p in PEERS if (workload, p) in seconds]
    return max(peers, key=lambda pg: pg[1][1] / pg[1][0]) if peers else None


def table(lines: Iterable[str]) -> str:
    """A Markdown table: per workload, each client's rate (a latency row: its time),
    our ratio to each Python peer and to the best of them (above 1: ours is faster), and
    the fraction of nats.go we reach; ``n/a`` where a client has no such workload."""
    order, seconds = _rates(lines)
    impls = {impl for _, impl in seconds}
    peers = [p for p in PEERS if p in impls]
    native = NATIVE in impls
    cols = [OURS, *peers, *([NATIVE] if native else [])]
    head = ["workload", *cols, *(f"/ {p}" for p in peers), "/ best Python peer"]
    if native:
        head.append("fraction of nats.go")
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for w in order:
        ours = seconds.get((w, OURS))
        if ours is None:
            continue
        cells = [w]
        for impl in cols:
            got = seconds.get((w, impl))
            cells.append(_fmt_rate(w, *got) if got else "n/a")
        ours_rate = ours[1] / ours[0]
        for p in peers:
            got = seconds.get((w, p))
            cells.append(f"{ours_rate / (got[1] / got[0]):.2f}x" if got else "n/a")
        best = _best_peer(seconds, w)
        cells.append(f"{ours_rate / (best[1][1] / best[1][0]):.2f}x" if best else "n/a")
        if native:
            got = seconds.get((w, NATIVE))
            cells.append(f"{ours_rate / (got[1] / got[0]):.2f}" if got else "n/a")
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


#: a process busy this many cores' worth of the run's wall time bounds the rate
BUSY = 0.85


def bound(client: float, server: float, cores: int) -> str:
    """What bounds a run, from how many cores' worth of its wall time the client and
    the server were busy: both cores, the busier of the two processes, or neither (they
    take turns: round trips, a window or a pull waited for, each side idle a part of
    the time while the other works)."""
    if client + server >= 0.9 * cores:
        return "both cores"
    if max(client, server) >= BUSY:
        return "the client" if client >= server else "the server"
    return "neither (turns)"


def bounds_table(lines: Iterable[str], cores: int) -> str:
    """A Markdown table: per throughput workload measured with ``--cpu``, how busy our
    client and the server were over the best run (cores' worth of its wall time), and
    the same in the Go client's run, each with what bounds it (``bound``)."""
    order, best = _measurements(lines)
    sides = [impl for impl in (OURS, NATIVE) if any(k[1] == impl for k in best)]
    head = ["workload"]
    for impl in sides:
        head += [f"{impl}: client, server busy", f"{impl}: bound"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for w in order:
        cells = [w]
        for impl in sides:
            m = best.get((w, impl))
            if m is None or m.get("client_cpu") is None or m.get("server_cpu") is None:
                cells += ["n/a", "n/a"]
                continue
            client, server = m["client_cpu"] / m["seconds"], m["server_cpu"] / m["seconds"]
            cells += [f"{client:.2f}, {server:.2f}", bound(client, server, cores)]
        if any(c != "n/a" for c in cells[1:]):
            rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def floor_table(lines: Iterable[str]) -> str:
    """A Markdown table: per workload with a socket floor (the same calls on bare
    blocking sockets, no client library) and, where measured, a client floor (what a
    client spends on its own thread whatever the server does), the floors' rates, ours,
    the best Python peer's and nats.go's, then ours and twice the best peer as fractions
    of the lower floor: above 1 in the last column, no client gets twice as fast as that
    peer on this machine."""
    order, seconds = _rates(lines)
    impls = {impl for _, impl in seconds}
    native = NATIVE in impls
    floors = [FLOOR, *([CLIENT_FLOOR] if CLIENT_FLOOR in impls else [])]
    head = ["workload", *floors, OURS, "best Python peer", *([NATIVE] if native else [])]
    head += [f"{OURS} / floor", "2x best peer / floor"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for w in order:
        floor, ours = seconds.get((w, FLOOR)), seconds.get((w, OURS))
        if floor is None or ours is None:
            continue
        top = _best_peer(seconds, w)
        if top is None:
            continue
        name, best = top
        cells = [w]
        floor_rate = float("inf")
        for impl in floors:
            got = seconds.get((w, impl))
            cells.append(_fmt_rate(w, *got) if got else "n/a")
            if got:
                floor_rate = min(floor_rate, got[1] / got[0])
        cells += [_fmt_rate(w, *ours), f"{_fmt_rate(w, *best)} ({name})"]
        if native:
            got = seconds.get((w, NATIVE))
            cells.append(_fmt_rate(w, *got) if got else "n/a")
        cells.append(f"{ours[1] / ours[0] / floor_rate:.2f}")
        cells.append(f"{2 * best[1] / best[0] / floor_rate:.2f}")
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _cores(title: str) -> int:
    """The CPU count a caption names ("2 cores (...)"), else this machine's."""
    first = title.split(" cores", 1)[0]
    return int(first) if first.isdigit() else (os.cpu_count() or 1)


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def caption(loop: str = "asyncio", native: bool = False) -> str:
    """The machine (CPU count, load), Python, loop, server and peer versions, and the
    date, of this run."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    server = "nats-server ?"
    binary = shutil.which("nats-server") or str(Path(sys.executable).with_name("nats-server"))
    try:
        server = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except OSError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    peers = [
        f"{name} {v}"
        for name, dist in (("nats-py", "nats-py"), ("natsio", "natsio"), ("nats-core", "nats-core"))
        if (v := _version(dist))
    ]
    if native:
        peers.append(f"{NATIVE} {_native_version()}")
    return (
        f"{os.cpu_count()} cores ({cpu}), load {load:.1f}; Python {platform.python_version()} "
        f"({loop}); {server}; {', '.join(peers)}; {time.strftime('%Y-%m-%d')}"
    )


def _native_version() -> str:
    """nats.go's version from its sources (Debian's package), or '?'."""
    from benchmarks.bench_native import DEBIAN_GOPATH

    gopath = os.environ.get("NATS_GO_GOPATH", DEBIAN_GOPATH)
    try:
        text = (Path(gopath) / "src/github.com/nats-io/nats.go/nats.go").read_text()
    except OSError:
        return "?"
    for line in text.splitlines():
        if line.strip().startswith("Version") and "=" in line:
            return line.split("=", 1)[1].strip().strip('"')
    return "?"


def run_benchmarks(out: Path, loop: str = "asyncio", native: bool = True) -> list[str]:
    """Run every benchmark of ``RUNS`` with ``--json`` (and the native anchor when
    ``native``, before them and again after: the machine's load moves over twenty
    minutes, and each of its workloads keeps the faster of its two runs, so a fraction
    of nats.go errs low rather than high); keep the lines in ``out``."""
    lines: list[str] = []
    runs = [(*args, "--loop", loop, "--cpu") for args in RUNS]
    if native:
        runs = [(*NATIVE_RUN, "--cpu"), *runs, (*NATIVE_RUN, "--cpu")]
    for args in runs:
        print(f"running {' '.join(args)} ...", file=sys.stderr, flush=True)
        proc = subprocess.run(
            [sys.executable, "-m", *args, "--json"], capture_output=True, text=True
        )
        sys.stderr.write(proc.stderr)
        if proc.returncode != 0:
            # what it measured before it failed is kept; the rest is missing from the chart
            print(f"{args[0]} failed (exit {proc.returncode})", file=sys.stderr, flush=True)
        lines += [line for line in proc.stdout.splitlines() if line.startswith("{")]
        out.write_text("\n".join(lines) + "\n")
    return lines


def draw(data: Sequence[Ratio], svg: Path, title: str) -> None:
    """Horizontal bars, a group per workload and a bar per peer, to ``svg``.

    The axis is logarithmic (base 2), so that 0.5x and 2x sit as far from the 1x line,
    and a 250x next to a 1.4x still leaves both readable. The Go client's bars are grey:
    they read as the fraction of nats.go reached."""
    import textwrap

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator

    workloads = list(dict.fromkeys(r.workload for r in data))
    peers = list(dict.fromkeys(r.peer for r in data))
    value = {(r.workload, r.peer): r.times for r in data}
    height = 0.8 / max(len(peers), 1)
    colors = {p: c for p, c in zip(PEERS, ("#1f77b4", "#ff7f0e", "#2ca02c"), strict=True)}
    fig, ax = plt.subplots(figsize=(9, 0.22 * len(workloads) * max(len(peers), 1) + 2.2))
    for k, peer in enumerate(peers):
        ys = [i + k * height for i, w in enumerate(workloads) if (w, peer) in value]
        xs = [value[(w, peer)] for w in workloads if (w, peer) in value]
        label = f"vs {peer}" if peer != NATIVE else f"fraction of {NATIVE}"
        color = "#8c8c8c" if peer == NATIVE else colors.get(peer)
        bars = ax.barh(ys, xs, height=height, label=label, color=color)
        for bar, x in zip(bars, xs, strict=True):
            text = f" {x:.2f}" if peer == NATIVE else f" {x:.1f}x"
            ax.text(x, bar.get_y() + bar.get_height() / 2, text, va="center", fontsize=7)
    ax.set_xscale("log", base=2)
    low = min(min(value.values()), 0.5) / 1.3
    high = max(max(value.values()), 2.0) * 1.6
    ax.set_xlim(low, high)
    ticks = [2.0**e for e in range(-8, 12) if low <= 2.0**e <= high]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xticklabels([f"{t:g}x" for t in ticks], fontsize=8)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_yticks([i + height * (len(peers) - 1) / 2 for i in range(len(workloads))])
    ax.set_yticklabels(workloads, fontsize=9)
    ax.set_ylim(len(workloads) - 0.1, -0.3)
    what = (
        "times as fast as the peer (throughput: ours / theirs; latency: theirs / ours);"
        " right of the line: faster"
    )
    ax.set_xlabel("\n".join([what, *textwrap.wrap(title, 110)]), fontsize=8)
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=4, fontsize=8, frameon=False)
    ax.grid(axis="x", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    fig.tight_layout()
    svg.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(svg, format="svg", metadata={"Date": None})
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    ap.add_argument("--svg", type=Path, required=True, help="where to write the chart")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--run", action="store_true", help="run the benchmarks first")
    src.add_argument("--from", dest="source", type=Path, help="benchmark JSON lines")
    ap.add_argument(
        "--loop",
        choices=["asyncio", "uvloop"],
        default="uvloop" if importlib.util.find_spec("uvloop") else "asyncio",
        help="--run: the event loop of the Python benchmarks (uvloop where installed)",
    )
    ap.add_argument("--no-native", action="store_true", help="--run: skip the Go anchor")
    args = ap.parse_args(argv)
    data_file = args.svg.with_suffix(".jsonl")
    if args.run:
        lines = run_benchmarks(data_file, args.loop, not args.no_native)
        has_native = any(f'"impl": "{NATIVE}"' in line for line in lines)
        title = caption(args.loop, has_native)
        data_file.with_suffix(".caption").write_text(title + "\n")
    else:
        lines = args.source.read_text().splitlines()
        cap = args.source.with_suffix(".caption")
        title = cap.read_text().strip() if cap.exists() else caption()
    data = ratios(lines)
    if not data:
        print("error: no workload measured both ours and a peer", file=sys.stderr)
        return 1
    draw(data, args.svg, title)
    text = f"{title}\n\n{table(lines)}\n"
    busy = bounds_table(lines, _cores(title))
    if busy.count("\n") > 1:
        text += f"\nWhat bounds each rate (cores busy over the best run, from /proc):\n\n{busy}\n"
    floors = floor_table(lines)
    if floors.count("\n") > 1:
        text += (
            "\nAgainst the floors, same server and run (socket floor: the same calls on bare"
            " blocking sockets, no client library; client floor: what a client spends on its"
            " own thread whatever the server does; the fractions are of the lower"
            " floor):\n\n" + floors + "\n"
        )
    if args.run:
        data_file.with_suffix(".txt").write_text(text)
    print(text)
    print(f"wrote {args.svg} ({len(data)} bars)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
