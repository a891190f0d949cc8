"""Runs of MSG ops found in a feed's bytes a column at a time (NumPy), for the source.

``frame_run`` is the bulk parser (``protocol.ops.BulkParse``) of a source's connection:
where the ops of a feed begin with ``MSG``, it finds as many as follow one another to one
subscription, with a few vectorised passes over the bytes instead of a Python step per
op, and keeps them as a ``FrameRun``: the feed and the positions of each op's fields,
from which its subjects and payloads come as Arrow arrays without a Python object per
message (the source's other columns: ``_columns.py``).

How the ops are found: every byte that a control line cannot hold (below ``!``, above
``~``: spaces, CR, LF, tabs, bytes of UTF-8) is located at once, and the LFs among them
are taken to alternate between control lines and payloads, which holds as long as no
payload has an LF. Each op is then checked the way the op-by-op parser would read it:
``MSG``, a space, the subject, a space, the sid (the first op's), a space, the reply
subject, a space, the size (ASCII digits, at most ``max_payload``), CR LF, exactly that
many bytes of payload, CR LF; a control line of at most ``max_control_line`` bytes with
exactly those four spaces and nothing else below ``!`` or above ``~``. The run ends
before the first op that is not such an op (an LF in a payload, another sid, a header
block, a status, an op cut by the end of the feed): those ops are left to the parser,
so a run holds exactly what the parser would have returned for its bytes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from ..protocol.ops import Msg, MsgRun

__all__ = [
    "RUN_MIN",
    "FrameRun",
    "Ints",
    "digits",
    "frame_run",
    "repeated",
    "view_array",
    "windows",
]

#: fewer ops than this are left to the parser (the passes cost more than they save)
RUN_MIN = 16
_MSG = np.frombuffer(b"MSG ", np.uint8)
#: the longest size and sid texts read (longer ones are left to the parser, which
#: turns down a size past max_payload anyway)
_MAX_DIGITS = 18
# Arrow's 16-byte views: (length, 12 bytes inline) or (length, prefix, buffer, offset)
_INLINE = 12
_WINDOW = np.arange(_INLINE)

Ints = npt.NDArray[np.int64]
M = TypeVar("M", bound=Msg)


def windows(a: npt.NDArray[Any], start: Ints, width: int) -> npt.NDArray[Any]:
    """``a[start[i]:start[i] + width]`` for each i, as an (n, width) array (what lies
    past the end of ``a`` reads as 0): rows of a sliding window over ``a`` (a
    contiguous array), a copy of ``width`` items each, rather than an index an item."""
    if not len(start):
        return np.zeros((0, width), a.dtype)
    if int(start.max()) > len(a) - width:
        padded = np.zeros(len(a) + width, a.dtype)
        padded[: len(a)] = a
        a = padded
    step = a.itemsize
    rows = np.ndarray((len(a) - width + 1, width), a.dtype, a, 0, (step, step))
    return rows[start]


def digits(
    a: npt.NDArray[np.uint8], start: Ints, end: Ints, max_digits: int = _MAX_DIGITS
) -> tuple[Ints, npt.NDArray[np.bool_]]:
    """The numbers written in ``a[start:end]`` (each 1 to ``max_digits`` ASCII digits,
    at most 19), and where they are such numbers (not one past what an int64 holds:
    19 digits begin with at most 8)."""
    width = end - start
    top = int(width.max()) if width.size else 0
    if top < 1 or top > max_digits:
        return np.zeros(len(start), np.int64), np.zeros(len(start), bool)
    if top < 19 and int(width.min()) == top:
        # one width (sizes of one digit count: the common case): a row of digits each
        d = windows(a, start, top) - np.uint8(48)
        if (d <= 9).all():
            value = d[:, 0].astype(np.int64)
            for k in range(1, top):
                value = value * 10 + d[:, k]
            return value, np.ones(len(start), bool)
    value = np.zeros(len(start), np.int64)
    ok = width >= 1
    if top == 19:
        ok &= (width < 19) | (a[start] <= ord("8"))
    for k in range(top, 0, -1):  # the k-th digit from the end, where there is one
        has = width >= k
        digit = a[np.where(has, end - k, 0)] - np.uint8(48)
        ok &= (digit <= 9) | ~has
        value = np.where(has, value * 10 + digit, value)
    return value, ok


def _special(a: npt.NDArray[np.uint8]) -> Ints:
    """Where ``a`` has a byte below "!" or above "~" ((b - 33) wraps around below "!").
    Both steps write into one array of the feed's size: a new array for each step costs
    page faults at every feed (past glibc's mmap threshold, each one is mapped anew)."""
    scratch = np.empty(len(a), np.uint8)
    np.subtract(a, np.uint8(33), out=scratch)
    return np.flatnonzero(np.greater(scratch, np.uint8(93), out=scratch.view(np.bool_)))


def frame_run(data: bytes, pos: int, max_line: int, max_payload: int) -> tuple[int, MsgRun | None]:
    """The run of MSG ops to one sid at ``data[pos:]`` (see the module): ``(end, run)``,
    or ``(pos, None)`` when fewer than ``RUN_MIN`` ops make one."""
    a = np.frombuffer(data, np.uint8)
    special = _special(a[pos:])
    special += pos
    lf = special[a[special] == 10]
    m = len(lf) // 2  # ops with their payload's LF in this feed
    if m < RUN_MIN:
        return pos, None
    line_lf = lf[0 : 2 * m : 2]
    end_lf = lf[1 : 2 * m : 2]
    ls = np.empty(m, np.int64)
    ls[0] = pos
    ls[1:] = end_lf[:-1] + 1
    cr = line_lf - 1
    # the special bytes of each control line: four spaces, then its CR
    j = np.searchsorted(special, ls)
    j = np.minimum(j, len(special) - 5)
    sp = windows(special, j, 5)
    s1, s2, s3 = sp[:, 1], sp[:, 2], sp[:, 3]
    sid_text = data[int(s1[0]) + 1 : int(s2[0])]
    if not sid_text.isdigit() or len(sid_text) > _MAX_DIGITS:
        return pos, None
    size, sized = digits(a, s3 + 1, cr)
    size[~sized] = 0  # (whatever is not a size is turned down by its check)
    f = _Fields(a, ls, sp, cr, end_lf, size, sized, np.frombuffer(sid_text, np.uint8))
    # every op checked at once; where some op fails, each one, to find the first
    n = m if f.ok(max_line, max_payload, each=False) else _first_false(f, max_line, max_payload)
    if n < RUN_MIN:
        return pos, None
    run = FrameRun(data, int(sid_text), ls[:n], s1[:n], s2[:n], s3[:n], cr[:n], size[:n])
    return int(end_lf[n - 1]) + 1, run


def _first_false(f: _Fields, max_line: int, max_payload: int) -> int:
    ok: npt.NDArray[np.bool_] = f.ok(max_line, max_payload, each=True)
    return int(np.argmin(ok)) if not ok.all() else len(ok)


class _Fields:
    """Where ``frame_run`` takes the fields of each op to be, and their checks."""

    def __init__(
        self,
        a: npt.NDArray[np.uint8],
        ls: Ints,
        sp: Ints,
        cr: Ints,
        end_lf: Ints,
        size: Ints,
        sized: npt.NDArray[np.bool_],
        sid: npt.NDArray[np.uint8],
    ) -> None:
        self.a, self.ls, self.sp, self.cr = a, ls, sp, cr
        self.end_lf, self.size, self.sized, self.sid = end_lf, size, sized, sid

    def ok(self, max_line: int, max_payload: int, *, each: bool) -> Any:
        """Whether the ops are MSG ops of one sid as the parser reads them (see the
        module): per op (``each``), or for all of them at once (one bool, cheaper: no
        reduction along rows)."""
        if not each:
            return all(x.all() for x in self._checks(max_line, max_payload))
        ok = np.ones(len(self.ls), bool)
        for x in self._checks(max_line, max_payload):
            ok &= x.all(axis=1) if x.ndim == 2 else x
        return ok

    def _checks(self, max_line: int, max_payload: int) -> Iterator[npt.NDArray[np.bool_]]:
        """Each check, true where an op passes it (a row of a 2-D one, where all do)."""
        a, ls, sp, cr, size = self.a, self.ls, self.sp, self.cr, self.size
        s1, s2, s3 = sp[:, 1], sp[:, 2], sp[:, 3]
        yield sp[:, 4] == cr  # four special bytes, then the CR
        yield a[sp[:, :4]] == 32  # ... all spaces
        yield a[cr] == 13
        yield windows(a, ls, 4) == _MSG
        yield sp[:, 0] == ls + 3
        yield (s1 > ls + 4) & (s2 > s1 + 1) & (s3 > s2 + 1)  # no empty field
        yield cr - ls <= max_line
        yield self.sized & (size <= max_payload)
        yield self.end_lf == cr + 3 + size  # the LF after the payload's CR
        yield a[np.clip(cr + 2 + size, 0, len(a) - 1)] == 13
        yield s2 - s1 - 1 == len(self.sid)  # the first op's sid
        yield windows(a, s1 + 1, len(self.sid)) == self.sid


class FrameRun(MsgRun):
    """A run of MSG ops found by ``frame_run``: the feed they came in and, per op, where
    its line starts (``ls``), the spaces after its subject, sid and reply subject
    (``s1``, ``s2``, ``s3``), its CR (``cr``) and its payload's size."""

    __slots__ = ("cr", "data", "ls", "s1", "s2", "s3", "size")

    def __init__(
        self, data: bytes, sid: int, ls: Ints, s1: Ints, s2: Ints, s3: Ints, cr: Ints, size: Ints
    ) -> None:
        super().__init__(sid)
        self.data = data
        self.ls = ls
        self.s1 = s1
        self.s2 = s2
        self.s3 = s3
        self.cr = cr
        self.size = size

    def __len__(self) -> int:
        return len(self.ls)

    @property
    def nbytes(self) -> int:
        return int(self.size.sum())

    def reply(self, i: int) -> str:
        return self.data[int(self.s2[i]) + 1 : int(self.s3[i])].decode()

    def split(self, k: int) -> tuple[MsgRun, MsgRun]:
        d, sid = self.data, self.run_sid
        f = (self.ls, self.s1, self.s2, self.s3, self.cr, self.size)
        return FrameRun(d, sid, *(x[:k] for x in f)), FrameRun(d, sid, *(x[k:] for x in f))

    def ops(self, msg_type: type[M]) -> list[M]:
        d, sid = self.data, self.run_sid
        return [
            msg_type(d[ls + 4 : s1].decode(), sid, d[s2 + 1 : s3].decode(), d[cr + 2 : cr + 2 + z])
            for ls, s1, s2, s3, cr, z in zip(
                self.ls.tolist(),
                self.s1.tolist(),
                self.s2.tolist(),
                self.s3.tolist(),
                self.cr.tolist(),
                self.size.tolist(),
                strict=True,
            )
        ]

    def subjects(self) -> pa.Array:
        """The subjects, as an Arrow string array (one subject repeated, the common
        case, laid out at once)."""
        d, ls, s1 = self.data, self.ls, self.s1
        n = len(ls)
        width = int(s1[0] - ls[0])  # "MSG " and the first subject
        if (s1 - ls == width).all():
            line = np.frombuffer(d, np.uint8, width, int(ls[0]))
            a = np.frombuffer(d, np.uint8)
            if (windows(a, ls, width) == line).all():
                return repeated(d[int(ls[0]) + 4 : int(s1[0])], n)
        start = ls + 4
        return view_array(d, start, s1 - start, pa.string_view(), pa.string())

    def payloads(self) -> pa.Array:
        """The payloads, as an Arrow binary array."""
        size = self.size
        z = int(size[0])
        if (size == z).all():
            # the ops lie one after the other, each ending in its payload and CR LF:
            # the same slice from the end of each
            n = len(size)
            offsets = np.empty(n + 1, np.int64)
            offsets[:n] = self.ls
            offsets[n] = self.cr[-1] + 4 + z
            ops = pa.Array.from_buffers(
                pa.large_binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(self.data)]
            )
            return pc.binary_slice(ops, -(z + 2), -2).cast(pa.binary())
        return view_array(self.data, self.cr + 2, size, pa.binary_view(), pa.binary())

    def reply_bounds(self) -> tuple[Ints, Ints]:
        """Where each reply subject starts and ends in ``data``."""
        return self.s2 + 1, self.s3


