"""The source's Arrow columns of a run of messages: the subject, the payload, the header
map, and the stream sequence and time cut out of each ack subject.

A run found in the feed's bytes (``FrameRun``) gives its columns without a Python object
per message; a run of the parser's ops (``OpsRun``: a message the bulk parser left, one
with a header block) gives them from lists of its fields.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import NatsError
from ..message import ack_stream_index
from ..protocol.headers import parse_headers
from ..protocol.ops import Msg, MsgRun
from ._frames import FrameRun, Ints, digits, frame_run, repeated, windows

__all__ = [
    "ARROW_SCHEMA",
    "ARROW_SCHEMA_ARRAYS",
    "ColumnRun",
    "Columns",
    "Layout",
    "column_run",
    "run_columns",
    "strings",
    "token",
]

#: the source's rows (``_source.SCHEMA``) as Spark wants them in Arrow batches
ARROW_SCHEMA = pa.schema(
    [
        ("subject", pa.string()),
        ("data", pa.binary()),
        ("headers", pa.map_(pa.string(), pa.string())),
        ("sequence", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
    ]
)
HEADERS_TYPE = ARROW_SCHEMA.field("headers").type
#: the headers as they are (option headers_format=array): every value of a header kept,
#: in order, as the official NATS connector gives them
HEADER_ARRAYS_TYPE = pa.map_(pa.string(), pa.list_(pa.string()))
#: the source's rows with ``HEADER_ARRAYS_TYPE`` headers
ARROW_SCHEMA_ARRAYS = ARROW_SCHEMA.set(
    ARROW_SCHEMA.get_field_index("headers"), pa.field("headers", HEADER_ARRAYS_TYPE)
)
# digits of a timestamp in nanoseconds (from 2001-09-09 to 2286-11-20)
_TS_DIGITS = 19
_DOT = ord(".")
#: runs of fewer of the parser's ops than this are read value by value
_FEW = 8

_subject_of = attrgetter("subject")
_payload_of = attrgetter("payload")
_reply_of = attrgetter("reply")
_hdr_of = attrgetter("hdr")


@dataclass(frozen=True)
class Layout:
    """Where the stream sequence, the time and the pending count are among the tokens of
    one consumer's ack subjects (9 tokens in v1, 11 or more in v2), learnt from one."""

    tokens: int
    seq_at: int
    ts_at: int
    pending_at: int

    @classmethod
    def of(cls, reply: str) -> Layout:
        """The layout of ``reply``, placed by ``ack_stream_index`` as every reader of ack
        subjects places it: the stream sequence, the time and the pending count are the
        third, fifth and sixth tokens after the stream's name.

        Raises:
            NatsError: ``reply`` is no ack subject (10 tokens fit neither layout).
        """
        n = reply.count(".") + 1
        at = ack_stream_index(n)
        if at < 0 or not reply.startswith("$JS.ACK."):
            raise NatsError(f"not a JetStream message: reply subject {reply!r}")
        return cls(n, at + 3, at + 5, at + 6)

    @property
    def pending_last(self) -> bool:
        """The pending count is the last token (9 tokens, or exactly 11)."""
        return self.tokens in (9, 11)


class Columns(NamedTuple):
    subjects: pa.Array
    datas: pa.Array
    headers: pa.Array
    seqs: pa.Array
    nanos: pa.Array


def token(reply: str | None, at: int) -> int:
    """The number at token ``at`` of an ack subject (-1: none there)."""
    try:
        return int((reply or "").split(".")[at])
    except (IndexError, ValueError):
        return -1


class ColumnRun(FrameRun):
    """A run found in the bytes whose columns were made as it was found
    (``column_run``), for ``layout``."""

    __slots__ = ("columns", "layout")

    def __init__(self, run: FrameRun, layout: Layout, columns: Columns) -> None:
        super().__init__(run.data, run.run_sid, run.ls, run.s1, run.s2, run.s3, run.cr, run.size)
        self.layout = layout
        self.columns = columns

    def split(self, k: int) -> tuple[MsgRun, MsgRun]:
        head, tail = super().split(k)
        assert isinstance(head, FrameRun) and isinstance(tail, FrameRun)
        cols = self.columns
        return (
            ColumnRun(head, self.layout, Columns(*(c[:k] for c in cols))),
            ColumnRun(tail, self.layout, Columns(*(c[k:] for c in cols))),
        )


