"""The performance page's chart: ratios from benchmark JSON lines, drawn as an SVG."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.chart import main, ratios, table


def _line(workload: str, impl: str, seconds: float, ops: int = 1000) -> str:
    return json.dumps({"workload": workload, "impl": impl, "seconds": seconds, "ops": ops})


def test_ratios_are_our_throughput_over_each_peers() -> None:
    lines = [
        "a table line that is not JSON",
        _line("pub", "jetstream", 0.5),
        _line("pub", "nats-py", 1.5),
        _line("pub", "natsio", 1.0),
        _line("fetch", "jetstream", 1.0, ops=2000),
        _line("fetch", "nats-py", 1.0, ops=500),
        _line("only peers", "nats-py", 1.0),
    ]
    got = {(r.workload, r.peer): round(r.times, 3) for r in ratios(lines)}
    assert got == {("pub", "nats-py"): 3.0, ("pub", "natsio"): 2.0, ("fetch", "nats-py"): 4.0}


def test_the_chart_is_drawn_from_a_file(tmp_path: Path) -> None:
    data = tmp_path / "run.jsonl"
    data.write_text("\n".join([_line("pub", "jetstream", 0.5), _line("pub", "nats-py", 1.0)]))
    (tmp_path / "run.caption").write_text("2 cores; Python 3; nats-server v2\n")
    svg = tmp_path / "chart.svg"
    assert main(["--from", str(data), "--svg", str(svg)]) == 0
    text = svg.read_text()
    assert text.startswith("<?xml") and "<svg" in text
    assert "2.0x" in text  # the bar's label


def test_nothing_to_compare_is_an_error(tmp_path: Path) -> None:
    data = tmp_path / "run.jsonl"
    data.write_text(_line("pub", "jetstream", 0.5))
    assert main(["--from", str(data), "--svg", str(tmp_path / "c.svg")]) == 1


def test_the_table_gives_each_peer_the_best_python_peer_and_the_fraction_of_nats_go() -> None:
    lines = [
        _line("pub", "jetstream", 1.0),
        _line("pub", "nats-py", 3.0),
        _line("pub", "natsio", 2.0),
        _line("pub", "nats-core", 4.0),
        _line("pub", "nats.go", 0.5),
        _line("publish_async", "jetstream", 1.0),
        _line("publish_async", "nats-py", 4.0),
    ]
    rows = [r for r in table(lines).splitlines() if r.startswith("| pub")]
    pub = rows[0].split(" | ")
    # ours, nats-py, natsio, nats-core, nats.go, /nats-py, /natsio, /nats-core, best, native
    assert pub[6:] == ["3.00x", "2.00x", "4.00x", "2.00x", "0.50 |"]
    pa = rows[1].split(" | ")
    assert pa[6:] == ["4.00x", "n/a", "n/a", "4.00x", "n/a |"]


def test_a_workload_measured_twice_keeps_its_faster_run() -> None:
    """The native anchor runs before the Python benchmarks and after them: each of its
    workloads keeps the faster of the two, whichever came first."""
    for first, second in ((2.0, 1.0), (1.0, 2.0)):
        lines = [
            _line("pub", "nats.go", first),
            _line("pub", "jetstream", 1.0),
            _line("pub", "nats.go", second),
        ]
        got = {(r.workload, r.peer): round(r.times, 3) for r in ratios(lines)}
        assert got == {("pub", "nats.go"): 1.0}
