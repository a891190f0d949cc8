"""The performance page's chart, summary and tables: ours against the Python peers and Go.

Reads the JSON lines the benchmarks print with ``--json`` (one measurement per line:
workload, impl, seconds, ops), or makes them first with ``--run``, and draws for each
workload two bars: our throughput divided by the best other Python client's, so 2 means
twice as fast (for a latency, that client's time divided by ours, the same reading), and
divided by the native anchor's (``nats.go``, ``benchmarks/bench_native.py``), which
reads as the fraction of the Go client reached. A line marks 1x. The caption names the
machine (CPU count, load), Python, the event loop, nats-server and the peers' versions.

It also prints the page's text (``report``): a sentence per workload family of
``FAMILIES`` (the lowest and highest of its ratios), then Markdown tables with one kind
of figure a column: per workload each client's rate (latencies in a table of their
own), our ratio to each Python peer and to the best of them, the fraction of nats.go;
what bounds each rate; and the floors of bare sockets.

Regenerate the committed chart (some twenty minutes; run it with the Python of
``.venv-bench``, which has every peer and matplotlib; Go for the native column)::

    .venv-bench/bin/python -m benchmarks.chart --run --svg docs/assets/speedup.svg

``--run`` writes the measurements beside the SVG (``.jsonl``, with ``.caption`` and the
text as ``.txt``), so the chart and the text can be drawn again from them without
running anything (``--from FILE``; from the SVG's own ``.jsonl``, the ``.txt`` is
written again too).
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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks._floor import CLIENT_FLOOR, FLOOR

OURS = "jetstream"
NATIVE = "nats.go"
#: the Python peers, in the order of the columns (a peer not installed is left out)
PEERS = ("nats-py", "natsio", "nats-core")

#: the workload families of the performance page's summary, one sentence each, and the
#: chart's order: (family, its workloads)
FAMILIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Publishing", ("publish 16 B", "publish 1 KiB")),
    ("Publish and subscribe", ("pub->sub 16 B", "pub->sub 1 KiB")),
    ("Request and reply, latency", ("request p50 (1/latency)", "request p99 (1/latency)")),
    ("JetStream publishing", ("sync publish", "publish_async")),
    (
        "Consuming with acks",
        (
            "fetch+ack batch 100",
            "fetch+ack batch 500",
            "fetch+ack_sync batch 500",
            "messages()+ack",
            "ack_sync",
            "ack_sync 100 at a time",
        ),
    ),
    ("Ordered replay", ("ordered replay", "ordered replay, push")),
    ("KeyValue", ("put", "get", "watch (until up to date)")),
    ("ObjectStore, 32 MiB objects", ("put 32 MiB", "get 32 MiB (bytes)", "get 32 MiB (stream)")),
)

#: rows kept beside the headline rows: in the tables, not in the chart's bars nor the
#: summary. The headline rows are the code users write (one ``await msg.ack()`` a
#: message; an echo responder's async callback in the requester's process); beside them,
#: ours acking a batch with ``ack_all`` (no other client has such a call) and the
#: request with the responder in a second process. Each is listed right after its
#: headline row (the value) in the tables
BESIDE = {
    "fetch+ack_all batch 100": "fetch+ack batch 100",
    "fetch+ack_all batch 500": "fetch+ack batch 500",
    "request p50, responder in another process (1/latency)": "request p99 (1/latency)",
    "request p99, responder in another process (1/latency)": "request p99 (1/latency)",
}

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
    return _beside_their_headline(order), best


def _beside_their_headline(order: list[str]) -> list[str]:
    """``order`` with each row of ``BESIDE`` moved right after its headline row (the
    native anchor, which runs first, has none of them: they would come last)."""
    out = [w for w in order if w not in BESIDE or BESIDE[w] not in order]
    for w, anchor in BESIDE.items():
        if w in order and anchor in order:
            at = out.index(anchor) + 1
            while at < len(out) and BESIDE.get(out[at]) == anchor:
                at += 1
            out.insert(at, w)
    return out


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


def _rate(got: tuple[float, int]) -> float:
    return got[1] / got[0]


def table(lines: Iterable[str]) -> str:
    """Markdown tables, one kind of figure a column: each client's rate a second per
    throughput workload; each client's time per latency workload (``... (1/latency)``);
    then per workload our ratio to each Python peer and to the best of them (above 1:
    ours is faster) and the fraction of nats.go we reach. ``n/a`` where a client has no
    such workload."""
    order, seconds = _rates(lines)
    impls = {impl for _, impl in seconds}
    peers = [p for p in PEERS if p in impls]
    native = NATIVE in impls
    cols = [OURS, *peers, *([NATIVE] if native else [])]
    ours_order = [w for w in order if (w, OURS) in seconds]

    def rows(head: list[str], cells_of: Callable[[str], list[str]], ws: list[str]) -> str:
        out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        out += ["| " + " | ".join([w, *cells_of(w)]) + " |" for w in ws]
        return "\n".join(out)

    def rate_cells(w: str) -> list[str]:
        return [_fmt_rate(w, *seconds[(w, i)]) if (w, i) in seconds else "n/a" for i in cols]

    def ratio_cells(w: str) -> list[str]:
        ours = _rate(seconds[(w, OURS)])
        cells = [
            f"{ours / _rate(seconds[(w, p)]):.2f}x" if (w, p) in seconds else "n/a" for p in peers
        ]
        best = _best_peer(seconds, w)
        cells.append(f"{ours / _rate(best[1]):.2f}x" if best else "n/a")
        if native:
            got = seconds.get((w, NATIVE))
            cells.append(f"{ours / _rate(got):.2f}" if got else "n/a")
        return cells

    parts = []
    throughput = [w for w in ours_order if "latency" not in w]
    latency = [w for w in ours_order if "latency" in w]
    if throughput:
        parts.append("Rates a second:\n\n" + rows(["workload", *cols], rate_cells, throughput))
    if latency:
        parts.append("Latencies:\n\n" + rows(["workload", *cols], rate_cells, latency))
    head = ["workload", *(f"/ {p}" for p in peers), "/ best Python peer"]
    head += ["fraction of nats.go"] if native else []
    parts.append(
        "Ours over each Python client (above 1: ours is faster; for a latency, their time"
        " over ours), and the fraction of nats.go's speed:\n\n"
        + rows(head, ratio_cells, ours_order)
    )
    return "\n\n".join(parts)


def headline(lines: Iterable[str]) -> list[Ratio]:
    """Per workload, ours over the best Python peer's (``peer`` is that peer's name) and
    over nats.go's (the fraction of nats.go), in the order of ``FAMILIES`` and then of
    appearance, the rows of ``BESIDE`` left out: the chart's bars."""
    order, seconds = _rates(lines)
    known = [w for _, members in FAMILIES for w in members]
    out: list[Ratio] = []
    rest = [w for w in order if w not in known and w not in BESIDE]
    for w in [w for w in known if w in order] + rest:
        ours = seconds.get((w, OURS))
        if ours is None or ours[0] <= 0:
            continue
        best = _best_peer(seconds, w)
        if best is not None:
            out.append(Ratio(w, best[0], _rate(ours) / _rate(best[1])))
        native = seconds.get((w, NATIVE))
        if native is not None:
            out.append(Ratio(w, NATIVE, _rate(ours) / _rate(native)))
    return out


