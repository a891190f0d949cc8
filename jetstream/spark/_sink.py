"""Writing DataFrames to a JetStream stream, exactly once per row within the duplicate window.

Every row gets a deterministic ``Nats-Msg-Id``: the value of ``key_col`` when one is given,
otherwise ``<query id>:<batch id>:<partition>:<row index>`` (``<job id>:<partition>:<row
index>`` for ``write_dataframe``). When Spark re-runs a batch or a task after a failure,
the same rows get the same ids and the stream stores each of them once.

The rows are published from the executors (``mapInArrow``: Arrow batches, one connection
and one event loop per task, opened inside the task) through ``publish_async`` with a
bounded window; every PubAck is checked, rows whose publish failed are retried one at a
time with the same id, and a partition that still cannot confirm all its rows fails its
task, so Spark retries. ``mode="driver"`` collects the batch to the driver and publishes
from there (small batches; no executor round trip).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from ..errors import BadHeaderError, NatsError, StreamNotFoundError
from ..errors import TimeoutError as NatsTimeoutError
from ..protocol.headers import NATS_MSG_ID, Headers, encode_headers, parse_headers
from ._common import ConnectSpec, SparkConfigError, SparkWriteError, run_sync

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

__all__ = ["BatchReport", "ForeachBatchSink", "foreach_batch_sink", "write_dataframe"]

_RESULT_SCHEMA = "partition int, rows long, duplicates long, first_seq long, last_seq long"
_json = msgspec.json.Encoder()
# the header block of a row that carries only its message id
_ID_HDR = b"NATS/1.0\r\nNats-Msg-Id: %b\r\n\r\n"


def _check_id(msg_id: str) -> None:
    """Refuse an id that is empty or cannot be a header value (CR, LF, NUL...)."""
    if not msg_id:
        raise SparkWriteError("a row's message id (its key column) is empty")
    try:
        encode_headers({"Nats-Msg-Id": msg_id})
    except BadHeaderError as exc:
        raise SparkWriteError(f"a row's message id {msg_id!r} cannot be sent: {exc}") from None


@dataclass(frozen=True)
class _Target:
    """What to publish and how: the part of the sink that travels to the executors."""

    conn: ConnectSpec
    subject: str | None
    subject_col: str | None
    value_col: str | None
    headers_cols: tuple[str, ...]
    key_col: str | None
    stream: str | None
    max_pending: int
    retries: int
    min_duplicate_window: float


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
    partitions: list[int] = field(default_factory=list)


class _PartitionWriter:
    """Publishes the rows of one partition with a bounded window of outstanding acks.

    It is the ``AckTracker`` of its publishes: each ack or failure comes back to
    ``acked`` / ``failed`` with the row, and no future is made per row.
    """

    def __init__(self, target: _Target, id_prefix: str, js: Any) -> None:
        self.t = target
        self.prefix = id_prefix
        self.js = js
        self.rows = 0
        self.duplicates = 0
        self.first_seq = 0
        self.last_seq = 0
        self.index = 0
        # rows whose publish failed: ((subject, data, header block, msg id), error)
        self.lost: list[tuple[tuple[str, bytes, bytes, str], BaseException]] = []
        # a row stored in another stream than the target's (raised by ``finish``)
        self.error: SparkWriteError | None = None
        #: rows published a second time by ``finish`` (their first publish failed)
        self.retried = 0

    # -- AckTracker (called from the read path: records, never raises) ----------------

    def acked(self, ack: Any) -> None:
        stream = self.t.stream
        if stream is not None and ack.stream != stream:
            if self.error is None:
                self.error = SparkWriteError(
                    f"row stored in stream {ack.stream!r}, not {stream!r}: the subject is "
                    f"bound to another stream"
                )
            return
        self.rows += 1
        if ack.duplicate:
            self.duplicates += 1
            return
        seq = ack.seq
        if not self.first_seq or seq < self.first_seq:
            self.first_seq = seq
        if seq > self.last_seq:
            self.last_seq = seq

    def failed(self, row: tuple[str, bytes, bytes, str], exc: BaseException) -> None:
        self.lost.append((row, exc))

    # -- writing ----------------------------------------------------------------------

    async def write(self, batch: pa.RecordBatch) -> None:
        t = self.t
        n = batch.num_rows
        if not n:
            return
        names = batch.schema.names
        if t.subject_col is not None:
            subjects: Sequence[Any] = batch.column(names.index(t.subject_col)).to_pylist()
        else:
            subjects = [t.subject] * n
        if t.value_col is not None:
            values: list[Any] = batch.column(names.index(t.value_col)).to_pylist()
        else:
            values = [_json.encode(r) for r in batch.to_pylist()]
        keys = batch.column(names.index(t.key_col)).to_pylist() if t.key_col is not None else None
        hcols = [(h, batch.column(names.index(h)).to_pylist()) for h in t.headers_cols]
        rows: list[tuple[str, bytes, bytes, str]] = []
        append = rows.append
        start = self.index
        for i in range(n):
            subject = subjects[i]
            if subject is None:
                raise SparkWriteError(f"row {start + i}: the subject column is null")
            data = values[i]
            if data is None:
                data = b""
            elif isinstance(data, str):
                data = data.encode()
            elif not isinstance(data, bytes):
                raise SparkWriteError(
                    f"row {start + i}: value column {t.value_col!r} holds a "
                    f"{type(data).__name__}; it must be binary or string (value_col=None "
                    f"publishes each row as JSON)"
                )
            if keys is not None:
                key = keys[i]
                if key is None:
                    raise SparkWriteError(
                        f"row {start + i}: key column {t.key_col!r} is null; a row "
                        f"without a key cannot be deduplicated"
                    )
                msg_id = str(key)
            else:
                msg_id = f"{self.prefix}:{start + i}"
            if hcols:
                headers = {h: str(col[i]) for h, col in hcols if col[i] is not None} or None
                hdr = encode_headers(
                    self.js._publish_headers(headers, msg_id, None, None, None, None, None)
                )
            else:
                if not msg_id or not msg_id.isprintable():
                    _check_id(msg_id)
                hdr = _ID_HDR % msg_id.encode()
            append((subject, data, hdr, msg_id))
        # the window itself, many rows a call: a row needs no future of its own
        pub = self.js._publisher
        sent = 0
        while True:
            sent = pub.try_publish_rows(rows, sent, self)
            if sent == n:
                break
            await pub._wait_room(pub.timeout)
            await self.js.client._wait_writable()
        self.index = start + n

    async def finish(self) -> None:
        pub = self.js._publisher
        if pub.pending:
            try:
                # every publish resolves within its timeout (the window's sweep)
                await pub.wait_all(self.js.timeout * 2 + 5)
            except NatsError:
                pub._on_loss(NatsTimeoutError("no PubAck"))
        # rows whose publish failed (a cut connection, a leader election): once more each,
        # with the same id, through the publish that retries and waits for its ack
        still: list[tuple[str, BaseException]] = []
        lost, self.lost = self.lost, []
        self.retried += len(lost)
        for (subject, data, hdr, msg_id), _ in lost:
            # the row's own headers: its header block without the id (passed apart)
            own = parse_headers(hdr)[2]
            own.pop(NATS_MSG_ID, None)
            headers: Headers | None = own or None
            try:
                ack = await self.js.publish(
                    subject, data, headers=headers, msg_id=msg_id, retry_attempts=self.t.retries
                )
            except NatsError as err:
                still.append((msg_id, err))
                continue
            self.acked(ack)
        if self.error is not None:
            raise self.error
        if still:
            first_id, first_err = still[0]
            raise SparkWriteError(
                f"{len(still)} of {self.index} rows were not confirmed by the stream "
                f"(first: msg id {first_id!r}: {first_err}); Spark will retry them"
            )


async def _write_batches(
    target: _Target, id_prefix: str, batches: Iterable[pa.RecordBatch]
) -> tuple[int, int, int, int]:
    nc = None
    writer = None
    try:
        for batch in batches:
            if not batch.num_rows:
                continue
            if writer is None:
                nc = await target.conn.connect()
                js = target.conn.jetstream(nc, publish_async_max_pending=target.max_pending)
                writer = _PartitionWriter(target, id_prefix, js)
            await writer.write(batch)
        if writer is None:
            return 0, 0, 0, 0
        await writer.finish()
        return writer.rows, writer.duplicates, writer.first_seq, writer.last_seq
    finally:
        if nc is not None:
            await nc.close()


def _partition_task(
    target: _Target, id_base: str, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """Runs inside a Spark task: publish this partition, yield one row of counts."""
    import pyarrow as pa
    from pyspark import TaskContext

    ctx = TaskContext.get()
    partition = ctx.partitionId() if ctx is not None else 0
    rows, dups, first, last = run_sync(_write_batches(target, f"{id_base}:{partition}", batches))
    yield pa.RecordBatch.from_pydict(
        {
            "partition": pa.array([partition], pa.int32()),
            "rows": pa.array([rows], pa.int64()),
            "duplicates": pa.array([dups], pa.int64()),
            "first_seq": pa.array([first], pa.int64()),
            "last_seq": pa.array([last], pa.int64()),
        }
    )


def _check_columns(target: _Target, columns: Sequence[str]) -> None:
    wanted = [
        ("subject_col", target.subject_col),
        ("value_col", target.value_col),
        ("key_col", target.key_col),
        *(("headers_cols", h) for h in target.headers_cols),
    ]
    for what, col in wanted:
        if col is not None and col not in columns:
            hint = " (value_col=None publishes each row as JSON)" if what == "value_col" else ""
            raise SparkConfigError(
                f"{what}={col!r} is not a column of the DataFrame; its columns are "
                f"{list(columns)}{hint}"
            )


def _check_value_type(target: _Target, df: DataFrame) -> None:
    col = target.value_col
    if col is None:
        return
    kind = df.schema[col].dataType.typeName()
    if kind not in ("binary", "string") and not kind.startswith(("varchar", "char")):
        raise SparkConfigError(
            f"value_col={col!r} is a {kind} column; the payload must be binary or string "
            f"(cast it, or value_col=None publishes each row as JSON)"
        )


async def _check_stream(target: _Target) -> str:
    """The stream the rows will land in, checked to exist and to deduplicate."""
    nc = await target.conn.connect()
    try:
        js = target.conn.jetstream(nc)
        name = target.stream
        if name is None:
            assert target.subject is not None
            try:
                name = await js.find_stream(target.subject)
            except NatsError as exc:
                raise SparkConfigError(
                    f"no stream stores subject {target.subject!r}: {exc}"
                ) from exc
        try:
            info = (await js.stream(name)).cached_info
        except StreamNotFoundError as exc:
            raise SparkConfigError(
                f"stream {name!r} does not exist on {', '.join(target.conn.servers)}; "
                f"create it (with a duplicate_window) before starting the query"
            ) from exc
        window = info.config.duplicate_window
        if not isinstance(window, float) or window < target.min_duplicate_window:
            have = f"{window:g}s" if isinstance(window, float) and window > 0 else "none"
            raise SparkConfigError(
                f"stream {name!r} has too short a duplicate_window ({have}): a batch re-run "
                f"later than that would be stored twice; set it to at least "
                f"{target.min_duplicate_window:g}s (and at most max_age), or lower "
                f"min_duplicate_window"
            )
        if target.subject is not None:
            try:
                owner = await js.find_stream(target.subject)
            except NatsError:
                owner = None
            if owner != name:
                raise SparkConfigError(
                    f"subject {target.subject!r} is not stored by stream {name!r}"
                    + (f" but by {owner!r}" if owner else "")
                )
        return name
    finally:
        await nc.close()


def _run_batch(
    target: _Target,
    df: DataFrame,
    id_base: str,
    batch_id: int,
    mode: Literal["executors", "driver"],
) -> BatchReport:
    report = BatchReport(batch_id)
    if mode == "driver":
        table = df.toArrow()
        parts = [(0, *run_sync(_write_batches(target, f"{id_base}:0", table.to_batches())))]
    else:
        rows = df.mapInArrow(partial(_partition_task, target, id_base), _RESULT_SCHEMA).collect()
        parts = [tuple(r) for r in rows]
    for p, n, d, first, last in parts:
        report.partitions.append(p)
        report.rows += n
        report.duplicates += d
        if first and (not report.first_seq or first < report.first_seq):
            report.first_seq = first
        report.last_seq = max(report.last_seq, last)
    return report


class ForeachBatchSink:
    """The function given to ``writeStream.foreachBatch``; see ``foreach_batch_sink``."""

    def __init__(self, target: _Target, mode: Literal["executors", "driver"]) -> None:
        self._target = target
        self._mode = mode
        self._checked: str | None = None
        #: the report of the last batch written
        self.last_report: BatchReport | None = None

    def __repr__(self) -> str:
        return f"<ForeachBatchSink stream={self._target.stream!r} mode={self._mode}>"

    def check(self, df: DataFrame) -> str:
        """Check the columns and the target stream; return the stream's name."""
        _check_columns(self._target, df.columns)
        _check_value_type(self._target, df)
        if self._checked is None:
            self._checked = run_sync(_check_stream(self._target))
        return self._checked

    def write(self, df: DataFrame, id_base: str, batch_id: int = 0) -> BatchReport:
        """Check, then write ``df`` with the row ids ``<id_base>:<partition>:<row>``."""
        self.check(df)
        self.last_report = _run_batch(self._target, df, id_base, batch_id, self._mode)
        return self.last_report

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        query_id = batch_df.sparkSession.sparkContext.getLocalProperty("sql.streaming.queryId")
        if not query_id:
            raise SparkConfigError(
                "no streaming query id: use this sink with writeStream.foreachBatch, "
                "or write_dataframe(..., job_id=...) for a batch job"
            )
        self.write(batch_df, f"{query_id}:{batch_id}", batch_id)


