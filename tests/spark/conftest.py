"""The Spark session of the Spark tests: every test that takes ``spark`` runs twice, in a
classic session and in a Spark Connect session.

One session of each kind serves the whole run (a start costs seconds): the fixture is
session-scoped and parametrised, so pytest runs every classic test, stops that session,
then starts a Spark Connect server (its own JVM, on a free loopback port) and runs every
test again through a Connect client. The two kinds never live in one process at once:
PySpark picks an API by a process-wide switch (``SPARK_CONNECT_MODE_ENABLED``), which the
fixture clears when its Connect session ends.

Spark is kept quiet and local: loopback only, no UI, two cores, few shuffle partitions.
Python workers run this interpreter (``PYSPARK_PYTHON``), so they import the same
``jetstream``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.spark.servers import SparkConnectServer

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable

KINDS = ["classic", "connect"]

# the settings of both kinds of session (static ones: given when the driver starts)
CONF = {
    "spark.ui.enabled": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
    "spark.python.worker.reuse": "true",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "2000",
    "spark.sql.files.openCostInBytes": "1",
    "spark.ui.showConsoleProgress": "false",
}

_CONNECT_ENV = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE")


def _classic() -> Any:
    from pyspark.sql import SparkSession

    for var in _CONNECT_ENV:
        os.environ.pop(var, None)
    builder = SparkSession.builder.master("local[2]").appName("jetstream-tests")
    for key, value in CONF.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session


@pytest.fixture(scope="session", params=KINDS)
def spark(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    """A classic session on ``local[2]``, or a Spark Connect session whose server runs
    ``local[2]`` (``request.param``); with the ``jetstream`` format registered."""
    from jetstream.spark import register

    if request.param == "classic":
        session = _classic()
        server = None
    else:
        from pyspark.sql import SparkSession

        server = SparkConnectServer(tmp_path_factory.mktemp("connect"), conf=CONF).start()
        session = SparkSession.builder.remote(server.url).getOrCreate()
    register(session)
    try:
        yield session
    finally:
        session.stop()
        for var in _CONNECT_ENV:
            os.environ.pop(var, None)
        if server is not None:
            server.stop()


@pytest.fixture
def connect(spark: Any) -> bool:
    """True when the test runs in the Spark Connect session."""
    from jetstream.spark._common import is_connect

    return is_connect(spark)
