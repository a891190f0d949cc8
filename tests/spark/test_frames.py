"""The source's bulk parser (``jetstream.spark._frames``) and the columns of its runs.

(a) a parser with the bulk parser gives, any split of any stream, the ops of the parser
    without it (runs taken whole where they are MSG ops to one sid, the rest op by op);
    random and mutated bytes give the same ops and the same ProtocolError;
(b) a run's fields, cuts and ops are those of its bytes;
(c) a run's columns, made from its bytes, are those made from its ops one by one.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jetstream.errors import NatsError, ProtocolError
from jetstream.message import parse_ack_subject
from jetstream.protocol.ops import PING, Msg, MsgRun, Op, OpsRun
from jetstream.protocol.parser import Parser
from jetstream.spark._columns import ColumnRun, Layout, column_run, run_columns
from jetstream.spark._frames import RUN_MIN, FrameRun, digits, frame_run, view_array
from tests.profiles import examples
from tests.unit.test_parser_properties import encode, feed_pieces, msgs, ops_strategy

PROPERTY = settings(max_examples=examples(300), deadline=None)


def expand(ops: Sequence[Op]) -> list[Op]:
    """The ops with every run replaced by its ops."""
    out: list[Op] = []
    for op in ops:
        out += op.ops(Msg) if isinstance(op, MsgRun) else [op]
    return out


def both(data: bytes, cuts: Sequence[int], **limits: int) -> tuple[object, object, int]:
    """What the parser gives ``data`` fed in pieces with the bulk parser and without it
    (the ops, or the ProtocolError and the ops before it), and how many runs it took;
    the source's bulk parser (``column_run``) is checked to give what ``frame_run`` does."""
    results = []
    runs = 0
    for bulk in (frame_run, column_run, None):
        parser = Parser(bulk=bulk, **limits)
        try:
            got = feed_pieces(parser, data, cuts)
        except ProtocolError as exc:
            results.append(("error", str(exc).split(":")[0], expand(exc.ops)))  # type: ignore[attr-defined]
            continue
        if bulk is frame_run:
            runs = sum(isinstance(op, MsgRun) for op in got)
        results.append(("ops", expand(got), parser.buffered))
    assert results[1] == results[0]
    return results[0], results[2], runs


# payloads of a consumer's messages: mostly plain, some with CR, LF and spaces in them
payloads = st.one_of(
    st.binary(min_size=0, max_size=40).filter(lambda b: b"\n" not in b),
    st.binary(max_size=40),
    st.sampled_from([b"", b"x" * 13, b"\r\n", b"a b\tc", b"\xff\xfe"]),
)
subjects = st.sampled_from(["orders.new", "o", "a.b.c", "x" * 40, "orders.é"])


# payloads without an LF (the common case) and, now and then, one with
plain_payloads = st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"."))


@st.composite
def consumer_feeds(draw: st.DrawFn) -> list[Msg | Op]:
    """What a consumer's inbox gets: runs of MSG ops with ack subjects to one sid (one
    subject a run, mostly), now and then an op the bulk parser leaves to the parser (an
    LF in a payload, a subject not in ASCII), a status, an op to another sid, a PING."""
    sid = draw(st.sampled_from([1, 7, 123456]))
    out: list[Msg | Op] = []
    seq = draw(st.integers(1, 10**12))
    for _ in range(draw(st.integers(0, 4))):
        subject = draw(subjects)
        for _ in range(draw(st.integers(0, 3 * RUN_MIN))):
            reply = f"$JS.ACK.S.C.1.{seq}.{seq}.17000000000{seq % 10**8:08d}.{10**6 - seq % 10**6}"
            odd = draw(st.integers(0, 40)) == 0
            payload = draw(payloads if odd else plain_payloads)
            out.append(Msg(draw(subjects) if odd else subject, sid, reply, payload))
            seq += 1
        out.append(
            draw(
                st.one_of(
                    st.just(PING),
                    msgs(),
                    ops_strategy,
                    st.just(
                        Msg("_INBOX.x", sid, None, b"", b"NATS/1.0 100 Idle Heartbeat\r\n\r\n", 100)
                    ),
                )
            )
        )
    return out


