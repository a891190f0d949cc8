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
    user, password, token, creds, connect_timeout, tls_ca, tls_cert, tls_key,
    api_prefix, domain, timeout

Rows: ``subject`` (string), ``data`` (binary), ``headers`` (map of string to string; a
header given several times keeps its values joined by ", "), ``sequence`` (long, the stream
sequence), ``timestamp`` (when the message was stored).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as _dt
import queue
import threading
import time
from collections.abc import AsyncIterator, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
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
from ..errors import JetStreamError, NatsError, StreamNotFoundError
from ..ordered import OrderedStream
from ._columns import ARROW_SCHEMA, Layout, column_run, run_columns, token
from ._common import (
    ConnectSpec,
    SparkConfigError,
    connect_spec_from_options,
    lower_keys,
    number_option,
    run_sync,
)
from ._plan import Limits, bytes_end, lost_range, plan, removed

if TYPE_CHECKING:
    from jetstream import Client, OrderedConsumer
    from jetstream.api import StreamState
    from jetstream.protocol.ops import MsgRun
    from jetstream.stream import Stream

__all__ = [
    "ARROW_SCHEMA",
    "SCHEMA",
    "BatchReader",
    "SeqRange",
    "StreamReader",
    "read_batches",
]

SCHEMA = (
    "subject string, data binary, headers map<string,string>, sequence long, timestamp timestamp"
)
# messages taken from the consumer per Arrow batch: the first batches are small (a short
# range answers quickly), later ones grow to this
_FIRST_CHUNK = 1000
_MAX_CHUNK = 16384
# messages asked for per pull (at most the range's length)
_PULL_BATCH = 16384
# Arrow batches read ahead of the Spark task (see read_batches)
_AHEAD = 2
# a reader's consumer is deleted when it finishes; this is for a task that dies first
_INACTIVE = 30.0


@dataclass(frozen=True)
class _Options:
    conn: ConnectSpec
    stream: str
    subjects: tuple[str, ...]
    start_seq: int | None
    start_time: _dt.datetime | None
    end_seq: int | None
    limits: Limits
    partitions: int

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> _Options:
        o = lower_keys(options)
        conn = connect_spec_from_options(o, "source")
        stream = o.get("stream")
        if not stream:
            raise SparkConfigError("the jetstream source needs option stream=")
        start_time = None
        if o.get("start_time"):
            try:
                start_time = _dt.datetime.fromisoformat(o["start_time"])
            except ValueError:
                raise SparkConfigError(
                    f"option start_time={o['start_time']!r} is not an ISO 8601 time"
                ) from None
            if start_time.tzinfo is None:
                start_time = start_time.replace(tzinfo=_dt.UTC)
        subjects = tuple(s.strip() for s in o.get("subjects", "").split(",") if s.strip())
        return cls(
            conn,
            stream,
            subjects,
            number_option(o, "start_seq", 1),
            start_time,
            number_option(o, "end_seq", 0),
            Limits.parse(o),
            number_option(o, "partitions", 1) or 1,
        )


class SeqRange(InputPartition):
    """The stream sequences ``[first, end)`` one Spark partition reads."""

    def __init__(self, first: int, end: int) -> None:
        super().__init__((first, end))
        self.first = first
        self.end = end


def _split(first: int, end: int, parts: int) -> list[SeqRange]:
    span = end - first
    if span <= 0:
        return []
    parts = max(1, min(parts, span))
    step, extra = divmod(span, parts)
    out = []
    lo = first
    for i in range(parts):
        hi = lo + step + (1 if i < extra else 0)
        out.append(SeqRange(lo, hi))
        lo = hi
    return out


def _missing(opts: _Options) -> SparkConfigError:
    return SparkConfigError(
        f"stream={opts.stream!r}: stream {opts.stream!r} does not exist on "
        f"{', '.join(opts.conn.servers)}"
    )


@contextlib.asynccontextmanager
async def _stream(opts: _Options) -> AsyncIterator[Stream]:
    """The stream on a connection of its own (closed on leaving); a missing stream is a
    ``SparkConfigError`` naming it."""
    nc = await opts.conn.connect()
    try:
        try:
            stream = await opts.conn.jetstream(nc).stream(opts.stream)
        except StreamNotFoundError:
            raise _missing(opts) from None
        yield stream
    finally:
        await nc.close()


async def _latest(opts: _Options) -> int:
    """The stream's last sequence + 1."""
    async with _stream(opts) as stream:
        return stream.cached_info.state.last_seq + 1


async def _bounds(opts: _Options) -> tuple[int, int]:
    """(where a read starts, the stream's last sequence + 1), checking the stream exists."""
    async with _stream(opts) as stream:
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
            return (msgs[0].metadata.sequence.stream if msgs else latest), latest
        finally:
            await oc.delete()


