"""Coverage-guided fuzzing of the property tests (``make fuzz MINUTES=10``).

HypoFuzz runs the Hypothesis tests of the parser, the header blocks, the subjects, the
command encoders and the ack subjects as they are, each input steered by the branches the
earlier ones reached. The run starts from the saved corpus and stops after ``--minutes``;
it then prints, per test, the inputs tried, the behaviors reached (HypoFuzz's coverage:
the branches taken, and the ``event()`` labels a test reports) and each failure with its
shrunk input, and saves the grown corpus. It exits non-zero when a failure was found:
each becomes an ``@example`` of its test (and a fix, where the library was wrong).

The corpus (``tests/fuzz-corpus``) holds, for each test, the inputs that reached a
behavior no smaller input reached: one file a test, named after it, one input a line
(Hypothesis's choice sequence, ``choices_to_bytes``, in base64). It is loaded into a fresh
Hypothesis example database (``.hypothesis/fuzz/db``) under each test's current database
key, and written back from it after the run; the engine's reports and observations stay
there. (Hypothesis keys its directory database by a digest of each test's source: saved
as such, 1,000 files and more, the corpus of a test would be lost at its first edit, an
``@example`` added to it included.)

Run: ``.venv-fuzz/bin/python -m tests.fuzz [--minutes 10] [--workers N]`` (``make fuzz``
makes ``.venv-fuzz``, with the extra ``fuzz``).
"""

from __future__ import annotations

import argparse
import base64
import importlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from hypofuzz.database import FailureState, HypofuzzDatabase, Report, test_keys_key
from hypothesis.database import (
    DirectoryBasedExampleDatabase,
    choices_from_bytes,
    choices_to_bytes,
)
from hypothesis.internal.reflection import function_digest

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "fuzz-corpus"
WORK = ROOT / ".hypothesis" / "fuzz"
#: the modules whose properties are fuzzed
FILES = (
    "tests/unit/test_parser_properties.py",
    "tests/unit/test_headers.py",
    "tests/unit/test_subjects.py",
    "tests/unit/test_commands.py",
    "tests/unit/test_ack_metadata.py",
)


@dataclass
class Outcome:
    """What the engine reported of one test."""

    nodeid: str
    inputs: int = 0
    behaviors: int = 0
    corpus: int = 0
    failures: list[str] = field(default_factory=list)


def run(minutes: float, workers: int, log: Path) -> float:
    """HypoFuzz on ``FILES`` with ``WORK/db`` as its database for ``minutes``; the
    seconds it ran. It stops earlier by itself only when every test has failed."""
    env = dict(os.environ, HYPOTHESIS_PROFILE="fuzz", FUZZ_DATABASE=str(WORK / "db"))
    cli = Path(sys.executable).parent / "hypothesis"
    argv = [str(cli), "fuzz", "-n", str(workers), "--no-dashboard", "--"]
    argv += [*FILES, "-p", "no:cacheprovider"]
    started = time.monotonic()
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            proc.wait(timeout=minutes * 60)
        except subprocess.TimeoutExpired:
            # the hub and its workers; SIGTERM, since a KeyboardInterrupt in the middle of
            # an input would be saved as a failure of its test (the database's writes are
            # a rename each: none is left half-done)
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    return time.monotonic() - started


def latest(reports: Iterable[Report]) -> list[Report]:
    """The last report of each worker (a worker's counts run on from its start)."""
    last: dict[str, Report] = {}
    for report in reports:
        seen = last.get(report.worker_uuid)
        if seen is None or report.elapsed_time >= seen.elapsed_time:
            last[report.worker_uuid] = report
    return list(last.values())


def outcomes(db: HypofuzzDatabase) -> dict[bytes, Outcome]:
    """Per test key, what its reports, corpus and failures say."""
    found: dict[bytes, Outcome] = {}
    for key in set(db.fetch(test_keys_key)):
        last = latest(db.reports.fetch(key))
        if not last:
            continue
        outcome = Outcome(max(last, key=lambda r: r.elapsed_time).nodeid)
        outcome.inputs = sum(sum(r.status_counts.values()) for r in last)
        outcome.behaviors = max(r.behaviors for r in last)
        outcome.corpus = len(list(db.corpus.fetch(key)))
        for state in (FailureState.SHRUNK, FailureState.UNSHRUNK):
            for choices in db.failures(state=state).fetch(key):
                seen = db.failure_observations(state=state).fetch(key, choices)
                text = "(no observation saved)" if seen is None else seen.representation
                if seen is not None and seen.metadata.traceback:
                    text += "\n" + seen.metadata.traceback
                outcome.failures.append(text)
        fatal = db.fatal_failures.fetch(key)
        if fatal is not None:
            outcome.failures.append(f"fatal (the test could not run):\n{fatal.traceback}")
        found[key] = outcome
    return found