def foreach_batch_sink(
    servers: str | Sequence[str],
    *,
    subject: str | None = None,
    subject_col: str | None = None,
    value_col: str | None = "value",
    headers_cols: Sequence[str] = (),
    key_col: str | None = None,
    stream: str | None = None,
    max_pending: int = 4000,
    mode: Literal["executors", "driver"] = "executors",
    retries: int = 5,
    min_duplicate_window: float = 60.0,
    **connect_options: Any,
) -> ForeachBatchSink:
    """A function for ``df.writeStream.foreachBatch(...)`` that writes every row to a
    JetStream stream exactly once (within the stream's duplicate window).

    Args:
        servers: NATS URL(s), a list or a comma-separated string.
        subject: the subject of every row; or ``subject_col``: the column holding each
            row's subject.
        value_col: the payload column (binary or string). ``None``: each row serialised
            to JSON.
        headers_cols: columns sent as message headers (header name = column name).
        key_col: a column unique per row, used as its ``Nats-Msg-Id``. Prefer it: ids
            from positions are only safe when Spark recomputes a batch in the same order.
        stream: the stream that must store the rows (checked at query start; found from
            ``subject`` when not given).
        max_pending: publishes outstanding at once per task.
        mode: ``"executors"`` (default: each partition publishes from its task) or
            ``"driver"`` (collect the batch, publish from the driver: small batches).
        retries: attempts for a row whose publish failed, with the same id.
        min_duplicate_window: refuse a stream whose duplicate window is shorter (seconds):
            a batch re-run after the window has passed would be stored twice.
        connect_options: options of ``jetstream.connect`` that can be pickled (user,
            password, token, creds, connect_timeout, ...), plus ``tls_ca``, ``tls_cert``,
            ``tls_key`` (paths), ``api_prefix``, ``domain`` and ``timeout``.

    Raises (when the first batch runs, that is at query start):
        SparkConfigError: unknown column, missing stream, a duplicate window shorter
            than ``min_duplicate_window``, unreachable server.
        SparkWriteError: rows that could not be confirmed (the batch fails; Spark's retry
            or a restart from the checkpoint writes them again, deduplicated).
    """
    if (subject is None) == (subject_col is None):
        raise SparkConfigError("give exactly one of subject= and subject_col=")
    if subject is None and stream is None:
        raise SparkConfigError("with subject_col=, give stream= so it can be checked")
    if max_pending < 1:
        raise SparkConfigError("max_pending must be at least 1")
    target = _Target(
        ConnectSpec.make(servers, **connect_options),
        subject,
        subject_col,
        value_col,
        tuple(headers_cols),
        key_col,
        stream,
        max_pending,
        retries,
        min_duplicate_window,
    )
    return ForeachBatchSink(target, mode)


def write_dataframe(
    df: DataFrame, servers: str | Sequence[str], *, job_id: str, **options: Any
) -> BatchReport:
    """Write a (batch) DataFrame to a stream and return what was stored.

    The rows' ids are ``<job_id>:<partition>:<row index>`` unless ``key_col`` is given,
    so running the same job again with the same ``job_id`` stores nothing twice (within
    the duplicate window). The options are those of ``foreach_batch_sink``; the checks
    it makes at query start are made here before anything is sent.
    """
    if not job_id or any(c in job_id for c in " \t\r\n"):
        raise SparkConfigError(f"job_id must be a non-empty token, not {job_id!r}")
    return foreach_batch_sink(servers, **options).write(df, job_id)
