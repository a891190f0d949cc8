"""The benchmarks still run: each one, shrunk, prints a figure for ours and nats-py.

Nothing here looks at a speed (timings are never asserted): a benchmark that breaks
after a change to the client or to nats-py fails here instead of on the next
measuring day. The optional peers (natsio, nats-core: Python 3.13, ``make bench``) are
in a row when they are installed and simply absent otherwise. The tests that need Go and
Debian's nats.go sources (the native anchor, reading or making a Go profile) are marked
``native``: ``make test`` leaves them out, ``make test-native`` installs Go and runs them,
and without Go they fail (the native anchor's own "skipped" is no pass here).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import jetstream
from benchmarks._floor import deliver_all, fetch_ack, loop_floor, publish_all, round_trips
from jetstream.embedded import NatsServer

ROOT = Path(__file__).resolve().parents[2]

ALL_IMPLS = {"jetstream", "nats-py", "natsio", "nats-core"}

RUNS = {
    "bench_core": ["--count", "2000", "--requests", "20"],
    "bench_js": ["--count", "400"],
    "bench_kv": ["--count", "100"],
    "bench_objectstore": ["--size", "1"],
}

FLOORS = {
    "bench_core": {"request p50 (1/latency)"},
    "bench_js": {"sync publish", "ack_sync", "fetch+ack batch 100", "fetch+ack batch 500"},
    "bench_kv": {"put", "get"},
    "bench_objectstore": {"put 1 MiB", "get 1 MiB (bytes)", "get 1 MiB (stream)"},
}

CLIENT_FLOORS = {
    "bench_core": {"request p50 (1/latency)"},
    "bench_objectstore": {"get 1 MiB (bytes)", "get 1 MiB (stream)"},
}

#: rows that must be there: the headline rows (the code users write, every client) and
#: the rows beside them
ROWS = {
    "bench_core": {
        "request p50 (1/latency)",
        "request p99 (1/latency)",
        "request p50, responder in another process (1/latency)",
        "request p99, responder in another process (1/latency)",
    },
    "bench_js": {
        "fetch+ack batch 100",
        "fetch+ack batch 500",
        "fetch+ack_all batch 100",
        "fetch+ack_all batch 500",
    },
}

#: rows of ours alone (a call the other clients do not have)
OURS_ONLY = {
    "bench_js": {
        "fetch+ack_all batch 100",
        "fetch+ack_all batch 500",
        "fetch+ack_sync_all batch 500",
    },
    # the ordered replay by push beside the watch, through the watch's own consumer
    "bench_kv": {"the bucket's stream, ordered push"},
}


@pytest.mark.parametrize("module", sorted(RUNS))
def test_benchmark_reports_both_clients(module: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{module}", "--repeat", "1", "--json", "--cpu"]
        + RUNS[module],
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
    # the round trips also timed on bare sockets, for the chart's table of floors
    floors = {w for w, impls in by_workload.items() if "socket floor" in impls}
    assert floors == FLOORS[module], floors
    # and a reader's own share of an ObjectStore get (its digest, one bytes of it)
    client_floors = {w for w, impls in by_workload.items() if "client floor" in impls}
    assert client_floors == CLIENT_FLOORS.get(module, set()), client_floors
    # what the benchmark said of a run it did not count
    notes = [line for line in proc.stdout.splitlines() if "not counted" in line]
    assert ROWS.get(module, set()) <= set(by_workload), sorted(by_workload)
    ours_only = OURS_ONLY.get(module, set())
    for workload, impls in by_workload.items():
        measured = impls - {"socket floor", "client floor"}
        if workload in ours_only:
            assert measured == {"jetstream"}, (workload, impls)
            continue
        assert {"jetstream", "nats-py"} <= measured <= ALL_IMPLS, (workload, impls, notes)
    # --cpu: the CPU of our best run, the client's and the server's, for the chart's table
    # of what bounds each rate (a latency has none); the server's is read from its /proc
    # stat, a whole number of clock ticks (none, often, in a run this short: that it is the
    # server's CPU over the run is the test of with_cpu below)
    for r in rows:
        if r["impl"] == "jetstream" and "latency" not in r["workload"]:
            assert r["client_cpu"] > 0 and _clock_ticks(r["server_cpu"]), r


def _clock_ticks(seconds: float) -> bool:
    """CPU seconds read from /proc: a whole number (0 or more) of the kernel's clock ticks."""
    ticks = seconds * os.sysconf("SC_CLK_TCK")
    return ticks > -1e-6 and abs(ticks - round(ticks)) < 1e-6


