"""Reading a stream from Spark: ``spark.readStream.format("jetstream")`` and
``spark.read.format("jetstream")``, through PySpark's Python Data Source API.

Offsets are stream sequences: ``{"seq": n}`` is the next sequence to read. Each
micro-batch covers the sequences ``[start, end)`` and is split into contiguous ranges,
one per Spark partition; a partition reads its range inside its task with an ordered
consumer (filtered on the server) and stops at the range's end, so every message of the
stream is read once per query, across restarts from the checkpoint too. A range is
handed to Spark as Arrow record batches, built a column at a time from the runs of
messages the ordered stream hands over (``OrderedStream.take_runs``): the connection's
feeds are cut into runs of MSG ops by a vectorised bulk parser (``_frames.py``), so no
Python object is made per row, and the stream sequences and times come out of the ack
subjects of a whole run at once (``_columns.py``).

Under ``Trigger.AvailableNow`` the stream's end is fixed when the query starts and read
in as many micro-batches as the limits allow (``_plan.plan``); every progress reports the
stream's end seen when planning (``reportLatestOffset``), so the lag can be watched.

Options (Spark lowercases option names, so they are written in snake_case):

    servers              NATS URL(s), comma-separated (required)
    stream               the stream to read (required)
    subjects             filter subjects, comma-separated (default: all)
    start_seq            first sequence to read (default: the stream's first)
    start_time           ISO 8601 time: start at the first message stored at or after it
    end_seq              last sequence to read, inclusive (batch reads only)
    max_rows_per_batch   at most this many sequences per micro-batch
    max_bytes_per_batch  at most this many bytes per micro-batch (``_plan.stored_size``)
    min_rows_per_batch   wait for at least this many new sequences before a batch ...
    max_trigger_delay    ... but no longer than this (default 15m)
    fail_on_data_loss    true (default): messages removed before the query read them fail
                         it (``SparkDataLossError``); false: skipped with a warning
    partitions           ranges per batch, read side by side (default 1: one reader, as a
                         stream is one ordered log, like a Kafka topic partition; more
                         split a large read over executors with cores to spare)
    read_timeout         how long a task's read and the driver's planning wait through a
                         server that does not answer (paused, restarting, electing a
                         leader, out of reach) before they fail (default 5m; see ``_range``)
    headers_format       joined (default): headers map<string,string>, several values of
                         a header joined by ", "; array: map<string,array<string>>, every
                         value kept (what the writer's headers_col takes back as it is)
    user, password, token, creds, name, connect_timeout, tls_ca, tls_cert, tls_key,
    api_prefix, domain, timeout

Rows: ``subject`` (string), ``data`` (binary), ``headers`` (map of string to string; a
header given several times keeps its values joined by ", "; with ``headers_format=array``
map of string to array of string, every value kept as it came), ``sequence`` (long, the
stream sequence), ``timestamp`` (when the message was stored).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import TYPE_CHECKING, TypeVar

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from ..api import DeliverPolicy
from ..errors import TimeoutError as NatsTimeoutError
from ._columns import ARROW_SCHEMA
from ._common import patiently, run_sync
from ._losses import LossLedger
from ._plan import bytes_end, plan
from ._range import read_batches
from ._readopts import ReadOptions, open_stream

if TYPE_CHECKING:
    from jetstream.stream import Stream

__all__ = [
    "ARROW_SCHEMA",
    "SCHEMA",
    "SCHEMA_ARRAYS",
    "BatchReader",
    "SeqRange",
    "StreamReader",
]

T = TypeVar("T")

SCHEMA = (
    "subject string, data binary, headers map<string,string>, sequence long, timestamp timestamp"
)
#: the rows with ``headers_format=array``: every value of a header kept
SCHEMA_ARRAYS = (
    "subject string, data binary, headers map<string,array<string>>, sequence long, "
    "timestamp timestamp"
)
# the consumer of a planning read is deleted when it is done; this is for one cut off
_INACTIVE = 30.0


class SeqRange(InputPartition):
    """The stream sequences ``[first, end)`` one Spark partition reads; ``report``:
    where the driver hears of gaps the read skips (a streaming query's, see
    ``_losses``)."""

    def __init__(self, first: int, end: int, report: str | None = None) -> None:
        super().__init__((first, end))
        self.first = first
        self.end = end
        self.report = report


def _split(first: int, end: int, parts: int, report: str | None = None) -> list[SeqRange]:
    span = end - first
    if span <= 0:
        return []
    parts = max(1, min(parts, span))
    step, extra = divmod(span, parts)
    out = []
    lo = first
    for i in range(parts):
        hi = lo + step + (1 if i < extra else 0)
        out.append(SeqRange(lo, hi, report))
        lo = hi
    return out


def _read(opts: ReadOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """A task's read of its partition. When a batch plans no range at all (an empty
    stream or range), Spark still runs one task, with a partition of its own: it reads
    nothing."""
    if not isinstance(partition, SeqRange):
        return iter(())
    return read_batches(opts, partition.first, partition.end, partition.report)


async def _on_stream(
    opts: ReadOptions, what: str, work: Callable[[Stream], Awaitable[T]], *, patient: bool
) -> T:
    """``work(stream)`` on a connection of its own. ``patient``: a server that does
    not answer (paused, restarting, electing a leader) is waited through, the work done
    again from the start, for up to ``read_timeout``; then it fails loudly. Planning
    never goes on from half an answer. The first contact of a query is not patient: a
    wrong address or a server that is down fails at once."""

    async def attempt() -> T:
        async with open_stream(opts) as stream:
            return await work(stream)

    if not patient:
        return await attempt()
    return await patiently(f"stream {opts.stream!r}: {what}", opts.read_timeout, attempt)


async def _latest(stream: Stream) -> int:
    """The stream's last sequence + 1."""
    return stream.cached_info.state.last_seq + 1


