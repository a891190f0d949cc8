"""Where the server's CPU goes a message while our ordered consumer replays a stream, by
pull and by push (the performance page's figures on the ordered replay's bound); with
``--workload fetch``, while our client fetches and acks the stream (batch 100, one
``await msg.ack()`` a message) and while the Go program does the same with nats.go: what
our requests cost the server against Go's.

The nats-server is started with its profiling port (``prof_port``), ``--count`` messages
are stored as bench_js stores them, and the ordered consumer replays them from the start
again and again while the server records a CPU profile of ``--seconds`` (Go's pprof, at
the server's ``/debug/pprof/profile``). For each mode it prints the messages a second in
the window and the server's CPU a message (from ``/proc``), and writes ``<mode>.pprof``
into ``--out``. When Go is on the PATH, ``go tool pprof`` reads the profiles and the report
gives the server functions that took the most, in microseconds a message in each mode:
what in the server's work a pull adds, or makes dearer, against a push.

Run: ``.venv/bin/python -m benchmarks.server_profile [--workload ordered|fetch]
[--seconds 8] [--count 200000] [--loop uvloop] [--out DIR] [--top 25]`` (``fetch`` needs
Go and nats.go, as ``benchmarks/bench_native.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jetstream
from benchmarks import bench_native
from benchmarks._report import proc_cpu, run_on_loop
from benchmarks.bench_js import Ours
from jetstream import ConsumerConfig
from jetstream.embedded import NatsServer
from jetstream.testing._support import _free_ports

#: each workload's two windows: the ordered replay by pull and by push; fetch+ack by our
#: client and by the Go program
WORKLOADS = {"ordered": ("pull", "push"), "fetch": ("ours", "nats.go")}
#: the package of the server's own functions, left off their names in the report
_SERVER_PKG = "github.com/nats-io/nats-server/v2/server."


@dataclass
class Window:
    """One mode's profiling window: what was replayed in it and what the server spent."""

    mode: str
    messages: int
    seconds: float
    server_cpu: float
    profile: str
    #: function -> cumulative seconds in the profile (filled when Go can read it)
    cum: dict[str, float] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.messages / self.seconds

    def us_a_message(self, seconds: float) -> float:
        return seconds / self.messages * 1e6


def _fetch_profile(port: int, seconds: int, path: str) -> None:
    """Ask the server for a CPU profile of ``seconds`` and write it to ``path``."""
    url = f"http://127.0.0.1:{port}/debug/pprof/profile?seconds={seconds}"
    with urllib.request.urlopen(url, timeout=seconds + 30) as resp, open(path, "wb") as f:
        f.write(resp.read())


async def _replay(stream: Any, push: bool, count: int, until: asyncio.Future[Any] | None) -> int:
    """Replay the stream once from its start (or until ``until`` is done): messages read."""
    oc = await stream.ordered_consumer(push=push)
    got = 0
    async with oc.messages(max_messages=500) as it:
        async for _ in it:
            got += 1
            if got == count or (until is not None and got % 1000 == 0 and until.done()):
                break
    return got


async def _fetch_ack(stream: Any, count: int, until: asyncio.Future[Any] | None) -> int:
    """Fetch and ack the stream's ``count`` messages with a consumer of their own, 100 a
    fetch and one ``await msg.ack()`` a message (or until ``until`` is done): acked."""
    c = await stream.create_consumer(ConsumerConfig(max_ack_pending=-1))
    got = 0
    try:
        while got < count and not (until is not None and until.done()):
            msgs = await c.fetch(min(100, count - got), expires=5)
            for m in msgs:
                await m.ack()
            got += len(msgs)
    finally:
        await stream.delete_consumer(c.name)
    return got


async def _native_window(
    url: str, pid: int, prof_port: int, args: Any, exe: Path | str, mode: str
) -> Window:
    """The Go program's fetch+ack (``-fetch-loop``) for the profile's seconds, while the
    server profiles itself."""
    if isinstance(exe, str):
        raise SystemExit(f"no Go program to profile against: {exe}")
    path = os.path.join(args.out, f"{mode}.pprof")
    t0, cpu0 = time.perf_counter(), proc_cpu(pid)
    proc = await asyncio.create_subprocess_exec(
        str(exe),
        "-url",
        url,
        "-fetch-loop",
        str(args.seconds),
        stdout=asyncio.subprocess.PIPE,
    )
    fut = asyncio.ensure_future(asyncio.to_thread(_fetch_profile, prof_port, args.seconds, path))
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), args.seconds + 120)
        await fut
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        if not fut.done():
            fut.cancel()
    if proc.returncode != 0:
        raise RuntimeError(f"the Go program's fetch loop failed ({proc.returncode})")
    seconds, cpu = time.perf_counter() - t0, proc_cpu(pid) - cpu0
    return Window(mode, int(out.split()[-1]), seconds, cpu, path)


