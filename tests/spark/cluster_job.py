"""A Spark driver for the standalone-cluster test, run as its own process: the example
pipeline, then a 50,000-row ``write_dataframe``, through a classic session on a cluster
(``--master spark://...``) or a Spark Connect server (``--connect sc://...``). Prints one
line ``RESULT {json}``.

    python -m tests.spark.cluster_job --nats nats://... (--master URL | --connect URL) [--writer]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path
from types import ModuleType

from jetstream.spark import write_dataframe

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "spark_pipeline.py"
ROWS = 50_000


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("spark_pipeline", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nats", required=True)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--connect")
    parser.add_argument("--writer", action="store_true")
    args = parser.parse_args()
    example = _example()
    spark = example.make_session(args.master, args.connect)
    try:
        pipeline = example.demo(spark, args.nats, args.writer)
        df = spark.range(ROWS, numPartitions=4).selectExpr(
            "rpad(cast(id as string), 100, '.') as value"
        )
        report = write_dataframe(
            df, args.nats, job_id="cluster-rows", subject="cluster.rows", stream="CLUSTER"
        )
    finally:
        spark.stop()
    result = {
        "pipeline": pipeline,
        "rows": report.rows,
        "duplicates": report.duplicates,
        "partitions": sorted(report.partitions),
    }
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
