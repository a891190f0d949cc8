"""The Spark fault matrix (``tests/spark/faults.py``): each path of the adapter (batch
read, streaming read, foreachBatch sink, writer, KeyValue sink) against each fault (a
server paused past the timeout, killed and restarted, a stream leader killed, a 12 s
blackhole, Spark's Python workers killed, the driver killed), the fault landing inside the
work. Each cell: the output is exact, or the job failed loudly and its re-run made it
exact.

``make test`` runs one cell per path, the faults spread over them (``CELLS_QUICK``, about
three minutes); ``make spark-faults`` runs the whole matrix (``SPARK_FAULTS=all``, with
the Spark Connect cells of the paths whose driver side runs in the Connect server).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.spark.faults import N_WRITE, cells, kill_python_workers, run_cell

CELLS = [
    pytest.param(
        path,
        fault,
        kind,
        id=f"{path}|{fault}" + ("|connect" if kind == "connect" else ""),
        marks=[pytest.mark.slow],
    )
    for path, fault, kind in cells(os.environ.get("SPARK_FAULTS", "quick"))
]


@pytest.mark.parametrize(("path", "fault", "spark"), CELLS, indirect=["spark"])
def test_cell(path: str, fault: str, spark: Any, tmp_path: Path) -> None:
    from jetstream.spark._common import is_connect

    kind = "connect" if is_connect(spark) else "classic"
    cell = run_cell(path, fault, kind, spark, tmp_path / "cell")
    print(f"{cell.name}: landed {cell.landed}; first run {cell.first_run}; {cell.seconds:.0f}s")
    assert cell.landed and not cell.landed.startswith("never"), cell.landed
    assert not cell.landed.startswith(f"{N_WRITE} of"), f"the fault came after: {cell.landed}"
    assert cell.problems == [], f"{cell.name} (first run {cell.first_run}): {cell.problems}"


def test_the_worker_fault_kills_only_this_runs_workers(tmp_path: Path) -> None:
    """A daemon of another process tree (here one whose parent has exited, as the Spark
    Connect server of the other pytest worker is not ours) keeps its workers."""
    pid_file = tmp_path / "child.pid"
    script = (
        "import subprocess, sys, time; "
        "p = subprocess.Popen(['sleep', '120']); "
        f"open({str(pid_file)!r}, 'w').write(str(p.pid)); time.sleep(120)"
    )
    # the shell starts the stand-in daemon in the background and exits: the daemon is
    # nobody's child here any more
    subprocess.run(
        ["sh", "-c", f'"{sys.executable}" -c "{script}" pyspark.daemon >/dev/null 2>&1 &'],
        check=True,
    )
    deadline = time.monotonic() + 30
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline, "the stand-in daemon did not start its worker"
        time.sleep(0.05)
    child = int(pid_file.read_text())
    stat = Path(f"/proc/{child}/stat").read_text()
    daemon = int(stat.rsplit(")", 1)[1].split()[1])
    try:
        kill_python_workers()
        time.sleep(0.2)
        state = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0]
        assert state != "Z", "the worker of a daemon that is not ours was killed"
    finally:
        for pid in (child, daemon):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
