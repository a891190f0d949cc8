"""Writing DataFrames to a KeyValue bucket: ``kv_sink`` for ``foreachBatch`` (and any
DataFrame), and the partition writer that the ``jetstream-kv`` format shares with it.

Each row puts its value under its key; a row whose value is null deletes the key. The
keys are checked against the KeyValue key rules (``jetstream.kv.validate_key``) before
anything is sent: a bad key fails the batch with a ``SparkConfigError`` naming it.

Within a batch the last row of a key wins, "last" in the DataFrame's own order: partition
by partition, and row by row within a partition (the order ``df.collect()`` gives). The
sink numbers the rows in that order and keeps, for each key, the value of its highest
number (an aggregation by key: a shuffle, so that every key is written by one task, once),
then each task puts its keys with ``KeyValue.put_async`` (over its Python worker's
connection, ``_pool``; at most ``max_pending`` puts in flight). Each stage runs at most
``tasks`` tasks (the batch coalesced; the numbers are given before). The numbering stage
runs, and checks every key, before any task of the writing stage starts.

A batch written again (a task or a batch retried, a query restarted from its checkpoint)
puts the same last values again: plain puts, no message ids, so the bucket ends with the
same values (and one more revision of each key written twice). A put the bucket does not
confirm (a cut connection, an election) is sent again with ``kv.put`` up to ``retries``
times; a key still unconfirmed fails the task with a ``SparkWriteError``.
"""

from __future__ import annotations

import asyncio
import re
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from ..bulk import Backoff
from ..errors import BadBucketError, BadNameError, BucketNotFoundError, NatsError
from ..kv import validate_bucket, validate_key
from ._common import (
    ConnectSpec,
    SparkConfigError,
    SparkWriteError,
    argument_names,
    is_connect,
    log,
    run_sync,
)
from ._kvcommits import check_commit_bucket, check_record_name, last_batch, record_batch
from ._pool import lease, run_pooled
from ._query import QUERY_ID_PROPERTY, active_query_ids
from ._target import is_payload_type

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from ..api import PubAck
    from ..kv import KeyValue

__all__ = [
    "KvPartition",
    "KvReport",
    "KvSink",
    "KvTarget",
    "check_bucket",
    "check_kv_columns",
    "kv_sink",
    "last_values",
    "new_kv_target",
    "put_partition",
    "task_error",
]

_RESULT_SCHEMA = "partition int, puts long, deletes long, retried long"


@dataclass(frozen=True)
class KvTarget:
    """Which bucket, which columns and how: the part of the sink that travels to tasks."""

    conn: ConnectSpec
    bucket: str
    key_col: str
    value_col: str
    max_pending: int
    retries: int


def new_kv_target(
    conn: ConnectSpec,
    *,
    bucket: str | None,
    key_col: str,
    value_col: str,
    max_pending: int,
    retries: int,
) -> KvTarget:
    """A ``KvTarget`` of options checked on their own (before anything is connected to)."""
    if not bucket:
        raise SparkConfigError("bucket: name the KeyValue bucket to write to (bucket=...)")
    try:
        validate_bucket(bucket)
    except BadNameError as exc:
        raise SparkConfigError(f"bucket={bucket!r}: {exc}") from None
    if not key_col:
        raise SparkConfigError("key_col: name the column holding each row's key")
    if not value_col:
        raise SparkConfigError("value_col: name the column holding each row's value")
    if max_pending < 1:
        raise SparkConfigError(f"max_pending must be at least 1, not {max_pending}")
    if retries < 0:
        raise SparkConfigError(f"retries must be at least 0, not {retries}")
    return KvTarget(conn, bucket, key_col, value_col, max_pending, retries)


