"""The performance page's chart: ratios from benchmark JSON lines, drawn as an SVG."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.chart import bound, bounds_table, floor_table, main, ratios, table


def _line(
    workload: str,
    impl: str,
    seconds: float,
    ops: int = 1000,
    cpu: tuple[float, float] | None = None,
) -> str:
    m = {"workload": workload, "impl": impl, "seconds": seconds, "ops": ops}
    if cpu is not None:
        m["client_cpu"], m["server_cpu"] = cpu
    return json.dumps(m)


def test_ratios_are_our_throughput_over_each_peers() -> None:
    lines = [
        "a table line that is not JSON",
        _line("pub", "jetstream", 0.5),
        _line("pub", "nats-py", 1.5),
        _line("pub", "natsio", 1.0),
        _line("fetch", "jetstream", 1.0, ops=2000),
        _line("fetch", "nats-py", 1.0, ops=500),
        _line("only peers", "nats-py", 1.0),
        _line("pub", "socket floor", 0.25),  # a floor is not a peer: no bar
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


def test_a_bound_is_the_busy_process_both_cores_or_neither() -> None:
    assert bound(0.98, 0.40, cores=2) == "the client"
    assert bound(0.60, 0.95, cores=2) == "the server"
    assert bound(0.95, 0.90, cores=2) == "both cores"
    assert bound(0.40, 0.70, cores=2) == "neither (turns)"
    assert bound(0.95, 0.90, cores=4) == "the client"


def test_the_bounds_table_reads_the_cpu_of_each_sides_best_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [
        _line("pub->sub", "jetstream", 2.0, cpu=(1.9, 0.6)),  # slower: not the one kept
        _line("pub->sub", "jetstream", 1.0, cpu=(0.98, 0.3)),
        _line("pub->sub", "nats.go", 0.5, cpu=(0.4, 0.25)),
        _line("fetch", "jetstream", 1.0, cpu=(0.4, 0.7)),
        _line("fetch", "nats-py", 3.0, cpu=(0.9, 0.2)),  # only ours and Go's are shown
        _line("latency", "jetstream", 1.0),  # no CPU measured: no row
    ]
    rows = bounds_table(lines, cores=2).splitlines()
    assert rows[0].startswith("| workload | jetstream: client, server busy | jetstream: bound")
    assert rows[2] == "| pub->sub | 0.98, 0.30 | the client | 0.80, 0.50 | neither (turns) |"
    assert rows[3] == "| fetch | 0.40, 0.70 | neither (turns) | n/a | n/a |"
    assert len(rows) == 4
    # and the chart's text has it under the rates, read from the caption's core count
    data = tmp_path / "run.jsonl"
    data.write_text("\n".join([*lines, _line("pub->sub", "nats-py", 4.0)]))
    (tmp_path / "run.caption").write_text("4 cores (x); Python 3\n")
    out = tmp_path / "c.svg"
    assert main(["--from", str(data), "--svg", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "What bounds each rate" in printed
    assert "| fetch | 0.40, 0.70 | neither (turns) | n/a | n/a |" in printed


def test_the_floor_table_sets_twice_the_best_peer_against_bare_sockets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [
        # 1000 puts: ours 8k/s, natsio 5k/s, nats-py 4k/s, bare sockets 8k/s, Go 10k/s
        _line("put", "jetstream", 0.125),
        _line("put", "natsio", 0.2),
        _line("put", "nats-py", 0.25),
        _line("put", "nats.go", 0.1),
        _line("put", "socket floor", 0.125),
        # a latency row: the floor's p50 against ours and the peers'
        _line("request p50 (1/latency)", "jetstream", 200e-6, ops=1),
        _line("request p50 (1/latency)", "nats-py", 300e-6, ops=1),
        _line("request p50 (1/latency)", "socket floor", 100e-6, ops=1),
        _line("publish", "jetstream", 1.0),  # no floor: no row
        _line("publish", "nats-py", 2.0),
        # a get with the client's own share measured too: the lower floor counts
        _line("get", "jetstream", 0.5, ops=10),
        _line("get", "natsio", 1.0, ops=10),
        _line("get", "socket floor", 0.25, ops=10),
        _line("get", "client floor", 0.4, ops=10),
    ]
    rows = [r.split(" | ") for r in floor_table(lines).splitlines()[2:]]
    assert [r[0] for r in rows] == ["| put", "| request p50 (1/latency)", "| get"]
    # socket floor, client floor, ours, best peer, Go, ours / floor, 2x best peer / floor
    assert rows[0][1:] == ["8.0k", "n/a", "8.0k", "5.0k (natsio)", "10.0k", "1.00", "1.25 |"]
    assert rows[1][1:] == ["100 µs", "n/a", "200 µs", "300 µs (nats-py)", "n/a", "0.50", "0.67 |"]
    assert rows[2][1:] == ["40.0", "25.0", "20.0", "10.0 (natsio)", "n/a", "0.80", "0.80 |"]
    # and the chart's text carries it under the rates
    data = tmp_path / "run.jsonl"
    data.write_text("\n".join(lines))
    assert main(["--from", str(data), "--svg", str(tmp_path / "c.svg")]) == 0
    out = capsys.readouterr().out
    assert "Against the floors" in out and "5.0k (natsio)" in out
