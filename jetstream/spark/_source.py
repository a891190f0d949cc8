"""Reading a stream from Spark: ``spark.readStream.format("jetstream")`` and
``spark.read.format("jetstream")``, through PySpark's Python Data Source API.

Offsets are stream sequences: ``{"seq": n}`` is the next sequence to read. Each
micro-batch covers the sequences ``[start, end)`` and is split into contiguous ranges,
one per Spark partition; a partition reads its range inside its task with an ordered
consumer (filtered on the server) and stops at the range's end, so every message of the
stream is read once per query, across restarts from the checkpoint too.

Options (Spark lowercases option names, so they are written in snake_case):

    servers              NATS URL(s), comma-separated (required)
    stream               the stream to read (required)
    subjects             filter subjects, comma-separated (default: all)
    start_seq            first sequence to read (default: the stream's first)
    start_time           ISO 8601 time: start at the first message stored at or after it
    end_seq              last sequence to read, inclusive (batch reads only)
    max_rows_per_batch   at most this many sequences per micro-batch
    partitions           ranges per batch (default 2)
    user, password, token, creds, tls_ca, tls_cert, tls_key, api_prefix, domain, timeout

Rows: ``subject`` (string), ``data`` (binary), ``headers`` (map of string to string; a
header given several times keeps its values joined by ", "), ``sequence`` (long, the stream
sequence), ``timestamp`` (when the message was stored).
"""

from __future__ import annotations

import asyncio
import datetime as _dt
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows

from ..api import DeliverPolicy
from ..errors import NatsError, StreamNotFoundError
from ._common import ConnectSpec, SparkConfigError, run_sync

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ..client import Client
    from ..ordered import OrderedConsumer, OrderedStream

__all__ = ["SCHEMA", "JetStreamDataSource", "SeqRange", "register"]

SCHEMA = (
    "subject string, data binary, headers map<string,string>, sequence long, timestamp timestamp"
)
# messages taken from the consumer per step of a partition's reader
_CHUNK = 1000
# a reader's consumer is deleted when it finishes; this is for a task that dies first
_INACTIVE = 30.0
_CONNECT_KEYS = ("user", "password", "token", "creds", "name")


