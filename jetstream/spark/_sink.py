"""Writing DataFrames to a JetStream stream from ``foreachBatch`` and from batch jobs,
exactly once per row within the stream's duplicate window.

Every row gets a deterministic ``Nats-Msg-Id``: the value of ``key_col`` when one is
given; otherwise ``<query id>:<batch id>:<partition>:<row index>`` (``<id_prefix>:<batch
id>:...`` with an explicit ``id_prefix``, ``<job id>:<partition>:<row index>`` for
``write_dataframe``). When Spark re-runs a batch or a task after a failure, the same rows
get the same ids and the stream stores each of them once.

The rows are published from the executors (``mapInArrow``: Arrow batches), by at most
``tasks`` tasks a batch (the batch coalesced; its rows numbered before, so that their ids
do not depend on it), each over its Python worker's connection (``_pool``), see
``_publish``. ``mode="driver"``
collects the batch to the driver and publishes from there (small batches; no executor
round trip). The same code runs in a classic session and under Spark Connect, where the
foreachBatch function runs on the Connect server.

With ``commit_subject`` the rows are not named by id: each partition's rows go out in
atomic batches closed by a commit marker (``_commits``), stored once whatever time has
passed, with no duplicate window.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

from ._common import (
    WRITE_TIMEOUT,
    ConnectSpec,
    SparkConfigError,
    argument_names,
    is_connect,
    run_sync,
    task_slots,
)
from ._pool import run_pooled
from ._publish import ROW_COL, PartitionResult, write_batches
from ._query import QUERY_ID_PROPERTY, active_query_ids
from ._target import Target, check_columns, check_stream, new_target
from ._target import trace_headers as check_trace_headers

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

__all__ = ["BatchReport", "ForeachBatchSink", "foreach_batch_sink", "write_dataframe"]

_RESULT_SCHEMA = (
    "partition int, rows long, duplicates long, first_seq long, last_seq long, parts array<int>"
)


@dataclass
class BatchReport:
    """What one micro-batch (or one ``write_dataframe``) stored."""

    batch_id: int
    #: rows confirmed by a PubAck (stored now or found already stored)
    rows: int = 0
    #: rows the stream had already stored (a re-run batch): acked as duplicates
    duplicates: int = 0
    #: stream sequence range written by this batch (0 when nothing new was stored)
    first_seq: int = 0
    last_seq: int = 0
    #: the DataFrame's partitions whose rows were written
    partitions: list[int] = field(default_factory=list)
    #: the Spark tasks that wrote them (at most the sink's ``tasks``)
    tasks: int = 0

    def add(self, part: PartitionResult) -> None:
        """Count in what one task stored."""
        self.tasks += 1
        if part.parts:
            self.partitions.extend(part.parts)
            self.partitions.sort()
        elif part.rows:
            self.partitions.append(part.partition)
        self.rows += part.rows
        self.duplicates += part.duplicates
        if part.first_seq and (not self.first_seq or part.first_seq < self.first_seq):
            self.first_seq = part.first_seq
        self.last_seq = max(self.last_seq, part.last_seq)


@dataclass(frozen=True)
class _Ids:
    """How a batch's rows are named (unless the key column names them): ``<base>:<partition>:
    <row>``, ``base`` being ``fixed`` if set, else ``<query id>:<batch>`` with the query id
    of the task's own job (classic Spark sets it), else that of ``query`` (found on the
    driver)."""

    batch_id: int
    fixed: str | None = None
    query: str | None = None

    def base(self, task_query: str | None) -> str:
        if self.fixed is not None:
            return self.fixed
        query = task_query or self.query
        if not query:
            raise SparkConfigError(
                "this batch's rows have no streaming query to name them after: give key_col= "
                "(a column unique per row) or id_prefix= (write_dataframe: job_id=)"
            )
        return f"{query}:{self.batch_id}"


def _partition_task(
    target: Target, ids: _Ids, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """Runs inside a Spark task: publish this task's rows, yield one row of counts."""
    import pyarrow as pa
    from pyspark import TaskContext

    ctx = TaskContext.get()
    partition = ctx.partitionId() if ctx is not None else 0
    base = ""
    if target.key_col is None:
        base = ids.base(ctx.getLocalProperty(QUERY_ID_PROPERTY) if ctx is not None else None)
    row_col = ROW_COL if target.key_col is None else None
    res = run_pooled(write_batches(target, base, batches, partition, row_col))
    yield pa.RecordBatch.from_pydict(
        {
            "partition": pa.array([partition], pa.int32()),
            "rows": pa.array([res.rows], pa.int64()),
            "duplicates": pa.array([res.duplicates], pa.int64()),
            "first_seq": pa.array([res.first_seq], pa.int64()),
            "last_seq": pa.array([res.last_seq], pa.int64()),
            "parts": pa.array([list(res.parts)], pa.list_(pa.int32())),
        }
    )


