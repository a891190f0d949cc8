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
  per op; see ``BatchParser._batch`` (``_batch.py``). The batch is checked to be
  exactly what the op-by-op loop would return, and the loop takes over for
  anything else.
* A feed that is one whole MSG or HMSG with a sid and sizes seen before (a round
  trip's: a request, its reply, a PubAck, a direct get's answer) skips the loop
  (``Parser._one``): it comes after the thread slept, with the loop out of the CPU's
  caches, where that takes a third or more off its parse.
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

import msgspec

from jetstream.errors import ProtocolError
from jetstream.protocol.ops import OK, PING, PONG, BulkParse, Err, Info, Msg, Op

from ._batch import PROBE, PROBE_LINES, BatchParser, SidTypes
from ._common import (
    CRLF,
    HDR_PLAIN,
    gather,
    headers_too_big,
    line_too_long,
    no_crlf,
    quote,
    run_length,
    run_pattern,
    status_of,
    too_big,
    wrong_fields,
)

__all__ = ["DEFAULT_MAX_CONTROL_LINE", "DEFAULT_MAX_PAYLOAD", "Parser"]

DEFAULT_MAX_CONTROL_LINE = 4096
"""The server's default ``max_control_line``: the longest control line accepted."""

DEFAULT_MAX_PAYLOAD = 64 * 1024 * 1024
"""Accept messages up to the largest ``max_payload`` a server can be configured with
until ``INFO`` tells the client the real limit."""

_SMALL_PIECE = 4096  # pieces of a split payload below this size are copied, not referenced
_INT_CACHE = 1024  # distinct sid/size texts remembered by the op-by-op loop
_LINE_CACHE = 256  # distinct MSG control lines remembered by the op-by-op loop
# A run of one repeated MSG control line is found with a regular expression (one per
# line, at most _RUN_CACHE kept) when at least _RUN_PATTERN_MIN more ops could follow.
_RUN_PATTERN_MIN = 4
_RUN_CACHE = 64

_info_decoder = msgspec.json.Decoder(Info)

# A parsed MSG/HMSG control line: subject, sid, reply, header size (-1 for MSG), total size.
_Pending = tuple[str, int, str | None, int, int]


