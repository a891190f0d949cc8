"""examples/spark_lag.py: a scheduled availableNow job in bounded batches and its lag,
from the query progress and from a StreamingQueryListener, in both session kinds."""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from jetstream.embedded import NatsServer
from tests import leaks

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "spark_lag.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("spark_lag", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_lag_falls_batch_by_batch_to_zero(
    spark: Any,
    connect: bool,
    module_nats_server: NatsServer,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    example = _load()
    url = module_nats_server.url
    leaks.run(example.setup(url))
    caplog.set_level(logging.INFO, logger="spark_lag")
    listener = example.watch_lag(spark)
    try:
        batches = example.run_job(spark, url, str(tmp_path / "ckpt"), listener)
        assert batches == [(250, 750), (250, 500), (250, 250), (250, 0)]
        assert [m for m in caplog.messages if m.startswith("query events")] == [
            f"query events: lag {n}" for n in (750, 500, 250, 0)
        ]
        # the query's progress stands in only where Spark Connect dropped the listener
        fallback = [m for m in caplog.messages if m.startswith("the listener heard no end")]
        assert not fallback or connect, fallback
    finally:
        spark.streams.removeListener(listener)