def default_tasks(spark: Any) -> int:
    """Twice the session's task slots (``task_slots``), as Spark's tuning guide advises
    two or three tasks a core: a slow task does not hold the batch up; 0 when the
    settings do not tell."""
    return 2 * (task_slots(spark) or 0)


def coalesced(df: DataFrame, tasks: int | None) -> DataFrame:
    """``df`` in at most ``tasks`` partitions (default: ``default_tasks``): a batch of
    many small or empty partitions (an aggregation's ``spark.sql.shuffle.partitions``,
    200 by default) is written by a few tasks, each reading several of them, rather than
    by a task each."""
    n = default_tasks(df.sparkSession) if tasks is None else tasks
    return df.coalesce(n) if n else df


def _run_batch(
    target: Target,
    df: DataFrame,
    ids: _Ids,
    mode: Literal["executors", "driver"],
    tasks: int | None = None,
) -> BatchReport:
    report = BatchReport(ids.batch_id)
    if mode == "driver":
        table = df.toArrow()
        base = "" if target.key_col is not None else ids.base(None)
        report.add(run_pooled(write_batches(target, f"{base}:0", table.to_batches())))
        return report
    if target.key_col is None:
        from pyspark.sql.functions import monotonically_increasing_id

        # each row numbered in the batch's own partitions before they are coalesced:
        # its id does not depend on how many tasks write it
        df = df.withColumn(ROW_COL, monotonically_increasing_id())
    df = coalesced(df, tasks)
    rows = df.mapInArrow(partial(_partition_task, target, ids), _RESULT_SCHEMA).collect()
    for r in rows:
        partition, count, duplicates, first_seq, last_seq, parts = r
        report.add(
            PartitionResult(partition, count, duplicates, first_seq, last_seq, tuple(parts or ()))
        )
    return report


class ForeachBatchSink:
    """The function given to ``writeStream.foreachBatch``; see ``foreach_batch_sink``."""

    def __init__(
        self,
        target: Target,
        mode: Literal["executors", "driver"],
        id_prefix: str | None,
        tasks: int | None = None,
    ) -> None:
        self._target = target
        self._mode = mode
        self._id_prefix = id_prefix
        # the tasks a batch is written by: given, or twice the session's task slots (found at
        # the first batch; 0: not known, the batch's partitions as they are)
        self._tasks = tasks
        self._checked: str | None = None
        # (id of the batch's session, its query's id): under Spark Connect, the session a
        # query's batches come in stays the same for the whole run
        self._query: tuple[str, str] | None = None
        #: the report of the last batch written (in the process that ran the batch: under
        #: Spark Connect, the server's)
        self.last_report: BatchReport | None = None

    def __repr__(self) -> str:
        return f"<ForeachBatchSink stream={self._target.stream!r} mode={self._mode}>"

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_query"] = None  # found again where the function runs
        return state

    def check(self, df: DataFrame) -> str:
        """Check the columns and the target stream; return the stream's name."""
        check_columns(self._target, df.schema)
        if self._checked is None:
            self._checked = run_sync(check_stream(self._target))
        return self._checked

    def write(self, df: DataFrame, id_base: str, batch_id: int = 0) -> BatchReport:
        """Check, then write ``df`` with the row ids ``<id_base>:<partition>:<row>`` (or
        the key column's values)."""
        self.check(df)
        self.last_report = _run_batch(
            self._target, df, _Ids(batch_id, fixed=id_base), self._mode, self._task_count(df)
        )
        return self.last_report

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        self.check(batch_df)
        if self._target.key_col is not None:
            ids = _Ids(batch_id, fixed=str(batch_id))  # the key column names every row
        elif self._id_prefix is not None:
            ids = _Ids(batch_id, fixed=f"{self._id_prefix}:{batch_id}")
        else:
            ids = self._query_ids(batch_df, batch_id)
        self.last_report = _run_batch(
            self._target, batch_df, ids, self._mode, self._task_count(batch_df)
        )

    def _task_count(self, df: DataFrame) -> int:
        if self._tasks is None:
            self._tasks = default_tasks(df.sparkSession)
        return self._tasks

    def _query_ids(self, df: DataFrame, batch_id: int) -> _Ids:
        """Ids after the streaming query of this batch; refuse when it cannot be known."""
        connect = is_connect(df)
        session = str(getattr(df.sparkSession, "session_id", ""))
        if connect and self._query is not None and self._query[0] == session:
            return _Ids(batch_id, query=self._query[1])
        found = active_query_ids(df)
        if len(found) == 1:
            if connect:
                self._query = (session, found[0])
            return _Ids(batch_id, query=found[0])
        if found and not connect and self._mode == "executors":
            # several queries run at once: a classic task knows its own query's id
            return _Ids(batch_id)
        why = (
            f"{len(found)} streaming queries are active and this batch could come from any"
            if found
            else "no streaming query is active (is this called outside foreachBatch?)"
        )
        raise SparkConfigError(
            f"cannot name the rows of batch {batch_id} after their streaming query: {why}. "
            f"Give key_col= (a column unique per row) or id_prefix= (a name of the query "
            f"that stays the same across its restarts) to foreach_batch_sink"
        )