# A stand-in for a server: it spins for 0.3 s of its own CPU once told to go, then waits.
_BUSY = """
import sys, time
print("ready", flush=True)
sys.stdin.readline()
t0 = time.process_time()
while time.process_time() - t0 < 0.3:
    pass
print("done", flush=True)
sys.stdin.readline()
"""


def test_every_implementation_of_a_benchmark_lists_the_same_workloads() -> None:
    """A peer that lacks a row of ours lists it with None: a shorter list is refused before
    anything runs (it failed a chart run half-way with an IndexError)."""
    from benchmarks._report import race_workloads

    async def run() -> float:
        return 0.01

    ours = [("a", 1, run), ("b", 1, run)]
    with pytest.raises(ValueError, match=r"peer lists the workloads \['a'\], not \['a', 'b'\]"):
        asyncio.run(race_workloads({"ours": ours, "peer": [("a", 1, run)]}, repeat=1))
    got = asyncio.run(
        race_workloads({"ours": ours, "peer": [("a", 1, run), ("b", 1, None)]}, repeat=1)
    )
    assert sorted((m.workload, m.impl) for m in got) == [
        ("a", "ours"),
        ("a", "peer"),
        ("b", "ours"),
    ]


def test_the_server_cpu_of_a_run_is_what_the_server_spent_in_it() -> None:
    """What a benchmark's ``--cpu`` reports of the server: the CPU its process spent during
    the timed run (not before it, not the benchmark's own)."""
    from benchmarks._report import race_async, with_cpu

    async def measure() -> dict[str, tuple[float, float]]:
        pipe = asyncio.subprocess.PIPE
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _BUSY, stdin=pipe, stdout=pipe
        )
        assert proc.stdin is not None and proc.stdout is not None
        stdin, stdout = proc.stdin, proc.stdout
        try:
            async with asyncio.timeout(60):
                assert await stdout.readline() == b"ready\n"  # its start is not counted

                async def run() -> float:
                    t0 = time.perf_counter()
                    stdin.write(b"go\n")
                    assert await stdout.readline() == b"done\n"
                    return time.perf_counter() - t0

                cpu: dict[str, tuple[float, float]] = {}
                await race_async({"ours": with_cpu(run, "busy", "ours", 1, proc.pid, True)}, 1, cpu)
                return cpu
        finally:
            stdin.close()
            await proc.wait()

    client, server = asyncio.run(measure())["ours"]
    # the stand-in's 0.3 s (a tick or two of rounding), and this process all but idle
    assert 0.25 <= server < 1.0 and _clock_ticks(server), server
    assert client < server / 2, (client, server)


@pytest.mark.native
def test_the_native_anchor_runs() -> None:
    """The Go program of the benchmarks builds and runs (``make test-native`` installs Go
    and Debian's nats.go sources first)."""
    sizes = ["--count", "2000", "--js-count", "400", "--kv-count", "50", "--requests", "20"]
    only = ["--size", "1", "--only", "core,kv", "--cpu"]
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_native", "--repeat", "1", "--json", *sizes, *only],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert rows, (
        f"the native anchor did not run (make test-native installs Go): {proc.stderr[-3000:]}"
    )
    assert {r["impl"] for r in rows} == {"nats.go"}
    assert {r["workload"] for r in rows} >= {"publish 16 B", "pub->sub 1 KiB", "put", "get"}
    # the request rows as bench_core's (the same names, so that the ratios line up): an
    # echo callback in this process, then in a second one
    assert {r["workload"] for r in rows} >= ROWS["bench_core"]
    assert all(r["seconds"] > 0 and r["ops"] > 0 for r in rows), rows
    timed = [r for r in rows if "latency" not in r["workload"]]
    assert all(r["client_cpu"] > 0 and _clock_ticks(r["server_cpu"]) for r in timed), timed


