"""The ``jetstream`` data source of PySpark: reads a stream (``spark.read`` and
``spark.readStream``, see ``_source``). ``register(spark)`` makes it known to a session,
classic or Spark Connect."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
)

from ._source import SCHEMA, BatchReader, StreamReader, _Options

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["JetStreamDataSource", "register"]


class JetStreamDataSource(DataSource):
    """The ``jetstream`` format of ``spark.read`` and ``spark.readStream``."""

    @classmethod
    def name(cls) -> str:
        return "jetstream"

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: Any) -> DataSourceReader:
        return BatchReader(_Options.parse(self.options))

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return StreamReader(_Options.parse(self.options))


def register(spark: SparkSession) -> None:
    """Register the ``jetstream`` format with ``spark``, a classic or a Spark Connect
    session (once per session)."""
    spark.dataSource.register(JetStreamDataSource)
