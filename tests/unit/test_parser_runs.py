"""What the parser says of a feed's run (``run_start``, ``run_end``, ``run_sid``,
``run_bytes``): the client hands a feed to one subscription on its word, without looking
at every op again, so the word must be true whenever it is given, and given for the
feeds a subscription or a consumer receives."""

from __future__ import annotations

from jetstream.protocol.ops import PING, Msg, Op
from jetstream.protocol.parser import Parser


def claimed(parser: Parser, ops: list[Op]) -> bool:
    """Whether the parser claims a run reaching the end of ``ops``; if so, the claim is
    checked against the ops themselves."""
    if parser.run_end != len(ops) or not ops:
        return False
    run = ops[parser.run_start :]
    assert run, "a run is never empty"
    assert all(isinstance(op, Msg) and op.sid == parser.run_sid for op in run)
    assert all(isinstance(op, Msg) and op.hdr is None and op.status == 0 for op in run)
    assert sum(len(op.payload) for op in run if isinstance(op, Msg)) == parser.run_bytes
    return True


def msgs(count: int, size: int, sid: int = 7, reply: bytes | None = None) -> bytes:
    out = b""
    for i in range(count):
        r = b"" if reply is None else reply + b".%d " % i
        out += b"MSG a.b %d %b%d\r\n%b\r\n" % (sid, r, size, bytes([65 + i % 26]) * size)
    return out


def test_a_steady_feed_is_one_run() -> None:
    p = Parser()
    ops = p.feed(msgs(40, 16))
    assert len(ops) == 40
    assert claimed(p, ops)
    assert (p.run_start, p.run_sid, p.run_bytes) == (0, 7, 40 * 16)


def test_a_consumers_deliveries_are_one_run() -> None:
    # one subject, sid and size, an ack subject each: the batch path's reply run
    p = Parser()
    ops = p.feed(msgs(40, 128, sid=3, reply=b"$JS.ACK.S.C.1.1"))
    assert len(ops) == 40
    assert claimed(p, ops)
    assert (p.run_start, p.run_sid, p.run_bytes) == (0, 3, 40 * 128)


def test_a_run_of_large_messages_is_one_run() -> None:
    # too large to batch: the op-by-op loop's run of one repeated control line
    p = Parser()
    ops = p.feed(msgs(1, 4000) * 12)
    assert len(ops) == 12
    assert claimed(p, ops)
    assert (p.run_start, p.run_bytes) == (0, 12 * 4000)


def test_the_message_completed_from_the_feed_before_leads_the_run() -> None:
    data = msgs(41, 16)
    cut = len(msgs(1, 16)) - 5  # inside the first payload
    p = Parser()
    assert p.feed(data[:cut]) == []
    ops = p.feed(data[cut:])
    assert len(ops) == 41
    assert claimed(p, ops)
    assert p.run_start == 1  # the first message is not part of the run: its reader looks


def test_no_run_is_claimed_past_what_ends_it() -> None:
    p = Parser()
    ops = p.feed(msgs(40, 16) + b"PING\r\n")
    assert ops[-1] == PING
    assert not claimed(p, ops)
    # another subscription's message after the run
    ops = p.feed(msgs(40, 16) + msgs(1, 16, sid=8))
    assert len(ops) == 41
    assert not claimed(p, ops)
    # a feed with no run says nothing of an earlier feed's run, of as many ops
    p.feed(msgs(40, 16))
    ops = p.feed(b"PING\r\n" * 40)
    assert not claimed(p, ops)
    assert p.feed(b"") == [] and p.run_end == 0


def test_mixed_sids_are_not_a_run() -> None:
    p = Parser()
    data = b"".join(msgs(1, 16, sid=1 + i % 2) for i in range(40))
    ops = p.feed(data)
    assert len(ops) == 40
    assert not claimed(p, ops)