def check_kv_columns(target: KvTarget, schema: StructType) -> None:
    """The key column is a string column of ``schema``, the value column a binary or
    string one."""
    columns = schema.fieldNames()
    for what, col in (("key_col", target.key_col), ("value_col", target.value_col)):
        if col not in columns:
            raise SparkConfigError(
                f"{what}={col!r} is not a column of the DataFrame; its columns are {list(columns)}"
            )
    kind = schema[target.key_col].dataType.typeName()
    if kind == "binary" or not is_payload_type(kind):
        raise SparkConfigError(
            f"key_col={target.key_col!r} is a {kind} column; keys must be strings (cast it; "
            f"a key is letters, digits and '-/_=.')"
        )
    kind = schema[target.value_col].dataType.typeName()
    if not is_payload_type(kind):
        raise SparkConfigError(
            f"value_col={target.value_col!r} is a {kind} column; the value must be binary "
            f"or string (stored UTF-8 encoded): cast it, or to_json(...) a struct"
        )


async def check_bucket(target: KvTarget) -> str:
    """The bucket exists (and is a KeyValue bucket); returns its name."""
    nc = await target.conn.connect()
    try:
        await _bucket(target.conn.jetstream(nc), target)
        return target.bucket
    finally:
        await nc.close()


async def _bucket(js: Any, target: KvTarget) -> KeyValue:
    try:
        kv: KeyValue = await js.key_value(target.bucket)
    except BucketNotFoundError:
        raise SparkConfigError(
            f"bucket={target.bucket!r}: there is no bucket {target.bucket!r} on "
            f"{', '.join(target.conn.servers)}; create it (js.create_key_value(bucket=...)) "
            f"before writing"
        ) from None
    except BadBucketError as exc:
        raise SparkConfigError(f"bucket={target.bucket!r}: {exc}") from None
    return kv


def _check_keys(target: KvTarget, keys: Iterable[str | None]) -> None:
    for key in keys:
        if key is None:
            raise SparkConfigError(
                f"key_col={target.key_col!r}: a row's key is null; every row needs a key"
            )
        try:
            validate_key(key)
        except BadNameError as exc:
            raise SparkConfigError(
                f"key_col={target.key_col!r}: the key {key!r} of a row cannot be a key of "
                f"bucket {target.bucket!r}: {exc}"
            ) from None


def _as_bytes(values: pa.Array) -> list[bytes | None]:
    """The values of a binary or string column as bytes (strings UTF-8 encoded)."""
    import pyarrow as pa

    kind = values.type
    if pa.types.is_string(kind):
        values = values.cast(pa.binary())
    elif pa.types.is_large_string(kind):
        values = values.cast(pa.large_binary())
    out: list[Any] = values.to_pylist()
    return out


def last_values(
    target: KvTarget, batches: Iterable[pa.RecordBatch], columns: tuple[str, str]
) -> dict[str, bytes | None]:
    """The last value of each key in ``batches`` (None: delete it), the columns found by
    the names ``columns`` (key, value); every key checked."""
    latest: dict[Any, bytes | None] = {}
    for batch in batches:
        if not batch.num_rows:
            continue
        names = batch.schema.names
        keys = batch.column(names.index(columns[0]))
        if keys.null_count:
            _check_keys(target, [None])
        values = _as_bytes(batch.column(names.index(columns[1])))
        latest.update(zip(keys.to_pylist(), values, strict=True))
    _check_keys(target, latest)
    return latest


@dataclass(frozen=True)
class KvPartition:
    """What one partition wrote: keys put, keys deleted, writes sent a second time."""

    partition: int
    puts: int = 0
    deletes: int = 0
    retried: int = 0


