"""One Spark partition's read of the ``jetstream`` source: the stream sequences
``[first, end)``, handed to Spark as Arrow record batches.

The range is read with an ordered consumer (filtered on the server) from the range's
first sequence; the messages come in runs cut out of each feed at once
(``jetstream.bulk.take_runs``), and their fields go into Arrow columns a run at a time
(``_columns``), so no Python object is made per row.

Nothing is skipped silently. The read ends when the last message of the range (or of the
stream) has come, or when the stream's own state proves that the rest of the range is
gone: its first sequence moved past it (limits, a purge: data loss, reported as
``fail_on_data_loss`` says), the stream was deleted or made again (data loss too), or
no message of the range is left at or after the next sequence (deleted: simply absent).
Anything else, a server paused, restarting or electing a leader, a connection cut, a
consumer lost, is waited through: the connection reconnects, the ordered consumer is made
again from the next sequence, and a read that is cut off altogether opens again. Only
after ``read_timeout`` seconds with nothing read does the task fail, with a
``SparkReadTimeoutError`` that names the stream, the range and what was read; Spark
retries the task, and a re-run reads the range again.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from ..api import DeliverPolicy
from ..bulk import ordered_runs, take_runs
from ..errors import JetStreamError, MessageNotFoundError, NatsError, StreamNotFoundError
from ..errors import TimeoutError as NatsTimeoutError
from ._columns import (
    ARROW_SCHEMA,
    ARROW_SCHEMA_ARRAYS,
    Layout,
    column_run,
    run_columns,
    token,
)
from ._common import SparkReadTimeoutError, patiently
from ._losses import Loss, report_losses
from ._plan import lost_range, removed, span
from ._readopts import ReadOptions, missing_stream

if TYPE_CHECKING:
    import datetime as _dt

    from jetstream import Client, OrderedConsumer
    from jetstream.ordered import OrderedStream
    from jetstream.protocol.ops import MsgRun
    from jetstream.stream import Stream

__all__ = ["RangeReader", "read_batches", "read_rows"]

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
# how long one wait for messages lasts before the stream's state is asked whether the
# rest of the range is still there (the ordered consumer's heartbeats notice a lost
# consumer within about 2 s of this)
_WAIT = 5.0
# a consumer left behind by a read that was cut off is deleted within this, or expires
_DROP_TIMEOUT = 1.0


class RangeReader:
    """Reads the messages of one sequence range, an Arrow batch at a time (see the
    module)."""

    def __init__(self, opts: ReadOptions, first: int, end: int, report: str | None = None) -> None:
        self.opts = opts
        self.first = first
        self.end = end
        #: where the driver hears of the gaps this read skips (``_losses``)
        self.report = report
        #: the gaps skipped (``fail_on_data_loss=false``), reported to the driver
        self.losses: list[Loss] = []
        #: the lowest sequence not read yet
        self.next_seq = first
        #: rows handed over so far
        self.rows = 0
        #: sequences of the range found removed before they were read (reported as
        #: ``fail_on_data_loss`` says); ``_lost_to``: the end of what was reported
        self.lost = 0
        self._lost_to = first
        #: times the read was opened again after it was cut off
        self.reopened = 0
        self.done = False
        self.nc: Client | None = None
        self.stream: Stream | None = None
        self.oc: OrderedConsumer | None = None
        self.it: OrderedStream | None = None
        self.chunk_size = _FIRST_CHUNK
        # the stream's creation time when first opened: another one is a stream made again
        self._created: _dt.datetime | None = None
        # when something was last read (or the read opened): read_timeout counts from it
        self._since = time.monotonic()
        # where the stream sequence, the time and the pending count are among the tokens
        # of an ack subject (learnt from the first)
        self._layout: Layout | None = None

    def what(self) -> str:
        """The read, as errors name it: the stream, the range and what was read."""
        got = f"{self.rows} rows read" + (
            f", up to sequence {self.next_seq - 1}" if self.next_seq > self.first else ""
        )
        return (
            f"stream {self.opts.stream!r}, {span(self.first, self.end - 1)} "
            f"({self.end - self.first} in all; {got})"
        )

    # -- opening ------------------------------------------------------------------------

    async def open(self) -> None:
        """Open the read (again) from ``next_seq``, waiting through a server that does
        not answer for up to ``read_timeout``."""
        left = self.opts.read_timeout - (time.monotonic() - self._since)
        await patiently(f"reading {self.what()}", max(left, 0.0), self._open_once)
        self._since = time.monotonic()

    async def _open_once(self) -> None:
        await self._drop()
        o = self.opts
        # reconnects for as long as the read lasts: read_timeout bounds the wait
        self.nc = nc = await o.conn.connect(max_reconnect_attempts=-1)
        # the consumer's messages come in runs cut out of each feed at once
        nc.use_bulk_parse(column_run)
        js = o.conn.jetstream(nc)
        try:
            self.stream = stream = await js.stream(o.stream)
        except StreamNotFoundError:
            if self._created is None:
                raise missing_stream(o) from None
            self._stream_gone("was deleted")
            return
        info = stream.cached_info
        if self._created is None:
            self._created = info.created
        elif info.created != self._created:
            self._stream_gone("was deleted and made again")
            return
        if not self._removed_below(info.state.first_seq):
            self.done = True
            return
        self.oc = oc = await stream.ordered_consumer(
            filter_subjects=list(o.subjects),
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=self.next_seq,
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
        batch = min(_PULL_BATCH, self.end - self.next_seq)
        it = ordered_runs(oc, max_messages=batch, expires=5.0)
        await it.__aenter__()
        self.it = it

    # -- what the stream's state proves -------------------------------------------------

    def _removed_below(self, first_seq: int) -> bool:
        """Everything of the range below ``first_seq`` (the stream's first sequence) is
        gone: limits or a purge removed it since the batch was planned, which is data
        loss (``lost_range``: raised, or counted and logged). False when nothing of the
        range is left to read."""
        low = max(self.next_seq, self._lost_to)
        if first_seq > low:
            upto = min(first_seq, self.end)
            self._skip(low, upto, removed(low, upto - 1))
        return first_seq < self.end

    def _skip(self, low: int, upto: int, why: str) -> None:
        """Sequences ``[low, upto)`` are gone: raise ``SparkDataLossError``, or (with
        ``fail_on_data_loss=false``) log and count them, for the driver too."""
        lost_range(self.opts.stream, why, self.opts.limits.fail_on_data_loss)
        self.losses.append(Loss(self.opts.stream, low, upto - 1, why))
        self.lost += upto - low
        self._lost_to = upto

    def _stream_gone(self, how: str) -> None:
        """The stream was deleted (and maybe made again) while the range was being read:
        the rest of the range is lost."""
        low = max(self.next_seq, self._lost_to)
        if low < self.end:
            lost = span(low, self.end - 1)
            why = f"{lost} were lost: the stream {how} before this query read them"
            self._skip(low, self.end, why)
        self.done = True

    async def report_losses(self) -> None:
        """Tell the driver what this read skipped (when it listens: a streaming query)."""
        if self.report is not None and self.losses:
            await report_losses(self.opts.conn, self.report, self.losses, self.opts.read_timeout)
            self.losses = []

    async def rest_is_gone(self) -> bool:
        """True when the stream's state proves that no message of the range is left to
        read after ``next_seq`` (data loss is reported on the way); False when it shows
        one, or says nothing (no answer)."""
        stream = self.stream
        if stream is None:
            return False
        try:
            info = await stream.info()
        except StreamNotFoundError:
            self._stream_gone("was deleted")
            return True
        except NatsError:
            return False
        if info.created != self._created:
            self._stream_gone("was deleted and made again")
            return True
        if not self._removed_below(info.state.first_seq):
            return True
        low = max(self.next_seq, self._lost_to)
        for subject in self.opts.subjects or (">",):
            try:
                msg = await stream.get_msg(low, next_by_subject=subject, direct=False)
            except MessageNotFoundError:
                continue
            except NatsError:
                return False
            if msg.seq < self.end:
                return False
        return True

    async def _gap(self, seq: int) -> None:
        """The next message read is ``seq``, past ``next_seq``: sequences in between
        are filtered out or deleted (absent), or were removed by limits or a purge
        before they were read (data loss: ``_removed_below``)."""
        stream = self.stream
        assert stream is not None
        info = await patiently(f"reading {self.what()}", self.opts.read_timeout, stream.info)
        # no further than the message read: the sequences between are absent
        self._removed_below(min(info.state.first_seq, seq))

    # -- reading -------------------------------------------------------------------------

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

    def _deadline(self, exc: BaseException) -> None:
        """Fail loudly once ``read_timeout`` has passed with nothing read."""
        waited = time.monotonic() - self._since
        if waited > self.opts.read_timeout:
            raise SparkReadTimeoutError(
                f"reading {self.what()}: nothing came for {waited:.0f}s (option "
                f"read_timeout={self.opts.read_timeout:g}s) and the stream does not say "
                f"the rest is gone; last: {exc or type(exc).__name__}"
            ) from exc

    async def chunk(self) -> pa.RecordBatch | None:
        """The next messages of the range as one Arrow batch; None when the range is
        read.

        The messages are taken a run at a time (what one read of the socket brought),
        and their fields go into Arrow columns a run at a time."""
        if self.done:
            return None
        # at most this many messages can still fall inside the range (sequences are
        # distinct and ascending), so nothing past it is waited for
        want = min(self.chunk_size, self.end - self.next_seq)
        self.chunk_size = min(self.chunk_size * 2, _MAX_CHUNK)
        runs: list[MsgRun] = []
        got = 0
        while got < want and not self.done:
            it = self.it
            if it is None:
                self.reopened += 1
                await self.open()
                continue
            # about to wait for the network: if the last message ends the range (or the
            # stream), nothing more is coming for it
            if runs and not it.pending and self._last_one(runs[-1].reply(-1)):
                break
            try:
                more = await take_runs(it, _WAIT)
            except NatsTimeoutError as exc:
                if runs:
                    break  # hand over what came; the next chunk waits on
                if await self.rest_is_gone():
                    self.done = True
                else:
                    self._deadline(exc)
                continue
            except (NatsError, StopAsyncIteration) as exc:
                # the read was cut off (the stream deleted, the connection closed):
                # opened again from what was handed over
                await self._drop()
                if runs:
                    break
                self._deadline(exc)
                continue
            runs += more
            got += sum(map(len, more))
            self._since = time.monotonic()
        if not runs:
            return None
        seq = token(runs[0].reply(0), self._learn(runs[0].reply(0)).seq_at)
        if seq > max(self.next_seq, self._lost_to):
            await self._gap(seq)
        return self._batch(runs)

    def _batch(self, runs: list[MsgRun]) -> pa.RecordBatch:
        layout = self._learn(runs[0].reply(0))
        arrays = self.opts.header_arrays
        parts = [run_columns(run, layout, arrays) for run in runs]
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
        self.rows += n
        stamps = pc.divide(nanos, 1000).cast(pa.timestamp("us", tz="UTC"))
        return pa.RecordBatch.from_arrays(
            [subjects, datas, headers, seqs, stamps],
            schema=ARROW_SCHEMA_ARRAYS if arrays else ARROW_SCHEMA,
        )

    # -- closing -------------------------------------------------------------------------

    async def _drop(self) -> None:
        """Let go of the connection and consumer of a read that was cut off (its
        consumer deleted if the server answers at once, else left to expire)."""
        it, oc, nc = self.it, self.oc, self.nc
        self.it = self.oc = self.nc = None
        self.stream = None
        if it is not None:
            it.stop()
        if oc is not None:
            try:
                async with asyncio.timeout(_DROP_TIMEOUT):
                    await oc.delete()
            except TimeoutError:
                pass
        if nc is not None:
            await nc.close()

    async def close(self) -> None:
        it, oc, nc = self.it, self.oc, self.nc
        self.it = self.oc = self.nc = None
        if it is not None:
            it.stop()
        if oc is not None:
            await oc.delete()
        if nc is not None:
            await nc.close()


def read_batches(
    opts: ReadOptions, first: int, end: int, report: str | None = None
) -> Generator[pa.RecordBatch, None, None]:
    """Yield the messages of ``[first, end)`` as Arrow batches, inside a Spark task.

    The range is read on an event loop of its own in a thread beside the task's, a few
    batches ahead (``_AHEAD``): while Spark sends one batch on to its JVM, the next is
    read off the socket and built, instead of the connection standing still between
    batches. Memory stays within those few batches. ``report``: where the driver hears
    of gaps skipped (see ``_losses``)."""
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
        reader: RangeReader | None = None
        try:
            reader = RangeReader(opts, first, end, report)
            loop.run_until_complete(reader.open())
            while not stop.is_set():
                batch = loop.run_until_complete(reader.chunk())
                if batch is None:
                    break
                if batch.num_rows and not put(batch):
                    return
                if reader.done:
                    break
            loop.run_until_complete(reader.report_losses())
            put(None)
        except BaseException as exc:
            put(exc)
        finally:
            try:
                if reader is not None:
                    loop.run_until_complete(reader.close())
            finally:
                loop.close()

    thread = threading.Thread(target=work, name=f"jetstream-read-{first}", daemon=True)
    thread.start()
    try:
        while True:
            try:
                item = ahead.get(timeout=1.0)
            except queue.Empty:
                if thread.is_alive():
                    continue
                raise JetStreamError(
                    f"stream {opts.stream!r}: the read of [{first}, {end}) ended without a word"
                ) from None
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        thread.join(opts.conn.timeout + 5)


def read_rows(opts: ReadOptions, first: int, end: int) -> Iterator[tuple[Any, ...]]:
    """The rows of ``[first, end)`` as tuples (subject, data, headers, sequence,
    timestamp), from ``read_batches``: for callers that want rows, not batches."""
    batches = read_batches(opts, first, end)
    try:
        for batch in batches:
            yield from zip(*(c.to_pylist() for c in batch.columns), strict=True)
    finally:
        batches.close()
