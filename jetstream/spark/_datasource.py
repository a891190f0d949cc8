"""The ``jetstream`` data source of PySpark: reads a stream (``spark.read`` and
``spark.readStream``, see ``_source``) and writes one (``df.write`` and
``df.writeStream``, see ``_writer``). ``register(spark)`` makes it known to a session,
classic or Spark Connect, with the ``jetstream-kv`` format (writes to a KeyValue bucket,
see ``_kvwriter``).

The options are checked (``_options``) when Spark asks for the schema, which a classic
session does at ``.load()``, and again when it asks for a reader or a writer (at the
first action, ``.save()`` or ``.start()``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)

from ._kvwriter import JetStreamKVDataSource
from ._readopts import ReadOptions
from ._source import SCHEMA, BatchReader, StreamReader
from ._writer import BatchWriter, StreamWriter, WriteOptions

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

__all__ = ["JetStreamDataSource", "register"]


class JetStreamDataSource(DataSource):
    """The ``jetstream`` format of ``spark.read``, ``spark.readStream``, ``df.write`` and
    ``df.writeStream``."""

    @classmethod
    def name(cls) -> str:
        return "jetstream"

    def schema(self) -> str:
        # asked only by reads (at .load() in a classic session): their options are
        # checked here first
        ReadOptions.parse(self.options)
        return SCHEMA

    def reader(self, schema: Any) -> DataSourceReader:
        return BatchReader(ReadOptions.parse(self.options))

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return StreamReader(ReadOptions.parse(self.options))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return BatchWriter(WriteOptions.parse(self.options), schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return StreamWriter(WriteOptions.parse(self.options), schema)


def register(spark: SparkSession) -> None:
    """Register the ``jetstream`` format (reader and writer) and the ``jetstream-kv``
    format (writer) with ``spark``, a classic or a Spark Connect session (once per
    session)."""
    spark.dataSource.register(JetStreamDataSource)
    spark.dataSource.register(JetStreamKVDataSource)
