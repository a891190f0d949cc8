"""The Headers multi-map, header block encoding and parsing."""

from __future__ import annotations

from types import MappingProxyType

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from jetstream.errors import BadHeaderError, ProtocolError
from jetstream.protocol import headers as headers_mod
from jetstream.protocol.headers import Headers, encode_headers, parse_headers
from tests.profiles import examples

# --- Headers ---------------------------------------------------------------------


def test_first_value_replace_add_get_all() -> None:
    h = Headers()
    h.add("X-A", "1")
    h.add("X-A", "2")
    h["X-B"] = "b"
    assert h["X-A"] == "1"
    assert h.get_all("X-A") == ["1", "2"]
    assert len(h) == 2
    assert list(h) == ["X-A", "X-B"]
    h["X-A"] = "3"
    assert h.get_all("X-A") == ["3"]
    assert list(h) == ["X-A", "X-B"]  # replacing keeps the key's position
    assert h.multi_items() == [("X-A", "3"), ("X-B", "b")]


def test_get_all_returns_a_copy_and_empty_when_missing() -> None:
    h = Headers({"k": ["1", "2"]})
    values = h.get_all("k")
    values.append("3")
    assert h.get_all("k") == ["1", "2"]
    assert h.get_all("missing") == []


def test_missing_key() -> None:
    h = Headers({"a": "1"})
    with pytest.raises(KeyError):
        h["b"]
    with pytest.raises(KeyError):
        del h["b"]
    assert h.get("b") is None
    assert h.get("b", "x") == "x"
    assert "b" not in h
    assert not h.__contains__(1)  # a non-str key is simply absent


def test_delete_removes_every_value() -> None:
    h = Headers([("a", "1"), ("a", "2"), ("b", "3")])
    del h["a"]
    assert "a" not in h
    assert h.multi_items() == [("b", "3")]
    assert h.pop("b") == "3"
    assert len(h) == 0


def test_case_insensitive_fallback_and_case_preserving() -> None:
    h = Headers({"Nats-Msg-Id": "x"})
    assert h["nats-msg-id"] == "x"
    assert h["NATS-MSG-ID"] == "x"
    assert "nats-msg-id" in h
    h["nats-msg-id"] = "y"
    assert list(h) == ["Nats-Msg-Id"]  # the first spelling is kept
    assert h["Nats-Msg-Id"] == "y"
    h.add("NATS-MSG-ID", "z")
    assert h.get_all("nats-msg-id") == ["y", "z"]
    del h["nats-MSG-id"]
    assert len(h) == 0


def test_exact_spelling_wins_over_case_insensitive() -> None:
    _, _, h = parse_headers(b"NATS/1.0\r\nFoo: upper\r\nfoo: lower\r\n\r\n")
    assert list(h) == ["Foo", "foo"]
    assert h["Foo"] == "upper"
    assert h["foo"] == "lower"
    assert h["FOO"] == "upper"  # no exact match: the first case-insensitive one
    h["foo"] = "new"
    assert h.get_all("Foo") == ["upper"]


def test_construction_forms() -> None:
    from_dict = Headers({"a": "1", "b": ["2", "3"], "c": ("4",)})
    assert from_dict.multi_items() == [("a", "1"), ("b", "2"), ("b", "3"), ("c", "4")]
    from_pairs = Headers([("a", "1"), ("b", "2"), ("b", "3"), ("c", "4")])
    assert from_pairs == from_dict
    from_proxy = Headers(MappingProxyType({"a": "1"}))
    assert from_proxy == {"a": "1"}
    copied = Headers(from_dict)
    copied.add("a", "x")
    assert from_dict.get_all("a") == ["1"]
    assert from_dict.copy() == from_dict
    assert from_dict.copy() is not from_dict
    assert Headers({"a": [], "b": "1"}) == {"b": "1"}
    assert list(Headers({"a": [], "b": "1"})) == ["b"]
    # Keys given as distinct spellings stay distinct.
    assert list(Headers({"A": "1", "a": "2"})) == ["A", "a"]


