"""Decoding a direct-get reply: its subject, sequence and time ride in headers.

The common case (the server's own spelling) is read without parsing the whole header
block; every other block goes through the full parse. Both must give the same answer.
"""

from __future__ import annotations

import datetime as dt

import pytest

from jetstream.core.message import Msg
from jetstream.errors import ProtocolError
from jetstream.stream import _direct_msg

TS = "2026-11-22T11:50:00.123456789Z"


def reply(hdr: bytes, data: bytes = b"v") -> Msg:
    return Msg("_INBOX.x.1", 1, None, data, hdr)


def block(*lines: str) -> bytes:
    return ("NATS/1.0\r\n" + "".join(f"{line}\r\n" for line in lines) + "\r\n").encode()


SERVER = (
    "Nats-Stream: KV_B",
    "Nats-Subject: $KV.B.k.1",
    "Nats-Sequence: 12",
    f"Nats-Time-Stamp: {TS}",
    "Nats-Last-Sequence: 12",
)


def test_the_server_spelling() -> None:
    m = _direct_msg(reply(block(*SERVER), b"hello"), "KV_B")
    assert (m.subject, m.seq, m.data) == ("$KV.B.k.1", 12, b"hello")
    assert m.time == dt.datetime(2026, 11, 22, 11, 50, 0, 123457, tzinfo=dt.UTC)  # rounded
    assert m.headers["Nats-Stream"] == "KV_B"
    assert m.raw_headers == block(*SERVER)


def test_the_message_own_headers_come_first_and_are_kept() -> None:
    m = _direct_msg(reply(block("KV-Operation: DEL", "X: 1", *SERVER)), "KV_B")
    assert (m.subject, m.seq) == ("$KV.B.k.1", 12)
    assert m.headers["KV-Operation"] == "DEL"


@pytest.mark.parametrize(
    "lines",
    [
        # another spelling of the names: the full parse finds them case-insensitively
        ("nats-subject: $KV.B.k.1", "NATS-SEQUENCE: 12", f"nats-time-stamp: {TS}"),
        # odd spacing around the values
        ("Nats-Subject:\t$KV.B.k.1 ", "Nats-Sequence:   12", f"Nats-Time-Stamp:{TS}\t"),
        # a repeated key: the first value wins either way
        (
            "Nats-Subject: $KV.B.k.1",
            "Nats-Sequence: 12",
            "Nats-Sequence: 99",
            f"Nats-Time-Stamp: {TS}",
        ),
    ],
)
def test_other_blocks_give_the_same_answer(lines: tuple[str, ...]) -> None:
    m = _direct_msg(reply(block(*lines)), "S")
    assert (m.subject, m.seq) == ("$KV.B.k.1", 12)
    assert m.time.year == 2026


@pytest.mark.parametrize(
    "lines",
    [
        ("Nats-Subject: a", f"Nats-Time-Stamp: {TS}"),  # no sequence
        ("Nats-Subject: a", "Nats-Sequence: twelve", f"Nats-Time-Stamp: {TS}"),
        ("Nats-Subject: a", "Nats-Sequence: 12", "Nats-Time-Stamp: yesterday"),
        ("Nats-Sequence: 12", f"Nats-Time-Stamp: {TS}"),  # no subject
    ],
)
def test_a_reply_without_valid_metadata_is_a_protocol_error(lines: tuple[str, ...]) -> None:
    with pytest.raises(ProtocolError, match="direct get on stream 'S'"):
        _direct_msg(reply(block(*lines)), "S")
