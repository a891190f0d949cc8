"""The performance page's chart: how many times faster than each peer, one bar per workload.

Reads the JSON lines the benchmarks print with ``--json`` (one measurement per line:
workload, impl, seconds, ops), or makes them first with ``--run``, and draws for each
workload one bar per peer: our throughput divided by that peer's, so 2 means twice as
fast (for a latency, the peer's time divided by ours, the same reading). A line marks
1x. The caption names the machine, Python and nats-server the figures come from.

Regenerate the committed chart (a few minutes; needs the ``dev`` extra for matplotlib)::

    python -m benchmarks.chart --run --svg docs/assets/speedup.svg

``--run`` writes the measurements beside the SVG (``.jsonl``), so the chart can be
drawn again from them without running anything (``--from FILE``).
"""

from __future__ import annotations

import argparse
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

OURS = "jetstream"

#: the benchmarks run by ``--run``, with options that keep the whole run to minutes
RUNS: tuple[tuple[str, ...], ...] = (
    ("benchmarks.bench_core", "--repeat", "3", "--count", "300000", "--requests", "2000"),
    ("benchmarks.bench_js", "--repeat", "3", "--count", "100000"),
    ("benchmarks.bench_kv", "--repeat", "3", "--count", "10000"),
    ("benchmarks.bench_objectstore", "--size", "32"),
)


@dataclass(frozen=True)
class Ratio:
    workload: str
    peer: str
    times: float  # ours vs the peer: above 1, ours is faster


def ratios(lines: Iterable[str]) -> list[Ratio]:
    """Our speed over each peer's, per workload, from benchmark JSON lines (a
    workload measured twice keeps its last run)."""
    seconds: dict[tuple[str, str], tuple[float, int]] = {}
    order: list[str] = []
    for line in lines:
        line = line.strip()
        if not line.startswith("{"):
            continue
        m = json.loads(line)
        w, impl = m["workload"], m["impl"]
        if w not in order:
            order.append(w)
        seconds[(w, impl)] = (float(m["seconds"]), int(m["ops"]))
    out: list[Ratio] = []
    for w in order:
        ours = seconds.get((w, OURS))
        if ours is None or ours[0] <= 0:
            continue
        for (w2, impl), (secs, ops) in seconds.items():
            if w2 != w or impl == OURS or secs <= 0:
                continue
            # ops per second, ours over theirs (equal ops: their seconds over ours)
            out.append(Ratio(w, impl, (ours[1] / ours[0]) / (ops / secs)))
    return out


def caption() -> str:
    """The machine, Python and server versions, and the date, of this run."""
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
    return (
        f"{os.cpu_count()} cores ({cpu}), load {load:.1f}; Python {platform.python_version()}; "
        f"{server}; {time.strftime('%Y-%m-%d')}"
    )


def run_benchmarks(out: Path) -> list[str]:
    """Run every benchmark of ``RUNS`` with ``--json``; keep the lines in ``out``."""
    lines: list[str] = []
    for args in RUNS:
        print(f"running {args[0]} ...", file=sys.stderr, flush=True)
        proc = subprocess.run(
            [sys.executable, "-m", *args, "--json"], capture_output=True, text=True, check=True
        )
        lines += [line for line in proc.stdout.splitlines() if line.startswith("{")]
    out.write_text("\n".join(lines) + "\n")
    return lines


def draw(data: Sequence[Ratio], svg: Path, title: str) -> None:
    """Horizontal bars, a group per workload and a bar per peer, to ``svg``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    workloads = list(dict.fromkeys(r.workload for r in data))
    peers = list(dict.fromkeys(r.peer for r in data))
    value = {(r.workload, r.peer): r.times for r in data}
    height = 0.8 / max(len(peers), 1)
    fig, ax = plt.subplots(figsize=(9, 0.42 * len(workloads) * max(len(peers), 1) + 1.6))
    for k, peer in enumerate(peers):
        ys = [i + k * height for i, w in enumerate(workloads) if (w, peer) in value]
        xs = [value[(w, peer)] for w in workloads if (w, peer) in value]
        bars = ax.barh(ys, xs, height=height, label=f"vs {peer}")
        for bar, x in zip(bars, xs, strict=True):
            ax.text(
                bar.get_width(),
                bar.get_y() + bar.get_height() / 2,
                f" {x:.1f}x",
                va="center",
                fontsize=8,
            )
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_yticks([i + height * (len(peers) - 1) / 2 for i in range(len(workloads))])
    ax.set_yticklabels(workloads, fontsize=9)
    ax.invert_yaxis()
    ax.set_xlabel("times as fast as the peer (our throughput / theirs; 1 = the same)")
    ax.set_title(title, fontsize=10)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=4, fontsize=8)
    ax.margins(x=0.12)
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
    args = ap.parse_args(argv)
    data_file = args.svg.with_suffix(".jsonl")
    if args.run:
        lines = run_benchmarks(data_file)
        title = caption()
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
    print(f"wrote {args.svg} ({len(data)} bars)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
