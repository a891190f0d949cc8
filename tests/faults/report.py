"""Fault figures against their bars (``make faults-report``), printed like a benchmark.

The tests in this folder assert the invariants with generous bounds; this script
measures the timing bars of the fault-suite issue on this machine and prints each
figure next to its bar. Nothing here fails a build: it reports.

Scenarios measured:
  1  publishes with msg ids while every connection is cut every ~0.5 s: stored count,
     errors seen by the application, p99 publish-to-ack;
  3  a 3 s blackhole during pull consumption with 0.5 s heartbeats: time to the typed
     missed-heartbeat signal, time to resume after the heal;
  4  a blackhole with 1 s pings: time to find the dead link, time to reconnect after the heal;
  7  ``consume()`` on an R3 consumer of a 3-node cluster while a publisher publishes with msg
     ids, through a rolling restart (SIGTERM, SIGKILL, SIGTERM), a lame-duck consumer leader,
     a 10 s SIGSTOP of the consumer leader and a leader step-down: for each step the time
     until a message published after it is consumed, against 1 s after the later of the
     raft groups having live leaders again and the first such publish being acked (there is
     nothing to consume before both); acked publishes consumed; redeliveries;
  8  publishes with msg ids through the kill -9 of an R3 stream's leader, three rounds with
     8 publishing tasks and two with one: per round how long no publish was acked
     (unavailable) against how long the election took (from the kill to the new leader's
     announcement, as the client heard it), and the pause between that announcement and
     publishing resuming (target 0.3 s; below 0: resumed before the announcement came).

And the bounds the tests assert only generously (10 s), measured here:
  H  a malformed op from a hostile server (every "error" case of test_hostile_server.py):
     from the op to the client connected again, the slowest and the median, against 1 s;
  B  a consumer's backoff schedule [0.5 s, 30 s] (test_consumers.py): the first
     redelivery's step as the client sees it (between the two deliveries), against 0.5 s
     (+ 0.3 s for the way through the client).
The proxy-cut recovery of test_proxy_faults.py (a healed blackhole) is scenario 4.

Then the recovery matrix of issue 19 (``tests/faults/matrix.py``): every consumption mode
against every disruption, each cell's recovery time (seconds from "the server answers
again" to the mode's next message) against the 2 s target, and what failed in a cell.
And the read loops of issue 35 (``tests/faults/loops.py``): ``next()`` and ``fetch(10)``
loops started before the disruption, as it hits or right after the servers answer
again, each one's lag (the slowest message, from the later of its publish and the
servers answering again to its delivery) against the same target, with the messages
the application's connection gave back (``stats.stranded_naks``) in each run.

Run: ``.venv/bin/python -m tests.faults.report [--count N] [--matrix-only | --no-matrix |
--bounds-only]`` (``--bounds-only``: scenarios 4, H and B, a minute or so).
"""

from __future__ import annotations

import argparse
import asyncio
import time

import jetstream
from jetstream import ConsumerConfig, NoHeartbeatError, StreamConfig
from jetstream.embedded import NatsCluster, NatsServer
from tests.faults.loops import CALLS, MOMENTS, loop_mode, loop_modes
from tests.faults.matrix import DISRUPTIONS, MODES, TARGET, Matrix, run_matrix
from tests.faults.proxy import FaultProxy
from tests.faults.test_cluster_consume import (
    Flow,
    Step,
    freeze_and_step_down,
    lame_duck,
    rolling_restart,
)
from tests.faults.test_hostile_server import CASES, FakeServer
from tests.faults.test_publish_election import kill_round

FAST = {"reconnect_time_wait": 0.05, "reconnect_jitter": 0.02, "max_reconnect_attempts": -1}
Row = tuple[str, str, str, bool]


