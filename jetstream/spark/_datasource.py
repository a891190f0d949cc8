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

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import ReadLimit, SupportsTriggerAvailableNow

from ._kvwriter import JetStreamKVDataSource
from ._readopts import ReadOptions
from ._source import SCHEMA, SCHEMA_ARRAYS, BatchReader, StreamReader
from ._writer import BatchWriter, StreamWriter, WriteOptions

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

__all__ = ["JetStreamDataSource", "RefusedStreamReader", "register"]


class JetStreamDataSource(DataSource):
    """The ``jetstream`` format of ``spark.read``, ``spark.readStream``, ``df.write`` and
    ``df.writeStream``."""

    @classmethod
    def name(cls) -> str:
        return "jetstream"

    def schema(self) -> str:
        # asked only by reads (at .load() in a classic session): their options are
        # checked here first
        return SCHEMA_ARRAYS if ReadOptions.parse(self.options).header_arrays else SCHEMA

    def reader(self, schema: Any) -> DataSourceReader:
        return BatchReader(ReadOptions.parse(self.options))

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        try:
            return StreamReader(ReadOptions.parse(self.options))
        except Exception as exc:
            return RefusedStreamReader(exc)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return BatchWriter(WriteOptions.parse(self.options), schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return StreamWriter(WriteOptions.parse(self.options), schema)


class RefusedStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """What ``streamReader`` returns when it cannot make a reader: it raises the error at
    the first call. PySpark's streaming source process stops the reader it made in a
    ``finally``, so an error raised by ``streamReader`` itself reaches the user as the
    context of PySpark's own ``UnboundLocalError`` (no reader to stop): raised from the
    reader's first call instead, it is the only error reported."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def _raise(self) -> NoReturn:
        raise self.error

    def initialOffset(self) -> dict[str, int]:
        self._raise()

    def prepareForTriggerAvailableNow(self) -> None:
        self._raise()

    def getDefaultReadLimit(self) -> ReadLimit:
        self._raise()

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        self._raise()

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        self._raise()

    def read(self, partition: InputPartition) -> Iterator[Any]:
        self._raise()

    def commit(self, end: dict[str, int]) -> None:
        self._raise()

    def stop(self) -> None:
        """Nothing was opened."""


def register(spark: SparkSession) -> None:
    """Register the ``jetstream`` format (reader and writer) and the ``jetstream-kv``
    format (writer) with ``spark``, a classic or a Spark Connect session (once per
    session)."""
    spark.dataSource.register(JetStreamDataSource)
    spark.dataSource.register(JetStreamKVDataSource)
