"""``parse_ack_subject``: JetStream message metadata from the ``$JS.ACK`` reply subject.

v1 (9 tokens): ``$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>``

v2 (11 or more): ``$JS.ACK.<domain>.<account hash>.`` then the same seven tokens, maybe
followed by more; ``_`` as the domain when there is none.
"""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jetstream.errors import NatsError
from jetstream.message import (
    JsMsg,
    MsgMetadata,
    SequencePair,
    ack_stream_index,
    parse_ack_subject,
)

TS = 1_795_311_856_446_713_942  # nanoseconds


def test_v1_layout() -> None:
    meta = parse_ack_subject(f"$JS.ACK.ORDERS.worker.3.1042.17.{TS}.5")
    assert meta == MsgMetadata(
        stream="ORDERS",
        consumer="worker",
        num_delivered=3,
        sequence=SequencePair(stream=1042, consumer=17),
        timestamp_ns=TS,
        num_pending=5,
        domain="",
    )


def test_v2_layout_without_domain() -> None:
    meta = parse_ack_subject(f"$JS.ACK._.szMpdrwD.ORDERS.worker.1.2.3.{TS}.0")
    assert meta.domain == ""
    assert meta.stream == "ORDERS" and meta.consumer == "worker"
    assert meta.num_delivered == 1
    assert meta.sequence == SequencePair(2, 3)
    assert meta.timestamp_ns == TS
    assert meta.num_pending == 0


def test_v2_layout_with_domain() -> None:
    meta = parse_ack_subject(f"$JS.ACK.hub.szMpdrwD.S.C.7.8.9.{TS}.10")
    assert meta.domain == "hub"
    assert (meta.stream, meta.consumer) == ("S", "C")
    assert (meta.num_delivered, meta.sequence.stream, meta.sequence.consumer) == (7, 8, 9)
    assert meta.num_pending == 10


def test_v2_layout_with_trailing_tokens() -> None:
    # Later servers may append tokens (a random token, more fields): they are ignored.
    meta = parse_ack_subject(f"$JS.ACK.hub.ACCHASH.S.C.1.2.3.{TS}.4.xyz")
    assert meta.domain == "hub" and meta.num_pending == 4
    meta = parse_ack_subject(f"$JS.ACK._.ACCHASH.S.C.1.2.3.{TS}.4.a.b.c")
    assert meta.domain == "" and meta.sequence == SequencePair(2, 3)


def test_layouts_agree() -> None:
    v1 = parse_ack_subject(f"$JS.ACK.S.C.1.2.3.{TS}.4")
    v2 = parse_ack_subject(f"$JS.ACK._.H.S.C.1.2.3.{TS}.4")
    assert v1 == v2


def test_timestamp() -> None:
    meta = parse_ack_subject(f"$JS.ACK.S.C.1.2.3.{TS}.4")
    assert meta.timestamp.tzinfo is dt.UTC
    expected = dt.datetime(2026, 11, 22, 1, 44, 16, 446714, tzinfo=dt.UTC)
    assert abs(meta.timestamp - expected) <= dt.timedelta(microseconds=1)
    zero = parse_ack_subject("$JS.ACK.S.C.1.2.3.0.4")
    assert zero.timestamp == dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    "subject",
    [
        "",
        "$JS.ACK",
        "_INBOX.abc.def",
        "$JS.ACK.S.C.1.2.3.4",  # 8 tokens
        "$JS.ACK.S.C.1.2.3.4.5.6",  # 10 tokens: neither layout
        "$JS.NAK.S.C.1.2.3.4.5",  # wrong second token
        "JS.ACK.S.C.1.2.3.4.5",  # wrong first token
        "$js.ack.S.C.1.2.3.4.5",  # case matters
        "$JS.ACK.S.C.x.2.3.4.5",  # non-numeric delivered
        "$JS.ACK.S.C.1.2.3.4.",  # empty pending
        "$JS.ACK.S.C.1.2.3.4.5.5e3",  # 10 tokens again
        "$JS.ACK.hub.H.S.C.1.two.3.4.5",  # v2, non-numeric stream sequence
        "$JS.ACK.hub.H.S.C.1.2.3.now.5",  # v2, non-numeric timestamp
        "$JS.FC.hub.H.S.C.xyz",  # a flow-control subject is no ack subject
    ],
)
def test_malformed(subject: str) -> None:
    with pytest.raises(NatsError) as info:
        parse_ack_subject(subject)
    assert repr(subject) in str(info.value)


def test_jsmsg_metadata_is_lazy_and_cached() -> None:
    msg = JsMsg("s", 0, f"$JS.ACK.hub.H.S.C.1.2.3.{TS}.4", b"")
    first = msg.metadata
    assert first.domain == "hub"
    assert msg.metadata is first


def test_jsmsg_without_reply_has_no_metadata() -> None:
    msg = JsMsg("s", 0, None, b"")
    with pytest.raises(NatsError):
        _ = msg.metadata


_name = st.text(
    alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1
)
_num = st.integers(min_value=0, max_value=2**63 - 1)


@settings(deadline=None)
@given(
    stream=_name,
    consumer=_name,
    domain=st.one_of(st.just("_"), _name),
    nums=st.tuples(_num, _num, _num, _num, _num),
    v2=st.booleans(),
)
def test_round_trip(
    stream: str,
    consumer: str,
    domain: str,
    nums: tuple[int, int, int, int, int],
    v2: bool,
) -> None:
    delivered, sseq, cseq, ts, pending = nums
    tail = f"{stream}.{consumer}.{delivered}.{sseq}.{cseq}.{ts}.{pending}"
    subject = f"$JS.ACK.{domain}.ACCHASH.{tail}" if v2 else f"$JS.ACK.{tail}"
    meta = parse_ack_subject(subject)
    assert (meta.stream, meta.consumer) == (stream, consumer)
    assert meta.num_delivered == delivered
    assert meta.sequence == SequencePair(sseq, cseq)
    assert meta.timestamp_ns == ts and meta.num_pending == pending
    assert meta.domain == ("" if not v2 or domain == "_" else domain)


@pytest.mark.parametrize(("tokens", "at"), [(8, -1), (9, 2), (10, -1), (11, 4), (14, 4)])
def test_one_reading_of_the_layout(tokens: int, at: int) -> None:
    """``ack_stream_index`` is the one place the layouts are told apart: 10 tokens fit
    neither (v2 adds two before the stream's name), so such a subject is refused, and
    the ordered consumer's sequence check does not take it for its next message."""
    assert ack_stream_index(tokens) == at


def test_ordered_check_places_the_consumer_sequence_by_the_same_layout() -> None:
    from jetstream._ordered_base import consumer_seq

    for reply, tail in ((f"$JS.ACK.S.C.1.2.3.{TS}.5", 3), (f"$JS.ACK._.h.S.C.1.2.3.{TS}.5.x", 4)):
        n = reply.count(".") + 1
        assert n - ack_stream_index(n) - 4 == tail
        assert consumer_seq(reply, tail) == 3 == parse_ack_subject(reply).sequence.consumer
