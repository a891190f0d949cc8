"""benchmarks/_spark_kv.py (``bench_spark --only kv``) still runs: each way of putting the
keys, shrunk, on the shared Spark sessions; every run checks the bucket holds them all.
Nothing here looks at a speed."""

from __future__ import annotations

from typing import Any

from benchmarks._spark_kv import bench_kv_sink, report_kv_sink
from jetstream.embedded import NatsServer
from tests.spark.helpers import classic_only


@classic_only
def test_the_kv_sink_benchmark_runs(
    spark: Any, module_nats_server: NatsServer, capsys: Any
) -> None:
    results = bench_kv_sink(spark, module_nats_server.url, 500, repeat=1)
    assert {m.impl for m in results} == {
        "kv.put",
        "kv.put_async",
        "spark kv sink",
        "spark kv format",
    }
    assert all(m.ops == 500 and m.seconds > 0 for m in results)
    report_kv_sink(results, json_output=False)
    out = capsys.readouterr().out
    assert "spark kv sink/kv.put" in out and "spark kv format:" in out