def repeated(value: bytes, n: int) -> pa.Array:
    """``n`` times the UTF-8 text ``value``, as an Arrow string array laid out at once."""
    offsets = np.arange(n + 1, dtype=np.int32) * np.int32(len(value))
    return pa.Array.from_buffers(
        pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(value * n)]
    )


def view_array(
    data: bytes, start: Ints, length: Ints, view: pa.DataType, out: pa.DataType
) -> pa.Array:
    """``data[start[i]:start[i] + length[i]]`` for each i, as an Arrow array of type
    ``out``: Arrow views into ``data`` (16 bytes each, values of up to 12 bytes inline),
    then one cast that copies the values out at C speed."""
    n = len(start)
    a = np.frombuffer(data, np.uint8)
    views = np.zeros((n, 4), "<i4")
    views[:, 0] = length
    bytes16 = views.view(np.uint8)
    short = length <= _INLINE
    if short.all():
        # every value inline: its bytes, zero after its length
        bytes16[:, 4:16] = np.where(length[:, None] > _WINDOW, windows(a, start, _INLINE), 0)
    else:
        # (length, first 4 bytes, buffer 0, offset); short ones redone inline below
        bytes16[:, 4:8] = windows(a, start, 4)
        views[:, 3] = start
        if short.any():
            k = np.flatnonzero(short)
            window = windows(a, start[k], _INLINE)
            bytes16[k, 4:16] = np.where(length[k, None] > _WINDOW, window, 0)
    arr = pa.Array.from_buffers(view, n, [None, pa.py_buffer(views), pa.py_buffer(data)])
    return arr.cast(out)
