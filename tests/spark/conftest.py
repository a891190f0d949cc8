"""One local Spark session for every Spark test (a session start costs seconds here).

Spark is kept quiet and local: loopback only, no UI, warnings only, two cores, few
shuffle partitions. Workers run this interpreter (``PYSPARK_PYTHON``), so they import the
same ``jetstream``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("jetstream-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
        .config("spark.python.worker.reuse", "true")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "2000")
        .config("spark.sql.files.openCostInBytes", "1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("WARN")
    from jetstream.spark import register

    register(session)
    try:
        yield session
    finally:
        session.stop()
