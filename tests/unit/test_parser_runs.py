"""What the parser says of a feed's run (``run_start``, ``run_end``, ``run_sid``,
``run_bytes``): the client hands a feed to one subscription on its word, without looking
at every op again, so the word must be true whenever it is given, and given for the
feeds a subscription or a consumer receives."""

from __future__ import annotations

import msgspec

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


# --- the class of a sid's messages (``sid_types``) -----------------------------------


class Delivery(Msg, gc=False):
    """A class registered for some sids (as a consumer registers ``JsMsg``)."""


def fields(op: Op) -> tuple[object, ...]:
    return msgspec.structs.astuple(op) if isinstance(op, Msg) else (op,)


def with_types(data: bytes, sids: set[int], cut: int | None = None) -> list[Op]:
    """``data`` parsed with ``Delivery`` registered for ``sids`` (fed in two pieces at
    ``cut``): the same ops as without, each message of its sid's class."""
    types: dict[int, type[Msg]] = dict.fromkeys(sids, Delivery)
    p, plain = Parser(sid_types=types), Parser()
    pieces = [data] if cut is None else [data[:cut], data[cut:]]
    ops = [op for piece in pieces for op in p.feed(piece)]
    assert list(map(fields, ops)) == list(map(fields, [o for x in pieces for o in plain.feed(x)]))
    for op in ops:
        if isinstance(op, Msg):
            assert type(op) is (Delivery if op.sid in sids else Msg), op
    return ops


def hmsg(subject: bytes, sid: int, reply: bytes, payload: bytes) -> bytes:
    block = b"NATS/1.0\r\nKV-Operation: DEL\r\n\r\n"
    return b"HMSG %b %d %b %d %d\r\n%b%b\r\n" % (
        subject,
        sid,
        reply,
        len(block),
        len(block) + len(payload),
        block,
        payload,
    )


def test_a_registered_sid_gets_its_class_on_every_path() -> None:
    one = msgs(1, 16)
    # a steady feed (the batch's one repeated line), consumer deliveries (its reply run)
    assert len(with_types(msgs(40, 16), {7})) == 40
    assert len(with_types(msgs(40, 128, reply=b"$JS.ACK.S.C.1.1"), {7})) == 40
    # a lone message, then again with its sid and size known (the round trip's shortcut)
    assert len(with_types(one + one, {7}, cut=len(one))) == 2
    got = hmsg(b"_INBOX.a.1", 7, b"r", b"v")  # a direct get's answer, alike
    assert len(with_types(got + got, {7}, cut=len(got))) == 2
    # large messages (the loop's run), a payload begun in the feed before (the loop)
    assert len(with_types(msgs(1, 4000) * 12, {7})) == 12
    assert len(with_types(msgs(41, 16), {7}, cut=len(one) - 5)) == 41
    # one subject a key, a header block now and then (a KV watch: the batch's columns)
    watch = b"".join(
        hmsg(b"$KV.B.k%d" % i, 7, b"$JS.ACK.r.%d" % i, b"")
        if i % 9 == 4
        else b"MSG $KV.B.k%d 7 $JS.ACK.r.%d 3\r\nabc\r\n" % (i, i)
        for i in range(40)
    )
    assert len(with_types(watch, {7})) == 40
    assert len(with_types(watch, {7}, cut=len(watch) // 2 + 3)) == 40
    # a heartbeat amid deliveries: a status is made of the sid's class too
    hb = b"HMSG a.b 7 %d %d\r\n%b\r\n" % (31, 31, b"NATS/1.0 100 Idle Heartbeat\r\n\r\n")
    ops = with_types(msgs(20, 16) + hb + msgs(20, 16), {7})
    assert [op.status for op in ops if isinstance(op, Msg)].count(100) == 1


def test_sids_of_two_classes_in_one_feed_each_get_their_own() -> None:
    # lines that repeat (two subscriptions, one registered), or differ (their subjects)
    two = b"".join(msgs(1, 16, sid=1 + i % 2) for i in range(40))
    assert len(with_types(two, {2})) == 40
    varied = b"".join(b"MSG s.%d %d 2\r\nab\r\n" % (i, 1 + i % 2) for i in range(40))
    assert len(with_types(varied, {1})) == 40
    assert len(with_types(varied, {1, 2})) == 40
    assert len(with_types(varied, set())) == 40


def test_deliveries_each_of_a_subject_of_their_own_are_one_run() -> None:
    # a KeyValue watch's: a subject and an ack subject each, one sid (the text run)
    feed = b"".join(
        b"MSG $KV.B.k.%d 9 $JS.ACK.KV_B.c.1.%d.%d.17.%d %d\r\n%b\r\n"
        % (i, i + 1, i + 1, 40 - i, i % 5, b"v" * (i % 5))
        for i in range(40)
    )
    p = Parser()
    ops = p.feed(feed)
    assert [op.subject for op in ops if isinstance(op, Msg)] == [f"$KV.B.k.{i}" for i in range(40)]
    assert claimed(p, ops)
    assert (p.run_start, p.run_sid, p.run_bytes) == (0, 9, sum(i % 5 for i in range(40)))
