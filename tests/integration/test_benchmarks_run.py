"""The benchmarks still run: each one, shrunk, prints a figure for both clients.

Nothing here looks at a speed (timings are never asserted): a benchmark that breaks
after a change to the client or to nats-py fails here instead of on the next
measuring day.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

RUNS = {
    "bench_core": ["--count", "2000", "--requests", "20"],
    "bench_js": ["--count", "400"],
    "bench_kv": ["--count", "100"],
    "bench_objectstore": ["--size", "1"],
}


@pytest.mark.parametrize("module", sorted(RUNS))
def test_benchmark_reports_both_clients(module: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{module}", "--repeat", "1", "--json", *RUNS[module]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert rows, proc.stdout[-3000:]
    by_workload: dict[str, set[str]] = {}
    for r in rows:
        assert r["seconds"] > 0 and r["ops"] > 0, r
        by_workload.setdefault(r["workload"], set()).add(r["impl"])
    for workload, impls in by_workload.items():
        assert impls == {"jetstream", "nats-py"}, (workload, impls)
