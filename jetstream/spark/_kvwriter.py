"""The ``jetstream-kv`` format: ``df.writeStream.format("jetstream-kv")``
(``DataSourceStreamArrowWriter``) and ``df.write.format("jetstream-kv")``
(``DataSourceArrowWriter``) put each row's value under its key in a KeyValue bucket, as
``kv_sink`` does (see ``_kv``); a null value deletes the key.

Spark hands each task one partition of the DataFrame as it is (a writer cannot shuffle),
so the last row of a key wins within its partition: a task keeps the last value of each
of its keys, checks every key, and only then puts them. When a key may be in several
partitions of one batch, write with ``kv_sink``, which groups the rows by key first; the
output of an aggregation grouped by the key holds each key in one partition.

``commit`` logs what a batch wrote on the ``jetstream.spark`` logger, ``abort`` which
partitions failed. Spark's Python data source writers take the ``append`` and
``complete`` output modes (``update`` goes through ``kv_sink``).

Options (strings; Spark lowercases their names):

    servers      NATS URL(s), comma-separated (required)
    bucket       the KeyValue bucket (required; it must exist)
    key_col      the string column of the keys (default "key")
    value_col    the binary or string column of the values (default "value")
    max_pending  puts in flight at once per task (default 4000)
    retries      attempts for a write the bucket did not confirm (default 5)
    commit_bucket  a KeyValue bucket where the last batch written whole is recorded under
                 the query's id (or job_id): a batch at or below it puts nothing (see
                 ``_kvcommits``)
    job_id       the name of a batch write's record (df.write with commit_bucket)
    user, password, token, creds, name, connect_timeout, tls_ca, tls_cert, tls_key,
    api_prefix, domain, timeout

Any other option is refused (``_options.KV_WRITE_OPTIONS``), Spark's own apart.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    DataSourceStreamWriter,
    DataSourceWriter,
    WriterCommitMessage,
)

from ..errors import BadNameError
from ..kv import validate_bucket
from ._common import (
    SparkConfigError,
    connect_spec_from_options,
    lower_keys,
    number_option,
    run_sync,
)
from ._kv import (
    KvTarget,
    check_bucket,
    check_kv_columns,
    last_values,
    new_kv_target,
    put_partition,
)
from ._kvcommits import check_commit_bucket, check_record_name, last_batch, record_batch
from ._options import KV_WRITE_OPTIONS, check_options
from ._pool import run_pooled
from ._query import task_micro_batch

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

__all__ = ["JetStreamKVDataSource", "KvBatchWriter", "KvStreamWriter", "KvWriteOptions"]

log = logging.getLogger("jetstream.spark")


@dataclass(frozen=True)
class KvWriteOptions:
    """The ``jetstream-kv`` writer's string options, parsed and checked on their own."""

    target: KvTarget
    commit_bucket: str | None = None
    job_id: str | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> KvWriteOptions:
        """The checked options; an unknown one (or one missing, or a bad value) is a
        ``SparkConfigError`` naming it."""
        o = lower_keys(options)
        check_options(o, KV_WRITE_OPTIONS, "the jetstream-kv writer")
        conn = connect_spec_from_options(o, "kv writer")
        if not o.get("bucket"):
            raise SparkConfigError(
                "the jetstream-kv writer needs option bucket (the KeyValue bucket to write to)"
            )
        retries = number_option(o, "retries", 0)
        commit_bucket = o.get("commit_bucket") or None
        if commit_bucket is not None:
            try:
                validate_bucket(commit_bucket)
            except BadNameError as exc:
                raise SparkConfigError(f"option commit_bucket={commit_bucket!r}: {exc}") from None
        job_id = o.get("job_id") or None
        if job_id is not None:
            check_record_name("job_id", job_id)
        return cls(
            new_kv_target(
                conn,
                bucket=o["bucket"],
                key_col=o.get("key_col") or "key",
                value_col=o.get("value_col") or "value",
                max_pending=number_option(o, "max_pending", 1) or 4000,
                retries=5 if retries is None else retries,
            ),
            commit_bucket,
            job_id,
        )


@dataclass
class KvWritten(WriterCommitMessage):
    """What one task wrote (its commit message)."""

    partition: int
    puts: int
    deletes: int
    retried: int
    #: the name of the batch's commit record (with ``commit_bucket``), and whether the
    #: record said the batch was written whole before (nothing put)
    name: str = ""
    skipped: bool = False


