"""The native anchor: the benchmarks' workloads run by a Go program of ours with nats.go.

``benchmarks/native/main.go`` is built offline in GOPATH mode against the nats.go
sources that Debian's ``golang-github-nats-io-go-nats-dev`` installs (under
``/usr/share/gocode``; another tree can be given with ``--gopath``), then run against an
embedded nats-server of the same binary the Python benchmarks use. It prints the same
JSON lines as the Python benchmarks' ``--json`` (impl ``nats.go``), so the report can
say what fraction of the Go client each workload reaches.

Without Go (or without the nats.go sources) it says that the native column is skipped
and exits 0: it is optional.

Run: ``.venv/bin/python -m benchmarks.bench_native [--json] [--repeat N]`` or
``make bench-native``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks._report import Measurement, arg_parser, report
from jetstream.embedded import NatsServer

HERE = Path(__file__).resolve().parent / "native"
DEBIAN_GOPATH = "/usr/share/gocode"


def build(out_dir: Path, gopath: str) -> Path | str:
    """Build the program into ``out_dir``; its path, or why it could not be built."""
    go = shutil.which("go")
    if go is None:
        return "no Go toolchain (`go`) on PATH"
    if not (Path(gopath) / "src/github.com/nats-io/nats.go").is_dir():
        return f"no nats.go sources under {gopath}/src (Debian: golang-github-nats-io-go-nats-dev)"
    env = {
        **os.environ,
        "GO111MODULE": "off",
        "GOPATH": gopath,
        "GOFLAGS": "",
        "GOCACHE": os.environ.get("GOCACHE") or str(out_dir / "cache"),
    }
    exe = out_dir / "bench-native"
    proc = subprocess.run(
        [go, "build", "-o", str(exe), "."], cwd=HERE, env=env, capture_output=True, text=True
    )
    if proc.returncode != 0:
        return f"go build failed: {proc.stderr.strip()[-2000:]}"
    return exe


def run(args: list[str], gopath: str = DEBIAN_GOPATH, cpu: bool = False) -> list[str] | str:
    """Build and run the program with ``args`` against a fresh embedded server: its JSON
    lines, or why there are none."""
    with tempfile.TemporaryDirectory() as tmp:
        exe = build(Path(tmp), gopath)
        if isinstance(exe, str):
            return exe
        with NatsServer() as server:
            pid = [f"-server-pid={server.pid}"] if cpu and server.pid else []
            proc = subprocess.run(
                [str(exe), "-url", server.url, *pid, *args],
                capture_output=True,
                text=True,
                timeout=3600,
            )
        sys.stderr.write(proc.stderr if proc.returncode == 0 else "")
        if proc.returncode != 0:
            return f"the native benchmark failed: {proc.stderr.strip()[-2000:]}"
        return [line for line in proc.stdout.splitlines() if line.startswith("{")]


def main() -> int:
    parser = arg_parser("the benchmarks' workloads with the Go client (nats.go)")
    parser.add_argument("--count", type=int, default=1_000_000, help="core publish messages")
    parser.add_argument("--js-count", type=int, default=200_000, help="JetStream messages")
    parser.add_argument("--kv-count", type=int, default=20_000, help="KeyValue keys")
    parser.add_argument("--requests", type=int, default=5000, help="requests for latency")
    parser.add_argument("--size", type=int, default=64, help="object size in MiB")
    parser.add_argument("--only", default="", help="families: core,js,kv,obj (default all)")
    parser.add_argument("--match", default="", help="only the workloads whose name has this")
    parser.add_argument("--gopath", default=os.environ.get("NATS_GO_GOPATH", DEBIAN_GOPATH))
    parser.add_argument("--cpu", action="store_true", help="client/server CPU per op (stderr)")
    args = parser.parse_args()
    got = run(
        [
            f"-count={args.count}",
            f"-js-count={args.js_count}",
            f"-kv-count={args.kv_count}",
            f"-requests={args.requests}",
            f"-size={args.size}",
            f"-repeat={args.repeat}",
            f"-only={args.only}",
            f"-match={args.match}",
        ],
        args.gopath,
        args.cpu,
    )
    if isinstance(got, str):
        print(f"native column skipped: {got}", file=sys.stderr)
        return 0
    rows = [json.loads(line) for line in got]
    results = [
        Measurement(
            r["workload"],
            r["impl"],
            r["seconds"],
            r["ops"],
            r["nbytes"],
            r.get("client_cpu"),
            r.get("server_cpu"),
        )
        for r in rows
    ]
    report(results, title="nats.go (native anchor)", json_output=args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