def test_equality() -> None:
    h = Headers([("a", "1"), ("a", "2"), ("b", "3")])
    assert h == {"a": ["1", "2"], "b": "3"}
    assert {"a": ["1", "2"], "b": "3"} == h  # noqa: SIM300 - the reflected comparison
    assert h == {"b": "3", "a": ("1", "2")}  # distinct-key order does not matter
    assert h == Headers([("b", "3"), ("a", "1"), ("a", "2")])
    assert h != {"a": ["2", "1"], "b": "3"}  # value order does
    assert h != {"a": "1", "b": "3"}
    assert h != {"A": ["1", "2"], "b": "3"}  # equality is exact on keys
    assert h != {"a": ["1", "2"]}
    assert h != {"a": ["1", "2"], "b": 3}
    assert h != [("a", "1")]
    assert Headers() == {}


def test_unhashable() -> None:
    with pytest.raises(TypeError, match="unhashable type: 'Headers'"):
        hash(Headers())


def test_repr() -> None:
    h = Headers([("a", "1"), ("b", "2"), ("b", "3")])
    assert repr(h) == "Headers({'a': '1', 'b': ['2', '3']})"
    assert repr(Headers()) == "Headers({})"


def test_mutable_mapping_mixins() -> None:
    h = Headers()
    h.update({"a": "1"}, b="2")
    assert h.setdefault("a", "x") == "1"
    assert dict(h.items()) == {"a": "1", "b": "2"}
    assert list(h.values()) == ["1", "2"]
    h.clear()
    assert not h


# --- encoding --------------------------------------------------------------------


def test_encode_exact_bytes() -> None:
    assert encode_headers({}) == b"NATS/1.0\r\n\r\n"
    assert encode_headers({"Nats-Msg-Id": "abc"}) == b"NATS/1.0\r\nNats-Msg-Id: abc\r\n\r\n"
    assert (
        encode_headers({"a": ["1", "2"], "b": "3"}) == b"NATS/1.0\r\na: 1\r\na: 2\r\nb: 3\r\n\r\n"
    )
    assert encode_headers(Headers([("a", "1"), ("b", "2"), ("a", "3")])) == (
        b"NATS/1.0\r\na: 1\r\na: 3\r\nb: 2\r\n\r\n"
    )
    assert encode_headers({"k": ""}) == b"NATS/1.0\r\nk: \r\n\r\n"
    assert encode_headers({"k": "a\tb"}) == b"NATS/1.0\r\nk: a\tb\r\n\r\n"
    assert encode_headers({"k": "héllo ✓"}) == "NATS/1.0\r\nk: héllo ✓\r\n\r\n".encode()
    assert encode_headers({"k": "a: b"}) == b"NATS/1.0\r\nk: a: b\r\n\r\n"
    assert encode_headers({"k": []}) == b"NATS/1.0\r\n\r\n"
    assert encode_headers({"!#$%&'*+-.^_`|~09AZaz": "v"}).startswith(
        b"NATS/1.0\r\n!#$%&'*+-.^_`|~09AZaz: v"
    )


BAD_KEYS = [
    ("", "is empty"),
    ("a b", "contains a space"),
    (" a", "contains a space"),
    ("a:", "contains ':'"),
    ("a:b", "contains ':'"),
    ("a\r", "CR or LF"),
    ("a\nb", "CR or LF"),
    ("a\r\nInjected", "CR or LF"),
    ("a\tb", "printable ASCII"),
    ("a\x00", "printable ASCII"),
    ("a\x7f", "printable ASCII"),
    ("\x1b", "printable ASCII"),
    ("ключ", "printable ASCII"),
    ("café", "printable ASCII"),
]


@pytest.mark.parametrize(("key", "reason"), BAD_KEYS)
def test_bad_key(key: str, reason: str) -> None:
    with pytest.raises(BadHeaderError) as info:
        encode_headers({key: "v"})
    assert repr(key) in str(info.value)
    assert reason in str(info.value)
    assert isinstance(info.value, ValueError)


BAD_VALUES = [
    ("a\rb", "CR or LF"),
    ("a\nb", "CR or LF"),
    ("v\r\n\r\nPUB evil 1", "CR or LF"),
    ("\x00", "NUL"),
    ("a\x01", "control character"),
    ("a\x0b", "control character"),
    ("a\x1b[0m", "control character"),
    ("a\x1f", "control character"),
    ("a\x7f", "control character"),
    ("\ud800", "UTF-8"),
]


