"""Exact bytes of every command encoder."""

from __future__ import annotations

import json
from types import MappingProxyType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jetstream.protocol import commands
from jetstream.protocol.commands import (
    PING,
    PONG,
    encode_connect,
    encode_pub,
    encode_sub,
    encode_unsub,
)
from jetstream.protocol.headers import encode_headers
from tests.profiles import examples


def pub(
    subject: str,
    payload: bytes | bytearray | memoryview,
    reply: str | None = None,
    headers: bytes | None = None,
) -> bytes:
    buf = bytearray()
    encode_pub(buf, subject, payload, reply, headers)
    return bytes(buf)


def test_ping_pong() -> None:
    assert PING == b"PING\r\n"
    assert PONG == b"PONG\r\n"


def test_connect() -> None:
    options = {
        "verbose": False,
        "pedantic": False,
        "name": "svc",
        "lang": "python",
        "protocol": 1,
        "headers": True,
        "no_responders": True,
    }
    line = encode_connect(options)
    assert line == (
        b'CONNECT {"verbose":false,"pedantic":false,"name":"svc","lang":"python",'
        b'"protocol":1,"headers":true,"no_responders":true}\r\n'
    )
    assert json.loads(line[len(b"CONNECT ") : -2]) == options


def test_connect_escapes_and_other_mappings() -> None:
    line = encode_connect(MappingProxyType({"pass": 'a"b\\c\r\n', "name": "ünï"}))
    assert line.startswith(b"CONNECT {") and line.endswith(b"}\r\n")
    assert line.count(b"\r\n") == 1  # CR/LF inside strings are escaped
    assert json.loads(line[8:-2]) == {"pass": 'a"b\\c\r\n', "name": "ünï"}
    assert encode_connect({}) == b"CONNECT {}\r\n"


def test_connect_refuses_unencodable_values() -> None:
    with pytest.raises(TypeError, match="Encoding objects of type object is unsupported"):
        encode_connect({"x": object()})