class Parser(BatchParser):
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
        msg_type: the class of ``MSG``/``HMSG`` ops (``Msg`` or a subclass with the
            same positional fields); ``sid_types``: another one for some sids.
        bulk: a bulk parser (``ops.BulkParse``), tried where the ops of a feed begin
            with ``MSG``; a public attribute, which may be set between feeds.

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
        "_error",
        "_have",
        "_ints",
        "_lines",
        "_msg",
        "_parts",
        "_pending",
        "_runs",
        "_tail",
        "bulk",
        "max_control_line",
        "max_payload",
    )

    def __init__(
        self,
        *,
        max_control_line: int = DEFAULT_MAX_CONTROL_LINE,
        max_payload: int = DEFAULT_MAX_PAYLOAD,
        msg_type: type[Msg] = Msg,
        sid_types: SidTypes | None = None,
        bulk: BulkParse | None = None,
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
        self._types = sid_types if sid_types is not None else {}
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
        # Patterns for runs of one repeated MSG control line (see run_length), by line.
        self._runs: dict[bytes, re.Pattern[bytes]] = {}
        # Feeds to skip before trying batch parsing again, and failed tries in a row.
        self._cooldown = 0
        self._misses = 0
        self.run_start = self.run_end = self.run_sid = self.run_bytes = 0  # see BatchParser
        #: a bulk parser, tried first where a feed's ops begin with MSG: it takes a run
        #: of them in one piece (``MsgRun``), and the loop parses what it leaves
        self.bulk = bulk

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
        self.run_end = 0
        try:
            if (data.startswith(b"MSG ") or data.startswith(b"HMSG ")) and (
                one := self._one(data)
            ) is not None:
                ops.append(one)
                return ops
            pos = 0
            if self._tail:
                # Finish the control line begun in an earlier feed: join only
                # that line (at most max_control_line bytes) with its end.
                tail = self._tail
                if tail[-1] == 13 and data[:1] == b"\n":
                    pos = 1
                else:
                    i = data.find(CRLF)
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
            err = ProtocolError(
                f"expected a UTF-8 subject or reply subject, got {quote(exc.object)}"
            )
            err.ops = ops
            self._error = err
            raise err from None
        except ValueError as exc:  # int() of an absurdly long digit string
            err = ProtocolError(f"malformed number in a control line: {exc}")
            err.ops = ops
            self._error = err
            raise err from None
        return ops

    def _one(self, data: bytes) -> Msg | None:
        """The op of a feed that is one whole MSG or HMSG, with a sid and sizes the loop
        validated before (``_ints``), and nothing else; else None: the loop parses (and
        reports) it."""
        if self._tail or self._pending is not None or self.bulk is not None:
            return None
        end = data.find(CRLF)
        if end < 0 or end > self.max_control_line:
            return None
        ints = self._ints
        # the size (the last field) first: a feed of more ops ends here, before the split
        size = ints.get(data[data.rfind(b" ", 0, end) + 1 : end])
        if size is None or len(data) != end + size + 4 or size > self.max_payload:
            return None
        hmsg = data[0] == 72  # H
        args = data[5 if hmsg else 4 : end].split()
        nargs = len(args) - hmsg
        if nargs == 3:
            reply = None
        elif nargs == 4:
            reply = args[2].decode()
        else:
            return None
        sid = ints.get(args[1])
        if sid is None or not data.endswith(CRLF):
            return None
        types = self._types
        cls = types.get(sid, self._msg) if types else self._msg
        start = end + 2
        if not hmsg:
            return cls(args[0].decode(), sid, reply, data[start : start + size])
        hdr_len = ints.get(args[-2])
        if hdr_len is None or hdr_len > size:
            return None
        mid = start + hdr_len
        hdr = data[start:mid]
        status = 0 if hdr.startswith(HDR_PLAIN) else status_of(hdr)
        return cls(args[0].decode(), sid, reply, data[mid : start + size], hdr, status)

    def _check_tail(self, tail: bytes) -> bytes:
        """``tail``, an incomplete control line; fails when it is already longer than
        allowed."""
        size = len(tail) - 1 if tail[-1:] == b"\r" else len(tail)
        if size > self.max_control_line:
            raise ProtocolError(
                f"expected a control line of at most {self.max_control_line} bytes "
                f"ending in CRLF, got {len(tail)} bytes without CRLF: {quote(tail)}"
            )
        return tail

    def _scan(self, data: bytes, pos: int, ops: list[Op]) -> None:
        """Parse the ops in ``data[pos:]``; keep the incomplete tail as state.

        The per-op work is all inline (a call per op would cost more than the rest of
        a small message's parse): a control line seen before is looked up, MSG and HMSG
        are parsed here; a run of one repeated line goes to ``_run``, anything else to
        ``_control``, an error is made out of the loop and raised.
        """
        if self.bulk is not None and data.startswith(b"MSG ", pos):
            end, run = self.bulk(data, pos, self.max_control_line, self.max_payload)
            if run is not None:
                ops.append(run)
                pos = end
        if self._cooldown:
            self._cooldown -= 1
        elif (data.startswith(b"MSG ", pos) or data.startswith(b"HMSG ", pos)) and data.count(
            CRLF, pos, pos + PROBE
        ) >= PROBE_LINES:
            pos = self._batch(data, pos, ops)
        n = len(data)
        find = data.find
        append = ops.append
        msg_type = self._msg
        types = self._types
        max_line = self.max_control_line
        max_payload = self.max_payload
        ints = self._ints
        lines = self._lines
        while pos < n:
            end = find(CRLF, pos)
            if end < 0:
                self._tail = self._check_tail(data[pos:])
                return
            if end - pos > max_line:
                raise line_too_long(data, pos, end, max_line)
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
                        raise wrong_fields("MSG", nargs, text)
                    got = ints.get(args[2])
                    sid = got if got is not None else self._int(args[2], text)
                    got = ints.get(args[-1])
                    size = got if got is not None else self._int(args[-1], text)
                if size > max_payload:
                    raise too_big("MSG", max_payload, size, text)
                start = end + 2
                stop = start + size
                if stop + 2 > n:
                    if known is None:
                        subject = args[1].decode()
                    self._wait(data, start, (subject, sid, reply, -1, size))
                    return
                if data[stop] != 13 or data[stop + 1] != 10:
                    raise no_crlf(f"{size}-byte payload", text, data[stop : stop + 2])
                if known is None:
                    subject = args[1].decode()
                    if reply is None:
                        if len(lines) >= _LINE_CACHE:
                            lines.clear()
                        lines[text] = (subject, sid, size)
                cls = types.get(sid, msg_type) if types else msg_type
                append(cls(subject, sid, reply, data[start:stop]))
                line = data[pos : end + 2]
                pos = stop + 2
                if data.startswith(line, pos):
                    # The next op has this very control line: maybe a run of them.
                    pos = self._run(data, pos, line, subject, sid, reply, size, ops)
            elif op == b"HMSG":
                nargs = len(args)
                if nargs == 5:
                    reply = None
                elif nargs == 6:
                    reply = args[3].decode()
                else:
                    raise wrong_fields("HMSG", nargs, data[pos:end])
                got = ints.get(args[2])
                sid = got if got is not None else self._int(args[2], text)
                got = ints.get(args[-2])
                hdr_len = got if got is not None else self._int(args[-2], text)
                got = ints.get(args[-1])
                size = got if got is not None else self._int(args[-1], text)
                if size > max_payload:
                    raise too_big("HMSG", max_payload, size, data[pos:end])
                if hdr_len > size:
                    raise headers_too_big(hdr_len, size, data[pos:end])
                start = end + 2
                stop = start + size
                if stop + 2 > n:
                    self._wait(data, start, (args[1].decode(), sid, reply, hdr_len, size))
                    return
                if data[stop] != 13 or data[stop + 1] != 10:
                    raise no_crlf(f"{size}-byte message", data[pos:end], data[stop : stop + 2])
                mid = start + hdr_len
                hdr = data[start:mid]
                status = 0 if hdr.startswith(HDR_PLAIN) else status_of(hdr)
                cls = types.get(sid, msg_type) if types else msg_type
                append(cls(args[1].decode(), sid, reply, data[mid:stop], hdr, status))
                pos = stop + 2
                if (
                    status
                    and not self._cooldown
                    and data.startswith(b"MSG ", pos)
                    and data.count(CRLF, pos, pos + PROBE) >= PROBE_LINES
                ):
                    # A status amid a consumer's deliveries: the run after it is batched
                    # too (from a copy of the rest: a batch splits all it is given), not
                    # parsed op by op. A try that fails here does not pause later ones.
                    misses = self._misses
                    done = self._batch(data[pos:], 0, ops)
                    if done:
                        pos += done
                    else:
                        self._misses = misses
                        self._cooldown = 0
            else:
                append(self._control(op, args, data[pos:end]))
                pos = end + 2
        self._tail = b""

    def _run(
        self,
        data: bytes,
        pos: int,
        line: bytes,
        subject: str,
        sid: int,
        reply: str | None,
        size: int,
        ops: list[Op],
    ) -> int:
        """The ops at ``pos`` that repeat ``line`` (the control line, CRLF included, of
        the MSG just parsed: one subject, sid, reply and size, a steady feed of messages
        too large to batch): the line is compared and the payload sliced, without
        splitting or parsing again. Returns the position after the run.

        The run is counted first (each op's CRLF and the next op's line are one
        comparison), then its messages are made at C speed.
        """
        sep = b"\r\n" + line
        skip = len(line)
        step = skip + size + 2
        first = pos + skip + size  # where the op at ``pos`` has its CRLF
        runs = self._runs
        rx = runs.get(line)
        if rx is None and (len(data) - first) // step >= _RUN_PATTERN_MIN:
            if len(runs) >= _RUN_CACHE:
                runs.clear()
            rx = runs[line] = run_pattern(sep, size)
        k = run_length(data, first, step, sep, rx)
        if not k:
            return pos
        stop = pos + k * step
        ops.extend(
            map(
                self._cls(sid),
                repeat(subject, k),
                repeat(sid, k),
                repeat(reply, k),
                [data[a : a + size] for a in range(pos + skip, stop, step)],
            )
        )
        self._note_run(ops, k + 1, sid, (k + 1) * size)  # with the op before the run
        return stop

    def _int(self, text: bytes, line: bytes) -> int:
        """Parse a sid or size (ASCII digits only: no sign, no ``_``) and cache it."""
        if not text.isdigit():
            raise ProtocolError(
                f"expected a non-negative decimal sid or size, got {quote(text)} in {quote(line)}"
            )
        ints = self._ints
        if len(ints) >= _INT_CACHE:
            ints.clear()
        value = ints[text] = int(text)
        return value

    def _control(self, op: bytes, args: list[bytes], line: bytes) -> Op:
        """Parse a control line that is not MSG/HMSG (``op`` is upper case)."""
        if op == b"PING" or op == b"PONG" or op == b"+OK":
            if len(args) != 1:
                raise ProtocolError(f"expected {op!r} alone on its line, got {quote(line)}")
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
                raise ProtocolError(f"expected 'INFO <json>', got {quote(line)}")
            try:
                return _info_decoder.decode(rest[1])
            except msgspec.DecodeError as exc:
                raise ProtocolError(f"expected INFO JSON, got {quote(rest[1])}: {exc}") from None
        raise ProtocolError(
            "expected one of INFO, MSG, HMSG, PING, PONG, +OK, -ERR, "
            f"got the control line {quote(line)}"
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
        trailer = gather(parts, size, size + 2)
        if trailer != CRLF:
            raise ProtocolError(
                f"expected CRLF after the {size}-byte payload of a message on {subject!r}, "
                f"got {quote(trailer)}"
            )
        if hdr_len < 0:
            ops.append(self._cls(sid)(subject, sid, reply, gather(parts, 0, size)))
        else:
            hdr = gather(parts, 0, hdr_len)
            status = 0 if hdr.startswith(HDR_PLAIN) else status_of(hdr)
            msg = self._cls(sid)(subject, sid, reply, gather(parts, hdr_len, size), hdr, status)
            ops.append(msg)
        return pos + need