@pytest.mark.parametrize(("value", "reason"), BAD_VALUES)
def test_bad_value(value: str, reason: str) -> None:
    with pytest.raises(BadHeaderError) as info:
        encode_headers({"Good": "fine", "X-Key": ["ok", value]})
    assert "'X-Key'" in str(info.value)
    assert reason in str(info.value)
    with pytest.raises(BadHeaderError):
        encode_headers(Headers([("X-Key", value)]))


@pytest.mark.parametrize("value", [1, None, b"bytes", bytearray(b"x"), 1.5, ["ok", 2]])
def test_value_of_wrong_type(value: object) -> None:
    with pytest.raises(BadHeaderError, match="must be a str"):
        encode_headers({"k": value})  # type: ignore[dict-item]


def test_key_of_wrong_type() -> None:
    with pytest.raises(BadHeaderError, match="must be a str"):
        encode_headers({b"k": "v"})  # type: ignore[dict-item]


# --- parsing ---------------------------------------------------------------------

STATUS_LINES = [
    (b"NATS/1.0\r\n\r\n", 0, ""),
    (b"NATS/1.0 503\r\n\r\n", 503, ""),
    (b"NATS/1.0 100 Idle Heartbeat\r\n\r\n", 100, "Idle Heartbeat"),
    (b"NATS/1.0 100 FlowControl Request\r\n\r\n", 100, "FlowControl Request"),
    (b"NATS/1.0 404 No Messages\r\n\r\n", 404, "No Messages"),
    (b"NATS/1.0 408 Request Timeout\r\n\r\n", 408, "Request Timeout"),
    (b"NATS/1.0 409 Consumer Deleted\r\n\r\n", 409, "Consumer Deleted"),
    (b"NATS/1.0 409 Leadership Change\r\n\r\n", 409, "Leadership Change"),
    (b"NATS/1.0 409 Exceeded MaxRequestBatch of 10\r\n\r\n", 409, "Exceeded MaxRequestBatch of 10"),
    (b"NATS/1.0 409 Message Size Exceeds MaxBytes\r\n\r\n", 409, "Message Size Exceeds MaxBytes"),
    (b"NATS/1.0 400 Bad Request\r\n\r\n", 400, "Bad Request"),
    (b"NATS/1.0 423 Nats-Pin-Id mismatch\r\n\r\n", 423, "Nats-Pin-Id mismatch"),
    (b"NATS/1.0 204 EOB\r\n\r\n", 204, "EOB"),
    (b"NATS/1.0 \r\n\r\n", 0, ""),
    (b"NATS/1.0  408  Request Timeout \r\n\r\n", 408, "Request Timeout"),
]


@pytest.mark.parametrize(("block", "status", "description"), STATUS_LINES)
def test_status_lines(block: bytes, status: int, description: str) -> None:
    assert parse_headers(block) == (status, description, Headers())
    assert parse_headers(memoryview(block)) == (status, description, Headers())
    assert parse_headers(bytearray(block)) == (status, description, Headers())


def test_status_with_headers() -> None:
    block = (
        b"NATS/1.0 408 Request Timeout\r\n"
        b"Nats-Pending-Messages: 5\r\n"
        b"Nats-Pending-Bytes: 1024\r\n\r\n"
    )
    status, description, h = parse_headers(block)
    assert (status, description) == (408, "Request Timeout")
    assert h[headers_mod.NATS_PENDING_MESSAGES] == "5"
    assert h[headers_mod.NATS_PENDING_BYTES] == "1024"


def test_heartbeat_with_stalled_header() -> None:
    block = (
        b"NATS/1.0 100 Idle Heartbeat\r\n"
        b"Nats-Last-Consumer: 12\r\nNats-Last-Stream: 40\r\nNats-Consumer-Stalled: $JS.FC.x\r\n\r\n"
    )
    status, description, h = parse_headers(block)
    assert status == 100 and description == "Idle Heartbeat"
    assert h == {
        "Nats-Last-Consumer": "12",
        "Nats-Last-Stream": "40",
        "Nats-Consumer-Stalled": "$JS.FC.x",
    }


