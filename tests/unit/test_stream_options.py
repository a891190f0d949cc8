"""The stream options of message schedules and counters in the typed config: sent when
set, left out when not, and read back from a server's reply (Go's null read as absent)."""

from __future__ import annotations

import msgspec
import pytest
from msgspec import UNSET

from jetstream.api import (
    StreamConfig,
    StreamInfoResponse,
    decode_response,
    encode,
    required_api_level,
)

_INFO = (
    b'{"config":{"name":"S","retention":"limits","storage":"file","discard":"old"%s},'
    b'"created":"2026-01-01T00:00:00Z","state":{}}'
)


@pytest.mark.parametrize("field", ["allow_msg_counter", "allow_msg_schedules"])
@pytest.mark.parametrize("value", [True, False])
def test_set_options_are_sent_and_read_back(field: str, value: bool) -> None:
    cfg = StreamConfig(name="S", **{field: value})
    sent = msgspec.json.decode(encode(cfg))
    assert sent[field] is value
    reply = _INFO % (b',"%s":%s' % (field.encode(), b"true" if value else b"false"))
    back = decode_response(reply, StreamInfoResponse, "r").config
    assert getattr(back, field) is value
    assert back == cfg
    assert encode(back) == encode(cfg)


@pytest.mark.parametrize("field", ["allow_msg_counter", "allow_msg_schedules"])
def test_unset_options_are_left_out(field: str) -> None:
    assert field not in msgspec.json.decode(encode(StreamConfig(name="S")))


@pytest.mark.parametrize("field", ["allow_msg_counter", "allow_msg_schedules"])
def test_a_null_from_the_server_reads_as_absent(field: str) -> None:
    reply = _INFO % (b',"%s":null' % field.encode())
    cfg = decode_response(reply, StreamInfoResponse, "r").config
    assert getattr(cfg, field) is UNSET
    assert field not in msgspec.json.decode(encode(cfg))
    assert cfg == StreamConfig(name="S")


def test_the_options_ask_for_api_level_2() -> None:
    assert required_api_level(StreamConfig(name="S", allow_msg_counter=True)) == 2
    assert required_api_level(StreamConfig(name="S", allow_msg_schedules=True)) == 2
    assert required_api_level(StreamConfig(name="S", allow_msg_schedules=False)) == 0