@dataclass(frozen=True)
class _Options:
    conn: ConnectSpec
    stream: str
    subjects: tuple[str, ...]
    start_seq: int | None
    start_time: _dt.datetime | None
    end_seq: int | None
    max_rows: int | None
    partitions: int

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> _Options:
        o = {k.lower(): v for k, v in options.items()}
        servers = o.get("servers")
        stream = o.get("stream")
        if not servers:
            raise SparkConfigError("the jetstream source needs option servers=")
        if not stream:
            raise SparkConfigError("the jetstream source needs option stream=")

        def number(key: str, low: int) -> int | None:
            raw = o.get(key)
            if raw is None:
                return None
            try:
                value = int(raw)
            except ValueError:
                raise SparkConfigError(f"option {key}={raw!r} is not a whole number") from None
            if value < low:
                raise SparkConfigError(f"option {key} must be at least {low}, not {value}")
            return value

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
        conn_opts: dict[str, Any] = {k: o[k] for k in _CONNECT_KEYS if o.get(k)}
        conn = ConnectSpec.make(
            o["servers"],
            tls_ca=o.get("tls_ca"),
            tls_cert=o.get("tls_cert"),
            tls_key=o.get("tls_key"),
            api_prefix=o.get("api_prefix"),
            domain=o.get("domain"),
            timeout=float(o.get("timeout", "10")),
            **conn_opts,
        )
        subjects = tuple(s.strip() for s in o.get("subjects", "").split(",") if s.strip())
        return cls(
            conn,
            stream,
            subjects,
            number("start_seq", 1),
            start_time,
            number("end_seq", 0),
            number("max_rows_per_batch", 1),
            number("partitions", 1) or 2,
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


async def _bounds(opts: _Options) -> tuple[int, int]:
    """(where a read starts, the stream's last sequence + 1), checking the stream exists."""
    nc = await opts.conn.connect()
    try:
        js = opts.conn.jetstream(nc)
        try:
            stream = await js.stream(opts.stream)
        except StreamNotFoundError:
            raise SparkConfigError(
                f"stream {opts.stream!r} does not exist on {', '.join(opts.conn.servers)}"
            ) from None
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
    finally:
        await nc.close()


def _headers(msg: Any) -> dict[str, str] | None:
    if not msg.raw_headers:
        return None
    h = msg.headers
    return {k: ", ".join(h.get_all(k)) for k in h}


class _RangeReader:
    """Reads the messages of one sequence range, a chunk at a time."""

    def __init__(self, opts: _Options, first: int, end: int) -> None:
        self.opts = opts
        self.first = first
        self.end = end
        self.nc: Client | None = None
        self.oc: OrderedConsumer | None = None
        self.it: OrderedStream | None = None
        self.done = False

    async def open(self) -> None:
        o = self.opts
        self.nc = nc = await o.conn.connect()
        js = o.conn.jetstream(nc)
        try:
            stream = await js.stream(o.stream)
        except StreamNotFoundError:
            raise SparkConfigError(f"stream {o.stream!r} does not exist") from None
        self.oc = oc = await stream.ordered_consumer(
            filter_subjects=list(o.subjects),
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=self.first,
            inactive_threshold=_INACTIVE,
        )
        if not (await oc.info()).num_pending:
            self.done = True
            return
        self.it = oc.messages(max_messages=min(_CHUNK, self.end - self.first), expires=5.0)
        await self.it.__aenter__()

    async def chunk(self) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = []
        it = self.it
        if self.done or it is None:
            return rows
        end = self.end
        wait = self.opts.conn.timeout
        while len(rows) < _CHUNK:
            try:
                msg = await it.next(timeout=wait)
            except NatsError:
                # nothing more arrives: the rest of the range was deleted or expired
                self.done = True
                break
            meta = msg.metadata
            seq = meta.sequence.stream
            if seq >= end:
                self.done = True
                break
            rows.append((msg.subject, msg.data, _headers(msg), seq, meta.timestamp))
            if seq >= end - 1 or meta.num_pending == 0:
                self.done = True
                break
        return rows

    async def close(self) -> None:
        if self.it is not None:
            self.it.stop()
        if self.oc is not None:
            await self.oc.delete()
        if self.nc is not None:
            await self.nc.close()


def _read_range(opts: _Options, first: int, end: int) -> Iterator[tuple[Any, ...]]:
    """Yield the rows of ``[first, end)``; runs inside a Spark task on its own event loop,
    stepped one chunk at a time, so memory stays within a chunk."""
    loop = asyncio.new_event_loop()
    reader = _RangeReader(opts, first, end)
    try:
        loop.run_until_complete(reader.open())
        while True:
            rows = loop.run_until_complete(reader.chunk())
            yield from rows
            if reader.done:
                break
    finally:
        try:
            loop.run_until_complete(reader.close())
        finally:
            loop.close()


class _StreamReader(DataSourceStreamReader):
    def __init__(self, opts: _Options) -> None:
        self.opts = opts

    def initialOffset(self) -> dict[str, int]:
        start, _ = run_sync(_bounds(self.opts))
        return {"seq": start}

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_rows:
            return ReadMaxRows(self.opts.max_rows)
        return ReadAllAvailable()

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        _, latest = run_sync(_bounds(self.opts))
        end = max(latest, start["seq"])
        if isinstance(limit, ReadMaxRows):
            end = min(end, start["seq"] + limit.max_rows)
        return {"seq": end}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[SeqRange]:
        return _split(start["seq"], end["seq"], self.opts.partitions)

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        assert isinstance(partition, SeqRange)
        return _read_range(self.opts, partition.first, partition.end)

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to release: the stream keeps its messages; offsets live in the
        query's checkpoint."""


class _BatchReader(DataSourceReader):
    def __init__(self, opts: _Options) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[SeqRange]:
        start, latest = run_sync(_bounds(self.opts))
        end = latest if self.opts.end_seq is None else min(latest, self.opts.end_seq + 1)
        return _split(start, end, self.opts.partitions)

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        assert isinstance(partition, SeqRange)
        return _read_range(self.opts, partition.first, partition.end)


class JetStreamDataSource(DataSource):
    """The ``jetstream`` format of ``spark.read`` and ``spark.readStream``."""

    @classmethod
    def name(cls) -> str:
        return "jetstream"

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: Any) -> DataSourceReader:
        return _BatchReader(_Options.parse(self.options))

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return _StreamReader(_Options.parse(self.options))


def register(spark: SparkSession) -> None:
    """Register the ``jetstream`` format with ``spark`` (once per session)."""
    spark.dataSource.register(JetStreamDataSource)