def test_direct_get_headers() -> None:
    block = (
        b"NATS/1.0\r\nNats-Stream: ORDERS\r\nNats-Subject: orders.1\r\nNats-Sequence: 7\r\n"
        b"Nats-Time-Stamp: 2024-01-02T03:04:05.123456789Z\r\nNats-Num-Pending: 3\r\n"
        b"Nats-Last-Sequence: 6\r\n\r\n"
    )
    status, _, h = parse_headers(block)
    assert status == 0
    assert h[headers_mod.NATS_STREAM] == "ORDERS"
    assert h[headers_mod.NATS_SUBJECT] == "orders.1"
    assert h[headers_mod.NATS_SEQUENCE] == "7"
    assert h[headers_mod.NATS_TIME_STAMP] == "2024-01-02T03:04:05.123456789Z"
    assert h[headers_mod.NATS_NUM_PENDING] == "3"
    assert h[headers_mod.NATS_LAST_SEQUENCE] == "6"


def test_parse_is_lenient_about_lines() -> None:
    block = (
        b"NATS/1.0\r\n"
        b"  Spaced  :   padded value \t\r\n"
        b"no colon here\r\n"
        b": no key\r\n"
        b"Multi: 1\r\n"
        b"Multi: 2\r\n"
        b"Time: 12:00:05\r\n"
        b"Empty:\r\n"
        b"Bare-LF: yes\n"
        b"Last: one\r\n\r\n"
    )
    _, _, h = parse_headers(block)
    assert h == {
        "Spaced": "padded value",
        "Multi": ["1", "2"],
        "Time": "12:00:05",
        "Empty": "",
        "Bare-LF": "yes",
        "Last": "one",
    }


def test_parse_tolerates_a_missing_final_blank_line() -> None:
    assert parse_headers(b"NATS/1.0\r\nA: 1") == (0, "", Headers({"A": "1"}))
    assert parse_headers(b"NATS/1.0\r\nA: 1\r\n") == (0, "", Headers({"A": "1"}))
    assert parse_headers(b"NATS/1.0 503") == (503, "", Headers())
    assert parse_headers(b"NATS/1.0") == (0, "", Headers())


def test_parse_replaces_invalid_utf8() -> None:
    _, _, h = parse_headers(b"NATS/1.0\r\nK: caf\xc3\xa9 \xff\xfe\r\n\r\n")
    assert h["K"] == "café \ufffd\ufffd"


@pytest.mark.parametrize(
    "block",
    [
        b"",
        b"\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n\r\n",
        b"NATS/2.0\r\n\r\n",
        b"nats/1.0\r\n\r\n",
        b" NATS/1.0\r\n\r\n",
        b"NATS/1.0x\r\n\r\n",
        b"NATS/1.0 abc\r\n\r\n",
        b"NATS/1.0 4O4 No Messages\r\n\r\n",
        b"NATS/1.0 \xd9\xa3\xd9\xa3\xd9\xa3\r\n\r\n",  # non-ASCII digits are not a status code
        b"NATS/1.0 50\r\n\r\n",
        b"NATS/1.0 5030\r\n\r\n",
        b"NATS/1.0 " + b"9" * 5000 + b"\r\n\r\n",
        b"NATS/1.0\rX\r\n\r\n",
        b"K: v\r\n\r\n",
    ],
)
def test_parse_refuses_a_bad_first_line(block: bytes) -> None:
    with pytest.raises(ProtocolError):
        parse_headers(block)


def test_header_name_constants() -> None:
    assert headers_mod.NATS_MSG_ID == "Nats-Msg-Id"
    assert headers_mod.NATS_EXPECTED_STREAM == "Nats-Expected-Stream"
    assert headers_mod.NATS_EXPECTED_LAST_SEQUENCE == "Nats-Expected-Last-Sequence"
    assert headers_mod.NATS_EXPECTED_LAST_SUBJECT_SEQUENCE == "Nats-Expected-Last-Subject-Sequence"
    assert headers_mod.NATS_EXPECTED_LAST_MSG_ID == "Nats-Expected-Last-Msg-Id"
    assert headers_mod.NATS_ROLLUP == "Nats-Rollup"
    assert headers_mod.NATS_TTL == "Nats-TTL"
    assert headers_mod.NATS_REQUIRED_API_LEVEL == "Nats-Required-Api-Level"
    for name in headers_mod.__all__:
        if name.startswith("NATS_"):
            value = getattr(headers_mod, name)
            assert encode_headers({value: "1"})  # every constant is a valid key