@pytest.mark.asyncio
async def test_a_socket_floor_times_only_answered_round_trips(
    nats_url: str, js: jetstream.JetStream
) -> None:
    await js.create_key_value(bucket="F")
    keys = [f"$KV.F.k{i}" for i in range(20)]
    assert round_trips(nats_url, keys, b"v") > 0
    assert [(await (await js.key_value("F")).get(f"k{i}")).value for i in (0, 19)] == [b"v"] * 2
    assert round_trips(nats_url, [f"$JS.API.DIRECT.GET.KV_F.{k}" for k in keys], b"") > 0
    # an error answer (here: no such key, 404) would time other work than the workload's
    with pytest.raises(ValueError, match="404"):
        round_trips(nats_url, ["$JS.API.DIRECT.GET.KV_F.$KV.F.missing"], b"")
    # a publish the stream refuses (too big for it): a JetStream API error as the PubAck
    await js.create_stream(jetstream.StreamConfig(name="SMALL", subjects=["small"], max_msg_size=8))
    assert round_trips(nats_url, ["small"], b"x" * 8) > 0
    with pytest.raises(ValueError, match="error"):
        round_trips(nats_url, ["small"], b"x" * 9)


@pytest.mark.asyncio
async def test_the_fetch_ack_floor_acks_every_message_it_pulls(
    nats_url: str, js: jetstream.JetStream
) -> None:
    stream = await js.create_stream(jetstream.StreamConfig(name="FA", subjects=["fa"]))
    for i in range(250):
        await js.publish("fa", b"m%d" % i)
    await stream.create_consumer(jetstream.ConsumerConfig(durable_name="d"))
    # 250 messages in pulls of 100: the last pull asks for 50
    assert fetch_ack(nats_url, "FA", "d", 250, 100) > 0
    info = await (await stream.consumer("d")).info()
    assert (info.num_pending, info.num_ack_pending, info.delivered.stream_seq) == (0, 0, 250)
    assert info.ack_floor.stream_seq == 250
    # a pull with nothing left to give is a status, not a hang nor a rate
    with pytest.raises(ValueError, match="status answered a pull"):
        fetch_ack(nats_url, "FA", "d", 1, 1, expires=0.3)


@pytest.mark.asyncio
async def test_the_event_loop_floor_times_answered_requests_and_closes_its_connections(
    nats_server: NatsServer, nc: jetstream.Client
) -> None:
    requests = await nc.subscribe("floor.request")
    replies = await nc.subscribe("floor.reply")
    await nc.flush()
    before = nats_server.monitor("connz")["num_connections"]
    assert await loop_floor(nats_server.url, rounds=30) > 0
    # each round a request, answered by the floor's responder with its payload
    got = [await requests.next_msg(timeout=5) for _ in range(30)]
    assert {(m.reply, m.data) for m in got} == {("floor.reply", b"x")}
    assert [(await replies.next_msg(timeout=5)).data for _ in range(30)] == [b"x"] * 30
    with pytest.raises(TimeoutError):
        await requests.next_msg(timeout=0.2)
    # both of its connections are closed once it returned (the server notices soon after)
    for _ in range(100):
        if nats_server.monitor("connz")["num_connections"] == before:
            break
        await asyncio.sleep(0.05)
    assert nats_server.monitor("connz")["num_connections"] == before


@pytest.mark.asyncio
async def test_the_object_floors_store_and_read_every_chunk(
    nats_url: str, js: jetstream.JetStream
) -> None:
    obs = await js.create_object_store(bucket="F")
    info = await obs.put("o", b"x" * 300_000, chunk_size=100_000)
    stream = await js.stream("OBJ_F")
    # every chunk of the object is delivered, and nothing else is waited for
    assert deliver_all(nats_url, "OBJ_F", f"$O.F.C.{info.nuid}", 3) > 0
    # chunks stored under a subject of their own, then that of the object purged
    purge = ("$JS.API.STREAM.PURGE.OBJ_F", b'{"filter":"$O.F.C.%b"}' % info.nuid.encode())
    assert publish_all(nats_url, "$O.F.C.floor", [b"y" * 100_000] * 4, purge) > 0
    state = (await stream.info()).state
    assert state.messages == 4 + 1  # the floor's chunks and the object's info
    # a consumer the server refuses (no such stream) is an error, not a hang
    with pytest.raises(ValueError, match="error"):
        deliver_all(nats_url, "OBJ_NONE", "$O.NONE.C.x", 1)


