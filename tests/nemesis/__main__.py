"""``python -m tests.nemesis``: a nemesis run, then its check and report (``make nemesis``).

    python -m tests.nemesis [--minutes 10] [--seed N] [--history FILE]
    python -m tests.nemesis --check FILE      # check a history written before

Exits 0 when the checker found no anomaly, 1 otherwise (a run that could not be
checked included). Without ``--seed`` a seed is drawn and printed; the report ends with
the command that replays the same schedule.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from pathlib import Path

from tests.nemesis.checker import bounds_from, check
from tests.nemesis.report import report
from tests.nemesis.run import run_for


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.nemesis", description=__doc__)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--history", help="where the history goes (default: a temporary file)")
    ap.add_argument("--check", metavar="FILE", help="only check this history")
    ap.add_argument(
        "--direct-gets",
        action="store_true",
        help="the bucket answers direct gets (any replica; not linearizable: see the docs)",
    )
    ap.add_argument("--overrun", type=float, help="seconds a call may outlive its deadline")
    ap.add_argument("--block", type=float, help="seconds the event loop may block at once")
    ap.add_argument("--rss", type=float, help="MB the memory may grow")
    args = ap.parse_args(argv)
    bounds = bounds_from(overrun=args.overrun, block=args.block, rss_mb=args.rss)
    if args.check:
        path = Path(args.check)
    else:
        seed = args.seed if args.seed is not None else random.randrange(1, 1_000_000)
        if args.history:
            path = Path(args.history)
        else:
            path = Path(tempfile.mkdtemp(prefix="nemesis-")) / f"history-{seed}.jsonl"
        print(f"nemesis: {args.minutes:g} min, seed {seed}, history {path}", flush=True)
        try:
            run_for(args.minutes * 60, seed, path, direct_gets=args.direct_gets)
        except Exception as exc:  # the run broke: what it wrote is still checked
            print(f"the run failed: {type(exc).__name__}: {exc}", flush=True)
    result = check(path, bounds)
    print(report(result, str(path)))
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
