"""Incremental, sans-IO parser of the ops a NATS server sends.

``Parser.feed(data)`` takes whatever bytes the socket produced and returns every
op that is now complete, in order: ``Info``, ``Msg`` (for both ``MSG`` and
``HMSG``), ``Err`` and the ``PING`` / ``PONG`` / ``OK`` singletons. Bytes of an
op that is not complete yet are kept for the next call, so an op may be split
at any byte.

Design notes (this is the receive hot path):

* No regular expressions and no per-op method calls. When nothing is left
  over from the previous call, ``data`` is parsed in place and only its
  incomplete tail is kept. Op by op, a control line is found with
  ``bytes.find`` and split with ``bytes.split``, and ``MSG`` / ``HMSG`` are
  handled inline; sids and sizes go through a small cache because ``int()``
  costs more than a dict lookup.
* Runs of small messages of one shape (the usual subscription or consumer
  traffic) are parsed in batch: ``data.split(CRLF)`` then one C-level pass
  (``map``, ``zip``, ``join``, ``count``) per column instead of a Python loop
  per op; see ``Parser._batch``. The batch is checked to be exactly what the
  op-by-op loop would return, and the loop takes over for anything else.
* Each payload is copied once, by the slice or split that makes it a
  ``bytes`` object. A payload that arrives in pieces is not copied while it is
  incomplete: the parser remembers the parsed control line and keeps
  references to the pieces (small pieces are gathered into one bytearray, so
  a trickle of tiny reads cannot cost more memory than the payload), then
  joins them once. Feeding a 64 MiB payload in 64 KiB pieces takes linear time.
* Every limit fails closed with ``ProtocolError``: a control line longer than
  ``max_control_line`` (complete or not), a message larger than
  ``max_payload``, malformed numbers, a header block that does not start with
  ``NATS/1.0``, a missing CRLF after a payload, an unknown op, a wrong number
  of fields. After the first ``ProtocolError`` the parser is dead and every
  later ``feed`` raises again; the client builds a new ``Parser`` for each
  connection. Between calls the parser holds at most ``max_control_line + 1``
  bytes of an incomplete control line or ``max_payload + 1`` bytes of an
  incomplete message (``Parser.buffered``); the pieces of the latter may keep
  the chunk they came from alive, so memory stays within ``max_control_line +
  max_payload`` plus one feed's data.
"""

from __future__ import annotations

import re
from itertools import repeat
from operator import add

import msgspec

from jetstream.errors import ProtocolError
from jetstream.protocol.ops import OK, PING, PONG, Err, Info, Msg, Op

__all__ = ["DEFAULT_MAX_CONTROL_LINE", "DEFAULT_MAX_PAYLOAD", "Parser"]

DEFAULT_MAX_CONTROL_LINE = 4096
"""The server's default ``max_control_line``: the longest control line accepted."""

DEFAULT_MAX_PAYLOAD = 64 * 1024 * 1024
"""Accept messages up to the largest ``max_payload`` a server can be configured with
until ``INFO`` tells the client the real limit."""

_CRLF = b"\r\n"
_SNIP = 64  # bytes of offending input quoted in error messages
_SMALL_PIECE = 4096  # pieces of a split payload below this size are copied, not referenced
_HDR_PLAIN = b"NATS/1.0\r\n"  # header block with no inline status: the common case
_INT_CACHE = 1024  # distinct sid/size texts remembered by the op-by-op loop
_LINE_CACHE = 256  # distinct MSG control lines remembered by the op-by-op loop
_SEP = b" \0 "  # joins control lines in Parser._batch
# Batch parsing (see Parser._batch) is tried when the data starts with MSG or
# HMSG and holds at least _PROBE_LINES CRLFs in its first _PROBE bytes (small
# ops), and used for runs of at least _BATCH_MIN ops.
_BATCH_MIN = 4
_PROBE = 2048
_PROBE_LINES = 16
_COOLDOWN_MAX = 64  # after failed batch attempts, skip at most this many feeds
# A run of one repeated MSG control line is found with a regular expression (one per
# line, at most _RUN_CACHE kept) when at least _RUN_PATTERN_MIN more ops could follow.
_RUN_PATTERN_MIN = 4
_RUN_CACHE = 64