def _span(values: Iterable[float], unit: str) -> str:
    """``1.92x to 2.60x``: the lowest and the highest (one figure when they are the same)."""
    low, high = f"{min(values):.2f}{unit}", f"{max(values):.2f}{unit}"
    return low if low == high else f"{low} to {high}"


def summary(lines: Iterable[str]) -> str:
    """One Markdown list item per workload family of ``FAMILIES``: how many times as
    fast as the best other Python client ours was, and what fraction of nats.go's speed
    it reached, each from the lowest to the highest of the family's workloads."""
    ratio = {(r.workload, r.peer == NATIVE): r.times for r in headline(lines)}
    items = []
    for family, members in FAMILIES:
        peer = [ratio[(w, False)] for w in members if (w, False) in ratio]
        go = [ratio[(w, True)] for w in members if (w, True) in ratio]
        parts = []
        if peer:
            parts.append(f"{_span(peer, 'x')} the best other Python client")
        if go:
            parts.append(f"{_span(go, '')} of nats.go")
        if parts:
            items.append(f"- **{family}**: " + ", ".join(parts) + ".")
    return "\n".join(items)


def native_runs_table(lines: Iterable[str]) -> str:
    """A Markdown table: per workload, the fraction of nats.go ours reached against each
    of the Go program's runs, in the order they ran (``--run`` runs it before the Python
    benchmarks and again after them; the chart keeps the faster, the lower fraction).
    Empty when Go ran once or not at all."""
    lines = list(lines)
    _, seconds = _rates(lines)
    runs: dict[str, list[tuple[float, int]]] = {}
    for line in lines:
        line = line.strip()
        if line.startswith("{"):
            m = json.loads(line)
            if m["impl"] == NATIVE and m["seconds"] > 0:
                runs.setdefault(m["workload"], []).append((float(m["seconds"]), int(m["ops"])))
    count = max((len(v) for v in runs.values()), default=0)
    if count < 2:
        return ""
    head = ["workload", *(f"fraction of {NATIVE}, its run {k + 1}" for k in range(count))]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for w, got in runs.items():
        ours = seconds.get((w, OURS))
        if ours is None:
            continue
        cells = [f"{_rate(ours) / _rate(g):.2f}" for g in got]
        rows.append("| " + " | ".join([w, *cells, *["n/a"] * (count - len(cells))]) + " |")
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
        head += [f"{impl}: client busy", f"{impl}: server busy", f"{impl}: bound"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for w in order:
        cells = [w]
        for impl in sides:
            m = best.get((w, impl))
            if m is None or m.get("client_cpu") is None or m.get("server_cpu") is None:
                cells += ["n/a", "n/a", "n/a"]
                continue
            client, server = m["client_cpu"] / m["seconds"], m["server_cpu"] / m["seconds"]
            cells += [f"{client:.2f}", f"{server:.2f}", bound(client, server, cores)]
        if any(c != "n/a" for c in cells[1:]):
            rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _fmt_us(us: float) -> str:
    if round(us) >= 100:
        return f"{us:.0f}"
    return f"{us:.1f}" if round(us, 1) >= 10 else f"{us:.2f}"


def cpu_table(lines: Iterable[str]) -> str:
    """A Markdown table: per throughput workload measured with ``--cpu``, the CPU time a
    message (an operation: an ObjectStore row's is an object) of our client and of the
    server with it, and of the Go program and the server with it, in microseconds, over
    the best run of each side (the runs of ``bounds_table``)."""
    order, best = _measurements(lines)
    head = ["workload", f"{OURS} client", f"server, with {OURS}"]
    native = any(k[1] == NATIVE for k in best)
    if native:
        head += [f"{NATIVE} client", f"server, with {NATIVE}"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for w in order:
        cells = [w]
        for impl in (OURS, *([NATIVE] if native else [])):
            m = best.get((w, impl))
            if m is None or m.get("client_cpu") is None or m.get("server_cpu") is None:
                cells += ["n/a", "n/a"]
                continue
            per = 1e6 / m["ops"]
            cells += [_fmt_us(m["client_cpu"] * per), _fmt_us(m["server_cpu"] * per)]
        if cells[1] != "n/a":
            rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def floor_table(lines: Iterable[str]) -> str:
    """A Markdown table: per workload with a socket floor (the same calls on bare
    blocking sockets, no client library) and, where measured, a client floor (what a
    client spends on its own thread whatever the server does; for a request, the request
    between two bare protocols on the event loop), the floors' rates, ours,
    the best Python peer's and nats.go's, then ours and twice the best peer as fractions
    of the lower floor: above 1 in the last column, no client gets twice as fast as that
    peer on this machine."""
    order, seconds = _rates(lines)
    impls = {impl for _, impl in seconds}
    native = NATIVE in impls
    floors = [FLOOR, *([CLIENT_FLOOR] if CLIENT_FLOOR in impls else [])]
    head = ["workload", *floors, OURS, "best Python peer", "which"]
    head += [NATIVE] if native else []
    head += [f"{OURS} / floor", "2x best peer / floor"]
    tables: list[list[str]] = []
    for latency in (False, True):  # rates a second, then microseconds: a kind a column
        rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for w in order:
            floor, ours = seconds.get((w, FLOOR)), seconds.get((w, OURS))
            top = _best_peer(seconds, w)
            if floor is None or ours is None or top is None or ("latency" in w) != latency:
                continue
            name, best = top
            cells = [w]
            floor_rate = float("inf")
            for impl in floors:
                got = seconds.get((w, impl))
                cells.append(_fmt_rate(w, *got) if got else "n/a")
                if got:
                    floor_rate = min(floor_rate, _rate(got))
            cells += [_fmt_rate(w, *ours), _fmt_rate(w, *best), name]
            if native:
                got = seconds.get((w, NATIVE))
                cells.append(_fmt_rate(w, *got) if got else "n/a")
            cells.append(f"{_rate(ours) / floor_rate:.2f}")
            cells.append(f"{2 * _rate(best) / floor_rate:.2f}")
            rows.append("| " + " | ".join(cells) + " |")
        if len(rows) > 2:
            tables.append(rows)
    return "\n\n".join("\n".join(rows) for rows in tables)


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
    """Two bars a workload, to ``svg``: how many times as fast as the best other Python
    client ours was (blue, labelled with that client's name), and the fraction of
    nats.go's speed it reached (grey). ``data`` is ``headline``'s: the workloads in the
    order of ``FAMILIES``, a thin line between two families.

    The axis is logarithmic (base 2), so that 0.5x and 2x sit as far from the 1x line."""
    import textwrap

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator

    workloads = list(dict.fromkeys(r.workload for r in data))
    row = {w: i for i, w in enumerate(workloads)}
    height = 0.4
    fig, ax = plt.subplots(figsize=(7.2, 0.3 * len(workloads) + 1.9))
    sides = (
        (
            [r for r in data if r.peer != NATIVE],
            -height / 2,
            "#1f77b4",
            "vs the best other Python client",
        ),
        ([r for r in data if r.peer == NATIVE], height / 2, "#8c8c8c", f"fraction of {NATIVE}"),
    )
    for bars_of, offset, color, label in sides:
        if not bars_of:
            continue
        ys = [row[r.workload] + offset for r in bars_of]
        bars = ax.barh(ys, [r.times for r in bars_of], height=height, color=color, label=label)
        for bar, r in zip(bars, bars_of, strict=True):
            text = f" {r.times:.2f}" if r.peer == NATIVE else f" {r.times:.1f}x {r.peer}"
            y = bar.get_y() + bar.get_height() / 2
            box = {"facecolor": "white", "edgecolor": "none", "pad": 0.5, "alpha": 0.8}
            ax.text(r.times, y, text, va="center", fontsize=9, bbox=box)
    family = {w: k for k, (_, members) in enumerate(FAMILIES) for w in members}
    for i in range(1, len(workloads)):
        if family.get(workloads[i], -1) != family.get(workloads[i - 1], -1):
            ax.axhline(i - 0.5, color="#bbbbbb", linewidth=0.8)
    values = [r.times for r in data]
    ax.set_xscale("log", base=2)
    low = min(min(values), 0.5) / 1.3
    high = max(max(values), 2.0) * 2.2  # room for the labels right of the longest bars
    ax.set_xlim(low, high)
    ticks = [2.0**e for e in range(-8, 12) if low <= 2.0**e <= high]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xticklabels([f"{t:g}x" for t in ticks], fontsize=10)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(workloads)))
    ax.set_yticklabels(workloads, fontsize=10)
    ax.set_ylim(len(workloads) - 0.5, -0.5)
    what = (
        "times as fast (throughput: ours / theirs; latency: theirs / ours);"
        " right of the line: ours is faster"
    )
    ax.set_xlabel("\n".join([what, *textwrap.wrap(title, 90)]), fontsize=8)
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, fontsize=10, frameon=False)
    ax.grid(axis="x", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    fig.tight_layout()
    svg.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(svg, format="svg", metadata={"Date": None})
    plt.close(fig)


def _section(name: str, body: str) -> str:
    """``body`` between the markers of a snippet section (``--8<-- "FILE:name"``)."""
    return f"<!-- --8<-- [start:{name}] -->\n{body}\n<!-- --8<-- [end:{name}] -->\n"


def report(lines: list[str], title: str) -> str:
    """The text beside the chart, in the sections the performance page includes:
    ``summary`` (a sentence a workload family), ``rates`` (the caption and every rate
    and ratio), ``native`` (the fraction of nats.go against each of its runs),
    ``bounds`` (what bounds each rate), ``cpu`` (the CPU a message of each side) and
    ``floors`` (the bare sockets)."""
    text = _section("summary", summary(lines))
    text += "\n" + _section("rates", f"{title}\n\n{table(lines)}")
    native = native_runs_table(lines)
    if native:
        text += (
            "\nThe fraction of nats.go against each of its runs (the chart keeps the lower):\n\n"
        )
        text += _section("native", native)
    busy = bounds_table(lines, _cores(title))
    if busy.count("\n") > 1:
        text += "\nWhat bounds each rate (cores busy over the best run, from /proc):\n\n"
        text += _section("bounds", busy)
    cpu = cpu_table(lines)
    if cpu.count("\n") > 1:
        text += "\nCPU a message, µs (the best run of each side):\n\n" + _section("cpu", cpu)
    floors = floor_table(lines)
    if floors.count("\n") > 1:
        text += (
            "\nAgainst the floors, same server and run (socket floor: the same calls on bare"
            " blocking sockets, no client library; client floor: what a client spends on its"
            " own thread whatever the server does, for a request the same request between"
            " two bare protocols on the benchmark's event loop; the fractions are of the"
            " lower floor):\n\n" + _section("floors", floors)
        )
    return text


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
    draw(headline(lines), args.svg, title)
    text = report(lines, title)
    if args.run or args.source.resolve() == data_file.resolve():
        # the text drawn from the chart's own run goes beside it, for the page
        data_file.with_suffix(".txt").write_text(text)
    print(text)
    print(f"wrote {args.svg} ({len(headline(lines))} bars)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
