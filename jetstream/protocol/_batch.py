"""Batch parsing: runs of small MSG or HMSG ops of one shape, at C speed.

``Parser`` (``parser.py``) inherits this: ``_scan`` tries ``_batch`` on a feed that
starts with small ops, then parses op by op whatever the batch left.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import repeat
from operator import add

from ._common import CRLF, status_of
from .ops import Msg, Op

__all__ = ["BATCH_MIN", "PROBE", "PROBE_LINES", "BatchParser", "SidTypes"]

#: the class of the messages of some sids (``Parser``'s ``sid_types``)
SidTypes = Mapping[int, type[Msg]]

_SEP = b" \0 "  # joins control lines in BatchParser._batch
# Batch parsing is tried when the data starts with MSG or HMSG and holds at least
# PROBE_LINES CRLFs in its first PROBE bytes (small ops), and used for runs of at
# least BATCH_MIN ops.
BATCH_MIN = 4
PROBE = 2048
PROBE_LINES = 16
_COOLDOWN_MAX = 64  # after failed batch attempts, skip at most this many feeds
#: what bytes.split() splits on besides the space and the newline (in ASCII text)
_OTHER_WHITESPACE = ("\t", "\r", "\x0b", "\x0c")


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


class BatchParser:
    """The batch half of ``Parser``, with the state of its tries: feeds to skip before
    trying again (``_cooldown``) and failed tries in a row (``_misses``).

    After each ``feed``, when ``run_end`` equals the number of ops returned, its ops
    from ``run_start`` on are one run of plain messages (no header block) for sid
    ``run_sid``, with ``run_bytes`` bytes of payload in all: a reader needs to look at
    the ops before it only (usually none, or the one whose payload began in the feed
    before). ``run_end`` is 0 when the feed made no such run.
    """

    __slots__ = ("_cooldown", "_misses", "_types", "run_bytes", "run_end", "run_sid", "run_start")

    max_control_line: int
    max_payload: int
    _msg: type[Msg]
    #: the class of the messages of some sids, instead of ``_msg`` (see ``Parser``)
    _types: SidTypes

    def _cls(self, sid: int) -> type[Msg]:
        """The class of the messages for ``sid``."""
        types = self._types
        return types.get(sid, self._msg) if types else self._msg

    def _column_cls(self, sids: Sequence[int]) -> type[Msg] | None:
        """The class of the messages for ``sids`` (one a message), or None when they
        are of more than one class (then the loop makes them one by one)."""
        types = self._types
        if not types or types.keys().isdisjoint(sids):
            return self._msg
        return self._cls(sids[0]) if sids.count(sids[0]) == len(sids) else None

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
        Otherwise nothing is consumed and the loop in ``Parser._scan`` parses (and
        reports) op by op; batch tries then pause for a few feeds. Only worth
        it for small ops, because the split scans payload bytes that the
        op-by-op loop skips: ``_scan`` probes before calling this.

        Returns:
            The position in ``data`` after the last op parsed here.
        """
        if pos:
            if pos == 1 or data[pos - 2 : pos] != CRLF:
                return pos  # a CRLF split across feeds; leave it to the loop
            # data[pos - 2:pos] is a CRLF, so data.split(CRLF) has an element
            # starting at pos: the one after the CRLFs before it.
            first = data.count(CRLF, 0, pos)
        else:
            first = 0
        lines = data.split(CRLF)
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
        done = self._lines_run(lines, first, last, head, stride, ops) if stride else 0
        if not done and stride == 2:
            # A status (an HMSG heartbeat or flow-control request) amid a consumer's
            # messages breaks the run's shape, and every path above refuses it: batch up
            # to it (the loop takes the status, then batches the rest). Looked for only
            # now, as a run without one is the common case. A match inside a payload
            # only ends the run early.
            hm = data.find(b"\r\nHMSG ", pos)
            if hm >= 0 and (cut := data.count(CRLF, 0, hm) + 1) < last:
                done = self._lines_run(lines, first, cut, head, stride, ops)
        if not done:
            return self._no_batch(pos)
        self._misses = 0
        return pos + done

    def _lines_run(
        self,
        lines: list[bytes],
        first: int,
        last: int,
        head: list[bytes],
        stride: int,
        ops: list[Op],
    ) -> int:
        """The ops of ``lines[first:last]`` (a feed split at its CRLFs), each ``stride``
        elements long, the first control line split into ``head``: the bytes consumed,
        or 0 (nothing added to ``ops``) when they are not a run the op-by-op loop would
        parse alike."""
        width = len(head)
        op = head[0]
        count = (last - first) // stride
        if count < BATCH_MIN:
            return 0
        end = first + count * stride
        ctl = lines[first:end:stride]
        payloads = lines[first + stride - 1 : end : stride]
        if stride == 2:
            same = ctl.count(ctl[0])
            done = 0
            if same == count:
                # A run of identical MSG control lines (one subject, sid, reply and
                # size: a steady feed): parse the line once, as the op-by-op loop would.
                done = self._same_line_run(head, ctl[0], payloads, count, ops)
            elif width == 5 and (done := self._reply_run(head, ctl, payloads, count, ops)):
                # One subject, sid and size, a reply subject each: a JetStream consumer's
                # deliveries (each ack subject is different).
                pass
            elif same > 1:
                # A few lines repeating (a wildcard subscription over some subjects):
                # parse each distinct line once.
                done = self._repeated_lines_run(ctl, payloads, count, ops)
            else:
                # Each line unique, with a subject or a reply subject of its own, for
                # one sid (a KeyValue watch's deliveries, the replies of requests).
                done = self._text_run(head, ctl, payloads, count, ops)
            if done:
                return done
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
            return 0
        sids = flat[2::step]
        if not b"".join(sids).isdigit():
            return 0
        payload_lens = list(map(len, payloads))
        hdrs: list[bytes] | None = None
        if stride == 2:
            sizes = payload_lens
        else:
            # Join each op's header elements back into its block; the final
            # b"" restores the CRLF that ends the block.
            block_cols = [lines[t:end:stride] for t in range(first + 1, first + stride - 1)]
            hdrs = list(map(CRLF.join, zip(*block_cols, repeat(b""))))
            hdr_lens = list(map(len, hdrs))
            if not _same_numbers(flat[width - 2 :: step], hdr_lens):
                return 0
            sizes = list(map(add, hdr_lens, payload_lens))
        if not _same_numbers(flat[width - 1 :: step], sizes) or max(sizes) > self.max_payload:
            return 0
        subjects = _decode_column(flat[1::step])
        sid_ints = _int_column(sids)
        cls = self._column_cls(sid_ints)
        if cls is None:
            return 0
        replies = (
            map(bytes.decode, flat[3::step])
            if width == (5 if hdrs is None else 6)
            else repeat(None)
        )
        if hdrs is None:
            ops.extend(map(cls, subjects, sid_ints, replies, payloads))
        else:
            # A block starts with b"NATS/1.0\r\n" when its first element is b"NATS/1.0".
            plain = lines[first + 1 : end : stride].count(b"NATS/1.0") == count
            status = repeat(0) if plain else map(status_of, hdrs)
            ops.extend(map(cls, subjects, sid_ints, replies, payloads, hdrs, status))
        return sum(ctl_lens) + sum(sizes) + 4 * count

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
        sid = int(sid_b)
        ops.extend(
            map(
                self._cls(sid),
                repeat(subject, count),
                repeat(sid, count),
                repeat(reply, count),
                payloads,
            )
        )
        self._note_run(ops, count, sid, count * size)
        return count * (len(line) + size + 4)

    def _reply_run(
        self, head: list[bytes], ctl: list[bytes], payloads: list[bytes], count: int, ops: list[Op]
    ) -> int:
        """Parse ``count`` MSG ops that differ only in their reply subject: each control
        line is ``MSG <subject> <sid> <reply> <size>`` with the subject, sid and size of
        the first (split: ``head``), single spaces between.

        The lines are joined with a newline and decoded once (ASCII only), then split
        at what lies between two replies (``<size>\\nMSG <subject> <sid> ``): every line
        is exactly prefix + reply + suffix when the only newlines and spaces there are
        those separators' own (so each newline is where one line ends).
        Returns the bytes consumed, or 0 when the run is not exactly what the op-by-op
        loop would accept (then the other paths decide).
        """
        sid_b = head[2]
        size_b = head[4]
        if not (sid_b.isdigit() and size_b.isdigit()):
            return 0
        size = int(size_b)
        if size > self.max_payload or list(map(len, payloads)).count(size) != count:
            return 0
        prefix = b"MSG %b %b " % (head[1], sid_b)
        suffix = b" " + size_b
        if not ctl[-1].startswith(prefix):
            return 0  # not one subject (a KeyValue watch's deliveries): no join made
        whole = b"\n".join(ctl)
        if not (whole.isascii() and whole.startswith(prefix) and whole.endswith(suffix)):
            return 0
        text = whole.decode()
        sep = (suffix + b"\n" + prefix).decode()
        inner = text[len(prefix) : len(text) - len(suffix)]
        replies = inner.split(sep)
        if (
            len(replies) != count
            or replies.count("")
            or inner.count(" ") != (count - 1) * sep.count(" ")
            or inner.count("\n") != count - 1
            or any(map(inner.__contains__, _OTHER_WHITESPACE))
            or len(prefix) + len(suffix) + max(map(len, replies)) > self.max_control_line
        ):
            return 0
        sid = int(sid_b)
        ops.extend(
            map(
                self._cls(sid),
                repeat(head[1].decode(), count),
                repeat(sid, count),
                replies,
                payloads,
            )
        )
        self._note_run(ops, count, sid, count * size)
        return len(whole) + 1 + count * (size + 3)

    def _text_run(
        self, head: list[bytes], ctl: list[bytes], payloads: list[bytes], count: int, ops: list[Op]
    ) -> int:
        """Parse ``count`` MSG ops for the sid of the first (split: ``head``), each line
        ``MSG <subject> <sid> [<reply>] <size>`` with single spaces.

        The lines are joined with a NUL field between them and decoded once (ASCII
        only), then split at their spaces: the subjects and replies are the strings of
        that one split, with no decode of their own. As in the general path, the NUL
        fields landing on every ``width + 1``-th place make every line ``width`` fields
        long. Returns the bytes consumed, or 0 when the run is not exactly what the
        op-by-op loop would accept (then the general path decides).
        """
        width = len(head)
        sid_b = head[2]
        if not sid_b.isdigit():
            return 0
        joined = _SEP.join(ctl)
        if not joined.isascii():
            return 0
        text = joined.decode()
        if "\n" in text or any(map(text.__contains__, _OTHER_WHITESPACE)):
            return 0
        fields = text.split(" ")
        step = width + 1
        lens = list(map(len, payloads))
        size = lens[0]
        if (
            len(fields) != count * step - 1
            or fields[width::step].count("\0") != count - 1
            or text.count("\0") != count - 1
            or fields[0::step].count("MSG") != count
            or fields[2::step].count(sid_b.decode()) != count
            or fields.count("")
            or max(map(len, ctl)) > self.max_control_line
        ):
            return 0
        sizes = fields[width - 1 :: step]
        if lens.count(size) == count:
            if sizes.count(str(size)) != count or size > self.max_payload:
                return 0
        elif " ".join(sizes) != " ".join(map(str, lens)) or max(lens) > self.max_payload:
            return 0
        sid = int(sid_b)
        replies = fields[3::step] if width == 5 else repeat(None, count)
        ops.extend(map(self._cls(sid), fields[1::step], repeat(sid, count), replies, payloads))
        nbytes = sum(lens)
        self._note_run(ops, count, sid, nbytes)
        return len(joined) - 3 * (count - 1) + nbytes + 4 * count

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
        cls = self._column_cls(sids)
        if lens != list(sizes) or cls is None:
            return 0
        ops.extend(map(cls, subjects, sids, replies, payloads))
        return sum(map(len, ctl)) + sum(lens) + 4 * count

    def _note_run(self, ops: list[Op], count: int, sid: int, nbytes: int) -> None:
        """``count`` plain messages for ``sid`` (``nbytes`` of payload) were just added
        to the end of ``ops`` (see the class)."""
        end = self.run_end = len(ops)
        self.run_start = end - count
        self.run_sid = sid
        self.run_bytes = nbytes

    def _no_batch(self, pos: int) -> int:
        """A batch try failed: pause batch tries for a while (longer after each miss)."""
        self._misses += 1
        self._cooldown = min(1 << self._misses, _COOLDOWN_MAX)
        return pos
