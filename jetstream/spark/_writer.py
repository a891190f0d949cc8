"""Writing to a stream through PySpark's Python Data Source writer API:
``df.writeStream.format("jetstream")`` (``DataSourceStreamArrowWriter``) and
``df.write.format("jetstream")`` (``DataSourceArrowWriter``).

Each task publishes its partition's Arrow batches as the foreachBatch sink does (see
``_publish``). A row's ``Nats-Msg-Id`` is its ``key_col`` value, or ``<query id>:<batch
id>:<partition>:<row index>`` in a streaming query: the query id (kept in the checkpoint)
and the micro-batch id come with the task's job, so a batch Spark writes again after a
restart from the checkpoint gets the same ids and is stored once. A batch write names its
rows ``<job_id>:<partition>:<row index>``.

``commit`` records what a batch stored (a log line on the ``jetstream.spark`` logger and,
with ``report_subject``, one JSON message to that subject); ``abort`` says which partitions
were not confirmed, the same two ways.

Options (strings; Spark lowercases their names):

    servers              NATS URL(s), comma-separated (required)
    subject | subject_col  the subject of every row, or the column holding each row's
    stream               the stream that must store the rows (required with subject_col)
    value_col            the payload column, binary or string (default "value"; an empty
                         value: each row as JSON)
    key_col              a column unique per row: its message id
    headers_cols         columns sent as headers, comma-separated
    headers_col          a map<string,string> or map<string,array<string>> column whose
                         entries are sent as headers (every value of an array kept)
    max_pending          publishes outstanding at once per task (default 4000)
    retries              at most this many more attempts for a row whose publish failed
                         (default: as many as write_timeout allows)
    write_timeout        how long a task waits through a server that does not answer
                         (paused, restarting, electing a leader) for its rows to be
                         confirmed, before it fails (default 5m)
    min_duplicate_window refuse a stream deduplicating over fewer seconds (default 60)
    commit_subject       commit each partition's rows in atomic batches with a marker
                         under this subject: exactly once whatever time has passed
                         (see ``_commits``; the stream needs allow_atomic)
    job_id               the name of a batch write (df.write) without key_col
    report_subject       where commit and abort publish their record (a stream must
                         store it)
    traceparent, tracestate  a W3C trace context put on every row
    user, password, token, creds, name, connect_timeout, tls_ca, tls_cert, tls_key,
    api_prefix, domain, timeout

Any other option is refused (``_options.WRITE_OPTIONS``), Spark's own apart.
"""

from __future__ import annotations

import logging
import pickle
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from ..errors import NatsError
from ._common import (
    WRITE_TIMEOUT,
    SparkConfigError,
    connect_spec_from_options,
    lower_keys,
    number_option,
    run_sync,
)
from ._options import WRITE_OPTIONS, check_options
from ._plan import duration_option
from ._pool import run_pooled
from ._publish import write_batches
from ._query import task_micro_batch
from ._target import Target, check_columns, check_stream, new_target

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

__all__ = ["BatchWriter", "StreamWriter", "WriteOptions", "Written"]

log = logging.getLogger("jetstream.spark")


@dataclass(frozen=True)
class WriteOptions:
    """The writer's string options, parsed and checked on their own."""

    target: Target
    job_id: str | None
    report_subject: str | None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> WriteOptions:
        """The checked options; an unknown one (or one missing, or a bad value) is a
        ``SparkConfigError`` naming it."""
        o = lower_keys(options)
        check_options(o, WRITE_OPTIONS, "the jetstream writer")
        conn = connect_spec_from_options(o, "writer")
        value_col = o.get("value_col", "value")
        window = o.get("min_duplicate_window", "60")
        try:
            min_window = float(window)
        except ValueError:
            raise SparkConfigError(
                f"option min_duplicate_window={window!r} is not a number of seconds"
            ) from None
        target = new_target(
            conn,
            subject=o.get("subject") or None,
            subject_col=o.get("subject_col") or None,
            value_col=value_col or None,
            headers_cols=[h.strip() for h in o.get("headers_cols", "").split(",") if h.strip()],
            key_col=o.get("key_col") or None,
            stream=o.get("stream") or None,
            max_pending=number_option(o, "max_pending", 1) or 4000,
            retries=number_option(o, "retries", 0),
            min_duplicate_window=min_window,
            traceparent=o.get("traceparent") or None,
            tracestate=o.get("tracestate") or None,
            write_timeout=duration_option(o, "write_timeout", WRITE_TIMEOUT),
            commit_subject=o.get("commit_subject") or None,
            headers_col=o.get("headers_col") or None,
        )
        job_id = o.get("job_id") or None
        if job_id is not None and (any(c in job_id for c in " \t\r\n") or not job_id.isprintable()):
            raise SparkConfigError(f"option job_id must be a token, not {job_id!r}")
        return cls(target, job_id, o.get("report_subject") or None)


@dataclass
class Written(WriterCommitMessage):
    """What one task stored (its commit message)."""

    partition: int
    rows: int
    duplicates: int
    first_seq: int
    last_seq: int
    #: the query id (streaming) or job id (batch) the task's rows were named after
    name: str


async def _check_report_subject(options: WriteOptions) -> None:
    subject = options.report_subject
    if subject is None:
        return
    t = options.target
    nc = await t.conn.connect()
    try:
        try:
            await t.conn.jetstream(nc).find_stream(subject)
        except NatsError as exc:
            raise SparkConfigError(
                f"report_subject={subject!r}: no stream stores it, so the records of "
                f"commit and abort would be lost ({exc})"
            ) from None
    finally:
        await nc.close()