async def _bounds(opts: ReadOptions, stream: Stream) -> tuple[int, int]:
    """(where a read starts, the stream's last sequence + 1)."""
    state = stream.cached_info.state
    latest = state.last_seq + 1
    if opts.start_seq is not None:
        return opts.start_seq, latest
    if opts.start_time is None:
        return max(state.first_seq, 1), latest
    oc = await stream.ordered_consumer(
        filter_subjects=list(opts.subjects),
        deliver_policy=DeliverPolicy.BY_START_TIME,
        opt_start_time=opts.start_time,
        inactive_threshold=_INACTIVE,
    )
    try:
        if not (await oc.info()).num_pending:
            return latest, latest
        msgs = await oc.fetch(1, expires=opts.conn.timeout)
        if not msgs:
            # the consumer has messages to deliver and none came: no answer, not "none"
            raise NatsTimeoutError(
                f"no message at or after start_time={opts.start_time.isoformat()} came "
                f"within {opts.conn.timeout:g}s, though the stream holds some"
            )
        return msgs[0].metadata.sequence.stream, latest
    finally:
        await oc.delete()


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The planning side of ``spark.readStream``: it lives on the driver for the whole
    query (in PySpark's source process), so the ``availableNow`` target, the time of the
    last batch and the stream's latest sequence seen are kept between calls."""

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self._target: int | None = None
        self._latest: int | None = None
        self._last_batch = time.monotonic()
        # the query's first contact with the server fails at once when it cannot be
        # reached; every later one waits through faults (``_on_stream``)
        self._contacted = False
        # where the tasks report the gaps they skip (fail_on_data_loss=false)
        self._ledger = None if opts.limits.fail_on_data_loss else LossLedger(opts.conn)

    def __getstate__(self) -> dict[str, object]:
        # what the executors get of it: no ledger (a thread and a connection)
        return {**self.__dict__, "_ledger": None}

    def _run(self, what: str, work: Callable[[Stream], Awaitable[T]]) -> T:
        out = run_sync(_on_stream(self.opts, what, work, patient=self._contacted))
        self._contacted = True
        return out

    def initialOffset(self) -> dict[str, int]:
        start, _ = self._run("where to start", lambda s: _bounds(self.opts, s))
        return {"seq": start}

    def prepareForTriggerAvailableNow(self) -> None:
        """Fix the end of an ``availableNow`` run: what the stream holds now."""
        self._target = self._run("the end of an availableNow run", _latest)

    def getDefaultReadLimit(self) -> ReadLimit:
        limits = self.opts.limits
        if limits.max_rows:
            return ReadMaxRows(limits.max_rows)
        if limits.max_bytes:
            return ReadMaxBytes(limits.max_bytes)
        if limits.min_rows:
            return ReadMinRows(limits.min_rows)
        return ReadAllAvailable()

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        """The end of the next batch. Any limit but ``ReadAllAvailable`` means the
        source's own limits (Spark passes the default one, or all available)."""
        read_all = isinstance(limit, ReadAllAvailable)
        offset = self._run("planning the next batch", lambda s: self._plan(s, start, read_all))
        ledger = self._ledger
        if ledger is not None:
            # what the last batch's tasks skipped goes into the query's count
            found = ledger.take()
            if found and offset != start:
                offset["lost"] = offset.get("lost", 0) + found
            elif found:
                ledger.give_back(found)
        return offset

    async def _plan(self, stream: Stream, start: dict[str, int], read_all: bool) -> dict[str, int]:
        o = self.opts
        state = stream.cached_info.state
        p = plan(
            o.stream,
            start,
            state.first_seq,
            state.last_seq,
            o.limits,
            read_all=read_all,
            target=self._target,
            waited=time.monotonic() - self._last_batch,
        )
        if o.limits.max_bytes and not read_all and p.end > p.first:
            end = await bytes_end(stream, o.subjects, p.first, p.end, o.limits.max_bytes)
            p = dataclasses.replace(p, end=end)
        self._latest = state.last_seq + 1
        offset = p.offset(start)
        if offset != start:
            self._last_batch = time.monotonic()
        return offset

    def reportLatestOffset(self) -> dict[str, int] | None:
        """The stream's last sequence + 1 as last seen when planning: Spark shows it as
        the source's ``latestOffset`` in the query progress, beside ``endOffset``."""
        return None if self._latest is None else {"seq": self._latest}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[SeqRange]:
        report = self._ledger.subject if self._ledger is not None else None
        return _split(end.get("from", start["seq"]), end["seq"], self.opts.partitions, report)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.opts, partition)

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to release: the stream keeps its messages; offsets live in the
        query's checkpoint."""

    def stop(self) -> None:
        if self._ledger is not None:
            self._ledger.stop()


class BatchReader(DataSourceReader):
    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[SeqRange]:
        opts = self.opts
        start, latest = run_sync(
            _on_stream(opts, "where to read", lambda s: _bounds(opts, s), patient=False)
        )
        end = latest if self.opts.end_seq is None else min(latest, self.opts.end_seq + 1)
        return _split(start, end, self.opts.partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.opts, partition)
