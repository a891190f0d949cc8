"""benchmarks/_spark_source.py (``bench_spark --only source``) still runs, shrunk, on the
shared Spark sessions: every way of reading the stream reads all of it, and the
availableNow run takes the micro-batches asked for. Nothing here looks at a speed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks._spark_source import available_now, bench_source, report_source
from jetstream.embedded import NatsServer
from tests.spark.helpers import classic_only


@classic_only
def test_the_source_benchmark_runs(
    spark: Any, module_nats_server: NatsServer, tmp_path: Path, capsys: Any
) -> None:
    url = module_nats_server.url
    results, ratios = bench_source(spark, url, 2000, repeat=1)
    assert {m.impl for m in results} == {
        "plain consumer",
        "spark source",
        "spark source, 2 ranges",
        "availableNow, 4 batches",
        "spark alone",
    }
    assert all(m.ops == 2000 and m.seconds > 0 for m in results)
    assert set(ratios) == {m.impl for m in results} - {"plain consumer"}
    report_source(results, ratios, json_output=False)
    assert "availableNow, 4 batches:" in capsys.readouterr().out
    _, batches = available_now(spark, url, 2000, 4, tmp_path / "ckpt")
    assert batches == 4