class _Puts:
    """The puts of one partition, at most the window's size in flight."""

    def __init__(self, kv: KeyValue, target: KvTarget) -> None:
        self.kv = kv
        self.t = target
        self.puts = 0
        self.deletes = 0
        self.retried = 0
        self.sent = 0
        self.inflight: deque[tuple[str, bytes | None, asyncio.Future[PubAck]]] = deque()
        self.failed: list[tuple[str, bytes | None, BaseException]] = []

    def _count(self, value: bytes | None) -> None:
        if value is None:
            self.deletes += 1
        else:
            self.puts += 1

    def _settle(self, key: str, value: bytes | None, fut: asyncio.Future[PubAck]) -> None:
        exc = fut.exception()
        if exc is None:
            self._count(value)
        else:
            self.failed.append((key, value, exc))

    async def send(self, key: str, value: bytes | None) -> None:
        kv = self.kv
        self.sent += 1
        try:
            fut = await (kv.delete_async(key) if value is None else kv.put_async(key, value))
        except NatsError as exc:  # not sent (a closed connection, no room in time)
            self.failed.append((key, value, exc))
            return
        inflight = self.inflight
        inflight.append((key, value, fut))
        while inflight and inflight[0][2].done():
            self._settle(*inflight.popleft())

    async def finish(self) -> None:
        for key, value, fut in self.inflight:
            if not fut.done():
                await asyncio.wait([fut])  # every publish_async future resolves by its deadline
            self._settle(key, value, fut)
        self.inflight.clear()
        still: list[tuple[str, BaseException]] = []
        failed, self.failed = self.failed, []
        for key, value, exc in failed:
            last = await self._again(key, value, exc)
            if last is not None:
                still.append((key, last))
        if still:
            key, exc = still[0]
            raise SparkWriteError(
                f"{len(still)} of {self.sent} writes to bucket {self.t.bucket!r} were not "
                f"confirmed (first: key {key!r}: {exc}); Spark will retry them"
            )

    async def _again(
        self, key: str, value: bytes | None, exc: BaseException
    ) -> BaseException | None:
        """Write a key whose write was not confirmed again, one attempt at a time, each
        awaited (the same value: if the first was stored after all, the key only gets
        one more revision), with a ``Backoff`` pause between this key's attempts (the
        first goes at once: a ``put`` itself waits through an election); None once
        confirmed, else the last error."""
        backoff = Backoff(None)
        for attempt in range(self.t.retries):
            if attempt:
                await backoff.pause()
            self.retried += 1
            try:
                if value is None:
                    await self.kv.delete(key)
                else:
                    await self.kv.put(key, value)
            except NatsError as err:
                exc = err
                continue
            self._count(value)
            return None
        return exc


async def put_partition(
    target: KvTarget, latest: dict[str, bytes | None], partition: int = 0
) -> KvPartition:
    """Put (or delete) every key of ``latest``; return what was written once every write
    is confirmed. The connection is the one the process keeps for ``target``'s settings
    (``_pool``); a partition without keys connects to nothing."""
    if not latest:
        return KvPartition(partition)
    async with lease(
        target.conn, target.conn.connect, publish_async_max_pending=target.max_pending
    ) as js:
        puts = _Puts(await _bucket(js, target), target)
        for key, value in latest.items():
            await puts.send(key, value)
        await puts.finish()
    return KvPartition(partition, puts.puts, puts.deletes, puts.retried)


def _partition() -> int:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return ctx.partitionId() if ctx is not None else 0


