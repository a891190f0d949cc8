"""A real standalone cluster on loopback (a master and a worker, each its own JVM, started
by pyspark's ``spark-class``): the example pipeline and a 50,000-row ``write_dataframe``
run on it twice, from a classic driver (the pipeline writing through the ``jetstream``
writer) and then through a Spark Connect server whose jobs run on the cluster (the
pipeline writing through the foreachBatch sink). Executors start their own Python workers,
which import ``jetstream`` from this interpreter's environment."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from jetstream.embedded import NatsServer
from tests.spark.helpers import make_stream, stream_state
from tests.spark.servers import SparkConnectServer, StandaloneCluster, spark_env

ROOT = Path(__file__).resolve().parents[2]
ROWS = 50_000


def _job(nats_url: str, *args: str) -> dict[str, object]:
    """Run ``tests/spark/cluster_job.py`` as a driver process; its result."""
    proc = subprocess.run(
        [sys.executable, "-m", "tests.spark.cluster_job", "--nats", nats_url, *args],
        cwd=ROOT,
        env=spark_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, (
        f"the driver failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    )
    result: dict[str, object] = json.loads(lines[-1][len("RESULT ") :])
    return result


@pytest.mark.slow
@pytest.mark.timeout(600)  # four JVMs and two drivers: minutes on a loaded machine
def test_a_standalone_cluster_runs_the_pipeline_and_50k_rows_twice(
    module_nats_server: NatsServer, tmp_path: Path
) -> None:
    url = module_nats_server.url
    make_stream(url, "CLUSTER", ["cluster.rows"], dedup=600.0)
    with StandaloneCluster(tmp_path / "cluster") as cluster:
        first = _job(url, "--master", cluster.url, "--writer")
        assert first == {
            "pipeline": True,
            "rows": ROWS,
            "duplicates": 0,
            "partitions": [0, 1, 2, 3],
        }
        conf = {"spark.sql.shuffle.partitions": "2"}
        with SparkConnectServer(tmp_path / "connect", master=cluster.url, conf=conf) as server:
            second = _job(url, "--connect", server.url)
        # the same job id again: every row found stored, none twice
        assert second == {
            "pipeline": True,
            "rows": ROWS,
            "duplicates": ROWS,
            "partitions": [0, 1, 2, 3],
        }
        # two applications ran on the worker, each with an executor of its own
        apps = sorted(p.name for p in (tmp_path / "cluster" / "work").glob("app-*"))
        assert len(apps) == 2, cluster.logs()
    assert stream_state(url, "CLUSTER") == (ROWS, ROWS)
