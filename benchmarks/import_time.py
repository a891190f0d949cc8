"""What an import costs a fresh process: ours beside nats-py, and the CLI's start.

Each row is a command run again and again in a fresh interpreter (``python -c ...``),
timed from the start of the process to its end, the contenders interleaved so that a busy
machine slows them alike; the table gives the median and the fastest run in seconds, and
the ratio of each median to nats-py's ``import nats`` (below 1: ours is faster). A bare
interpreter (``python -c pass``) is the floor every row includes.

The rows:

- ``import jetstream``: what any program pays first; the package loads its names on first
  use (its module ``__getattr__``), so this is the package and its version alone;
- ``jetstream.connect``: the client ready to connect, the core and the JetStream context
  with its streams, consumers and bucket management (what a program that connects pays);
- ``import jetstream.errors``: what a module that only catches our errors pays;
- ``import nats``: nats-py's package, which loads its client;
- ``jetstream pub --help``: the CLI's parser alone (``python -m jetstream``);
- ``jetstream pub x y`` (the core client) and ``jetstream stream ls`` (the JetStream
  context too): whole commands, each connecting to a nats-server this benchmark starts
  (``jetstream.embedded``), doing its work and closing.

Bytecode: by default the processes compile each module once, into a cache of this run's
own (``PYTHONPYCACHEPREFIX``, a temporary directory), warmed before the timing, as Python
does wherever it may write its ``__pycache__``. ``--no-bytecode-cache`` runs them with
``PYTHONDONTWRITEBYTECODE=1`` and no cache of their own: the standard library and the
installed wheels (nats-py) load from the bytecode their installers wrote, while an editable
checkout of ours is compiled from source at every start.

Run: ``.venv/bin/python -m benchmarks.import_time`` (``--runs N``, default 21;
``--json`` for one JSON object a row). ``python -X importtime -c 'import jetstream'``
says where the time goes. Not a timed test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence

from jetstream.embedded import NatsServer

__all__ = ["ROWS", "environment", "main", "measure"]

#: (row, argv after the interpreter)
ROWS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("python -c pass", ("-c", "pass")),
    ("import jetstream", ("-c", "import jetstream")),
    ("jetstream.connect", ("-c", "import jetstream; jetstream.connect")),
    ("import jetstream.errors", ("-c", "import jetstream.errors")),
    ("import nats", ("-c", "import nats")),
    ("jetstream pub --help", ("-m", "jetstream", "pub", "--help")),
    ("jetstream pub x y", ("-m", "jetstream", "pub", "x", "y")),
    ("jetstream stream ls", ("-m", "jetstream", "stream", "ls")),
)
BASELINE = "import nats"


def environment(*, bytecode_cache: str | None, url: str) -> dict[str, str]:
    """The environment of the timed processes (see the module's docstring); the CLI's
    commands connect to ``url``."""
    env = {**os.environ, "NATS_URL": url, "JETSTREAM_CLI_PLAIN": "1"}
    env.pop("PYTHONPYCACHEPREFIX", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if bytecode_cache is None:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    else:
        env["PYTHONPYCACHEPREFIX"] = bytecode_cache
    return env


def _run(name: str, argv: Sequence[str], env: dict[str, str]) -> int:
    done = subprocess.run(
        [sys.executable, *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        check=False,
    )
    return done.returncode


def measure(
    rows: Sequence[tuple[str, Sequence[str]]], runs: int, env: dict[str, str]
) -> dict[str, list[float]]:
    """Seconds of each run of each row, the rows interleaved run after run."""
    times: dict[str, list[float]] = {name: [] for name, _ in rows}
    for _ in range(runs):
        for name, argv in rows:
            t0 = time.perf_counter()
            _run(name, argv, env)
            times[name].append(time.perf_counter() - t0)
    return times


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=21, help="fresh processes a row (default 21)")
    ap.add_argument(
        "--no-bytecode-cache",
        action="store_true",
        help="PYTHONDONTWRITEBYTECODE=1: our modules compiled at every start",
    )
    ap.add_argument("--json", action="store_true", help="one JSON object a row")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="import-time-") as cache, NatsServer() as server:
        env = environment(bytecode_cache=None if args.no_bytecode_cache else cache, url=server.url)
        rows = []
        for name, cmd in ROWS:  # the first run warms the cache; nats-py may be absent
            status = _run(name, cmd, env)
            if status == 0:
                rows.append((name, cmd))
            elif name != BASELINE:
                raise SystemExit(f"{name}: exit status {status}")
        times = measure(rows, args.runs, env)
    base = statistics.median(times[BASELINE]) if BASELINE in times else None
    if not args.json:
        cached = "no bytecode cache" if args.no_bytecode_cache else "bytecode cached"
        print(f"{args.runs} fresh processes a row, {cached}; Python {sys.version.split()[0]}")
        print(f"{'command':30}{'median s':>10}{'min s':>9}{'vs nats-py':>12}")
    for name, _ in rows:
        median, fastest = statistics.median(times[name]), min(times[name])
        ratio = median / base if base else None
        if args.json:
            row = {"row": name, "median": median, "min": fastest, "runs": args.runs}
            print(json.dumps({**row, "vs_nats_py": ratio, "cache": not args.no_bytecode_cache}))
        else:
            shown = f"{ratio:12.2f}" if ratio is not None else f"{'-':>12}"
            print(f"{name:30}{median:10.3f}{fastest:9.3f}{shown}")


if __name__ == "__main__":
    main()