_info_decoder = msgspec.json.Decoder(Info)

# A parsed MSG/HMSG control line: subject, sid, reply, header size (-1 for MSG), total size.
_Pending = tuple[str, int, str | None, int, int]


def _q(data: bytes | bytearray | memoryview) -> str:
    """Quote at most ``_SNIP`` bytes of ``data`` for an error message."""
    if len(data) > _SNIP:
        return repr(bytes(data[:_SNIP])) + f"... ({len(data)} bytes)"
    return repr(bytes(data))


def _status(block: bytes) -> int:
    """The status code on the first line of a header block (``NATS/1.0 503``), or 0.

    Raises ProtocolError when the block does not start with ``NATS/1.0`` or the
    code is not three digits.
    """
    if not block.startswith(b"NATS/1.0"):
        raise ProtocolError(f"expected a header block starting with b'NATS/1.0', got {_q(block)}")
    eol = block.find(_CRLF)
    line = block[8:] if eol < 0 else block[8:eol]
    if not line or line.isspace():
        return 0
    code = line.split(None, 1)[0]
    if line[0] not in b" \t" or len(code) != 3 or not code.isdigit():
        raise ProtocolError(
            "expected b'NATS/1.0' optionally followed by a 3-digit status code, "
            f"got {_q(block[: eol if eol >= 0 else len(block)])}"
        )
    return int(code)


def _same_numbers(texts: list[bytes], values: list[int]) -> bool:
    """Whether ``int(texts[i]) == values[i]`` for all i, each text being ASCII digits.

    Sizes of small messages repeat, so ``int()`` runs once per distinct text;
    when they do not, one comparison of two joined strings replaces an
    ``int()`` per op (then text with leading zeros does not match, and the
    op-by-op loop parses it).
    """
    distinct = set(texts)
    if len(distinct) * 8 > len(texts):
        return b" ".join(texts) == " ".join(map(str, values)).encode()
    if not b"".join(distinct).isdigit():
        return False
    table = {text: int(text) for text in distinct}
    return list(map(table.__getitem__, texts)) == values


def _int_column(texts: list[bytes]) -> list[int]:
    """``int()`` of each of ``texts`` (ASCII digits), once per distinct text."""
    distinct = set(texts)
    if len(distinct) * 8 > len(texts):
        return list(map(int, texts))
    table = {text: int(text) for text in distinct}
    return list(map(table.__getitem__, texts))


def _decode_column(texts: list[bytes]) -> list[str]:
    """UTF-8 decode each of ``texts``, once per distinct text (equal subjects share a str)."""
    distinct = set(texts)
    if len(distinct) * 8 > len(texts):
        return list(map(bytes.decode, texts))
    table = {text: text.decode() for text in distinct}
    return list(map(table.__getitem__, texts))


def _gather(parts: list[bytes | bytearray | memoryview], start: int, stop: int) -> bytes:
    """Bytes ``start:stop`` of the concatenation of ``parts``, copied once."""
    out: list[bytes | bytearray | memoryview] = []
    offset = 0
    for part in parts:
        end = offset + len(part)
        if end > start and offset < stop:
            lo = start - offset if start > offset else 0
            hi = stop - offset if stop < end else len(part)
            out.append(memoryview(part)[lo:hi])
        offset = end
        if offset >= stop:
            break
    return b"".join(out)


def _run_pattern(sep: bytes, size: int) -> re.Pattern[bytes]:
    """``sep`` then ``size`` bytes of anything, as many times in a row as they come."""
    return re.compile(b"(?:%s.{%d})*+" % (re.escape(sep), size), re.DOTALL)