# --- properties ------------------------------------------------------------------

# Keys: printable ASCII without ':' (0x21-0x7e minus 0x3a).
key_alphabet = [chr(c) for c in range(0x21, 0x7F) if c != 0x3A]
keys = st.text(alphabet=key_alphabet, min_size=1, max_size=16)
# Values: anything but the control characters (TAB allowed) and surrogates; the
# parser strips surrounding spaces and tabs, so generated values have none.
value_chars = st.characters(
    codec="utf-8",  # no lone surrogates
    exclude_characters=[chr(c) for c in range(0x20) if c != 0x09] + ["\x7f"],
)
values = st.text(alphabet=value_chars, max_size=24).map(lambda v: v.strip(" \t"))
header_dicts = st.dictionaries(keys, st.lists(values, min_size=1, max_size=4), max_size=8)


@settings(max_examples=examples(500), deadline=None)
@given(header_dicts)
def test_round_trip(data: dict[str, list[str]]) -> None:
    block = encode_headers(data)
    assert block.startswith(b"NATS/1.0\r\n")
    assert block.endswith(b"\r\n\r\n")
    # No CR or LF but the line ends: one line per value, plus the first and last.
    assert block.count(b"\r\n") == sum(map(len, data.values())) + 2
    assert block.count(b"\r") == block.count(b"\r\n") == block.count(b"\n")
    status, description, parsed = parse_headers(block)
    assert (status, description) == (0, "")
    assert parsed == data
    assert parsed == Headers(data)
    assert encode_headers(parsed) == block


@settings(max_examples=examples(500), deadline=None)
@given(st.lists(st.tuples(keys, values), max_size=10))
def test_round_trip_of_headers_built_with_add(pairs: list[tuple[str, str]]) -> None:
    h = Headers()
    for key, value in pairs:
        h.add(key, value)
    _, _, parsed = parse_headers(encode_headers(h))
    assert parsed == h
    assert parsed.multi_items() == h.multi_items()


@settings(max_examples=examples(500), deadline=None)
@given(
    st.one_of(
        # anything: mostly refused
        st.dictionaries(st.text(max_size=6), st.text(max_size=6), max_size=4).map(
            lambda d: (d, False)
        ),
        # valid keys and values (spaces and tabs around values too): always taken
        st.dictionaries(keys, st.text(alphabet=value_chars, max_size=6), max_size=4).map(
            lambda d: (d, True)
        ),
    )
)
def test_encode_never_emits_a_bad_block(drawn: tuple[dict[str, str], bool]) -> None:
    data, valid = drawn
    try:
        block = encode_headers(data)
    except BadHeaderError:
        event("refused")
        assert not valid, f"valid headers refused: {data!r}"
        return
    event("encoded")
    _, _, parsed = parse_headers(block)
    assert parsed == {k: v.strip(" \t") for k, v in data.items()}


@settings(max_examples=examples(1000), deadline=None)
@given(
    st.one_of(
        st.binary(max_size=200),
        st.lists(st.sampled_from([b" ", b"\r", b"\n", b":", b"4", b"0", b"9", b"\xff", b"A"])).map(
            b"".join
        ),
    ),
    st.booleans(),
)
def test_parse_of_random_bytes_returns_or_raises_protocol_error(data: bytes, prefix: bool) -> None:
    block = b"NATS/1.0" + data if prefix else data
    try:
        status, description, h = parse_headers(block)
    except ProtocolError:
        # "NATS/1.0" ending its line is always a good start.
        assert not (prefix and (data in (b"", b"\r") or data.startswith((b"\r\n", b"\n"))))
        return
    # a status is the three digits after NATS/1.0 on the first line (0: no status)
    first = block.split(b"\n", 1)[0]
    assert 0 <= status <= 999 and (status == 0 or b"%03d" % status in first[8:])
    assert isinstance(description, str)
    for key in h:
        assert key and "\n" not in key
        assert all("\n" not in v for v in h.get_all(key))