# Spark makes the writer again to commit or abort each micro-batch, in a Python worker it
# may reuse: a check that passed there is not made again for a while (options and schema
# alike), so a batch's commit does not wait for three more connections.
_CHECKED: dict[bytes, tuple[float, str]] = {}
_CHECKED_FOR = 60.0


def _start(options: WriteOptions, schema: StructType) -> str:
    """The checks made when the query (or the batch write) starts, before any row is sent:
    the columns, the stream, the report subject. Returns the stream's name."""
    check_columns(options.target, schema)
    key = pickle.dumps((options, schema.json()))
    now = time.monotonic()
    hit = _CHECKED.get(key)
    if hit is not None and now - hit[0] < _CHECKED_FOR:
        return hit[1]
    stream = run_sync(check_stream(options.target))
    run_sync(_check_report_subject(options))
    _CHECKED[key] = (now, stream)
    return stream


def _write(options: WriteOptions, batches: Iterator[pa.RecordBatch], streaming: bool) -> Written:
    """Runs in a Spark task: publish the partition, return what it stored."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    partition = ctx.partitionId() if ctx is not None else 0
    t = options.target
    if streaming:
        query, batch = task_micro_batch(ctx, "jetstream", "to name the rows after")
        name, base = query, f"{query}:{batch}"
    else:
        name = base = options.job_id or ""
        if t.key_col is None and not options.job_id:
            raise SparkConfigError(
                "df.write.format('jetstream') needs option key_col (a column unique per row) "
                "or job_id (rows named <job_id>:<partition>:<row>)"
            )
    res = run_pooled(write_batches(t, f"{base}:{partition}", batches, partition))
    return Written(partition, res.rows, res.duplicates, res.first_seq, res.last_seq, name)


def _record(
    options: WriteOptions,
    messages: Sequence[WriterCommitMessage | None],
    batch_id: int | None,
    committed: bool,
) -> dict[str, Any]:
    """Log what a batch stored (or, aborted, what it did not), publish it to the report
    subject, and return it."""
    done = [m for m in messages if isinstance(m, Written)]
    failed = len(messages) - len(done)
    firsts = [m.first_seq for m in done if m.first_seq]
    record: dict[str, Any] = {
        "status": "committed" if committed else "aborted",
        "stream": options.target.stream,
        "batch": batch_id,
        "name": next((m.name for m in done if m.name), None),
        "rows": sum(m.rows for m in done),
        "duplicates": sum(m.duplicates for m in done),
        "first_seq": min(firsts) if firsts else 0,
        "last_seq": max((m.last_seq for m in done), default=0),
        "partitions": sorted(m.partition for m in done),
        "failed_partitions": failed,
    }
    what = f"batch {batch_id}" if batch_id is not None else f"write {record['name'] or ''}".strip()
    if committed:
        log.info(
            "jetstream writer: %s committed: %d rows confirmed by stream %r (%d of them "
            "already stored), sequences %d..%d",
            what,
            record["rows"],
            record["stream"],
            record["duplicates"],
            record["first_seq"],
            record["last_seq"],
        )
    else:
        log.warning(
            "jetstream writer: %s aborted: %d of %d partitions were not confirmed (their rows "
            "may be partly stored; writing the batch again stores each row once); the "
            "others confirmed %d rows",
            what,
            failed,
            len(messages),
            record["rows"],
        )
    if options.report_subject is not None and (record["rows"] or not committed):
        run_sync(_publish_record(options, record, batch_id))
    return record


async def _publish_record(options: WriteOptions, record: dict[str, Any], batch: int | None) -> None:
    t = options.target
    nc = await t.conn.connect()
    try:
        js = t.conn.jetstream(nc)
        # a commit Spark makes again (a restart between the write and the commit log)
        # records once; every abort records
        msg_id = f"{record['name']}:{batch}:committed" if record["status"] == "committed" else None
        assert options.report_subject is not None
        await js.publish(options.report_subject, msgspec.json.encode(record), msg_id=msg_id)
    finally:
        await nc.close()


class StreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("jetstream")``: see the module's doc."""

    def __init__(self, options: WriteOptions, schema: StructType) -> None:
        self.options = options
        self.stream = _start(options, schema)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Written:
        return _write(self.options, iterator, streaming=True)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _record(self.options, messages, batchId, committed=True)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _record(self.options, messages, batchId, committed=False)


class BatchWriter(DataSourceArrowWriter):
    """``df.write.format("jetstream").mode("append")``: see the module's doc."""

    def __init__(self, options: WriteOptions, schema: StructType, overwrite: bool) -> None:
        if overwrite:
            raise SparkConfigError(
                "mode('overwrite'): the jetstream writer only appends to a stream; use "
                "mode('append')"
            )
        t = options.target
        if t.key_col is None and not options.job_id:
            raise SparkConfigError(
                "df.write.format('jetstream') needs option key_col (a column unique per row) "
                "or job_id (rows named <job_id>:<partition>:<row>)"
            )
        self.options = options
        self.stream = _start(options, schema)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Written:
        return _write(self.options, iterator, streaming=False)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        _record(self.options, messages, None, committed=True)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        _record(self.options, messages, None, committed=False)