def _run_length(
    data: bytes, first: int, step: int, sep: bytes, rx: re.Pattern[bytes] | None
) -> int:
    """How many whole ops of one control line follow each other in ``data``.

    The first op's CRLF is at ``first``; ``sep`` is CRLF and the control line, and
    ``step`` the length of an op. Each op whose CRLF is followed by the line counts,
    and so does the last one when its CRLF is there. ``rx`` (``_run_pattern``: sep
    and a payload's worth of anything) finds the run in one call to the regular
    expression engine; without it, a ``startswith`` per op does.
    """
    if rx is None:
        crlf = first
        while data.startswith(sep, crlf):
            crlf += step
    else:
        found = rx.match(data, first)
        crlf = found.end() if found is not None else first
    k = (crlf - first) // step
    if crlf + 2 <= len(data) and data[crlf] == 13 and data[crlf + 1] == 10:
        k += 1  # and the run's last op (a bad one: the loop in _scan reports)
    return k


class Parser:
    r"""Turns the byte stream of one server connection into ops.

    >>> parser = Parser()
    >>> parser.feed(b"PING\r\nMSG orders.new 1 5\r\nhel")
    [Ping()]
    >>> parser.feed(b"lo\r\n")
    [Msg(subject='orders.new', sid=1, reply=None, payload=b'hello', hdr=None, status=0)]

    Args:
        max_control_line: the longest control line (without its CRLF) accepted;
            the server's default is 4096. A longer line, even one still without
            its CRLF, is a ``ProtocolError``: the parser never buffers without end.
        max_payload: the largest ``MSG`` / ``HMSG`` size (headers plus payload)
            accepted. A public attribute: the client lowers it to the server's
            ``max_payload`` once ``INFO`` has arrived.

    Strict about what the client acts on: sids and sizes are ASCII digits
    (no sign, no ``_``), subjects are UTF-8, a header block starts with
    ``NATS/1.0`` and its status, if any, is three digits (``Msg.status``, 0
    when absent). Lenient, on purpose, where nothing depends on it: op names
    in any case, fields separated by any run of ASCII whitespace, ``-ERR``
    text without quotes (taken as is) or with bytes that are not UTF-8
    (decoded with ``errors="replace"``: the text is only shown to people, so a
    bad byte should not kill the connection).
    """

    __slots__ = (
        "_cooldown",
        "_error",
        "_have",
        "_ints",
        "_lines",
        "_misses",
        "_msg",
        "_parts",
        "_pending",
        "_runs",
        "_tail",
        "max_control_line",
        "max_payload",
    )

    def __init__(
        self,
        *,
        max_control_line: int = DEFAULT_MAX_CONTROL_LINE,
        max_payload: int = DEFAULT_MAX_PAYLOAD,
        msg_type: type[Msg] = Msg,
    ) -> None:
        if max_control_line < 16:
            raise ValueError(f"max_control_line must be at least 16, got {max_control_line}")
        if max_payload < 0:
            raise ValueError(f"max_payload must be non-negative, got {max_payload}")
        self.max_control_line = max_control_line
        self.max_payload = max_payload
        # The class of MSG/HMSG ops: Msg or a subclass with the same positional fields
        # (the client passes its user-facing message class, so no second object is made).
        self._msg = msg_type
        # An incomplete control line (never contains CRLF; at most max_control_line + 1 bytes).
        self._tail = b""
        # The control line of a MSG/HMSG whose payload is incomplete.
        self._pending: _Pending | None = None
        # The pieces of that payload received so far, and their total length.
        self._parts: list[bytes | bytearray | memoryview] = []
        self._have = 0
        self._error: ProtocolError | None = None
        # Texts of sids and sizes already parsed: int() costs more than a dict
        # lookup, and a connection sees few distinct sids and sizes.
        self._ints: dict[bytes, int] = {}
        # MSG control lines without a reply already parsed: (subject, sid, size) by line.
        self._lines: dict[bytes, tuple[str, int, int]] = {}
        # Patterns for runs of one repeated MSG control line (see _run_length), by line.
        self._runs: dict[bytes, re.Pattern[bytes]] = {}
        # Feeds to skip before trying batch parsing again, and failed tries in a row.
        self._cooldown = 0
        self._misses = 0

    @property
    def buffered(self) -> int:
        """How many received bytes are held, waiting for the rest of their op."""
        return len(self._tail) + self._have

    def feed(self, data: bytes | bytearray | memoryview) -> list[Op]:
        """Parse ``data`` and return every op it completes, in order.

        ``bytes`` is the fast path (what ``asyncio.Protocol.data_received``
        gives). A ``bytearray`` or ``memoryview`` is copied once first, because
        its owner may reuse it after this call returns.

        Returns:
            The complete ops, possibly none. Incomplete tail bytes are kept.

        Raises:
            ProtocolError: the bytes break the protocol or a limit. The parser
                is then dead: every later call raises ``ProtocolError`` too.
        """
        if self._error is not None:
            raise ProtocolError(f"parser already failed, connection unusable: {self._error}")
        if type(data) is not bytes:
            data = bytes(data)
        ops: list[Op] = []
        try:
            pos = 0
            if self._tail:
                # Finish the control line begun in an earlier feed: join only
                # that line (at most max_control_line bytes) with its end.
                tail = self._tail
                if tail[-1] == 13 and data[:1] == b"\n":
                    pos = 1
                else:
                    i = data.find(_CRLF)
                    if i < 0:
                        self._tail = tail + data
                        self._check_tail(self._tail)
                        return ops
                    pos = i + 2
                self._tail = b""
                self._scan(tail + data[:pos], 0, ops)
            if self._pending is not None:
                pos = self._fill(data, pos, ops)
                if pos < 0:
                    return ops
            if pos < len(data):
                self._scan(data, pos, ops)
        except ProtocolError as exc:
            exc.ops = ops  # what came before the violation in this feed is still good
            self._error = exc
            raise
        except UnicodeDecodeError as exc:
            err = ProtocolError(f"expected a UTF-8 subject or reply subject, got {_q(exc.object)}")
            err.ops = ops
            self._error = err
            raise err from None
        except ValueError as exc:  # int() of an absurdly long digit string
            err = ProtocolError(f"malformed number in a control line: {exc}")
            err.ops = ops
            self._error = err
            raise err from None
        return ops

    def _check_tail(self, tail: bytes) -> None:
        """Fail when an incomplete control line is already longer than allowed."""
        size = len(tail) - 1 if tail[-1:] == b"\r" else len(tail)
        if size > self.max_control_line:
            raise ProtocolError(
                f"expected a control line of at most {self.max_control_line} bytes "
                f"ending in CRLF, got {len(tail)} bytes without CRLF: {_q(tail)}"
            )

    def _scan(self, data: bytes, pos: int, ops: list[Op]) -> None:
        """Parse the ops in ``data[pos:]``; keep the incomplete tail as state."""
        if self._cooldown:
            self._cooldown -= 1
        elif (data.startswith(b"MSG ", pos) or data.startswith(b"HMSG ", pos)) and data.count(
            _CRLF, pos, pos + _PROBE
        ) >= _PROBE_LINES:
            pos = self._batch(data, pos, ops)
        n = len(data)
        find = data.find
        append = ops.append
        msg_type = self._msg
        max_line = self.max_control_line
        max_payload = self.max_payload
        ints = self._ints
        runs = self._runs
        lines = self._lines
        while pos < n:
            end = find(_CRLF, pos)
            if end < 0:
                tail = data[pos:]
                self._check_tail(tail)
                self._tail = tail
                return
            if end - pos > max_line:
                raise ProtocolError(
                    f"expected a control line of at most {max_line} bytes, "
                    f"got {end - pos} bytes: {_q(data[pos:end])}"
                )
            text = data[pos:end]
            known = lines.get(text)
            if known is None:
                args = text.split()
                op = args[0] if args else b""
                if op != b"MSG" and op != b"HMSG":
                    op = op.upper()
            else:
                # A MSG control line without a reply seen before (a wildcard subscription
                # over a few subjects, or one subject with a few sizes): no split, no parse.
                op = b"MSG"
                subject, sid, size = known
                reply = None
            if op == b"MSG":
                if known is None:
                    nargs = len(args)
                    if nargs == 4:
                        reply = None
                    elif nargs == 5:
                        reply = args[3].decode()
                    else:
                        raise ProtocolError(
                            "expected 'MSG <subject> <sid> [reply] <size>', "
                            f"got {nargs} field(s): {_q(text)}"
                        )
                    got = ints.get(args[2])
                    sid = got if got is not None else self._int(args[2], text)
                    got = ints.get(args[-1])
                    size = got if got is not None else self._int(args[-1], text)
                if size > max_payload:
                    raise ProtocolError(
                        f"expected a MSG of at most max_payload={max_payload} bytes, "
                        f"got {size}: {_q(text)}"
                    )
                start = end + 2
                stop = start + size
                if stop + 2 > n:
                    if known is None:
                        subject = args[1].decode()
                    self._wait(data, start, (subject, sid, reply, -1, size))
                    return
                if data[stop] != 13 or data[stop + 1] != 10:
                    raise ProtocolError(
                        f"expected CRLF after the {size}-byte payload of "
                        f"{_q(text)}, got {_q(data[stop : stop + 2])}"
                    )
                if known is None:
                    subject = args[1].decode()
                    if reply is None:
                        if len(lines) >= _LINE_CACHE:
                            lines.clear()
                        lines[text] = (subject, sid, size)
                append(msg_type(subject, sid, reply, data[start:stop]))
                # A run of ops with this very control line (one subject, sid, reply and
                # size: a steady feed of messages too large to batch): compare the line
                # and slice the payload, without splitting or parsing again.
                line = data[pos : end + 2]
                pos = stop + 2
                if data.startswith(line, pos):
                    # Count the run first (each op's CRLF and the next op's line are one
                    # comparison), then make its messages at C speed.
                    sep = b"\r\n" + line
                    skip = len(line)
                    step = skip + size + 2
                    first = pos + skip + size  # where the op at ``pos`` has its CRLF
                    rx = runs.get(line)
                    if rx is None and (n - first) // step >= _RUN_PATTERN_MIN:
                        if len(runs) >= _RUN_CACHE:
                            runs.clear()
                        rx = runs[line] = _run_pattern(sep, size)
                    k = _run_length(data, first, step, sep, rx)
                    if k:
                        stop = pos + k * step
                        ops.extend(
                            map(
                                msg_type,
                                repeat(subject, k),
                                repeat(sid, k),
                                repeat(reply, k),
                                [data[a : a + size] for a in range(pos + skip, stop, step)],
                            )
                        )
                        pos = stop
            elif op == b"HMSG":
                nargs = len(args)
                if nargs == 5:
                    reply = None
                elif nargs == 6:
                    reply = args[3].decode()
                else:
                    raise ProtocolError(
                        "expected 'HMSG <subject> <sid> [reply] <header size> <total size>', "
                        f"got {nargs} field(s): {_q(data[pos:end])}"
                    )
                got = ints.get(args[2])
                sid = got if got is not None else self._int(args[2], text)
                got = ints.get(args[-2])
                hdr_len = got if got is not None else self._int(args[-2], text)
                got = ints.get(args[-1])
                size = got if got is not None else self._int(args[-1], text)
                if size > max_payload:
                    raise ProtocolError(
                        f"expected an HMSG of at most max_payload={max_payload} bytes, "
                        f"got {size}: {_q(data[pos:end])}"
                    )
                if hdr_len > size:
                    raise ProtocolError(
                        f"expected an HMSG header size <= total size, got {hdr_len} > "
                        f"{size}: {_q(data[pos:end])}"
                    )
                start = end + 2
                stop = start + size
                if stop + 2 > n:
                    self._wait(data, start, (args[1].decode(), sid, reply, hdr_len, size))
                    return
                if data[stop] != 13 or data[stop + 1] != 10:
                    raise ProtocolError(
                        f"expected CRLF after the {size}-byte message of "
                        f"{_q(data[pos:end])}, got {_q(data[stop : stop + 2])}"
                    )
                mid = start + hdr_len
                hdr = data[start:mid]
                status = 0 if hdr.startswith(_HDR_PLAIN) else _status(hdr)
                append(msg_type(args[1].decode(), sid, reply, data[mid:stop], hdr, status))
                pos = stop + 2
            else:
                append(self._control(op, args, data[pos:end]))
                pos = end + 2
        self._tail = b""

    def _int(self, text: bytes, line: bytes) -> int:
        """Parse a sid or size (ASCII digits only: no sign, no ``_``) and cache it."""
        if not text.isdigit():
            raise ProtocolError(
                f"expected a non-negative decimal sid or size, got {_q(text)} in {_q(line)}"
            )
        ints = self._ints
        if len(ints) >= _INT_CACHE:
            ints.clear()
        value = ints[text] = int(text)
        return value

    def _batch(self, data: bytes, pos: int, ops: list[Op]) -> int:
        """Parse a run of same-shape small MSG or HMSG ops at C speed.

        The common stream is many small messages of one shape: all MSG without
        a reply subject (a core subscription), or all MSG or all HMSG with one
        (a JetStream consumer), with the same number of header lines. In such
        a run, ``data.split(CRLF)`` yields the same number of elements per op
        (a control line, for HMSG the header lines, then the payload), so each
        column (control lines, payloads, ...) is a strided slice of the split,
        and every step below is one C-level pass over all ops (``map``,
        ``zip``, ``count``, ``join``) rather than a Python loop per op. Each
        payload is the ``bytes`` object that the split created: one copy.

        The run is accepted only if it is exactly what the op-by-op loop would
        return: every control line splits into the same op and number of
        fields, sizes and sids are ASCII digits, each header block and payload
        has exactly the announced length (so the next op starts where the
        stride says), headers start with ``NATS/1.0``, and no limit is passed.
        Otherwise nothing is consumed and the loop in ``_scan`` parses (and
        reports) op by op; batch tries then pause for a few feeds. Only worth
        it for small ops, because the split scans payload bytes that the
        op-by-op loop skips: ``_scan`` probes before calling this.

        Returns:
            The position in ``data`` after the last op parsed here.
        """
        if pos:
            if pos == 1 or data[pos - 2 : pos] != _CRLF:
                return pos  # a CRLF split across feeds; leave it to the loop
            # data[pos - 2:pos] is a CRLF, so data.split(CRLF) has an element
            # starting at pos: the one after the CRLFs before it.
            first = data.count(_CRLF, 0, pos)
        else:
            first = 0
        lines = data.split(_CRLF)
        last = len(lines) - 1  # lines[last] is not followed by CRLF: incomplete
        head = lines[first].split()
        width = len(head)
        op = head[0] if head else b""
        stride = 0
        if op == b"MSG" and (width == 4 or width == 5):
            stride = 2
        elif op == b"HMSG" and (width == 5 or width == 6) and head[-2].isdigit():
            # The elements of the first header block: its lines, then b"".
            hdr_len = int(head[-2])
            j = first
            size = 0
            while size < hdr_len and j < last:
                j += 1
                size += len(lines[j]) + 2
            if size == hdr_len and j - first >= 2:
                stride = j - first + 2
        count = (last - first) // stride if stride else 0
        if count < _BATCH_MIN:
            return self._no_batch(pos)
        end = first + count * stride
        ctl = lines[first:end:stride]
        payloads = lines[first + stride - 1 : end : stride]
        if stride == 2:
            if ctl.count(ctl[0]) == count:
                # A run of identical MSG control lines (one subject, sid, reply and
                # size: a steady feed): parse the line once, as the op-by-op loop would.
                done = self._same_line_run(head, ctl[0], payloads, count, ops)
            else:
                # A few lines repeating (a wildcard subscription over some subjects):
                # parse each distinct line once.
                done = self._repeated_lines_run(ctl, payloads, count, ops)
            if done:
                self._misses = 0
                return pos + done
        # Split all control lines at once, with a b"\0" field between lines: as no
        # line holds a NUL byte, this is each line's ``bytes.split()`` (what the
        # op-by-op loop does), one after the other; the separators landing on every
        # ``width + 1``-th field make every line ``width`` fields long.
        joined = _SEP.join(ctl)
        flat = joined.split()
        step = width + 1
        ctl_lens = list(map(len, ctl))
        if (
            len(flat) != count * step - 1
            or flat[width::step].count(b"\0") != count - 1
            or joined.count(b"\0") != count - 1
            or flat[0::step].count(op) != count
            or max(ctl_lens) > self.max_control_line
        ):
            return self._no_batch(pos)
        sids = flat[2::step]
        if not b"".join(sids).isdigit():
            return self._no_batch(pos)
        payload_lens = list(map(len, payloads))
        hdrs: list[bytes] | None = None
        if stride == 2:
            sizes = payload_lens
        else:
            # Join each op's header elements back into its block; the final
            # b"" restores the CRLF that ends the block.
            block_cols = [lines[t:end:stride] for t in range(first + 1, first + stride - 1)]
            hdrs = list(map(_CRLF.join, zip(*block_cols, repeat(b""))))
            hdr_lens = list(map(len, hdrs))
            if not _same_numbers(flat[width - 2 :: step], hdr_lens):
                return self._no_batch(pos)
            sizes = list(map(add, hdr_lens, payload_lens))
        if not _same_numbers(flat[width - 1 :: step], sizes) or max(sizes) > self.max_payload:
            return self._no_batch(pos)
        subjects = _decode_column(flat[1::step])
        sid_ints = _int_column(sids)
        replies = (
            map(bytes.decode, flat[3::step])
            if width == (5 if hdrs is None else 6)
            else repeat(None)
        )
        if hdrs is None:
            ops.extend(map(self._msg, subjects, sid_ints, replies, payloads))
        else:
            # A block starts with b"NATS/1.0\r\n" when its first element is b"NATS/1.0".
            plain = lines[first + 1 : end : stride].count(b"NATS/1.0") == count
            status = repeat(0) if plain else map(_status, hdrs)
            ops.extend(map(self._msg, subjects, sid_ints, replies, payloads, hdrs, status))
        self._misses = 0
        return pos + sum(ctl_lens) + sum(sizes) + 4 * count

    def _same_line_run(
        self, head: list[bytes], line: bytes, payloads: list[bytes], count: int, ops: list[Op]
    ) -> int:
        """Parse ``count`` MSG ops that share the control line ``line`` (split: ``head``).

        Returns the bytes consumed, or 0 when the run is not exactly what the op-by-op
        loop would accept (then the general batch path or the loop decides).
        """
        sid_b = head[2]
        size_b = head[-1]
        if not (sid_b.isdigit() and size_b.isdigit()) or len(line) > self.max_control_line:
            return 0
        size = int(size_b)
        if size > self.max_payload or list(map(len, payloads)).count(size) != count:
            return 0
        subject = head[1].decode()
        reply = head[3].decode() if len(head) == 5 else None
        ops.extend(
            map(
                self._msg,
                repeat(subject, count),
                repeat(int(sid_b), count),
                repeat(reply, count),
                payloads,
            )
        )
        return count * (len(line) + size + 4)

    def _repeated_lines_run(
        self, ctl: list[bytes], payloads: list[bytes], count: int, ops: list[Op]
    ) -> int:
        """Parse ``count`` MSG ops whose control lines repeat: each distinct line once.

        Returns the bytes consumed, or 0 when the lines do not repeat enough to pay,
        or one of them is not exactly what the op-by-op loop would accept.
        """
        distinct = set(ctl)
        if len(distinct) * 4 > count:
            return 0
        table: dict[bytes, tuple[str, int, str | None, int]] = {}
        max_line = self.max_control_line
        max_payload = self.max_payload
        for line in distinct:
            f = line.split()
            n = len(f)
            if (
                (n != 4 and n != 5)
                or f[0] != b"MSG"
                or not (f[2].isdigit() and f[-1].isdigit())
                or len(line) > max_line
            ):
                return 0
            size = int(f[-1])
            if size > max_payload:
                return 0
            table[line] = (f[1].decode(), int(f[2]), f[3].decode() if n == 5 else None, size)
        subjects, sids, replies, sizes = zip(*map(table.__getitem__, ctl), strict=True)
        lens: list[int] = list(map(len, payloads))
        if lens != list(sizes):
            return 0
        ops.extend(map(self._msg, subjects, sids, replies, payloads))
        return sum(map(len, ctl)) + sum(lens) + 4 * count

    def _no_batch(self, pos: int) -> int:
        """A batch try failed: pause batch tries for a while (longer after each miss)."""
        self._misses += 1
        self._cooldown = min(1 << self._misses, _COOLDOWN_MAX)
        return pos

    def _control(self, op: bytes, args: list[bytes], line: bytes) -> Op:
        """Parse a control line that is not MSG/HMSG (``op`` is upper case)."""
        if op == b"PING" or op == b"PONG" or op == b"+OK":
            if len(args) != 1:
                raise ProtocolError(f"expected {op!r} alone on its line, got {_q(line)}")
            return PING if op == b"PING" else PONG if op == b"PONG" else OK
        if op == b"-ERR":
            rest = line.split(None, 1)
            text = rest[1].strip() if len(rest) > 1 else b""
            if len(text) >= 2 and text[0] == 39 and text[-1] == 39:  # 'quoted'
                text = text[1:-1]
            return Err(text.decode("utf-8", "replace"))
        if op == b"INFO":
            rest = line.split(None, 1)
            if len(rest) != 2:
                raise ProtocolError(f"expected 'INFO <json>', got {_q(line)}")
            try:
                return _info_decoder.decode(rest[1])
            except msgspec.DecodeError as exc:
                raise ProtocolError(f"expected INFO JSON, got {_q(rest[1])}: {exc}") from None
        raise ProtocolError(
            "expected one of INFO, MSG, HMSG, PING, PONG, +OK, -ERR, "
            f"got the control line {_q(line)}"
        )

    def _wait(self, data: bytes, start: int, pending: _Pending) -> None:
        """Remember a parsed MSG/HMSG control line whose payload starts at ``data[start]``."""
        self._pending = pending
        self._parts = []
        self._have = 0
        self._tail = b""
        if start < len(data):
            self._stash(memoryview(data)[start:])

    def _stash(self, piece: memoryview) -> None:
        """Keep one piece of an incomplete payload without copying it (unless small)."""
        if not piece:
            return
        parts = self._parts
        self._have += len(piece)
        last = parts[-1] if parts else None
        if len(piece) >= _SMALL_PIECE:
            parts.append(piece)  # a reference to the caller's bytes: no copy
        elif isinstance(last, bytearray):
            last += piece  # our own accumulator of small pieces
        else:
            parts.append(bytearray(piece))

    def _fill(self, data: bytes, pos: int, ops: list[Op]) -> int:
        """Add ``data[pos:]`` to the pending payload.

        Returns the position in ``data`` after the completed op, or -1 when all
        of ``data`` went into a payload that is still incomplete.
        """
        assert self._pending is not None
        subject, sid, reply, hdr_len, size = self._pending
        need = size + 2 - self._have
        if len(data) - pos < need:
            self._stash(memoryview(data)[pos:])
            return -1
        parts = self._parts
        parts.append(memoryview(data)[pos : pos + need])
        self._pending = None
        self._parts = []
        self._have = 0
        trailer = _gather(parts, size, size + 2)
        if trailer != _CRLF:
            raise ProtocolError(
                f"expected CRLF after the {size}-byte payload of a message on {subject!r}, "
                f"got {_q(trailer)}"
            )
        if hdr_len < 0:
            ops.append(self._msg(subject, sid, reply, _gather(parts, 0, size)))
        else:
            hdr = _gather(parts, 0, hdr_len)
            status = 0 if hdr.startswith(_HDR_PLAIN) else _status(hdr)
            ops.append(self._msg(subject, sid, reply, _gather(parts, hdr_len, size), hdr, status))
        return pos + need
