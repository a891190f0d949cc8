"""PySpark adapter (the ``spark`` extra: pyspark 4.2 or newer, pyarrow, and the Spark
Connect client's dependencies). Everything here works the same in a classic session and
in a Spark Connect session; nothing reaches for ``sparkContext`` or the JVM.

- ``foreach_batch_sink(...)``: the function for ``df.writeStream.foreachBatch``; writes
  every row to a stream exactly once within the stream's duplicate window.
- ``write_dataframe(df, ...)``: the same for a batch job (a job id, or a key column).
- ``register(spark)``: the ``jetstream`` format: ``spark.readStream`` / ``spark.read``
  read a stream, ``df.writeStream`` / ``df.write`` write one (see
  ``JetStreamDataSource``); and the ``jetstream-kv`` format, which writes to a KeyValue
  bucket (see ``JetStreamKVDataSource``).
- ``kv_sink(...)``: the function for ``df.writeStream.foreachBatch`` that puts each row's
  value under its key in a KeyValue bucket (the last row of a key in a batch wins).

Limits of exactly-once: the stream drops a repeated ``Nats-Msg-Id`` only inside its
``duplicate_window`` (at most 24 hours, and never longer than ``max_age``); the server keeps
each id in memory (about 230 bytes) for that window; ids made from positions (no
``key_col``) are only safe when Spark recomputes a batch in the same order, so prefer a key
column that is unique per row.
"""

from __future__ import annotations

try:
    import pyarrow  # noqa: F401
    import pyspark  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "jetstream.spark needs pyspark and pyarrow: pip install 'jetstream-asyncio[spark]'"
    ) from exc

from ._common import ConnectSpec, SparkConfigError, SparkDataLossError, SparkWriteError
from ._datasource import JetStreamDataSource, register
from ._kv import KvReport, KvSink, kv_sink
from ._kvwriter import JetStreamKVDataSource
from ._sink import BatchReport, ForeachBatchSink, foreach_batch_sink, write_dataframe
from ._source import SCHEMA

__all__ = [
    "BatchReport",
    "ConnectSpec",
    "ForeachBatchSink",
    "JetStreamDataSource",
    "JetStreamKVDataSource",
    "KvReport",
    "KvSink",
    "SCHEMA",
    "SparkConfigError",
    "SparkDataLossError",
    "SparkWriteError",
    "foreach_batch_sink",
    "kv_sink",
    "register",
    "write_dataframe",
]
