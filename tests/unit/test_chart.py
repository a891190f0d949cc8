"""The performance page's chart: ratios from benchmark JSON lines, drawn as an SVG."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.chart import (
    BESIDE,
    FAMILIES,
    bound,
    bounds_table,
    cpu_table,
    floor_table,
    headline,
    main,
    native_runs_table,
    ratios,
    report,
    summary,
    table,
)


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
    rates, ratios_ = table(lines).split("\n\n")[1::2]
    # ours, nats-py, natsio, nats-core, nats.go: each client's rate a second
    assert rates.splitlines()[2] == "| pub | 1.0k | 333.3 | 500.0 | 250.0 | 2.0k |"
    rows = [r.split(" | ") for r in ratios_.splitlines() if r.startswith("| pub")]
    # /nats-py, /natsio, /nats-core, best, native
    assert rows[0][1:] == ["3.00x", "2.00x", "4.00x", "2.00x", "0.50 |"]
    assert rows[1][1:] == ["4.00x", "n/a", "n/a", "4.00x", "n/a |"]


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
    assert rows[0].startswith(
        "| workload | jetstream: client busy | jetstream: server busy | jetstream: bound"
    )
    assert rows[2] == "| pub->sub | 0.98 | 0.30 | the client | 0.80 | 0.50 | neither (turns) |"
    assert rows[3] == "| fetch | 0.40 | 0.70 | neither (turns) | n/a | n/a | n/a |"
    assert len(rows) == 4
    # and the chart's text has it under the rates, read from the caption's core count
    data = tmp_path / "run.jsonl"
    data.write_text("\n".join([*lines, _line("pub->sub", "nats-py", 4.0)]))
    (tmp_path / "run.caption").write_text("4 cores (x); Python 3\n")
    out = tmp_path / "c.svg"
    assert main(["--from", str(data), "--svg", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "What bounds each rate" in printed
    assert "| fetch | 0.40 | 0.70 | neither (turns) | n/a | n/a | n/a |" in printed


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
    rows = [r.split(" | ") for r in floor_table(lines).splitlines() if r.startswith("| ")]
    # rates a second, then the latencies in a table of their own
    heads = ["| workload", "| put", "| get", "| workload", "| request p50 (1/latency)"]
    assert [r[0] for r in rows] == heads
    # socket floor, client floor, ours, best peer, which, Go, ours / floor, 2x best / floor
    assert rows[1][1:] == ["8.0k", "n/a", "8.0k", "5.0k", "natsio", "10.0k", "1.00", "1.25 |"]
    assert rows[2][1:] == ["40.0", "25.0", "20.0", "10.0", "natsio", "n/a", "0.80", "0.80 |"]
    assert rows[4][1:] == ["100 µs", "n/a", "200 µs", "300 µs", "nats-py", "n/a", "0.50", "0.67 |"]
    # and the chart's text carries it under the rates
    data = tmp_path / "run.jsonl"
    data.write_text("\n".join(lines))
    assert main(["--from", str(data), "--svg", str(tmp_path / "c.svg")]) == 0
    out = capsys.readouterr().out
    assert "Against the floors" in out and "| 5.0k | natsio |" in out


def test_a_column_holds_one_kind_of_figure() -> None:
    """Latencies (µs) get a table of their own, apart from the rates a second."""
    lines = [
        _line("pub", "jetstream", 1.0),
        _line("pub", "nats-py", 2.0),
        _line("request p50 (1/latency)", "jetstream", 200e-6, ops=1),
        _line("request p50 (1/latency)", "nats-py", 300e-6, ops=1),
    ]
    rates, latencies, ratios_ = table(lines).split("\n\n")[1::2]
    assert "| pub | 1.0k | 500.0 |" in rates and "µs" not in rates
    assert "| request p50 (1/latency) | 200 µs | 300 µs |" in latencies
    assert "| request p50 (1/latency) | 1.50x | 1.50x |" in ratios_ and "µs" not in ratios_


def test_the_summary_gives_each_family_from_its_lowest_to_its_highest_ratio() -> None:
    lines = [
        # publish: ours 1M/s and 0.5M/s; the best peer 250k/s (nats-core) and 250k/s (nats-py)
        _line("publish 16 B", "jetstream", 1.0, ops=1_000_000),
        _line("publish 16 B", "nats-py", 1.0, ops=200_000),
        _line("publish 16 B", "nats-core", 1.0, ops=250_000),
        _line("publish 16 B", "nats.go", 1.0, ops=4_000_000),
        _line("publish 1 KiB", "jetstream", 1.0, ops=500_000),
        _line("publish 1 KiB", "nats-py", 1.0, ops=250_000),
        _line("publish 1 KiB", "nats.go", 1.0, ops=1_000_000),
        # a family with one workload measured, and no Go run of it
        _line("put", "jetstream", 1.0, ops=3000),
        _line("put", "natsio", 1.0, ops=2000),
    ]
    assert summary(lines).splitlines() == [
        "- **Publishing**: 2.00x to 4.00x the best other Python client, 0.25 to 0.50 of nats.go.",
        "- **KeyValue**: 1.50x the best other Python client.",
    ]
    # the chart's bars: per workload the best peer (named) and Go, in the families' order
    bars = [(r.workload, r.peer, round(r.times, 2)) for r in headline(lines)]
    assert bars == [
        ("publish 16 B", "nats-core", 4.0),
        ("publish 16 B", "nats.go", 0.25),
        ("publish 1 KiB", "nats-py", 2.0),
        ("publish 1 KiB", "nats.go", 0.5),
        ("put", "natsio", 1.5),
    ]


def test_the_rows_beside_the_headline_are_in_the_tables_not_in_the_bars() -> None:
    apart = "request p50, responder in another process (1/latency)"
    lines = [
        # the headline: one ack a message, every client
        _line("fetch+ack batch 100", "jetstream", 1.0, ops=2000),
        _line("fetch+ack batch 100", "nats-py", 1.0, ops=1000),
        _line("fetch+ack batch 100", "nats.go", 1.0, ops=4000),
        # beside it: ours alone with ack_all, and the responder in a second process
        _line("fetch+ack_all batch 100", "jetstream", 1.0, ops=3000),
        _line(apart, "jetstream", 200e-6, ops=1),
        _line(apart, "nats-py", 400e-6, ops=1),
        _line(apart, "nats.go", 100e-6, ops=1),
    ]
    assert {"fetch+ack_all batch 100", apart} <= set(BESIDE)
    assert [(r.workload, r.peer) for r in headline(lines)] == [
        ("fetch+ack batch 100", "nats-py"),
        ("fetch+ack batch 100", "nats.go"),
    ]
    assert summary(lines) == (
        "- **Consuming with acks**: 2.00x the best other Python client, 0.50 of nats.go."
    )
    text = table(lines)
    assert "| fetch+ack_all batch 100 | 3.0k | n/a | n/a |" in text
    assert f"| {apart} | 2.00x | 2.00x | 0.50 |" in text
    # each right after its headline row, though Go's run (first) made the order
    go_first = [_line("fetch+ack batch 500", "nats.go", 1.0), *lines]
    go_first.append(_line("fetch+ack batch 500", "jetstream", 1.0))
    go_first.append(_line("fetch+ack_all batch 500", "jetstream", 1.0))
    rates = table(go_first).split("Latencies")[0]
    rows = [r.split(" | ")[0] for r in rates.splitlines() if r.startswith("| fetch")]
    assert rows == [
        "| fetch+ack batch 500",
        "| fetch+ack_all batch 500",
        "| fetch+ack batch 100",
        "| fetch+ack_all batch 100",
    ]


def test_the_cpu_table_gives_each_sides_cpu_a_message_of_its_best_run() -> None:
    lines = [
        _line("pub", "jetstream", 2.0, ops=1000, cpu=(1.9, 0.6)),  # slower: not kept
        _line("pub", "jetstream", 1.0, ops=1000, cpu=(0.5, 0.25)),
        _line("pub", "nats.go", 0.5, ops=1000, cpu=(0.05, 0.2)),
        _line("obj", "jetstream", 1.0, ops=2, cpu=(0.5, 0.3)),  # 250 ms of client an object
        _line("latency", "jetstream", 1.0),  # no CPU measured: no row
    ]
    rows = cpu_table(lines).splitlines()
    assert rows[0] == (
        "| workload | jetstream client | server, with jetstream | nats.go client"
        " | server, with nats.go |"
    )
    assert rows[2:] == ["| pub | 500 | 250 | 50.0 | 200 |", "| obj | 250000 | 150000 | n/a | n/a |"]


def test_the_fraction_of_nats_go_against_each_of_its_runs() -> None:
    lines = [
        _line("pub", "nats.go", 0.5),  # before the Python benchmarks
        _line("pub", "jetstream", 1.0),
        _line("pub", "nats-py", 2.0),
        _line("only go once", "nats.go", 1.0),
        _line("only go once", "jetstream", 1.0),
        _line("pub", "nats.go", 0.25),  # and after
    ]
    rows = native_runs_table(lines).splitlines()
    assert (
        rows[0] == "| workload | fraction of nats.go, its run 1 | fraction of nats.go, its run 2 |"
    )
    assert rows[2:] == ["| pub | 0.50 | 0.25 |", "| only go once | 1.00 | n/a |"]
    assert native_runs_table(lines[1:-1]) == ""  # Go ran once: nothing to set apart


ASSETS = Path(__file__).resolve().parents[2] / "docs" / "assets"


def test_the_committed_text_is_the_committed_runs() -> None:
    """docs/assets/speedup.txt, which the performance page includes (its summary, rates,
    bounds and floors), is what the chart's own run gives: every figure of it comes from
    the run the chart was drawn from, and every family of the summary is in that run."""
    lines = (ASSETS / "speedup.jsonl").read_text().splitlines()
    title = (ASSETS / "speedup.caption").read_text().strip()
    assert (ASSETS / "speedup.txt").read_text() == report(lines, title)
    assert len(summary(lines).splitlines()) == len(FAMILIES)
    svg = (ASSETS / "speedup.svg").read_text()
    for r in headline(lines):
        label = f"{r.times:.2f}" if r.peer == "nats.go" else f"{r.times:.1f}x {r.peer}"
        assert label in svg, f"the chart has no bar labelled {label!r}"


def test_the_home_page_gives_the_runs_headline() -> None:
    """docs/index.md sums the run up in one line: its figures are the run's."""
    bars = headline((ASSETS / "speedup.jsonl").read_text().splitlines())
    peer = [r.times for r in bars if r.peer != "nats.go"]
    go = [r.times for r in bars if r.peer == "nats.go"]
    line = (
        f"each of {len(peer)} workloads {min(peer):.2f}x to {max(peer):.2f}x as fast as the"
        f" fastest other Python client at it, and at {min(go):.2f} to {max(go):.2f} of the"
        " speed of the Go client"
    )
    home = " ".join((ASSETS.parent / "index.md").read_text().split())
    assert line in home
