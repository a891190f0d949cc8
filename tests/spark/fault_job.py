"""A Spark driver of the fault matrix's ``driver`` cells, run as its own process (which
the test kills with SIGKILL mid-job, then starts again): one path's job
(``faults.run_job``) in a classic session on ``local[2]``.

    python -m tests.spark.fault_job '{"path": ..., "url": ..., "workdir": ...}'
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from tests.spark.faults import CONF, run_job


def main() -> None:
    from pyspark.sql import SparkSession

    from jetstream.spark import register

    args = json.loads(sys.argv[1])
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    builder = SparkSession.builder.master("local[2]").appName("jetstream-fault-job")
    for key, value in CONF.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    register(spark)
    try:
        run_job(args["path"], spark, args["url"], Path(args["workdir"]), args.get("commits", False))
    finally:
        spark.stop()
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