@PROPERTY
@given(consumer_feeds(), st.data())
def test_a_bulk_parser_gives_the_ops_of_any_split(ops: list[Op], data: st.DataObject) -> None:
    stream = b"".join(map(encode, ops))
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=6))
    with_bulk, without, _ = both(stream, cuts)
    assert with_bulk == without
    assert without == ("ops", ops, 0)


def test_a_run_of_plain_ops_is_taken_whole() -> None:
    ops = [
        Msg("s.x", 9, f"$JS.ACK.S.C.1.{i}.{i}.1700000000000000000.{100 - i}", b"p%d" % i)
        for i in range(1, 41)
    ]
    stream = b"".join(map(encode, ops))
    parser = Parser(bulk=frame_run)
    got = parser.feed(stream + b"PING\r\n" + stream[:30])
    assert len(got) == 2 and isinstance(got[0], FrameRun) and got[1] == PING
    assert got[0].ops(Msg) == ops and parser.buffered == 30


@PROPERTY
@given(st.binary(max_size=400), st.lists(st.integers(0, 400), max_size=4))
def test_random_bytes_give_the_same_ops_or_the_same_error(data: bytes, cuts: list[int]) -> None:
    with_bulk, without, _ = both(data, cuts)
    assert with_bulk == without


@PROPERTY
@given(consumer_feeds(), st.data())
def test_mutated_streams_give_the_same_ops_or_the_same_error(
    ops: list[Op], data: st.DataObject
) -> None:
    stream = bytearray(b"".join(map(encode, ops)))
    for _ in range(data.draw(st.integers(1, 4))):
        if stream:
            at = data.draw(st.integers(0, len(stream) - 1))
            stream[at] = data.draw(st.sampled_from(b" \t\r\n0129MSG.\xff"))
    limits = data.draw(st.sampled_from([{}, {"max_control_line": 60}, {"max_payload": 20}]))
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=3))
    with_bulk, without, _ = both(bytes(stream), cuts, **limits)
    assert with_bulk == without


def test_a_run_cut_and_read_by_fields() -> None:
    ops = [Msg("s", 3, f"r.{i}", b"%d" % i * (i % 5)) for i in range(RUN_MIN * 2)]
    _, run = frame_run(b"".join(map(encode, ops)), 0, 4096, 1 << 20)
    assert isinstance(run, FrameRun) and len(run) == len(ops) and run.run_sid == 3
    assert run.nbytes == sum(len(op.payload) for op in ops)
    head, tail = run.split(5)
    assert head.ops(Msg) == ops[:5] and tail.ops(Msg) == ops[5:]
    assert [run.reply(0), run.reply(-1), tail.reply(0)] == ["r.0", f"r.{len(ops) - 1}", "r.5"]
    assert run.payloads().to_pylist() == [op.payload for op in ops]
    assert run.subjects().to_pylist() == ["s"] * len(ops)


@pytest.mark.parametrize(
    "values",
    [[b"a" * 12, b""], [b"x" * 13, b"y" * 100], [b"abc", b"q" * 50, b"", b"z" * 12], [], [b"end"]],
)
def test_view_array_copies_the_values_out(values: list[bytes]) -> None:
    data = b"--".join(values)  # the last value ends the buffer
    starts, at = [], 0
    for v in values:
        starts.append(at)
        at += len(v) + 2
    arr = view_array(
        data,
        np.array(starts, np.int64),
        np.array([len(v) for v in values], np.int64),
        pa.binary_view(),
        pa.binary(),
    )
    arr.validate(full=True)
    assert arr.type == pa.binary() and arr.to_pylist() == values


@pytest.mark.parametrize(
    ("texts", "ok"),
    [
        (["0", "7", "12", "100"], [True] * 4),
        (["123", "456"], [True, True]),
        (["1x", "", "99"], [False, False, True]),
        (
            ["1700000000123456789", "8999999999999999999", "9300000000000000000"],
            [True, True, False],
        ),
    ],
)
def test_digits_reads_the_numbers_it_can(texts: list[str], ok: list[bool]) -> None:
    data = " ".join(texts).encode()
    starts, at = [], 0
    for t in texts:
        starts.append(at)
        at += len(t) + 1
    start = np.array(starts, np.int64)
    end = start + np.array([len(t) for t in texts], np.int64)
    values, good = digits(np.frombuffer(data, np.uint8), start, end, 19)
    assert good.tolist() == ok
    assert [int(v) for v, g in zip(values, good, strict=True) if g] == [
        int(t) for t, g in zip(texts, ok, strict=True) if g
    ]