async def scenario_1(server: NatsServer, count: int) -> list[Row]:
    async with FaultProxy(server.port) as proxy, jetstream.connect(proxy.url, **FAST) as nc:
        js = nc.jetstream(timeout=2)
        s = await js.create_stream(StreamConfig(name="S1", subjects=["s1"]))
        stop = asyncio.Event()

        async def cutter() -> None:
            while True:
                await asyncio.sleep(0.5)
                if stop.is_set():
                    return
                proxy.cut()

        task = asyncio.create_task(cutter())
        lat: list[float] = []
        app_errors = 0
        # besides every 0.5 s, a cut every count/50 publishes: a client fast enough to
        # finish in under 25 s still meets 50 cuts
        every = max(1, count // 50)
        for i in range(count):
            if i and i % every == 0:
                proxy.cut()
            t0 = time.perf_counter()
            try:
                await js.publish("s1", b"%d" % i, msg_id=f"m{i}", retry_attempts=20)
            except jetstream.NatsError:
                app_errors += 1
            lat.append(time.perf_counter() - t0)
        stop.set()
        await task
        stored = (await s.info()).state.messages
    lat.sort()
    p99 = lat[int(0.99 * (len(lat) - 1))]
    return [
        ("1 stored with msg ids", f"{stored}", f"== {count}", stored == count),
        ("1 errors reaching the app", f"{app_errors}", "0", app_errors == 0),
        ("1 cuts", f"{proxy.cuts}", ">= 50 at full size", proxy.cuts >= 50),
        ("1 p99 publish-to-ack", f"{p99 * 1000:.0f} ms", "<= 1000 ms", p99 <= 1.0),
    ]


async def scenario_3(server: NatsServer) -> list[Row]:
    async with (
        FaultProxy(server.port) as proxy,
        jetstream.connect(proxy.url, ping_interval=60, **FAST) as nc,
    ):
        js = nc.jetstream()
        s = await js.create_stream(StreamConfig(name="S3", subjects=["s3"]))
        c = await s.create_consumer(ConsumerConfig(durable_name="s3", ack_wait=30))
        errors: list[BaseException] = []
        async with c.messages(
            max_messages=20, expires=5, heartbeat=0.5, error_cb=errors.append
        ) as it:
            await js.publish("s3", b"before")
            await (await it.next(timeout=5)).ack()
            proxy.blackhole = True
            t0 = time.perf_counter()
            while not any(isinstance(e, NoHeartbeatError) for e in errors):
                await asyncio.sleep(0.005)
            detect = time.perf_counter() - t0
            await asyncio.sleep(max(0.0, 3.0 - detect))
            proxy.blackhole = False
            healed = time.perf_counter()
            await js.publish("s3", b"after")
            await (await it.next(timeout=10)).ack()
            resume = time.perf_counter() - healed
    return [
        ("3 missed-heartbeat signal", f"{detect * 1000:.0f} ms", "<= 1200 ms", detect <= 1.2),
        ("3 resume after heal", f"{resume * 1000:.0f} ms", "<= 500 ms", resume <= 0.5),
    ]


async def scenario_4(server: NatsServer) -> list[Row]:
    async with FaultProxy(server.port) as proxy:
        lost = asyncio.Event()
        async with jetstream.connect(
            proxy.url,
            ping_interval=1.0,
            max_outstanding_pings=2,
            connect_timeout=1.0,
            disconnected_cb=lost.set,
            **FAST,
        ) as nc:
            await nc.flush()
            proxy.blackhole = True
            t0 = time.perf_counter()
            await lost.wait()
            found = time.perf_counter() - t0
            await asyncio.sleep(max(0.0, 12.0 - found))
            proxy.blackhole = False
            healed = time.perf_counter()
            while not nc.is_connected:
                await asyncio.sleep(0.005)
            back = time.perf_counter() - healed
    return [
        ("4 dead link found", f"{found * 1000:.0f} ms", "<= 3000 ms", found <= 3.0),
        ("4 reconnect after heal", f"{back * 1000:.0f} ms", "<= 500 ms", back <= 0.5),
    ]


async def _hostile_recovery(hostile: bytes) -> float:
    """Seconds from the hostile op written to the client connected again."""
    server = FakeServer(hostile)
    await server.start()
    try:
        async with jetstream.connect(
            f"nats://127.0.0.1:{server.port}",
            error_cb=lambda _: None,
            reconnect_time_wait=0.05,
            reconnect_jitter=0.0,
            max_reconnect_attempts=-1,
            ping_interval=60,
        ) as nc:
            await nc.flush(timeout=5)
            async with asyncio.timeout(30):
                await server.sent.wait()
                t0 = time.perf_counter()
                while nc.stats.reconnects < 1 or not nc.is_connected:
                    await asyncio.sleep(0.002)
            return time.perf_counter() - t0
    finally:
        await server.close()


async def scenario_h() -> list[Row]:
    took = sorted([await _hostile_recovery(op) for op, outcome in CASES if outcome == "error"])
    worst, median = took[-1], took[len(took) // 2]
    return [
        (
            f"H hostile op to reconnected ({len(took)} ops), slowest",
            f"{worst * 1000:.0f} ms",
            "<= 1000 ms",
            worst <= 1.0,
        ),
        ("H hostile op to reconnected, median", f"{median * 1000:.0f} ms", "<= 1000 ms", True),
    ]


async def scenario_b(server: NatsServer, rounds: int = 3) -> list[Row]:
    steps: list[float] = []
    async with jetstream.connect(server.url) as nc:
        js = nc.jetstream()
        for n in range(rounds):
            name = f"BO{n}"
            s = await js.create_stream(StreamConfig(name=name, subjects=[f"bo{n}"]))
            await js.publish(f"bo{n}", b"x")
            c = await s.create_consumer(
                ConsumerConfig(durable_name="bo", backoff=[0.5, 30.0], max_deliver=4)
            )
            await c.next(timeout=10)
            t0 = time.perf_counter()
            await c.next(timeout=10)
            steps.append(time.perf_counter() - t0)
            await js.delete_stream(name)
    worst = max(steps)
    shown = ", ".join(f"{x * 1000:.0f}" for x in steps)
    return [
        (
            f"B backoff first step, slowest of {rounds} ({shown} ms)",
            f"{worst * 1000:.0f} ms",
            "<= 800 ms",
            0.45 <= worst <= 0.8,
        )
    ]


def _scenario_7_rows(label: str, steps: list[Step], flow: Flow) -> list[Row]:
    rows: list[Row] = []
    for s in steps:
        bar = s.bar_from + 1.0
        rows.append(
            (
                f"7 {s.what}: resume (election {s.election * 1000:.0f} ms,"
                f" publish {s.publish * 1000:.0f} ms)",
                f"{s.resume * 1000:.0f} ms",
                f"<= {bar * 1000:.0f} ms",
                s.resume <= bar,
            )
        )
    consumed = len(flow.acked & flow.first.keys())
    return [
        *rows,
        (
            f"7 {label}: acked consumed",
            f"{consumed}/{len(flow.acked)}",
            "all",
            consumed == len(flow.acked),
        ),
        (f"7 {label}: redeliveries", f"{flow.duplicates}", "counted", True),
    ]


async def scenario_7() -> list[Row]:
    rows: list[Row] = []
    scenarios = [
        ("rolling restart", rolling_restart),
        ("lame duck", lame_duck),
        ("SIGSTOP + step-down", freeze_and_step_down),
    ]
    async with NatsCluster(size=3) as cluster:
        for label, run in scenarios:
            try:
                steps, flow, _ = await run(cluster)
            except AssertionError as exc:  # a stall past the test's bounds: report it
                rows.append((f"7 {label}: {exc}"[:100], "stalled", "resumes", False))
                continue
            rows += _scenario_7_rows(label, steps, flow)
    return rows


async def scenario_8(tasks: tuple[int, ...] = (8, 8, 8, 1, 1)) -> list[Row]:
    rows: list[Row] = []
    async with NatsCluster(size=3) as cluster:
        for n, k in enumerate(tasks, 1):
            try:
                r = await kill_round(cluster, "PUBKILL", k)
            except (AssertionError, TimeoutError, jetstream.NatsError) as exc:
                rows.append((f"8 round {n}: {exc!r}"[:100], "stalled", "resumes", False))
                continue
            rows.append(
                (
                    f"8 round {n} ({k} task{'s' if k > 1 else ''}): unavailable"
                    f" {r.unavailable:.2f} s against election {r.election:.2f} s; pause after it",
                    f"{r.pause * 1000:.0f} ms",
                    "<= 300 ms",
                    r.pause <= 0.3,
                )
            )
            rows.append(
                (f"8 round {n}: errors reaching the app", f"{len(r.errors)}", "0", not r.errors)
            )
    return rows


async def main_async(count: int, *, bounds_only: bool = False) -> list[Row]:
    rows: list[Row] = []
    with NatsServer() as server:
        if not bounds_only:
            rows += await scenario_1(server, count)
            rows += await scenario_3(server)
        rows += await scenario_4(server)
        rows += await scenario_b(server)
    rows += await scenario_h()
    if bounds_only:
        return rows
    rows += await scenario_7()
    rows += await scenario_8()
    return rows


def run_matrices() -> dict[str, Matrix | BaseException]:
    """One run per disruption (each on its own servers and event loop)."""
    runs: dict[str, Matrix | BaseException] = {}
    for disruption in DISRUPTIONS:
        try:
            runs[disruption] = asyncio.run(run_matrix(disruption))
        except Exception as exc:  # a run that could not finish: reported, not raised
            runs[disruption] = exc
    return runs


def matrix_lines(runs: dict[str, Matrix | BaseException]) -> list[str]:
    """The matrix as text: a row per mode, a column per disruption, each cell its recovery
    time in seconds and "ok" when within the target with nothing wrong, "SLOW" past the
    target, "FAIL" when the cell's checks failed (listed below the table)."""
    col = max(14, *(len(d) for d in runs))
    width = max(len(m) for m in MODES)
    lines = [
        f"recovery matrix: seconds from 'server answers again' to the next message"
        f" (target {TARGET:g} s)",
        f"{'mode':{width}}  " + "  ".join(f"{d:>{col}}" for d in runs),
    ]
    notes: list[str] = []
    within = total = 0
    for mode in MODES:
        cells = []
        for disruption, run in runs.items():
            total += 1
            if isinstance(run, BaseException):
                cells.append(f"{'run failed':>{col}}")
                continue
            rec = run.recovery(mode)
            problems = run.problems(mode)
            figure = "never" if rec is None else f"{rec:.2f}"
            if problems:
                verdict = "FAIL"
                notes.append(f"  [{disruption} | {mode}] " + "; ".join(problems))
            elif rec is not None and rec <= TARGET:
                verdict = "ok"
                within += 1
            else:
                verdict = "SLOW"
            cells.append(f"{figure + ' ' + verdict:>{col}}")
        lines.append(f"{mode:{width}}  " + "  ".join(cells))
    steps = []
    for disruption, run in runs.items():
        if isinstance(run, BaseException):
            notes.append(f"  [{disruption}] the run failed: {run!r}"[:400])
            continue
        for s in run.steps:
            each = ", ".join(f"{k} {v - s.down:.2f}" for k, v in sorted(s.answers.items()))
            steps.append(
                f"  {disruption}: {s.what}, servers answered {s.answer - s.down:.2f} s after"
                + (f" ({each})" if each else "")
            )
        steps.append(
            f"  {disruption}: run {run.seconds:.0f} s, {len(run.acked)} + {len(run.kv_acked)}"
            f" acked publishes checked, {run.publish_errors} publish attempts failed"
        )
    lines.append(f"cells within {TARGET:g} s and passing: {within}/{total}")
    lines += ["steps:", *steps]
    lines += loop_lines(runs, notes)
    if notes:
        lines += ["failed cells:", *notes]
    return lines


def loop_lines(runs: dict[str, Matrix | BaseException], notes: list[str]) -> list[str]:
    """The read loops as text, like the matrix: a row per loop, a column per disruption
    (``-`` where the run has no such loop), each cell its lag in seconds and a verdict;
    then what each run gave back. A failed cell's problems go to ``notes``."""
    col = max(14, *(len(d) for d in runs))
    modes = [loop_mode(c, m) for m in MOMENTS for c in CALLS]
    width = max(len(m) for m in modes)
    lines = [
        "",
        f"read loops: seconds from the later of a message's publish and 'server answers"
        f" again' to its delivery, the slowest (target {TARGET:g} s)",
        f"{'loop':{width}}  " + "  ".join(f"{d:>{col}}" for d in runs),
    ]
    for mode in modes:
        cells = []
        for disruption, run in runs.items():
            if isinstance(run, BaseException) or mode not in loop_modes(disruption):
                cells.append(f"{'-':>{col}}")
                continue
            lag = run.lag(mode)
            problems = run.problems(mode)
            figure = "never" if lag is None else f"{lag:.2f}"
            if problems:
                verdict = "FAIL"
                notes.append(f"  [{disruption} | {mode}] " + "; ".join(problems))
            else:
                verdict = "ok" if lag is not None and lag <= TARGET else "SLOW"
            cells.append(f"{figure + ' ' + verdict:>{col}}")
        lines.append(f"{mode:{width}}  " + "  ".join(cells))
    for disruption, run in runs.items():
        if isinstance(run, BaseException):
            continue
        lost = sum(run.cells[m].lost for m in loop_modes(disruption))
        lines.append(
            f"  {disruption}: {run.stranded_naks} message(s) given back by the application's"
            f" connection (stats.stranded_naks); {lost} confirmed ack(s) the server lost"
        )
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    ap.add_argument("--count", type=int, default=50_000, help="publishes in scenario 1")
    which = ap.add_mutually_exclusive_group()
    which.add_argument("--matrix-only", action="store_true", help="only the recovery matrix")
    which.add_argument("--no-matrix", action="store_true", help="without the recovery matrix")
    which.add_argument(
        "--bounds-only",
        action="store_true",
        help="only the bounds the tests assert generously (scenarios 4, H and B)",
    )
    args = ap.parse_args()
    if not args.matrix_only:
        rows = asyncio.run(main_async(args.count, bounds_only=args.bounds_only))
        width = max(len(r[0]) for r in rows)
        print(f"{'scenario':{width}}  {'measured':>10}  {'bar':>20}  ok")
        for name, got, bar, ok in rows:
            print(f"{name:{width}}  {got:>10}  {bar:>20}  {'yes' if ok else 'NO'}")
        print()
    if not (args.no_matrix or args.bounds_only):
        print("\n".join(matrix_lines(run_matrices())), flush=True)


if __name__ == "__main__":
    main()