def test_ab_compares_our_client_with_another_version_of_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from benchmarks import ab

    # another checkout (here a copy of this one's package) against this checkout: every
    # workload of ours on both sides, with its ratio
    (tmp_path / "other").mkdir()
    shutil.copytree(ROOT / "jetstream", tmp_path / "other" / "jetstream")
    base = str(tmp_path / "other")
    argv = ["--base", base, "--rounds", "1", "--", "benchmarks.bench_parser", "--ops", "500"]
    assert ab.main(argv) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[2:]]
    assert len(rows) >= 5
    for row in rows:
        numbers = [c for c in row if c[0].isdigit()][-3:]
        now, base, ratio = (float(c.replace(",", "")) for c in numbers)
        assert now > 0 and base > 0 and ratio == pytest.approx(now / base, abs=0.01)
    # a ratio under the mark is called out, one above it is not
    lines = ab.report({"slow": (90.0, 100.0), "same": (100.0, 100.0)}, 0.95)
    assert lines[1].endswith("<- slower") and not lines[2].endswith("<- slower")
    # no separator: the usage, not a run
    assert ab.main(["--base", "HEAD"]) == 2


# A benchmark that only the base has: one op a second when it runs against this
# checkout's package, two against the base's own.
_PROBE = """
import json
from pathlib import Path

import jetstream

here = Path(__file__).resolve().parents[1]
ops = 2 if Path(jetstream.__file__).resolve().is_relative_to(here) else 1
print(json.dumps({"workload": "probe", "impl": "jetstream", "seconds": 1.0, "ops": ops}))
"""