def _number_rows(target: KvTarget, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Runs in a task of the first stage: check the keys of rows (key, value, number),
    hand them on as (key, number, value)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for batch in batches:
        if not batch.num_rows:
            continue
        keys = batch.column(0)
        if keys.null_count:
            _check_keys(target, [None])
        _check_keys(target, pc.unique(keys).to_pylist())
        yield pa.RecordBatch.from_arrays(
            [keys, batch.column(2), batch.column(1)], names=["key", "pos", "value"]
        )


def _write_task(target: KvTarget, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Runs in a task of the second stage: put this partition's keys (each once)."""
    import pyarrow as pa

    partition = _partition()
    latest = last_values(target, batches, ("key", "value"))
    res = run_pooled(put_partition(target, latest, partition))
    yield pa.RecordBatch.from_pydict(
        {
            "partition": pa.array([partition], pa.int32()),
            "puts": pa.array([res.puts], pa.int64()),
            "deletes": pa.array([res.deletes], pa.int64()),
            "retried": pa.array([res.retried], pa.int64()),
        }
    )


_TASK_ERROR = re.compile(r"\b(SparkConfigError|SparkWriteError): (.+)")


def task_error(exc: BaseException) -> NatsError | None:
    """The adapter's error that a Spark task raised, from the text of the job's error
    (the last one named in it), or None."""
    found = _TASK_ERROR.findall(str(exc))
    if not found:
        return None
    kind, message = found[-1]
    message = message.split(" SQLSTATE: ")[0].strip()
    return SparkConfigError(message) if kind == "SparkConfigError" else SparkWriteError(message)


@dataclass
class KvReport:
    """What one batch (one call of the sink) wrote to the bucket."""

    batch_id: int
    #: keys put and keys deleted, each confirmed by the bucket
    puts: int = 0
    deletes: int = 0
    #: writes sent a second time (their first was not confirmed)
    retried: int = 0
    partitions: list[int] = field(default_factory=list)
    #: the batch was written whole before (``commit_bucket``'s record): nothing was put
    skipped: bool = False

    def add(self, part: KvPartition) -> None:
        """Count in what one partition wrote."""
        self.partitions.append(part.partition)
        self.puts += part.puts
        self.deletes += part.deletes
        self.retried += part.retried


class KvSink:
    """The function given to ``writeStream.foreachBatch``; see ``kv_sink``."""

    def __init__(
        self,
        target: KvTarget,
        tasks: int | None = None,
        commit_bucket: str | None = None,
        id_prefix: str | None = None,
    ) -> None:
        self._target = target
        self._checked = False
        # where the last batch written whole is recorded, and under which name (given, or
        # the streaming query's id)
        self._commit_bucket = commit_bucket
        self._id_prefix = id_prefix
        # the tasks of each stage: given, or twice the session's task slots (found at the first
        # batch; 0: not known, the partitions as they are)
        self._tasks = tasks
        #: the report of the last batch written (in the process that ran the batch: under
        #: Spark Connect, the server's)
        self.last_report: KvReport | None = None

    def __repr__(self) -> str:
        t = self._target
        return f"<KvSink bucket={t.bucket!r} key_col={t.key_col!r} value_col={t.value_col!r}>"

    def check(self, df: DataFrame) -> None:
        """Check the columns and (once) that the bucket exists."""
        check_kv_columns(self._target, df.schema)
        if not self._checked:
            run_sync(check_bucket(self._target))
            if self._commit_bucket is not None:
                run_sync(check_commit_bucket(self._target.conn, self._commit_bucket))
            self._checked = True

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        self.check(batch_df)
        bucket = self._commit_bucket
        if bucket is None:
            self.last_report = self._write(batch_df, batch_id)
            return
        name = self._record_name(batch_df, batch_id)
        conn = self._target.conn
        done = run_sync(last_batch(conn, bucket, name))
        if done is not None and done >= batch_id:
            log.info(
                "kv_sink: batch %d of %r skipped: batch %d was written whole before "
                "(commit record in bucket %r)",
                batch_id,
                name,
                done,
                bucket,
            )
            self.last_report = KvReport(batch_id, skipped=True)
            return
        self.last_report = self._write(batch_df, batch_id)
        run_sync(record_batch(conn, bucket, name, batch_id))

    def _record_name(self, df: DataFrame, batch_id: int) -> str:
        """The name of the batch's commit record: ``id_prefix``, else its query's id."""
        if self._id_prefix is not None:
            return self._id_prefix
        query = None
        if not is_connect(df):
            # a classic foreachBatch runs on the thread of its query's batch
            query = df.sparkSession.sparkContext.getLocalProperty(QUERY_ID_PROPERTY)
        if not query:
            found = active_query_ids(df)
            query = found[0] if len(found) == 1 else None
        if not query:
            raise SparkConfigError(
                f"cannot name the commit record of batch {batch_id}: no single streaming "
                f"query it comes from; give kv_sink id_prefix= (a name of the query that "
                f"stays the same across its restarts)"
            )
        return str(query)

    def _write(self, df: DataFrame, batch_id: int) -> KvReport:
        from pyspark.sql.functions import monotonically_increasing_id
        from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

        from ._sink import coalesced, default_tasks

        t = self._target
        if self._tasks is None:
            self._tasks = default_tasks(df.sparkSession)
        binary = df.schema[t.value_col].dataType.typeName() == "binary"
        numbered_schema = StructType(
            [
                StructField("key", StringType()),
                StructField("pos", LongType()),
                StructField("value", BinaryType() if binary else StringType()),
            ]
        )
        # a row's number (monotonically_increasing_id): its partition in the high bits,
        # its index there in the low ones, so numbers order rows as the DataFrame does,
        # given before the partitions are coalesced to fewer tasks
        numbered = df.select(t.key_col, t.value_col).withColumn(
            "pos", monotonically_increasing_id()
        )
        last = (
            coalesced(numbered, self._tasks)
            .mapInArrow(partial(_number_rows, t), numbered_schema)
            .selectExpr("key", "struct(pos, value) as row")
            .groupBy("key")
            .agg({"row": "max"})
            .selectExpr("key", "`max(row)`.value as value")
        )
        report = KvReport(batch_id)
        try:
            write = coalesced(last, self._tasks).mapInArrow(partial(_write_task, t), _RESULT_SCHEMA)
            rows = write.collect()
        except Exception as exc:
            err = task_error(exc)
            if err is None:
                raise
            raise err from exc
        for r in rows:
            report.add(KvPartition(*r))
        return report


def kv_sink(
    servers: str | Sequence[str],
    *,
    bucket: str | None = None,
    key_col: str = "key",
    value_col: str = "value",
    max_pending: int = 4000,
    retries: int = 5,
    tasks: int | None = None,
    commit_bucket: str | None = None,
    id_prefix: str | None = None,
    **connect_options: Any,
) -> KvSink:
    """A function for ``df.writeStream.foreachBatch(...)`` that writes each batch to a
    KeyValue bucket: every row puts its value under its key, a row whose value is null
    deletes the key.

    Within a batch the last row of a key wins, in the DataFrame's order (partition by
    partition, row by row within each: the order of ``df.collect()``); each key is
    written once per batch, by one task. A batch written again after a failure or a
    restart puts the same values again, so the bucket ends the same. It works the same in
    a classic session and under Spark Connect, and on any DataFrame: ``sink(df, 0)``
    writes ``df`` outside a query too (``last_report`` says what it wrote).

    Args:
        servers: NATS URL(s), a list or a comma-separated string.
        bucket: the KeyValue bucket (it must exist).
        key_col: the string column holding each row's key (checked against the key
            rules: letters, digits and ``-/_=.``, no leading, trailing or doubled ``.``).
        value_col: the value column, binary or string (strings are stored UTF-8 encoded);
            a null value deletes the key.
        max_pending: puts in flight at once per task.
        retries: attempts for a write the bucket did not confirm.
        tasks: at most this many tasks check and write a batch (default: twice the
            session's task slots, as for ``foreach_batch_sink``); which row of a key wins does not
            depend on it.
        commit_bucket: a KeyValue bucket (it must exist; the sink's own will do) where the
            last batch written whole is recorded under the query's name: a batch at or
            below it is skipped, so a batch written again at any distance in time (after
            later batches wrote newer values) puts nothing back (see ``_kvcommits``).
        id_prefix: the name of that record (default: the streaming query's id, kept in its
            checkpoint); give one outside a query or for several queries of one Spark
            Connect session.
        connect_options: as for ``foreach_batch_sink`` (user, password, token, creds,
            tls_ca, tls_cert, tls_key, api_prefix, domain, timeout, ...).

    Raises (when the first batch runs, that is at query start; nothing is sent):
        SparkConfigError: no bucket given, no such bucket, a column that is not in the
            DataFrame, a key column that is not a string or a value column neither binary
            nor string, an unreachable server; in any batch, a null or invalid key
            (named in the message).
        SparkWriteError: keys whose write could not be confirmed (the batch fails;
            Spark's retry or a restart from the checkpoint writes them again).
    """
    target = new_kv_target(
        ConnectSpec.make(servers, own_arguments=argument_names(kv_sink), **connect_options),
        bucket=bucket,
        key_col=key_col,
        value_col=value_col,
        max_pending=max_pending,
        retries=retries,
    )
    if tasks is not None and tasks < 1:
        raise SparkConfigError(f"tasks must be at least 1, not {tasks}")
    if commit_bucket is not None:
        try:
            validate_bucket(commit_bucket)
        except BadNameError as exc:
            raise SparkConfigError(f"commit_bucket={commit_bucket!r}: {exc}") from None
    if id_prefix is not None:
        check_record_name("id_prefix", id_prefix)
    return KvSink(target, tasks, commit_bucket, id_prefix)