def test_pub() -> None:
    assert pub("foo", b"hello") == b"PUB foo 5\r\nhello\r\n"
    assert pub("foo.bar", b"hello", "_INBOX.x") == b"PUB foo.bar _INBOX.x 5\r\nhello\r\n"
    assert pub("foo", b"") == b"PUB foo 0\r\n\r\n"
    assert pub("foo", b"", "r") == b"PUB foo r 0\r\n\r\n"
    assert pub("foo", b"", "") == b"PUB foo 0\r\n\r\n"  # an empty reply means none
    assert pub("foo", b"a\r\nb") == b"PUB foo 4\r\na\r\nb\r\n"
    assert pub("ünï", b"x") == "PUB ünï 1\r\nx\r\n".encode()


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
@pytest.mark.parametrize("size", [0, 1, 1023, 1024, 1025, 70_000])
def test_pub_payload_types_and_sizes(kind: type, size: int) -> None:
    data = bytes(range(256)) * (size // 256) + bytes(size % 256)
    payload = kind(data)
    assert pub("s", payload) == b"PUB s %d\r\n" % size + data + b"\r\n"
    assert pub("s", payload, "r") == b"PUB s r %d\r\n" % size + data + b"\r\n"
    headers = b"NATS/1.0\r\nA: 1\r\n\r\n"
    total = len(headers) + size
    assert pub("s", payload, None, headers) == (
        b"HPUB s %d %d\r\n" % (len(headers), total) + headers + data + b"\r\n"
    )
    assert pub("s", payload, "r", headers) == (
        b"HPUB s r %d %d\r\n" % (len(headers), total) + headers + data + b"\r\n"
    )


def test_memoryview_slice_payload() -> None:
    view = memoryview(b"xxhelloxx")[2:7]
    assert pub("s", view) == b"PUB s 5\r\nhello\r\n"


def test_hpub() -> None:
    headers = encode_headers({"Nats-Msg-Id": "1"})
    assert headers == b"NATS/1.0\r\nNats-Msg-Id: 1\r\n\r\n"
    assert pub("foo", b"hi", None, headers) == (
        b"HPUB foo 28 30\r\nNATS/1.0\r\nNats-Msg-Id: 1\r\n\r\nhi\r\n"
    )
    assert pub("foo", b"hi", "_INBOX.r", headers) == (
        b"HPUB foo _INBOX.r 28 30\r\nNATS/1.0\r\nNats-Msg-Id: 1\r\n\r\nhi\r\n"
    )


def test_headers_only_messages() -> None:
    empty = encode_headers({})
    assert pub("foo", b"", None, empty) == b"HPUB foo 12 12\r\nNATS/1.0\r\n\r\n\r\n"
    assert pub("foo", b"", "r", empty) == b"HPUB foo r 12 12\r\nNATS/1.0\r\n\r\n\r\n"
    headers = encode_headers({"KV-Operation": "DEL"})
    assert pub("$KV.b.k", b"", None, headers) == (
        b"HPUB $KV.b.k 31 31\r\nNATS/1.0\r\nKV-Operation: DEL\r\n\r\n\r\n"
    )


def test_pub_appends_to_existing_buffer() -> None:
    buf = bytearray(b"PING\r\n")
    encode_pub(buf, "a", b"1")
    encode_pub(buf, "b", b"x" * 2000, "r")
    encode_pub(buf, "c", b"", headers=b"NATS/1.0\r\n\r\n")
    encode_sub(buf, "d", 7)
    encode_unsub(buf, 7)
    assert buf == (
        b"PING\r\n"
        b"PUB a 1\r\n1\r\n"
        b"PUB b r 2000\r\n" + b"x" * 2000 + b"\r\n"
        b"HPUB c 12 12\r\nNATS/1.0\r\n\r\n\r\n"
        b"SUB d 7\r\n"
        b"UNSUB 7\r\n"
    )


def test_inline_threshold_does_not_change_the_bytes() -> None:
    limit = commands._INLINE_MAX
    for size in (limit - 1, limit, limit + 1):
        assert pub("s", b"z" * size) == b"PUB s %d\r\n" % size + b"z" * size + b"\r\n"


def test_sub() -> None:
    buf = bytearray()
    encode_sub(buf, "foo.*", 1)
    assert buf == b"SUB foo.* 1\r\n"
    buf.clear()
    encode_sub(buf, "foo.>", 42, "workers")
    assert buf == b"SUB foo.> workers 42\r\n"
    buf.clear()
    encode_sub(buf, "foo", 3, "")
    assert buf == b"SUB foo 3\r\n"
    buf.clear()
    encode_sub(buf, "ünï.>", 12345678901, "grüppe")
    assert buf == "SUB ünï.> grüppe 12345678901\r\n".encode()


def test_unsub() -> None:
    buf = bytearray()
    encode_unsub(buf, 1)
    assert buf == b"UNSUB 1\r\n"
    buf.clear()
    encode_unsub(buf, 99, 5)
    assert buf == b"UNSUB 99 5\r\n"
    buf.clear()
    encode_unsub(buf, 2, 0)
    assert buf == b"UNSUB 2 0\r\n"


# A token of a valid subject (no dots, spaces or controls, not a lone wildcard).
token = st.text(alphabet="abcXYZ019-_$é", min_size=1, max_size=8)
subject = st.lists(token, min_size=1, max_size=4).map(".".join)


@settings(max_examples=examples(500), deadline=None)
@given(
    subject,
    st.binary(max_size=3000),
    st.none() | subject,
    st.none() | st.dictionaries(st.sampled_from(["A", "Nats-Msg-Id", "b-c"]), st.text("xyz ")),
)
def test_pub_frames_round_trip(
    subj: str, payload: bytes, reply: str | None, hdrs: dict[str, str] | None
) -> None:
    """Reading back the frame by its own control line gives the parts back."""
    block = None if hdrs is None else encode_headers(hdrs)
    frame = pub(subj, payload, reply, block)
    line, _, rest = frame.partition(b"\r\n")
    args = line.decode().split(" ")
    if block is None:
        assert args[0] == "PUB"
        size = int(args[-1])
        assert rest == payload + b"\r\n" and size == len(payload)
    else:
        assert args[0] == "HPUB"
        hdr_len, total = int(args[-2]), int(args[-1])
        assert rest[:hdr_len] == block
        assert rest[hdr_len:total] == payload
        assert rest[total:] == b"\r\n"
    assert args[1] == subj
    body_args = args[2:-1] if block is None else args[2:-2]
    assert body_args == ([] if reply is None else [reply])