def foreach_batch_sink(
    servers: str | Sequence[str],
    *,
    subject: str | None = None,
    subject_col: str | None = None,
    value_col: str | None = "value",
    headers_cols: Sequence[str] = (),
    key_col: str | None = None,
    stream: str | None = None,
    id_prefix: str | None = None,
    max_pending: int = 4000,
    mode: Literal["executors", "driver"] = "executors",
    tasks: int | None = None,
    retries: int | None = None,
    write_timeout: float = WRITE_TIMEOUT,
    min_duplicate_window: float = 60.0,
    traceparent: str | None = None,
    tracestate: str | None = None,
    commit_subject: str | None = None,
    headers_col: str | None = None,
    **connect_options: Any,
) -> ForeachBatchSink:
    """A function for ``df.writeStream.foreachBatch(...)`` that writes every row to a
    JetStream stream exactly once (within the stream's duplicate window).

    It works the same in a classic session and under Spark Connect (where the function
    runs on the Connect server), and on any DataFrame when ``key_col`` is given:
    ``sink(df, 7)`` writes ``df`` outside a query too.

    Args:
        servers: NATS URL(s), a list or a comma-separated string.
        subject: the subject of every row; or ``subject_col``: the column holding each
            row's subject.
        value_col: the payload column (binary or string). ``None``: each row serialised
            to JSON.
        headers_cols: columns sent as message headers (header name = column name).
        headers_col: a ``map<string,string>`` or ``map<string,array<string>>`` column
            whose entries are sent as headers, every value of an array as a value of its
            header (the source's ``headers`` column with ``headers_format=array`` comes
            back as it was); ``headers_cols`` win over it.
        key_col: a column unique per row, used as its ``Nats-Msg-Id``. Prefer it: ids
            from positions are only safe when Spark recomputes a batch in the same order.
        stream: the stream that must store the rows (checked at query start; found from
            ``subject`` when not given).
        id_prefix: without ``key_col``, rows are named ``<id_prefix>:<batch id>:
            <partition>:<row index>``; by default the prefix is the streaming query's id
            (kept in its checkpoint), found when the first batch runs. Give one when that
            cannot be found: several queries running at once in one Spark Connect session.
        max_pending: publishes outstanding at once per task.
        mode: ``"executors"`` (default: the batch is published from Spark tasks) or
            ``"driver"`` (collect the batch, publish from the driver: small batches).
        tasks: at most this many tasks publish a batch, each reading several of its
            partitions when it has more (default: twice the session's task slots, from
            ``spark.default.parallelism``, a ``local[N]`` master, or
            ``spark.executor.instances`` times ``spark.executor.cores``; when none says,
            a task per partition). A row's id does not depend on it.
        retries: at most this many more attempts for a row whose publish failed, with
            the same id (None: as many as ``write_timeout`` allows).
        write_timeout: how long a task waits through a server that does not answer
            (paused, restarting, electing a leader, out of reach) for its rows to be
            confirmed, before it fails (seconds).
        min_duplicate_window: refuse a stream whose duplicate window is shorter (seconds):
            a batch re-run after the window has passed would be stored twice. Not
            checked with ``commit_subject``.
        commit_subject: commit each partition's rows in atomic batches of 999, each
            closed by a marker on ``<commit_subject>.<query id>.<batch>.<partition>.
            <chunk>`` that the stream stores only once: a batch written again at any
            distance in time stores nothing twice, with no duplicate window. The stream
            needs ``allow_atomic`` and must store ``<commit_subject>.>``; not with
            ``key_col``.
        traceparent: a W3C ``traceparent`` put on every row (with ``tracestate``), so
            that a consumer downstream continues that trace; ``"current"``: the context
            current where the sink is made (the driver's; needs the ``otel`` extra).
        tracestate: the W3C ``tracestate`` that goes with ``traceparent``.
        connect_options: options of ``jetstream.connect`` that can be pickled (user,
            password, token, creds, connect_timeout, ...), plus ``tls_ca``, ``tls_cert``,
            ``tls_key`` (paths), ``api_prefix``, ``domain`` and ``timeout``.

    Raises (when the first batch runs, that is at query start):
        SparkConfigError: unknown column, missing stream, a subject the stream does not
            store, a value column neither binary nor string, a duplicate window shorter
            than ``min_duplicate_window``, unreachable server; no key column and no way
            to tell the batch's query.
        SparkWriteError: rows that could not be confirmed (the batch fails; Spark's retry
            or a restart from the checkpoint writes them again, deduplicated).
    """
    target = make_target(
        servers,
        subject=subject,
        subject_col=subject_col,
        value_col=value_col,
        headers_cols=headers_cols,
        key_col=key_col,
        stream=stream,
        max_pending=max_pending,
        retries=retries,
        min_duplicate_window=min_duplicate_window,
        write_timeout=write_timeout,
        commit_subject=commit_subject,
        headers_col=headers_col,
        **connect_options,
    )
    if traceparent == "current":
        from ..tracing import trace_headers

        current = trace_headers()
        traceparent, tracestate = current.get("traceparent"), current.get("tracestate")
    if traceparent is not None or tracestate is not None:
        target = replace(target, trace_headers=check_trace_headers(traceparent, tracestate))
    if mode not in ("executors", "driver"):
        raise SparkConfigError(f"mode must be 'executors' or 'driver', not {mode!r}")
    if id_prefix is not None:
        _check_token("id_prefix", id_prefix)
    if tasks is not None and tasks < 1:
        raise SparkConfigError(f"tasks must be at least 1, not {tasks}")
    return ForeachBatchSink(target, mode, id_prefix, tasks)