def _start(options: KvWriteOptions, schema: StructType) -> None:
    """The checks made when the query (or the batch write) starts, before any row is
    sent: the columns, the bucket."""
    check_kv_columns(options.target, schema)
    run_sync(check_bucket(options.target))
    if options.commit_bucket is not None:
        run_sync(check_commit_bucket(options.target.conn, options.commit_bucket))


def _write(
    options: KvWriteOptions, batches: Iterator[pa.RecordBatch], streaming: bool
) -> KvWritten:
    """Runs in a Spark task: put the last value of each key of the partition (none when
    the commit record says the batch was written whole before)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    partition = ctx.partitionId() if ctx is not None else 0
    t = options.target
    name = ""
    if options.commit_bucket is not None:
        name, batch = _record_of(options, ctx, streaming)
        done = run_pooled(last_batch(t.conn, options.commit_bucket, name))
        if done is not None and done >= batch:
            return KvWritten(partition, 0, 0, 0, name, skipped=True)
    latest = last_values(t, batches, (t.key_col, t.value_col))
    res = run_pooled(put_partition(t, latest, partition))
    return KvWritten(partition, res.puts, res.deletes, res.retried, name)


def _record_of(options: KvWriteOptions, ctx: Any, streaming: bool) -> tuple[str, int]:
    """(the commit record's name, the batch): the query's id and the micro-batch's, or
    ``job_id`` and 0 for a batch write."""
    if not streaming:
        if options.job_id is None:
            raise SparkConfigError(
                "df.write.format('jetstream-kv') with option commit_bucket needs option "
                "job_id (the name of its commit record)"
            )
        return options.job_id, 0
    return task_micro_batch(ctx, "jetstream-kv", "for its commit record")


def _record(
    options: KvWriteOptions,
    messages: Sequence[WriterCommitMessage | None],
    batch_id: int | None,
    committed: bool,
) -> None:
    done = [m for m in messages if isinstance(m, KvWritten)]
    what = f"batch {batch_id}" if batch_id is not None else "write"
    if committed and options.commit_bucket is not None:
        name = next((m.name for m in done if m.name), None)
        if name is not None and not all(m.skipped for m in done):
            run_sync(record_batch(options.target.conn, options.commit_bucket, name, batch_id or 0))
    puts = sum(m.puts for m in done)
    deletes = sum(m.deletes for m in done)
    bucket = options.target.bucket
    if committed:
        log.info(
            "jetstream-kv writer: %s committed: %d keys put, %d deleted in bucket %r%s",
            what,
            puts,
            deletes,
            bucket,
            " (written whole before: skipped)" if done and all(m.skipped for m in done) else "",
        )
    else:
        log.warning(
            "jetstream-kv writer: %s aborted: %d of %d partitions failed (their keys may be "
            "partly written; writing the batch again puts the same values); the others put "
            "%d keys and deleted %d in bucket %r",
            what,
            len(messages) - len(done),
            len(messages),
            puts,
            deletes,
            bucket,
        )


class KvStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("jetstream-kv")``: see the module's doc."""

    def __init__(self, options: KvWriteOptions, schema: StructType) -> None:
        self.options = options
        _start(options, schema)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KvWritten:
        return _write(self.options, iterator, streaming=True)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _record(self.options, messages, batchId, committed=True)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _record(self.options, messages, batchId, committed=False)


class KvBatchWriter(DataSourceArrowWriter):
    """``df.write.format("jetstream-kv").mode("append")``: see the module's doc."""

    def __init__(self, options: KvWriteOptions, schema: StructType, overwrite: bool) -> None:
        if overwrite:
            raise SparkConfigError(
                "mode('overwrite'): the jetstream-kv writer puts keys and leaves the others "
                "as they are; use mode('append')"
            )
        self.options = options
        _start(options, schema)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KvWritten:
        return _write(self.options, iterator, streaming=False)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        _record(self.options, messages, None, committed=True)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        _record(self.options, messages, None, committed=False)


class JetStreamKVDataSource(DataSource):
    """The ``jetstream-kv`` format of ``df.write`` and ``df.writeStream``: each row puts
    its value under its key in a KeyValue bucket (a null value deletes the key)."""

    @classmethod
    def name(cls) -> str:
        return "jetstream-kv"

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return KvBatchWriter(KvWriteOptions.parse(self.options), schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        # complete mode (overwrite) writes every key again: the others are left as they are
        return KvStreamWriter(KvWriteOptions.parse(self.options), schema)
