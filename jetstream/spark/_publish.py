"""Publishing Arrow batches of rows to a stream, exactly once per row within the stream's
duplicate window: what the foreachBatch sink and the ``jetstream`` writer share.

Every row gets a deterministic ``Nats-Msg-Id`` (its key column, or ``<prefix>:<row
index>``), so a task or batch that Spark runs again stores nothing twice. Rows go out
through ``publish_async`` with a bounded window, over the connection the process keeps
for the target's settings (``_pool``); every PubAck is checked, rows whose publish failed
are sent once more each with the same id, and a partition that still cannot confirm all
its rows fails its task.

With the target's ``commit_subject`` the rows carry no id: ``_commits.Committer`` sends
them in atomic chunks closed by markers, exactly once at any distance in time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from ..bulk import abandon_publishes, msg_id_headers, publish_rows
from ..errors import BadHeaderError, NatsError, StreamNotFoundError
from ..protocol.headers import NATS_MSG_ID, Headers, encode_headers, parse_headers
from ..protocol.subjects import subject_matches
from ._commits import Committer, marker_prefix
from ._common import SparkConfigError, SparkWriteError, patiently
from ._pool import lease
from ._target import Target

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["PartitionResult", "ROW_COL", "write_batches"]

_json = msgspec.json.Encoder()
# the header block of a row that carries only its message id: encode_headers' own, with
# a %b for the id (so a row costs one bytes formatting, not an encode)
_ID_HDR = encode_headers({NATS_MSG_ID: "%b"})
# a writing connection reconnects until write_timeout says to give up
_WRITER_CONNECT = {"max_reconnect_attempts": -1}


@dataclass(frozen=True)
class PartitionResult:
    """What one partition stored: rows confirmed by a PubAck (stored now or found
    already stored), the duplicates among them, and the stream sequences of the new ones
    (0 when nothing new was stored)."""

    partition: int
    rows: int = 0
    duplicates: int = 0
    first_seq: int = 0
    last_seq: int = 0
    #: the partitions of the DataFrame whose rows the task wrote, where it wrote several
    #: (a batch coalesced to fewer tasks: see ``ROW_COL``); empty: ``partition`` alone
    parts: tuple[int, ...] = ()


#: the column the sink adds before it coalesces a batch (``monotonically_increasing_id()``:
#: the row's partition in the DataFrame in the high bits, its index there in the low
#: ones), so that a row keeps the id ``<base>:<partition>:<row index>`` however many tasks
#: write the batch
ROW_COL = "__jetstream_row"
_ROW_BITS = 33


def _row_headers(
    traced: dict[str, str],
    hcols: Sequence[tuple[str, list[Any]]],
    hmaps: list[Any] | None,
    i: int,
) -> dict[str, Any] | None:
    """Row ``i``'s headers: the trace context, the entries of its ``headers_col`` map (a
    value or a list of values each), then its ``headers_cols`` (the later win)."""
    out: dict[str, Any] = dict(traced)
    if hmaps is not None and hmaps[i]:
        for key, value in hmaps[i]:
            if value is None:
                continue
            if isinstance(value, list):
                value = [v for v in value if v is not None]
                if not value:
                    continue
            out[key] = value
    for h, col in hcols:
        if col[i] is not None:
            out[h] = str(col[i])
    return out or None


def _check_id(msg_id: str) -> None:
    """Refuse an id that is empty or cannot be a header value (CR, LF, NUL...)."""
    if not msg_id:
        raise SparkWriteError("a row's message id (its key column) is empty")
    try:
        encode_headers({"Nats-Msg-Id": msg_id})
    except BadHeaderError as exc:
        raise SparkWriteError(f"a row's message id {msg_id!r} cannot be sent: {exc}") from None


class _PartitionWriter:
    """Publishes the rows of one partition with a bounded window of outstanding acks.

    It is the ``AckTracker`` of its publishes: each ack or failure comes back to
    ``acked`` / ``failed`` with the row, and no future is made per row.
    """

    def __init__(
        self,
        target: Target,
        id_prefix: str,
        js: Any,
        stream_subjects: Sequence[str] = (),
        row_col: str | None = None,
    ) -> None:
        self.t = target
        self.prefix = id_prefix
        self.row_col = row_col
        #: with ``commit_subject``: the rows go out in atomic batches with markers
        self.committer = (
            Committer(js, target.stream, target.write_timeout)
            if target.commit_subject is not None
            else None
        )
        #: the DataFrame's partitions whose rows were written (with ``row_col``)
        self.parts: set[int] = set()
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
        # the subjects the target stream stores (rows of subject_col are checked against
        # them before anything of their batch is sent); those seen to match
        self._patterns = tuple(stream_subjects)
        self._stored: set[str] = set()

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

    def _check_subject(self, subject: str, row: int) -> None:
        if any(subject_matches(p, subject) for p in self._patterns):
            self._stored.add(subject)
            return
        raise SparkConfigError(
            f"subject_col={self.t.subject_col!r}: row {row} has subject {subject!r}, which "
            f"stream {self.t.stream!r} does not store (its subjects: {list(self._patterns)})"
        )

    async def write(self, batch: pa.RecordBatch) -> None:
        t = self.t
        n = batch.num_rows
        if not n:
            return
        names = batch.schema.names
        row_ids: list[str] | None = None
        committer = self.committer
        if committer is not None:
            positions = self._positions(batch, names)
        elif self.row_col is not None and t.key_col is None:
            row_ids = self._row_ids(batch.column(names.index(self.row_col)))
        if self.row_col is not None and self.row_col in names:
            names = [c for c in names if c != self.row_col]
            batch = batch.select(names)
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
        hmaps = (
            batch.column(names.index(t.headers_col)).to_pylist()
            if t.headers_col is not None
            else None
        )
        traced = dict(t.trace_headers)
        check = t.subject_col is not None and bool(self._patterns)
        stored = self._stored
        # (subject, data, header block, msg id); with a committer (subject, data, headers
        # or None, ""): the chunk's batch sets the headers of its own
        rows: list[tuple[str, bytes, Any, str]] = []
        append = rows.append
        start = self.index
        for i in range(n):
            subject = subjects[i]
            if subject is None:
                raise SparkWriteError(f"row {start + i}: the subject column is null")
            if check and subject not in stored:
                self._check_subject(subject, start + i)
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
            if committer is not None:
                append((subject, data, _row_headers(traced, hcols, hmaps, i), ""))
                continue
            if keys is not None:
                key = keys[i]
                if key is None:
                    raise SparkWriteError(
                        f"row {start + i}: key column {t.key_col!r} is null; a row "
                        f"without a key cannot be deduplicated"
                    )
                msg_id = str(key)
            elif row_ids is not None:
                msg_id = row_ids[i]
            else:
                msg_id = f"{self.prefix}:{start + i}"
            if hcols or traced or hmaps is not None:
                headers = _row_headers(traced, hcols, hmaps, i)
                try:
                    hdr = encode_headers(msg_id_headers(headers, msg_id))
                except BadHeaderError as exc:
                    raise SparkWriteError(f"row {start + i}: {exc}") from None
            else:
                if not msg_id or not msg_id.isprintable():
                    _check_id(msg_id)
                hdr = _ID_HDR % msg_id.encode()
            append((subject, data, hdr, msg_id))
        if committer is not None:
            prefixes, indexes = positions
            await committer.add(
                marker_prefix(t.commit_subject or "", self.prefix),
                [(s, d, h) for s, d, h, _ in rows],
                indexes if indexes is not None else range(start, start + n),
                prefixes,
            )
            self.index = start + n
            return
        # the window itself, many rows a call: a row needs no future of its own; room in
        # it is waited for through faults (the acks of rows sent into a server that does
        # not answer time out, and those rows are sent again by ``finish``)
        await publish_rows(self.js, rows, self, timeout=self.t.write_timeout)
        self.index = start + n

    def _positions(
        self, batch: pa.RecordBatch, names: Sequence[str]
    ) -> tuple[list[str] | None, list[int] | None]:
        """Where each row's chunk marker goes: with ``row_col``, the marker prefix of its
        partition and its index there (from the column); else (None, None): the rows
        follow the partition's earlier ones under the writer's own prefix."""
        if self.row_col is None or self.row_col not in names:
            return None, None
        import pyarrow.compute as pc

        rows = batch.column(list(names).index(self.row_col))
        part = pc.shift_right(rows, _ROW_BITS).to_pylist()
        index = pc.bit_wise_and(rows, (1 << _ROW_BITS) - 1).to_pylist()
        self.parts.update(part)
        base = marker_prefix(self.t.commit_subject or "", self.prefix)
        by_part = {p: f"{base}.{p}" for p in set(part)}
        return [by_part[p] for p in part], index

    def _row_ids(self, rows: pa.Array) -> list[str]:
        """``<prefix>:<partition>:<row index>`` of each row, from its ``ROW_COL`` value."""
        import pyarrow as pa
        import pyarrow.compute as pc

        part = pc.shift_right(rows, _ROW_BITS)
        self.parts.update(pc.unique(part).to_pylist())
        index = pc.bit_wise_and(rows, (1 << _ROW_BITS) - 1)
        ids = pc.binary_join_element_wise(
            self.prefix, part.cast(pa.string()), index.cast(pa.string()), ":"
        )
        out: list[str] = ids.to_pylist()
        return out

    async def finish(self) -> None:
        committer = self.committer
        if committer is not None:
            try:
                await committer.finish()
            finally:
                self.rows, self.duplicates = committer.rows, committer.duplicates
                self.first_seq, self.last_seq = committer.first_seq, committer.last_seq
                self.retried = committer.retried
            return
        if self.js.publish_async_pending:
            try:
                # every publish resolves within its timeout (the window's sweep)
                await self.js.publish_async_complete(self.js.timeout * 2 + 5)
            except NatsError:
                abandon_publishes(self.js, "no PubAck")
        # rows whose publish failed (a cut connection, a paused server, a leader
        # election): again each, with the same id, through the publish that retries
        # until its deadline and waits for its ack; the first waits the fault out, the
        # task's whole wait bounded by write_timeout
        still: list[tuple[str, BaseException]] = []
        lost, self.lost = self.lost, []
        self.retried += len(lost)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.t.write_timeout
        for (subject, data, hdr, msg_id), _ in lost:
            # the row's own headers: its header block without the id (passed apart)
            own = parse_headers(hdr)[2]
            own.pop(NATS_MSG_ID, None)
            headers: Headers | None = own or None
            try:
                ack = await self.js.publish(
                    subject,
                    data,
                    headers=headers,
                    msg_id=msg_id,
                    timeout=max(deadline - loop.time(), 0.05),
                    retry_attempts=self.t.retries,
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


async def write_batches(
    target: Target,
    id_prefix: str,
    batches: Iterable[pa.RecordBatch],
    partition: int = 0,
    row_col: str | None = None,
) -> PartitionResult:
    """Publish every row of ``batches`` (one partition) with the ids ``<id_prefix>:<row
    index>`` (or the key column; with ``row_col``, ``<id_prefix>:<partition>:<row
    index>`` of the column's numbers, a column not sent); return what was stored once
    every row is confirmed.

    The connection is the one the process keeps for ``target``'s settings (``_pool``),
    made when the first row comes: a partition without rows connects to nothing."""
    rows = iter(batches)
    first = next((b for b in rows if b.num_rows), None)
    if first is None:
        return PartitionResult(partition)

    async def connect() -> Any:
        # a server restarting or out of reach is waited for (write_timeout)
        return await patiently(
            f"publishing to {target.stream or target.subject!r}",
            target.write_timeout,
            lambda: target.conn.connect(**_WRITER_CONNECT),
        )

    async with lease(
        target.conn, connect, _WRITER_CONNECT, publish_async_max_pending=target.max_pending
    ) as js:
        patterns: Sequence[str] = ()
        if target.subject_col is not None and target.stream is not None:
            patterns = await _stream_subjects(js, target)
        writer = _PartitionWriter(target, id_prefix, js, patterns, row_col)
        try:
            await writer.write(first)
            for batch in rows:
                await writer.write(batch)
            await writer.finish()
        except BaseException:
            if writer.committer is not None:
                await writer.committer.cancel()
            raise
    return PartitionResult(
        partition,
        writer.rows,
        writer.duplicates,
        writer.first_seq,
        writer.last_seq,
        tuple(sorted(writer.parts)),
    )


async def _stream_subjects(js: Any, target: Target) -> Sequence[str]:
    try:
        info = (await js.stream(target.stream)).cached_info
    except StreamNotFoundError:
        raise SparkConfigError(f"stream={target.stream!r}: no such stream") from None
    subjects = info.config.subjects
    return subjects if isinstance(subjects, list) else ()