def test_ab_can_run_the_base_benchmarks_against_both_packages(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from benchmarks import ab

    other = tmp_path / "other"
    shutil.copytree(ROOT / "jetstream", other / "jetstream")
    (other / "benchmarks").mkdir()
    (other / "benchmarks" / "__init__.py").write_text("")
    (other / "benchmarks" / "bench_probe.py").write_text(_PROBE)
    argv = ["--base", str(other), "--rounds", "2", "--", "benchmarks.bench_probe"]
    # this checkout's benchmarks have no such module: the run fails
    with pytest.raises(RuntimeError, match="bench_probe"):
        ab.main(argv)
    capsys.readouterr()
    # the base's own benchmarks: the same code on this checkout's package and the base's
    assert ab.main(["--base-benchmarks", *argv]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "the base's benchmarks" in out[0]
    assert out[2].split() == ["probe", "1.0", "2.0", "0.50", "<-", "slower"]


@pytest.mark.asyncio
async def test_fetch_rounds_times_each_part_of_a_round(nats_url: str) -> None:
    from benchmarks import fetch_rounds
    from jetstream import _fetch

    send_pull, end = _fetch._Fetch._send_pull, _fetch._Fetch._end
    # every part was seen in every round, and together they make up the round: most of
    # it, unless the loaded machine held the process up between parts, so measured
    # again a few times at most until they do
    for _ in range(5):
        parts = await fetch_rounds.rounds(nats_url, 1000, 100)
        whole = parts.pop("round")
        assert list(parts) == list(fetch_rounds.PARTS)
        assert all(t > 0 for t in parts.values())
        assert sum(parts.values()) <= whole
        if sum(parts.values()) > 0.5 * whole:
            break
    assert 0.5 * whole < sum(parts.values()), (parts, whole)
    # acking each batch with ack_all instead: the same parts
    assert all(t > 0 for t in (await fetch_rounds.rounds(nats_url, 500, 100, True)).values())
    # the fetch is as it was before
    assert (_fetch._Fetch._send_pull, _fetch._Fetch._end) == (send_pull, end)


def test_server_profile_reads_the_top_of_pprof() -> None:
    from benchmarks.server_profile import parse_top

    text = (
        "Showing nodes accounting for 4.66s, 72.36% of 6.44s total\n"
        "      flat  flat%   sum%        cum   cum%\n"
        "     0.05s  0.78% 66.15%      3.40s 52.80%  "
        "github.com/nats-io/nats-server/v2/server.(*consumer).loopAndGatherMsgs\n"
        "     0.02s  0.31%  0.31%      580ms  9.01%  time.Now\n"
        "         0     0%  0.31%     1.5ms  0.02%  runtime.futex\n"
    )
    assert parse_top(text) == {
        "(*consumer).loopAndGatherMsgs": 3.40,
        "time.Now": 0.58,
        "runtime.futex": 0.0015,
    }


@pytest.fixture(scope="module")
def ordered_profiles(tmp_path_factory: pytest.TempPathFactory) -> list[Any]:
    """The server profiled during the ordered replay, pull then push: once for the module
    (the test that reads the profiles with Go takes them from here too)."""
    from benchmarks import server_profile

    out = tmp_path_factory.mktemp("profiles")
    args = argparse.Namespace(workload="ordered", count=2000, seconds=1, out=str(out), top=5)
    return server_profile.run_on_loop(server_profile.main_async(args), "asyncio")


def test_server_profile_profiles_the_server_in_both_modes(ordered_profiles: list[Any]) -> None:
    from benchmarks import server_profile

    windows = ordered_profiles
    assert [w.mode for w in windows] == ["pull", "push"]
    for w in windows:
        # replayed over the profile's whole second, and the profile (gzipped) written
        assert w.messages >= 2000 and w.seconds >= 1.0
        assert Path(w.profile).read_bytes()[:2] == b"\x1f\x8b"
    text = server_profile.report(windows, 5)
    assert text.startswith("pull: ") and "\npush: " in text


@pytest.mark.native
def test_go_reads_the_servers_profile(ordered_profiles: list[Any]) -> None:
    from benchmarks import server_profile

    go = shutil.which("go")
    assert go, "no Go on PATH to read the profiles with (make test-native installs it)"
    # Go reads them: the consumer's delivery loop is in the server's time
    cum = server_profile.read_profile(go, ordered_profiles[0].profile, 200)
    assert any("loopAndGatherMsgs" in name for name in cum)


@pytest.mark.native
def test_server_profile_sets_our_fetches_against_the_go_programs(tmp_path: Path) -> None:
    from benchmarks import server_profile

    go = shutil.which("go")
    assert go, "no Go on PATH to build the Go program with (make test-native installs it)"
    args = argparse.Namespace(workload="fetch", count=2000, seconds=1, out=str(tmp_path), top=5)
    windows = server_profile.run_on_loop(server_profile.main_async(args), "asyncio")
    assert [w.mode for w in windows] == ["ours", "nats.go"]
    for w in windows:
        # fetched and acked over the profile's whole second, and the profile written
        assert w.messages >= 2000 and w.seconds >= 1.0
        assert Path(w.profile).read_bytes()[:2] == b"\x1f\x8b"
    assert server_profile.report(windows, 5).startswith("ours: ")
    # the Go program's pulls and acks are in the server's time: its deliveries
    cum = server_profile.read_profile(go, windows[1].profile, 200)
    assert any("loopAndGatherMsgs" in name for name in cum)


@pytest.mark.asyncio
async def test_request_hops_times_the_parts_of_ours_and_of_the_bare_protocols(
    nats_url: str,
) -> None:
    from benchmarks import request_hops
    from jetstream.core import _connection

    conn_class = _connection._Connection
    methods = (conn_class.write, conn_class.data_received)
    times, log = await request_hops.rounds_ours(nats_url, 100)
    # ours: every round marked (a PING of the server's may leave one out), each part
    # taking some time and the parts adding up to the round
    parts = request_hops.split(times, log)
    assert len(parts) >= 90
    assert all(p >= 0 for row in parts for p in row)
    durations = sorted(end - start for start, end in times)
    assert all(
        any(abs(sum(row) - d) < 1e-9 for d in durations) and row[1] > 0 and row[4] > 0
        for row in parts
    )
    # the client's connection class is as it was
    assert (conn_class.write, conn_class.data_received) == methods
    # both sides measured, every part and sum for each
    result = await request_hops.hops(nats_url, 100)
    assert list(result) == list(request_hops.IMPLS)
    for medians in result.values():
        assert list(medians) == [*request_hops.PARTS, *request_hops.SUMS]
        assert all(t >= 0 for t in medians.values())
        assert medians["the round trip"] > medians["the writes (2 + 5)"] > 0