class _RangeReader:
    """Reads the messages of one sequence range, an Arrow batch at a time."""

    def __init__(self, opts: _Options, first: int, end: int) -> None:
        self.opts = opts
        self.first = first
        self.end = end
        #: the lowest sequence not read yet
        self.next_seq = first
        self.nc: Client | None = None
        self.oc: OrderedConsumer | None = None
        self.it: OrderedStream | None = None
        self.done = False
        self.chunk_size = _FIRST_CHUNK
        # where the stream sequence, the time and the pending count are among the tokens
        # of an ack subject (learnt from the first)
        self._layout: Layout | None = None

    async def open(self) -> None:
        o = self.opts
        self.nc = nc = await o.conn.connect()
        # the consumer's messages come in runs cut out of each feed at once
        nc.use_bulk_parse(column_run)
        js = o.conn.jetstream(nc)
        try:
            stream = await js.stream(o.stream)
        except StreamNotFoundError:
            raise _missing(o) from None
        if not self._check_range(stream.cached_info.state):
            self.done = True
            return
        self.oc = oc = await stream.ordered_consumer(
            filter_subjects=list(o.subjects),
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=self.first,
            inactive_threshold=_INACTIVE,
        )
        # the answer that made the consumer says how many messages it has to deliver
        consumer = oc.consumer
        pending = consumer.cached_info.num_pending if consumer is not None else None
        if pending is None:
            pending = (await oc.info()).num_pending
        if not pending:
            self.done = True
            return
        batch = min(_PULL_BATCH, self.end - self.first)
        self.it = it = oc.messages(max_messages=batch, expires=5.0, runs=True)
        await it.__aenter__()

    def _check_range(self, state: StreamState) -> bool:
        """The range against the stream as the task finds it: limits or a purge may
        have removed the head of the range since the batch was planned, which is data
        loss (``lost_range``). False when nothing of the range is left to read. (A
        stream made again is found by the next batch's planning.)"""
        first, end, fail = self.first, self.end, self.opts.limits.fail_on_data_loss
        if state.first_seq > first:
            lost_range(
                self.opts.stream,
                removed(first, min(state.first_seq, end) - 1),
                fail,
            )
            return state.first_seq < end
        return True

    def _learn(self, reply: str | None) -> Layout:
        """The layout of the consumer's ack subjects, learnt from the first."""
        if self._layout is None:
            self._layout = Layout.of(reply or "")
        return self._layout

    def _last_one(self, reply: str | None) -> bool:
        """True if the message of ``reply`` ends the range: the last sequence of it, or
        of the stream."""
        layout = self._learn(reply)
        seq = token(reply, layout.seq_at)
        return seq >= self.end - 1 or token(reply, layout.pending_at) == 0

    async def chunk(self) -> pa.RecordBatch | None:
        """The next messages of the range as one Arrow batch; None when there are none.

        The messages are taken a run at a time (what one read of the socket brought),
        and their fields go into Arrow columns a run at a time."""
        it = self.it
        if self.done or it is None:
            return None
        # at most this many messages can still fall inside the range (sequences are
        # distinct and ascending), so nothing past it is waited for
        want = min(self.chunk_size, self.end - self.next_seq)
        self.chunk_size = min(self.chunk_size * 2, _MAX_CHUNK)
        runs: list[MsgRun] = []
        got = 0
        wait = self.opts.conn.timeout
        try:
            while got < want:
                # about to wait for the network: if the last message ends the range
                # (or the stream), nothing more is coming for it
                if runs and not it.pending and self._last_one(runs[-1].reply(-1)):
                    break
                more = await it.take_runs(wait)
                runs += more
                got += sum(map(len, more))
        except (NatsError, StopAsyncIteration):
            # nothing more arrives: the rest of the range was deleted or expired
            self.done = True
        if not runs:
            self.done = True
            return None
        return self._batch(runs)

    def _batch(self, runs: list[MsgRun]) -> pa.RecordBatch:
        layout = self._learn(runs[0].reply(0))
        parts = [run_columns(run, layout) for run in runs]
        if len(parts) == 1:
            subjects, datas, headers, seqs, nanos = parts[0]
        else:
            subjects, datas, headers, seqs, nanos = map(pa.concat_arrays, zip(*parts, strict=True))
        n = len(seqs)
        if n > 1 and not pc.all(pc.greater(seqs[1:], seqs[: n - 1])).as_py():
            # the ordered consumer hands over ascending stream sequences, always
            raise JetStreamError(
                f"stream {self.opts.stream!r}: the ordered read of [{self.first}, "
                f"{self.end}) went back in sequence"
            )
        last = seqs[n - 1].as_py()
        if last >= self.end:
            # the tail of the batch lies past the range: cut it off
            n = int(pc.sum(pc.less(seqs, self.end)).as_py() or 0)
            self.done = True
            subjects, datas, headers = subjects[:n], datas[:n], headers[:n]
            seqs = seqs[:n]
            nanos = nanos[:n]
            last = seqs[n - 1].as_py() if n else self.end
        elif last >= self.end - 1 or token(runs[-1].reply(-1), layout.pending_at) == 0:
            self.done = True
        self.next_seq = last + 1
        stamps = pc.divide(nanos, 1000).cast(pa.timestamp("us", tz="UTC"))
        return pa.RecordBatch.from_arrays(
            [subjects, datas, headers, seqs, stamps], schema=ARROW_SCHEMA
        )

    async def close(self) -> None:
        if self.it is not None:
            self.it.stop()
        if self.oc is not None:
            await self.oc.delete()
        if self.nc is not None:
            await self.nc.close()