LAYOUTS = {
    "v1": "$JS.ACK.S.C.1.{seq}.{cseq}.{ts}.{pending}",
    "v2": "$JS.ACK.hub.ACC.S.C.1.{seq}.{cseq}.{ts}.{pending}",
    "v2 token": "$JS.ACK.hub.ACC.S.C.1.{seq}.{cseq}.{ts}.{pending}.tok",
}


@PROPERTY
@given(
    st.sampled_from(sorted(LAYOUTS)),
    st.lists(st.integers(1, 3), min_size=RUN_MIN, max_size=60),
    st.lists(subjects, min_size=1, max_size=3),
    st.integers(1, 10**15),
    st.lists(payloads, min_size=1, max_size=4),
    st.sampled_from([10**7, 1000 + 20, 105, 10]),  # pending counts of one width, or not
)
def test_the_columns_of_a_run_are_those_of_its_ops(
    layout: str,
    steps: list[int],
    names: list[str],
    first: int,
    datas: list[bytes],
    pending: int,
) -> None:
    seqs = list(np.cumsum([first, *steps[1:]]))
    ops = [
        Msg(
            names[i % len(names)],
            5,
            LAYOUTS[layout].format(
                seq=s, cseq=i + 1, ts=1_700_000_000_000_000_000 + 7919 * i, pending=abs(pending - i)
            ),
            datas[i % len(datas)].replace(b"\n", b"."),
        )
        for i, s in enumerate(seqs)
    ]
    _, run = frame_run(b"".join(map(encode, ops)), 0, 4096, 1 << 20)
    shape = Layout.of(ops[0].reply or "")
    if any(not name.isascii() for name in names):
        assert run is None  # left to the parser: a subject not in ASCII
        return
    assert isinstance(run, FrameRun) and len(run) == len(ops)
    fast = run_columns(run, shape)
    slow = run_columns(OpsRun(ops), shape)
    assert [c.to_pylist() for c in fast] == [c.to_pylist() for c in slow]
    assert fast.seqs.to_pylist() == seqs
    # made as the run is found, and cut: the same columns, cut at the same row
    _, made = column_run(b"".join(map(encode, ops)), 0, 4096, 1 << 20)
    assert isinstance(made, ColumnRun)
    assert [c.to_pylist() for c in run_columns(made, shape)] == [c.to_pylist() for c in fast]
    head, tail = made.split(5)
    for part, rows in ((head, slice(0, 5)), (tail, slice(5, None))):
        assert isinstance(part, ColumnRun) and part.ops(Msg) == ops[rows]
        got = [c.to_pylist() for c in run_columns(part, shape)]
        assert got == [c.to_pylist()[rows] for c in slow]


def test_the_layout_is_placed_as_every_reader_of_ack_subjects_places_it() -> None:
    for shape, reply in LAYOUTS.items():
        got = reply.format(seq=41, cseq=2, ts=1_700_000_000_000_000_000, pending=3)
        layout = Layout.of(got)
        meta = parse_ack_subject(got)
        tokens = got.split(".")
        assert int(tokens[layout.seq_at]) == meta.sequence.stream == 41, shape
        assert int(tokens[layout.pending_at]) == meta.num_pending == 3, shape
    # ten tokens fit neither layout: refused here as parse_ack_subject refuses it
    ten = "$JS.ACK.hub.S.C.1.41.2.1700000000000000000.3"
    with pytest.raises(NatsError, match="not a JetStream message"):
        parse_ack_subject(ten)
    with pytest.raises(NatsError, match="not a JetStream message"):
        Layout.of(ten)
    with pytest.raises(NatsError, match="not a JetStream message"):
        Layout.of("_INBOX.a.b.c.d.e.f.g.h")