def current_keys() -> dict[str, bytes]:
    """The pytest node id of each property of ``FILES`` and its database key as HypoFuzz
    computes it (a digest of the test's source and node id)."""
    keys: dict[str, bytes] = {}
    for file in FILES:
        module = importlib.import_module(file.removesuffix(".py").replace("/", "."))
        for name, test in vars(module).items():
            inner = getattr(getattr(test, "hypothesis", None), "inner_test", None)
            if name.startswith("test_") and inner is not None:
                nodeid = f"{file}::{name}"
                # as HypoFuzz's collection does (Hypothesis's pytest plugin too, for a
                # parametrized test): the node id is part of the digest
                inner._hypothesis_internal_add_digest = nodeid.encode()
                keys[nodeid] = function_digest(inner)
    return keys


def corpus_file(nodeid: str) -> Path:
    """``tests/unit/test_x.py::test_y`` -> ``CORPUS/test_x.test_y.txt``."""
    file, _, name = nodeid.partition("::")
    return CORPUS / f"{Path(file).stem}.{name}.txt"


def load_corpus(db: HypofuzzDatabase, keys: dict[str, bytes]) -> int:
    """The saved inputs of each test into ``db``, under its current key; their number."""
    count = 0
    for nodeid, key in keys.items():
        path = corpus_file(nodeid)
        if not path.exists():
            continue
        db.save(test_keys_key, key)
        for line in path.read_text().splitlines():
            if not line or line.startswith("#"):
                continue
            choices = choices_from_bytes(base64.b64decode(line))
            if choices is not None:  # None: written by a Hypothesis that encoded otherwise
                db.corpus.save(key, choices)
                count += 1
    return count


def save_corpus(db: HypofuzzDatabase, keys: dict[str, bytes]) -> int:
    """``CORPUS`` anew from ``db``: each test's covering inputs, sorted; their number."""
    shutil.rmtree(CORPUS, ignore_errors=True)
    CORPUS.mkdir(parents=True)
    count = 0
    for nodeid, key in sorted(keys.items()):
        lines = sorted(base64.b64encode(choices_to_bytes(c)).decode() for c in db.corpus.fetch(key))
        if not lines:
            continue
        head = f"# {nodeid}: HypoFuzz's covering inputs (choice sequences in base64)"
        corpus_file(nodeid).write_text("\n".join([head, *lines]) + "\n")
        count += len(lines)
    return count


def size_of(path: Path) -> tuple[int, int]:
    """Files and bytes under ``path``."""
    files = [p for p in path.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--no-save", action="store_true", help="leave tests/fuzz-corpus as it is")
    args = parser.parse_args(argv)

    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    db = HypofuzzDatabase(DirectoryBasedExampleDatabase(WORK / "db"))
    keys = current_keys()
    loaded = load_corpus(db, keys)
    log = WORK / "hypofuzz.log"
    print(
        f"fuzzing {len(keys)} properties of {len(FILES)} modules for {args.minutes:g} min "
        f"on {args.workers} workers, from a corpus of {loaded} inputs"
    )
    seconds = run(args.minutes, args.workers, log)

    found = outcomes(db)
    if not found:
        print(log.read_text(errors="replace")[-4000:])
        print("HypoFuzz reported nothing (its output is above)")
        return 1
    print(f"\nran {seconds / 60:.1f} min; per test (behaviors: branches and events reached):\n")
    print("| test | inputs | behaviors | corpus | failures |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for o in sorted(found.values(), key=lambda o: o.nodeid):
        name = o.nodeid.removeprefix("tests/unit/")
        print(f"| `{name}` | {o.inputs:,} | {o.behaviors:,} | {o.corpus} | {len(o.failures)} |")
    total = Outcome("all")
    for o in found.values():
        total.inputs += o.inputs
        total.behaviors += o.behaviors
        total.corpus += o.corpus
        total.failures += o.failures
    print(
        f"| {len(found)} tests | {total.inputs:,} | {total.behaviors:,} | {total.corpus} "
        f"| {len(total.failures)} |"
    )
    for o in found.values():
        for failure in o.failures:
            print(f"\nFAILURE in {o.nodeid}:\n{failure}")
    if not args.no_save:
        for key, o in found.items():  # the key the workers used, should a digest differ
            keys[o.nodeid] = key
        saved = save_corpus(db, keys)
        files, size = size_of(CORPUS)
        print(f"\ncorpus saved: {saved} inputs, {files} files, {size / 1024:.0f} KiB")
    return 1 if total.failures else 0


if __name__ == "__main__":
    sys.exit(main())