def column_run(data: bytes, pos: int, max_line: int, max_payload: int) -> tuple[int, MsgRun | None]:
    """The source's bulk parser: ``frame_run``, and the columns of a run of ack subjects
    made at once, while the feed's bytes are still in the CPU's caches (made later, a
    batch of runs at a time, they cost twice as much: the bytes have to be read again
    from memory). A run whose numbers are not where its first ack subject says is left
    as it is, for ``run_columns`` to read the slow way."""
    end, run = frame_run(data, pos, max_line, max_payload)
    if isinstance(run, FrameRun):
        reply = run.reply(0)
        if reply.startswith("$JS.ACK.") and ack_stream_index(reply.count(".") + 1) > 0:
            layout = Layout.of(reply)
            numbers = _frame_numbers(run, layout)
            if numbers is not None:
                return end, ColumnRun(run, layout, _frame_columns(run, numbers))
    return end, run


def _frame_columns(run: FrameRun, numbers: tuple[pa.Array, pa.Array]) -> Columns:
    """The columns of a run found in the bytes (none has headers), with its numbers."""
    return Columns(run.subjects(), run.payloads(), pa.nulls(len(run), HEADERS_TYPE), *numbers)


def run_columns(run: MsgRun, layout: Layout, arrays: bool = False) -> Columns:
    """The columns of ``run`` (its ack subjects of ``layout``); ``arrays``: the headers
    as ``HEADER_ARRAYS_TYPE`` (every value of a header), else joined by ", "."""
    if isinstance(run, ColumnRun) and run.layout == layout:
        cols = run.columns
    elif isinstance(run, FrameRun):
        numbers = _frame_numbers(run, layout) or _split_numbers(
            [run.reply(i) for i in range(len(run))], layout
        )
        cols = _frame_columns(run, numbers)
    else:
        return _ops_columns(run, layout, arrays)
    # a run found in the bytes has no headers
    return cols._replace(headers=pa.nulls(len(cols.seqs), HEADER_ARRAYS_TYPE)) if arrays else cols


def _ops_columns(run: MsgRun, layout: Layout, arrays: bool) -> Columns:
    ops: list[Msg] = run.ops(Msg)
    replies = list(map(_reply_of, ops))
    if len(ops) < _FEW:
        # a few (what a bulk parser left at the start of a feed, cut by the read
        # before): value by value, as arrays cost more to set up than they take to read
        numbers = (
            pa.array([token(r, layout.seq_at) for r in replies], pa.int64()),
            pa.array([token(r, layout.ts_at) for r in replies], pa.int64()),
        )
    else:
        numbers = (_run_numbers(replies) if layout.pending_last else None) or _split_numbers(
            replies, layout
        )
    raws = list(map(_hdr_of, ops))
    kind = HEADER_ARRAYS_TYPE if arrays else HEADERS_TYPE
    if any(raws):
        headers = pa.array(list(map(_header_lists if arrays else _header_items, raws)), kind)
    else:
        headers = pa.nulls(len(ops), kind)
    return Columns(
        strings(list(map(_subject_of, ops))),
        pa.array(list(map(_payload_of, ops)), pa.binary()),
        headers,
        *numbers,
    )


def _frame_numbers(run: FrameRun, layout: Layout) -> tuple[pa.Array, pa.Array] | None:
    """The stream sequences and times of a run found in the bytes, cut out of its ack
    subjects there (None when a reply does not have the layout's tokens, or a number is
    not one). The stream sequences of a run without a gap (the first's to the last's one
    by one: the common case) are not read one by one.

    The common case, with the pending count the last token and of one width in the run:
    the dot before it is where the first reply has it, from the end, and the time the 19
    digits before that dot. Otherwise every dot of the replies is found at once, and each
    reply's by a search from its end."""
    a = np.frombuffer(run.data, np.uint8)
    start, end = run.reply_bounds()
    n = len(run)
    first_seq = token(run.reply(0), layout.seq_at)
    one_by_one = first_seq >= 0 and token(run.reply(n - 1), layout.seq_at) == first_seq + n - 1
    if one_by_one and layout.pending_last:
        reply = run.reply(0)
        ts_end = end - (len(reply) - reply.rfind("."))
        ts_start = ts_end - _TS_DIGITS
        if ((a[ts_end] == _DOT) & (a[ts_start - 1] == _DOT) & (ts_start > start)).all():
            nanos = _times(a, ts_start)
            if nanos is not None:
                return _ascending(first_seq, n), nanos
    lo = int(start[0])
    region = a[lo : int(end[-1])]
    dots = np.flatnonzero(np.equal(region, _DOT, out=np.empty(len(region), np.bool_)))
    dots += lo
    last = np.searchsorted(dots, end)  # past each reply's last dot
    if not (last - np.searchsorted(dots, start) == layout.tokens - 1).all():
        return None
    first = last - (layout.tokens - 1)  # each reply's first dot; token k ends at dot k
    ts_start = dots[first + layout.ts_at - 1] + 1
    if not (dots[first + layout.ts_at] - ts_start == _TS_DIGITS).all():
        return None
    nanos = _times(a, ts_start)
    if nanos is None:
        return None
    if one_by_one:
        return _ascending(first_seq, n), nanos
    seqs, ok = digits(a, dots[first + layout.seq_at - 1] + 1, dots[first + layout.seq_at])
    return (pa.array(seqs), nanos) if ok.all() else None