def make_target(
    servers: str | Sequence[str],
    *,
    subject: str | None,
    subject_col: str | None,
    value_col: str | None,
    headers_cols: Sequence[str],
    key_col: str | None,
    stream: str | None,
    max_pending: int,
    retries: int | None,
    min_duplicate_window: float,
    write_timeout: float = WRITE_TIMEOUT,
    commit_subject: str | None = None,
    headers_col: str | None = None,
    **connect_options: Any,
) -> Target:
    """The checked ``Target`` of the sink's options."""
    return new_target(
        ConnectSpec.make(
            servers, own_arguments=argument_names(foreach_batch_sink), **connect_options
        ),
        subject=subject,
        subject_col=subject_col,
        value_col=value_col,
        headers_cols=headers_cols,
        key_col=key_col,
        stream=stream,
        max_pending=max_pending,
        retries=retries,
        min_duplicate_window=min_duplicate_window,
        write_timeout=write_timeout,
        commit_subject=commit_subject,
        headers_col=headers_col,
    )


def _check_token(what: str, value: str) -> None:
    if not value or any(c in value for c in " \t\r\n") or not value.isprintable():
        raise SparkConfigError(f"{what} must be a non-empty token, not {value!r}")


def write_dataframe(
    df: DataFrame, servers: str | Sequence[str], *, job_id: str | None = None, **options: Any
) -> BatchReport:
    """Write a (batch) DataFrame to a stream and return what was stored.

    The rows' ids are the values of ``key_col`` when it is given (then ``job_id`` is not
    needed), else ``<job_id>:<partition>:<row index>``, so running the same job again
    with the same ``job_id`` stores nothing twice (within the duplicate window). The
    options are those of ``foreach_batch_sink``; the checks it makes at query start are
    made here before anything is sent. Works in a classic session and under Spark
    Connect alike.
    """
    if job_id is not None:
        _check_token("job_id", job_id)
    elif options.get("key_col") is None:
        raise SparkConfigError(
            "write_dataframe needs job_id= (rows named <job_id>:<partition>:<row>) or "
            "key_col= (a column unique per row)"
        )
    return foreach_batch_sink(servers, **options).write(df, job_id or "-")
