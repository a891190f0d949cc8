"""examples/spark_pipeline.py, the script docs/spark.md opens with (``make spark-demo``),
run as a reader runs it (``python spark_pipeline.py``, its own local Spark) against the
tests' nats-server: it prints what the page shows, line for line, and Spark reports no
error on stderr, nor after the session has stopped. (tests/spark/test_cluster.py runs it
through its writers on a cluster, and through Spark Connect.)"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from jetstream.embedded import NatsServer
from tests.spark.servers import spark_env

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "spark_pipeline.py"
PAGE = ROOT / "docs" / "spark.md"


def shown_output() -> str:
    """The output docs/spark.md shows for the script, right after it."""
    text = PAGE.read_text()
    whole = text.index('--8<-- "examples/spark_pipeline.py"\n')
    found = re.compile(r'^```text title="spark_pipeline\.py"\n(.*?)^```$', re.M | re.S).search(
        text, whole
    )
    assert found is not None, "docs/spark.md shows no output of spark_pipeline.py"
    between = text[whole : found.start()]
    assert between.count("```") == 1, "the output must follow the script"
    return found.group(1)


def test_the_page_opens_with_the_whole_script() -> None:
    text = PAGE.read_text()
    first = text.index("```")
    assert text[first:].startswith('```python\n--8<-- "examples/spark_pipeline.py"\n```')
    source = EXAMPLE.read_text()
    for part in (
        "trigger(availableNow=True)",
        "foreach_batch_sink(",
        "kv_sink(",
        "checkpointLocation",
        '"spark.sql.shuffle.partitions"',
        "groupBy(",
    ):
        assert part in source, part


def test_the_script_prints_what_the_page_shows(module_nats_server: NatsServer) -> None:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE)],
        cwd=ROOT,
        env=spark_env(NATS_URL=module_nats_server.url),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"exit {proc.returncode}:\n{proc.stdout}\n{proc.stderr[-5000:]}"
    assert proc.stdout == shown_output()
    errors = [
        line for line in proc.stderr.splitlines() if re.search(r"\bERROR\b|Exception\b", line)
    ]
    assert not errors, "\n".join(errors[:20])