async def profile_mode(
    url: str, pid: int, prof_port: int, args: Any, mode: str, exe: Path | str = ""
) -> Window:
    """Run ``mode`` while the server profiles itself; the profile is written out."""
    if mode == "nats.go":
        return await _native_window(url, pid, prof_port, args, exe, mode)
    async with jetstream.connect(url) as nc:
        js = nc.jetstream()
        stream = await js.stream("BENCH")
        push = mode == "push"

        async def once(until: asyncio.Future[Any] | None) -> int:
            if mode == "ours":
                return await _fetch_ack(stream, args.count, until)
            return await _replay(stream, push, args.count, until)

        await once(None)  # warm: consumer API, buffers
        path = os.path.join(args.out, f"{mode}.pprof")
        fut = asyncio.ensure_future(
            asyncio.to_thread(_fetch_profile, prof_port, args.seconds, path)
        )
        t0, cpu0 = time.perf_counter(), proc_cpu(pid)
        messages = 0
        try:
            while not fut.done():
                messages += await once(fut)
            await fut
        finally:
            if not fut.done():
                fut.cancel()
        seconds, cpu = time.perf_counter() - t0, proc_cpu(pid) - cpu0
    return Window(mode, messages, seconds, cpu, path)


async def main_async(args: Any) -> list[Window]:
    modes = WORKLOADS[args.workload]
    (prof_port,) = _free_ports(1)  # never one NatsServer picks too
    with (
        tempfile.TemporaryDirectory() as tmp,
        NatsServer(extra_config=f"prof_port: {prof_port}") as server,
    ):
        assert server.pid is not None
        exe: Path | str = ""
        if "nats.go" in modes:
            gopath = os.environ.get("NATS_GO_GOPATH", bench_native.DEBIAN_GOPATH)
            exe = await asyncio.to_thread(bench_native.build, Path(tmp), gopath)
        async with Ours(server.url) as ours:
            await ours.fresh_stream(args.count)  # the stream bench_js replays and fetches
        return [
            await profile_mode(server.url, server.pid, prof_port, args, mode, exe) for mode in modes
        ]


_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_SECONDS = re.compile(r"^([0-9.]+)(ns|us|µs|ms|s)$")


def parse_top(text: str) -> dict[str, float]:
    """Cumulative seconds per function from ``go tool pprof -top -cum`` output."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        cols = line.split(None, 5)
        if len(cols) < 6:
            continue
        m = _SECONDS.match(cols[3])
        if not m or not cols[4].endswith("%"):
            continue
        name = cols[5].strip().removeprefix(_SERVER_PKG)
        out[name] = float(m.group(1)) * _UNITS[m.group(2)]
    return out


def read_profile(go: str, path: str, nodes: int) -> dict[str, float]:
    top = subprocess.run(
        [go, "tool", "pprof", "-top", "-cum", f"-nodecount={nodes}", path],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return parse_top(top.stdout)


def report(windows: list[Window], top: int) -> str:
    lines = [
        f"{w.mode}: {w.rate:,.0f} msgs/s over {w.seconds:.1f} s, server CPU"
        f" {w.us_a_message(w.server_cpu):.2f} us a message ({w.profile})"
        for w in windows
    ]
    if all(w.cum for w in windows):
        first = windows[0]
        names = sorted(first.cum, key=first.cum.__getitem__, reverse=True)[:top]
        head = " ".join(f"{w.mode:>8s}" for w in windows)
        lines.append("")
        lines.append(f"server function, cumulative us a message: {head}   ratio")
        for name in names:
            per = [w.us_a_message(w.cum.get(name, 0.0)) for w in windows]
            cells = " ".join(f"{v:8.3f}" for v in per)
            ratio = f"{per[0] / per[1]:7.2f}" if per[1] else "    n/a"
            lines.append(f"  {name[:60]:60s} {cells} {ratio}")
    else:
        lines.append("(Go is not on the PATH: the profiles are written, not read)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    ap.add_argument(
        "--workload", choices=sorted(WORKLOADS), default="ordered", help="what is profiled"
    )
    ap.add_argument("--count", type=int, default=200_000, help="messages stored and replayed")
    ap.add_argument("--seconds", type=int, default=8, help="profile length a mode")
    ap.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio")
    ap.add_argument("--out", default="", help="directory for the .pprof files (default: temp)")
    ap.add_argument("--top", type=int, default=25, help="server functions in the report")
    args = ap.parse_args(argv)
    args.out = args.out or tempfile.mkdtemp(prefix="server-profile-")
    os.makedirs(args.out, exist_ok=True)
    windows = run_on_loop(main_async(args), args.loop)
    go = shutil.which("go")
    if go:
        for w in windows:
            w.cum = read_profile(go, w.profile, 4 * args.top)
    print(report(windows, args.top))


if __name__ == "__main__":
    main()