def _ascending(first: int, n: int) -> pa.Array:
    """The stream sequences ``first`` to ``first + n - 1`` (an ordered consumer's ascend,
    so n of them from the first's to the last's are all of those)."""
    return pa.array(np.arange(first, first + n, dtype=np.int64))


def _times(buf: npt.NDArray[np.uint8], start: Ints) -> pa.Array | None:
    """The 19-digit times at ``start`` in ``buf``, read by Arrow (None: not all digits)."""
    n = len(start)
    text = np.ascontiguousarray(windows(buf, start, _TS_DIGITS))
    offsets = np.arange(0, _TS_DIGITS * n + 1, _TS_DIGITS, dtype=np.int32)
    strings = pa.Array.from_buffers(
        pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(text)]
    )
    try:
        return pc.cast(strings, pa.int64())
    except pa.ArrowInvalid:
        return None


def _split_numbers(replies: list[str], layout: Layout) -> tuple[pa.Array, pa.Array]:
    """The stream sequences and times of ``replies``, each split into its tokens."""
    reply_array = pa.array(replies, pa.string())
    seq_at, ts_at = layout.seq_at, layout.ts_at
    if layout.pending_last:
        # the last four tokens: stream sequence, consumer sequence, time, pending
        tokens = pc.split_pattern(reply_array, ".", max_splits=4, reverse=True)
        seq_at, ts_at = 1, 3
    else:
        tokens = pc.split_pattern(reply_array, ".")
    return (
        pc.cast(pc.list_element(tokens, seq_at), pa.int64()),
        pc.cast(pc.list_element(tokens, ts_at), pa.int64()),
    )


def _run_numbers(replies: list[str]) -> tuple[pa.Array, pa.Array] | None:
    """The stream sequences and timestamps (ns) of ack subjects ending in ``.<stream seq>.
    <consumer seq>.<time>.<pending>``, when the stream sequences are those from the
    first's to the last's one by one (no gap: the common case, read from two subjects)
    and every time has 19 digits; else None.

    The times are cut from the subjects joined in one buffer, found by the dot before
    each pending count (a few vectorised steps back from each subject's end), and
    converted by Arrow: nothing per message in Python. Ordered-consumer stream
    sequences ascend, so n of them from ``first`` to ``first + n - 1`` are all of those.
    """
    n = len(replies)
    first = _token_from_end(replies[0], 4)
    last = _token_from_end(replies[-1], 4)
    if first < 0 or last - first != n - 1:
        return None
    joined = "".join(replies).encode()
    ends = np.cumsum(np.fromiter(map(len, replies), np.int64, n))
    if int(ends[-1]) != len(joined):  # not ASCII: lengths in characters are not bytes
        return None
    buf = np.frombuffer(joined, np.uint8)
    # the dot before each pending count (of at least one digit)
    dot = ends - 2
    todo = np.flatnonzero(buf[dot] != _DOT)
    for _ in range(21):
        if not todo.size:
            break
        dot[todo] -= 1
        todo = todo[buf[dot[todo]] != _DOT]
    else:
        return None
    start = dot - _TS_DIGITS
    if start.min() < 1 or (buf[start - 1] != _DOT).any():
        return None
    nanos = _times(buf, start)
    return None if nanos is None else (_ascending(first, n), nanos)


def _token_from_end(reply: str, back: int) -> int:
    """The number ``back`` tokens before the last of an ack subject (-1: none)."""
    try:
        return int(reply.rsplit(".", back)[1])
    except (IndexError, ValueError):
        return -1


def strings(values: list[str]) -> pa.Array:
    """``values`` as an Arrow string array; one subject repeated (a stream of one subject,
    the common case) is laid out at once rather than copied value by value."""
    n = len(values)
    one = values[0] if n else ""
    if n < 2 or values.count(one) != n or len(one) * n > 1 << 28:
        return pa.array(values, pa.string())
    return repeated(one.encode(), n)


def _header_items(raw: bytes | None) -> list[tuple[str, str]] | None:
    """A message's headers as map entries; a header given several times keeps its values
    joined by ", "."""
    if not raw:
        return None
    h = parse_headers(raw)[2]
    return [(k, ", ".join(h.get_all(k))) for k in h]


def _header_lists(raw: bytes | None) -> list[tuple[str, list[str]]] | None:
    """A message's headers as map entries, each with every value of its header."""
    if not raw:
        return None
    h = parse_headers(raw)[2]
    return [(k, h.get_all(k)) for k in h]
