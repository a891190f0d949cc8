"""bench: core and JetStream throughput, with live rates."""

from __future__ import annotations

import json
import re

from .conftest import Cli

RATE = re.compile(r"^Pub stats: [\d,]+ msgs/sec ~ [\d.]+ \w+/sec \([\d.]+ MB/sec", re.MULTILINE)


def test_bench(cli: Cli) -> None:
    core = cli.spawn("bench", "cli.bench", "--msgs", "20000", "--size", "16", "--sub", "2")
    js = cli.spawn(
        "bench", "cli.bench.js", "--js", "--msgs", "3000", "--size", "1KB", "--sub", "1",
        "--stream", "CLIBENCH", "--json",
    )  # fmt: skip
    js_plain = cli.spawn(
        "bench", "cli.bench.plain", "--js", "--msgs", "2000", "--stream", "CLIBENCH2", "--plain"
    )

    proc = core.wait()
    assert RATE.search(proc.stdout), proc.stdout
    assert "Sub stats:" in proc.stdout and "40,000 msgs" in proc.stdout  # 2 subscribers
    assert "pub" in proc.stderr and "msgs/s" in proc.stderr  # the live bars

    doc = json.loads(js.wait().stdout)
    assert doc["kind"] == "jetstream"
    assert (doc["pub"]["msgs"], doc["pub"]["size"]) == (3000, 1024)
    assert doc["pub"]["msgs_per_sec"] > 0 and doc["pub"]["mb_per_sec"] > 0
    assert doc["sub"]["msgs"] == 3000

    proc = js_plain.wait()
    assert RATE.search(proc.stdout), proc.stdout
    assert "pub (acked): 2,000/2,000 msgs (100%)" in proc.stderr

    # the bench streams are deleted afterwards
    names = json.loads(cli("stream", "ls", "--names", "--json").stdout)
    assert "CLIBENCH" not in names and "CLIBENCH2" not in names