def read_batches(opts: _Options, first: int, end: int) -> Generator[pa.RecordBatch, None, None]:
    """Yield the messages of ``[first, end)`` as Arrow batches, inside a Spark task.

    The range is read on an event loop of its own in a thread beside the task's, a few
    batches ahead (``_AHEAD``): while Spark sends one batch on to its JVM, the next is
    read off the socket and built, instead of the connection standing still between
    batches. Memory stays within those few batches."""
    ahead: queue.Queue[pa.RecordBatch | BaseException | None] = queue.Queue(_AHEAD)
    stop = threading.Event()

    def put(item: pa.RecordBatch | BaseException | None) -> bool:
        while not stop.is_set():
            try:
                ahead.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def work() -> None:
        loop = asyncio.new_event_loop()
        reader = _RangeReader(opts, first, end)
        try:
            loop.run_until_complete(reader.open())
            while not stop.is_set():
                batch = loop.run_until_complete(reader.chunk())
                if batch is None:
                    break
                if batch.num_rows and not put(batch):
                    return
                if reader.done:
                    break
            put(None)
        except BaseException as exc:
            put(exc)
        finally:
            try:
                loop.run_until_complete(reader.close())
            finally:
                loop.close()

    thread = threading.Thread(target=work, name=f"jetstream-read-{first}", daemon=True)
    thread.start()
    try:
        while True:
            item = ahead.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        thread.join(opts.conn.timeout + 5)


def _read_range(opts: _Options, first: int, end: int) -> Iterator[tuple[Any, ...]]:
    """The rows of ``[first, end)`` as tuples (subject, data, headers, sequence,
    timestamp), from ``read_batches``: for callers that want rows, not batches."""
    batches = read_batches(opts, first, end)
    try:
        for batch in batches:
            yield from zip(*(c.to_pylist() for c in batch.columns), strict=True)
    finally:
        batches.close()


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The planning side of ``spark.readStream``: it lives on the driver for the whole
    query (in PySpark's source process), so the ``availableNow`` target, the time of the
    last batch and the stream's latest sequence seen are kept between calls."""

    def __init__(self, opts: _Options) -> None:
        self.opts = opts
        self._target: int | None = None
        self._latest: int | None = None
        self._last_batch = time.monotonic()

    def initialOffset(self) -> dict[str, int]:
        start, _ = run_sync(_bounds(self.opts))
        return {"seq": start}

    def prepareForTriggerAvailableNow(self) -> None:
        """Fix the end of an ``availableNow`` run: what the stream holds now."""
        self._target = run_sync(_latest(self.opts))

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
        return run_sync(self._plan(start, isinstance(limit, ReadAllAvailable)))

    async def _plan(self, start: dict[str, int], read_all: bool) -> dict[str, int]:
        o = self.opts
        async with _stream(o) as stream:
            state = stream.cached_info.state
            self._latest = state.last_seq + 1
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
        offset = p.offset(start)
        if offset != start:
            self._last_batch = time.monotonic()
        return offset

    def reportLatestOffset(self) -> dict[str, int] | None:
        """The stream's last sequence + 1 as last seen when planning: Spark shows it as
        the source's ``latestOffset`` in the query progress, beside ``endOffset``."""
        return None if self._latest is None else {"seq": self._latest}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[SeqRange]:
        return _split(end.get("from", start["seq"]), end["seq"], self.opts.partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, SeqRange)
        return read_batches(self.opts, partition.first, partition.end)

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to release: the stream keeps its messages; offsets live in the
        query's checkpoint."""


class BatchReader(DataSourceReader):
    def __init__(self, opts: _Options) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[SeqRange]:
        start, latest = run_sync(_bounds(self.opts))
        end = latest if self.opts.end_seq is None else min(latest, self.opts.end_seq + 1)
        return _split(start, end, self.opts.partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, SeqRange)
        return read_batches(self.opts, partition.first, partition.end)
