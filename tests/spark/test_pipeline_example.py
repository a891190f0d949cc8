"""examples/spark_pipeline.py (``make spark-demo``), run on the shared Spark sessions: its
foreachBatch sinks (the stream's and the KeyValue one) in the classic session, its
``jetstream`` and ``jetstream-kv`` writers through Spark Connect (tests/spark/test_cluster.py
runs the other two pairs on a cluster)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

from jetstream.embedded import NatsServer
from tests import leaks

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "spark_pipeline.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("spark_pipeline", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pipeline_totals_match_the_orders(
    spark: Any, connect: bool, module_nats_server: NatsServer, tmp_path: Path
) -> None:
    example = _load()
    url = module_nats_server.url
    expected = leaks.run(example.setup(url))
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    example.run_query(spark, url, str(tmp_path / "ckpt"), writer=connect)
    totals = leaks.run(example.final_totals(url))
    assert totals == expected
    assert sum(totals.values()) > 0 and len({w for w, _ in totals}) == 3
    # each user's spend, in the bucket: read by key and through a watch
    spend = example.spend_of(expected)
    assert set(spend) == set(example.USERS)
    assert leaks.run(example.read_spend(url)) == spend
    assert leaks.run(example.watch_spend(url)) == spend
