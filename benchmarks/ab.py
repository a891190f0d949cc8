"""Our client against itself at another revision, in one run: is anything slower?

A chart run compares clients; this compares two versions of ours. The benchmark given
after ``--`` runs in turns, once against this checkout's ``jetstream`` and once against
the ``jetstream`` package of ``--base`` (a git revision, or the folder of another
checkout, copied into a temporary folder beside these same benchmarks), round after
round, the order swapped every round so that a busy spell of the machine falls on both
alike. Each side keeps the best of its runs, and the report gives, per workload, this
checkout's rate over the base's (below 1: slower now), marking those below ``--below``
(0.95).

Run: ``.venv/bin/python -m benchmarks.ab --base HEAD~3 -- benchmarks.bench_js --count
100000``. The benchmark is run with ``--json`` and ``--repeat 1``, and with ``--no-peers``
when it takes that option; only our client's rows count. Give it rounds (five by
default): the first run of a series tends to be the slowest, and the same code against
itself came out at 0.79 - 0.93 after one round and 0.98 - 1.03 after four
(``bench_parser``).

``--base-benchmarks`` runs the base's own benchmarks on both sides instead: the code a
user wrote against the base, on the base and on this checkout. That is the check that
nothing got slower for code that does not use what came later, and it is the one that
runs against a base older than the APIs this checkout's benchmarks call.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OURS = "jetstream"


def export(base: str, names: Sequence[str], dest: Path) -> None:
    """The folders ``names`` (``jetstream``, ``benchmarks``) of ``base`` into ``dest``.
    ``base`` is a folder holding them (another checkout), or else a git revision of this
    one."""
    if (Path(base) / "jetstream").is_dir():
        for name in names:
            shutil.copytree(Path(base) / name, dest / name)
        return
    tar = subprocess.run(
        ["git", "archive", "--format=tar", base, *names],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=BytesIO(tar)) as t:
        t.extractall(dest, filter="data")


def sides(base: str, tmp: Path, base_benchmarks: bool) -> tuple[Path, Path]:
    """The two folders a benchmark runs in: this checkout's ``jetstream`` and the base's,
    each beside the same benchmarks: this checkout's, or with ``base_benchmarks`` the
    base's own (the code a user wrote against the base, run on both)."""
    now, old = tmp / "now", tmp / "base"
    now.mkdir()
    old.mkdir()
    export(base, ["jetstream", "benchmarks"] if base_benchmarks else ["jetstream"], old)
    bench = old / "benchmarks" if base_benchmarks else ROOT / "benchmarks"
    if not base_benchmarks:
        (old / "benchmarks").symlink_to(bench, target_is_directory=True)
    (now / "jetstream").symlink_to(ROOT / "jetstream", target_is_directory=True)
    (now / "benchmarks").symlink_to(bench, target_is_directory=True)
    return now, old


def _run(
    module: str, args: Sequence[str], path: Path, impls: Sequence[str] = (OURS,)
) -> dict[str, float]:
    """Our rows (those of ``impls``) of one run of ``module`` with ``path`` first on the
    import path: ops/s per workload (``workload, impl`` for another impl than ours)."""
    env = {**os.environ, "PYTHONPATH": str(path)}
    proc = subprocess.run(
        [sys.executable, "-m", module, "--json", "--repeat", "1", *args],
        cwd=path,
        env=env,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{module} failed at {path.name}:\n{proc.stderr[-2000:]}")
    rates: dict[str, float] = {}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            m = json.loads(line)
            if m["impl"] in impls and m["seconds"] > 0:
                name = m["workload"] if m["impl"] == OURS else f"{m['workload']}, {m['impl']}"
                rates[name] = m["ops"] / m["seconds"]
    return rates


def compare(
    module: str,
    args: Sequence[str],
    now: Path,
    base: Path,
    rounds: int,
    impls: Sequence[str] = (OURS,),
) -> dict[str, tuple[float, float]]:
    """Per workload, the best rate in ``now`` and in ``base`` over ``rounds`` rounds of
    one run each, taking turns."""
    best: dict[str, list[float]] = {}
    pair_of = [now, base]
    for r in range(max(1, rounds)):
        for side in pair_of if r % 2 == 0 else pair_of[::-1]:
            for workload, rate in _run(module, args, side, impls).items():
                pair = best.setdefault(workload, [0.0, 0.0])
                i = 0 if side == now else 1
                pair[i] = max(pair[i], rate)
    return {w: (mine, theirs) for w, (mine, theirs) in best.items() if mine and theirs}


def report(results: dict[str, tuple[float, float]], below: float) -> list[str]:
    """Lines: per workload both rates and their ratio, marked when below ``below``."""
    width = max([28, *map(len, results)])
    lines = [f"{'workload':{width}s} {'now':>12s} {'base':>12s} {'now/base':>9s}"]
    for w, (now, before) in results.items():
        ratio = now / before
        mark = "  <- slower" if ratio < below else ""
        lines.append(f"{w:{width}s} {now:12,.1f} {before:12,.1f} {ratio:9.2f}{mark}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        print("usage: benchmarks.ab --base REV [--rounds N] -- MODULE [ARGS]", file=sys.stderr)
        return 2
    cut = argv.index("--")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    ap.add_argument(
        "--base", required=True, help="a git revision, or a checkout's folder, to compare with"
    )
    ap.add_argument("--rounds", type=int, default=5, help="runs of each side, taking turns")
    ap.add_argument("--below", type=float, default=0.95, help="mark ratios under this")
    ap.add_argument(
        "--base-benchmarks",
        action="store_true",
        help="run the base's own benchmarks on both sides (for a base older than the APIs "
        "this checkout's benchmarks call)",
    )
    ap.add_argument(
        "--impl",
        action="append",
        help="the rows of this impl count too (as the Spark benchmarks name ours: "
        "'spark source', 'spark writer'); ours by default",
    )
    opts = ap.parse_args(argv[:cut])
    module, *args = argv[cut + 1 :]
    with tempfile.TemporaryDirectory() as tmp:
        now, base = sides(opts.base, Path(tmp), opts.base_benchmarks)
        help_text = subprocess.run(
            [sys.executable, "-m", module, "--help"],
            cwd=now,
            env={**os.environ, "PYTHONPATH": str(now)},
            capture_output=True,
            text=True,
        ).stdout
        if "--no-peers" in help_text and "--no-peers" not in args:
            args.append("--no-peers")
        impls = opts.impl or [OURS]
        results = compare(module, args, now, base, opts.rounds, impls)
    if not results:
        print(f"error: {module} measured nothing of ours on both sides", file=sys.stderr)
        return 1
    whose = "the base's" if opts.base_benchmarks else "this checkout's"
    print(
        f"{module} {' '.join(args)} ({whose} benchmarks): this checkout against "
        f"{opts.base}, best of {opts.rounds}"
    )
    print("\n".join(report(results, opts.below)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
