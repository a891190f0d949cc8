"""The server-op parser: every op, every error, fed whole, byte by byte and with trailing data."""

from __future__ import annotations

import subprocess
import sys
import tracemalloc
from collections.abc import Callable, Sequence

import pytest

from jetstream.errors import ProtocolError
from jetstream.protocol import parser as parser_mod
from jetstream.protocol._common import run_length, run_pattern
from jetstream.protocol.ops import OK, PING, PONG, Err, Info, Msg, Op
from jetstream.protocol.parser import Parser

# --- helpers -----------------------------------------------------------------------


def feed_whole(data: bytes, parser: Parser | None = None) -> list[Op]:
    return (parser or Parser()).feed(data)


def feed_bytewise(data: bytes, parser: Parser | None = None) -> list[Op]:
    p = parser or Parser()
    ops: list[Op] = []
    for i in range(len(data)):
        ops += p.feed(data[i : i + 1])
    return ops


def feed_chunks(data: bytes, size: int, parser: Parser | None = None) -> list[Op]:
    p = parser or Parser()
    ops: list[Op] = []
    for i in range(0, len(data), size):
        ops += p.feed(data[i : i + size])
    return ops


def hmsg(subject: bytes, sid: int, reply: bytes | None, headers: bytes, payload: bytes) -> bytes:
    """HMSG bytes as the server writes them (sizes computed here)."""
    fields = [b"HMSG", subject, b"%d" % sid, *([reply] if reply else [])]
    fields += [b"%d" % len(headers), b"%d" % (len(headers) + len(payload))]
    return b" ".join(fields) + b"\r\n" + headers + payload + b"\r\n"


# An op that the parser must hold back: its tail is missing.
TRAILING = b"MSG partial.subject 9 10\r\nonly-5"


def check_all_ways(data: bytes, expected: Sequence[Op]) -> None:
    """``data`` gives ``expected`` fed whole, byte by byte, in chunks, and with trailing data."""
    assert feed_whole(data) == list(expected)
    assert feed_bytewise(data) == list(expected)
    for size in (2, 3, 7, 64):
        assert feed_chunks(data, size) == list(expected)
    p = Parser()
    assert p.feed(data + TRAILING) == list(expected)
    assert p.buffered == len(b"only-5")
    assert p.feed(b"!!!!\r\nPING\r\n") == [Msg("partial.subject", 9, None, b"only-5!!!!"), PING]
    assert p.buffered == 0


# --- table tests: every op ---------------------------------------------------------

INFO_JSON = (
    b'{"server_id":"NDLZ5TFIBZ3QW2R3XK7DZFP7QZOBQ4QEDPWDA6VZYYV5MSGFUVZPJ7SQ",'
    b'"server_name":"n1-eu","version":"2.10.22","proto":1,"git_commit":"240e9a4",'
    b'"go":"go1.23.5","host":"0.0.0.0","port":4222,"headers":true,'
    b'"max_payload":1048576,"jetstream":true,"client_id":17,"client_ip":"10.1.2.3",'
    b'"auth_required":true,"nonce":"pZ2dQ0o5lq7m3Hk","cluster":"eu","domain":"hub",'
    b'"connect_urls":["10.1.2.4:4222","10.1.2.5:4222"],"ldm":false,'
    b'"xkey":"XDKLRX3CX5NNJFM5ROS6BZHDZ3NKEKZV3IGCGOEDY2Y2JPDJZBB2U5DM",'
    b'"some_future_field":{"nested":[1,2,3]},"tls_available":true}'
)
INFO_OP = Info(
    server_id="NDLZ5TFIBZ3QW2R3XK7DZFP7QZOBQ4QEDPWDA6VZYYV5MSGFUVZPJ7SQ",
    server_name="n1-eu",
    version="2.10.22",
    go="go1.23.5",
    host="0.0.0.0",
    port=4222,
    proto=1,
    headers=True,
    max_payload=1048576,
    client_id=17,
    client_ip="10.1.2.3",
    auth_required=True,
    tls_available=True,
    connect_urls=["10.1.2.4:4222", "10.1.2.5:4222"],
    nonce="pZ2dQ0o5lq7m3Hk",
    cluster="eu",
    domain="hub",
    jetstream=True,
    xkey="XDKLRX3CX5NNJFM5ROS6BZHDZ3NKEKZV3IGCGOEDY2Y2JPDJZBB2U5DM",
)

BINARY = bytes(range(256)) + b"\r\n\r\nMSG fake 1 2\r\nxx\r\n" + b"\r" + b"\n"
HB_HEADERS = (
    b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 12\r\nNats-Last-Stream: 40\r\n\r\n"
)

OP_TABLE: list[tuple[str, bytes, list[Op]]] = [
    ("info", b"INFO " + INFO_JSON + b"\r\n", [INFO_OP]),
    (
        "info minimal",
        b'INFO {"server_id":"S","max_payload":512}\r\n',
        [Info(server_id="S", max_payload=512)],
    ),
    ("ping", b"PING\r\n", [PING]),
    ("pong", b"PONG\r\n", [PONG]),
    ("ok", b"+OK\r\n", [OK]),
    ("lower case ops", b"ping\r\npong\r\n+ok\r\n", [PING, PONG, OK]),
    ("trailing spaces", b"PING \r\nPONG\t\r\n", [PING, PONG]),
    ("msg", b"MSG foo.bar 9 5\r\nhello\r\n", [Msg("foo.bar", 9, None, b"hello")]),
    (
        "msg with reply",
        b"MSG foo.bar 9 _INBOX.abc.1 5\r\nhello\r\n",
        [Msg("foo.bar", 9, "_INBOX.abc.1", b"hello")],
    ),
    ("msg empty payload", b"MSG a 1 0\r\n\r\n", [Msg("a", 1, None, b"")]),
    ("msg empty payload, reply", b"MSG a 1 r 0\r\n\r\n", [Msg("a", 1, "r", b"")]),
    ("msg lower case", b"msg a 1 2\r\nhi\r\n", [Msg("a", 1, None, b"hi")]),
    (
        "msg spaces and tabs",
        b"MSG   a.b\t\t22 \t r.1   3\r\nabc\r\n",
        [Msg("a.b", 22, "r.1", b"abc")],
    ),
    (
        "msg binary payload with CRLF inside",
        b"MSG bin 3 %d\r\n" % len(BINARY) + BINARY + b"\r\n",
        [Msg("bin", 3, None, BINARY)],
    ),
    (
        "msg utf-8 subject",
        "MSG caf\u00e9.\u00fcber 4 3\r\nabc\r\n".encode(),
        [Msg("caf\u00e9.\u00fcber", 4, None, b"abc")],
    ),
    ("msg large sid", b"MSG a 18446744073709551615 1\r\nx\r\n", [Msg("a", 2**64 - 1, None, b"x")]),
    (
        "hmsg plain headers",
        b"HMSG a.b 2 31 33\r\nNATS/1.0\r\nNats-Msg-Id: id-1\r\n\r\nhi\r\n",
        [Msg("a.b", 2, None, b"hi", b"NATS/1.0\r\nNats-Msg-Id: id-1\r\n\r\n", 0)],
    ),
    (
        "hmsg reply",
        b"HMSG a.b 2 $JS.ACK.S.C.1.2.3.1700000000000000000.0 12 14\r\nNATS/1.0\r\n\r\nhi\r\n",
        [Msg("a.b", 2, "$JS.ACK.S.C.1.2.3.1700000000000000000.0", b"hi", b"NATS/1.0\r\n\r\n", 0)],
    ),
    (
        "hmsg no responders",
        b"HMSG _INBOX.x.1 1 16 16\r\nNATS/1.0 503\r\n\r\n\r\n",
        [Msg("_INBOX.x.1", 1, None, b"", b"NATS/1.0 503\r\n\r\n", 503)],
    ),
    (
        "hmsg idle heartbeat",
        b"HMSG _INBOX.hb 5 %d %d\r\n" % (len(HB_HEADERS), len(HB_HEADERS)) + HB_HEADERS + b"\r\n",
        [Msg("_INBOX.hb", 5, None, b"", HB_HEADERS, 100)],
    ),
    (
        "hmsg request timeout",
        b"HMSG _INBOX.p 7 59 59\r\n"
        b"NATS/1.0 408 Request Timeout\r\nNats-Pending-Messages: 10\r\n\r\n\r\n",
        [
            Msg(
                "_INBOX.p",
                7,
                None,
                b"",
                b"NATS/1.0 408 Request Timeout\r\nNats-Pending-Messages: 10\r\n\r\n",
                408,
            )
        ],
    ),
    (
        "hmsg consumer deleted",
        b"HMSG _INBOX.p 7 33 33\r\nNATS/1.0 409 Consumer Deleted\r\n\r\n\r\n",
        [Msg("_INBOX.p", 7, None, b"", b"NATS/1.0 409 Consumer Deleted\r\n\r\n", 409)],
    ),
    (
        "hmsg no messages",
        b"HMSG _INBOX.p 7 28 28\r\nNATS/1.0 404 No Messages\r\n\r\n\r\n",
        [Msg("_INBOX.p", 7, None, b"", b"NATS/1.0 404 No Messages\r\n\r\n", 404)],
    ),
    (
        "hmsg binary payload",
        b"HMSG bin 3 12 %d\r\nNATS/1.0\r\n\r\n" % (12 + len(BINARY)) + BINARY + b"\r\n",
        [Msg("bin", 3, None, BINARY, b"NATS/1.0\r\n\r\n", 0)],
    ),
    (
        "hmsg lower case, tabs",
        b"hmsg\ta\t1\t12\t13\r\nNATS/1.0\r\n\r\nx\r\n",
        [Msg("a", 1, None, b"x", b"NATS/1.0\r\n\r\n", 0)],
    ),
    (
        "a mixed stream",
        b"PING\r\nMSG a 1 1\r\nx\r\nHMSG b 2 r 12 12\r\nNATS/1.0\r\n\r\n\r\n"
        b"-ERR 'Stale Connection'\r\nPONG\r\n",
        [
            PING,
            Msg("a", 1, None, b"x"),
            Msg("b", 2, "r", b"", b"NATS/1.0\r\n\r\n", 0),
            Err("Stale Connection"),
            PONG,
        ],
    ),
]


@pytest.mark.parametrize(
    ("data", "expected"), [t[1:] for t in OP_TABLE], ids=[t[0] for t in OP_TABLE]
)
def test_op_table(data: bytes, expected: list[Op]) -> None:
    check_all_ways(data, expected)


# -ERR texts that nats-server sends (server/client.go, parser.go, server.go, errors.go).
SERVER_ERRORS = [
    "Unknown Protocol Operation",
    "Authorization Violation",
    "Authentication Timeout",
    "User Authentication Expired",
    "User Authentication Revoked",
    "Account Authentication Expired",
    "Stale Connection",
    "Maximum Payload Violation",
    "maximum connections exceeded",
    "maximum account active connections exceeded",
    "maximum subscriptions exceeded",
    'Permissions Violation for Publish to "foo"',
    'Permissions Violation for Subscription to "foo.>"',
    'Permissions Violation for Subscription to "foo" using queue "workers"',
    'Permissions Violation for Publish with Reply of "_INBOX.abc"',
    "Invalid Publish Subject",
    "Invalid Subject",
    "Secure Connection - TLS Required",
    "invalid client protocol",
    "no responders requires headers support",
    "Connection throttling is active. Please try again later.",
    "maximum control line exceeded: State 1, max_control_line 4096, Buffer len 5000 "
    '(snip: "PUB foo.bar.baz 10000000000000000000000000000000"...)',
]


@pytest.mark.parametrize("text", SERVER_ERRORS)
def test_server_err_texts(text: str) -> None:
    check_all_ways(b"-ERR '%s'\r\n" % text.encode(), [Err(text)])


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"-ERR\r\n", ""),
        (b"-ERR  \r\n", ""),
        (b"-ERR no quotes here\r\n", "no quotes here"),
        (b"-ERR ''\r\n", ""),
        (b"-ERR 'it's quoted'\r\n", "it's quoted"),  # only the outer quotes go
        (b"-ERR   'padded'  \r\n", "padded"),
        (b"-err 'lower'\r\n", "lower"),
        (b"-ERR 'bad \xff byte'\r\n", "bad \ufffd byte"),  # errors="replace", on purpose
    ],
)
def test_err_variants(data: bytes, message: str) -> None:
    check_all_ways(data, [Err(message)])


def test_crlf_split_between_cr_and_lf() -> None:
    p = Parser()
    assert p.feed(b"PING\r") == []
    assert p.feed(b"\nMSG a 1 2\r") == [PING]
    assert p.feed(b"\nab\r") == []
    assert p.feed(b"\nPONG\r\n") == [Msg("a", 1, None, b"ab"), PONG]
    assert p.buffered == 0


def test_bytearray_and_memoryview_input() -> None:
    data = b"MSG a 1 3\r\nabc\r\nPING\r\n"
    expected: list[Op] = [Msg("a", 1, None, b"abc"), PING]
    assert Parser().feed(bytearray(data)) == expected
    assert Parser().feed(memoryview(data)) == expected
    buf = bytearray(data)
    ops = Parser().feed(memoryview(buf)[:16])
    buf[11:14] = b"XYZ"  # the caller reuses its buffer: our payload is unaffected
    assert ops == [Msg("a", 1, None, b"abc")]
    assert isinstance(ops[0], Msg) and type(ops[0].payload) is bytes


def test_empty_feed() -> None:
    p = Parser()
    assert p.feed(b"") == []
    assert p.feed(b"MSG a 1 3\r\na") == []
    assert p.feed(b"") == []
    assert p.feed(b"bc\r\n") == [Msg("a", 1, None, b"abc")]


def test_buffered_counts_held_bytes() -> None:
    p = Parser()
    p.feed(b"MSG a 1 10\r\n12345")
    assert p.buffered == 5
    p.feed(b"678")
    assert p.buffered == 8
    assert p.feed(b"90\r") == []
    assert p.buffered == 11
    assert p.feed(b"\nPI") == [Msg("a", 1, None, b"1234567890")]
    assert p.buffered == 2


def test_max_payload_can_be_lowered_after_info() -> None:
    p = Parser()
    ops = p.feed(b'INFO {"max_payload":8}\r\nMSG a 1 8\r\n12345678\r\n')
    assert isinstance(ops[0], Info)
    p.max_payload = ops[0].max_payload
    assert ops[1] == Msg("a", 1, None, b"12345678")
    with pytest.raises(ProtocolError, match="max_payload=8"):
        p.feed(b"MSG a 1 9\r\n")


def test_payload_pieces_are_not_copied_until_complete() -> None:
    """A 64 MiB payload fed in 64 KiB pieces: one copy, linear work."""
    size = 64 * 1024 * 1024
    piece = bytes(64 * 1024)
    p = Parser()
    tracemalloc.start()
    try:
        assert p.feed(b"MSG big 1 %d\r\n" % size) == []
        for _ in range(size // len(piece)):
            assert p.feed(piece) == []
        assert p.buffered == size
        ops = p.feed(b"\r\nPING\r\n")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert ops[1] == PING
    msg = ops[0]
    assert isinstance(msg, Msg) and len(msg.payload) == size and not any(msg.payload[::4096])
    # The pieces are referenced, not copied: the only big allocation is the payload.
    assert peak < size * 1.1


def test_small_pieces_are_gathered() -> None:
    p = Parser()
    p.feed(b"HMSG s 1 12 1012\r\nNATS/1.0\r\n\r\n")
    body = bytes(range(200)) * 5
    for i in range(len(body)):
        assert p.feed(body[i : i + 1]) == []
    assert len(p._parts) == 1  # one bytearray, not a thousand memoryviews
    assert p.feed(b"\r\n") == [Msg("s", 1, None, body, b"NATS/1.0\r\n\r\n", 0)]


# --- the batch path ------------------------------------------------------------------


def _stream(ops: int, template: Callable[[int], bytes]) -> bytes:
    return b"".join(template(i) for i in range(ops))


BATCH_STREAMS: list[tuple[str, Callable[[int], bytes], Callable[[int], Msg]]] = [
    (
        "msg",
        lambda i: b"MSG s.%d 7 %d\r\n%s\r\n" % (i % 3, len(str(i)), str(i).encode()),
        lambda i: Msg(f"s.{i % 3}", 7, None, str(i).encode()),
    ),
    (
        "msg reply",
        lambda i: b"MSG s 70000 r.%d 2\r\nab\r\n" % i,
        lambda i: Msg("s", 70000, f"r.{i}", b"ab"),
    ),
    (
        "hmsg",
        lambda i: hmsg(b"s", i, None, b"NATS/1.0\r\nK: %03d\r\n\r\n" % (i % 1000), b"hi"),
        lambda i: Msg("s", i, None, b"hi", b"NATS/1.0\r\nK: %03d\r\n\r\n" % (i % 1000), 0),
    ),
    (
        "hmsg reply status",
        lambda i: hmsg(b"s", 1, b"r", b"NATS/1.0 100 Idle HB\r\nA: b\r\n\r\n", b"x"),
        lambda i: Msg("s", 1, "r", b"x", b"NATS/1.0 100 Idle HB\r\nA: b\r\n\r\n", 100),
    ),
]


@pytest.mark.parametrize(
    ("template", "expect"), [t[1:] for t in BATCH_STREAMS], ids=[t[0] for t in BATCH_STREAMS]
)
def test_batch_path_matches_the_loop(
    monkeypatch: pytest.MonkeyPatch,
    template: Callable[[int], bytes],
    expect: Callable[[int], Msg],
) -> None:
    batched = 0
    original = Parser._batch

    def counting(self: Parser, data: bytes, pos: int, ops: list[Op]) -> int:
        nonlocal batched
        before = len(ops)
        end = original(self, data, pos, ops)
        batched += len(ops) - before
        return end

    monkeypatch.setattr(Parser, "_batch", counting)
    data = _stream(500, template)
    expected = [expect(i) for i in range(500)]
    assert feed_whole(data) == expected
    assert batched >= 400  # the whole feed went (mostly) through _batch
    assert feed_chunks(data, 1000) == expected
    assert feed_chunks(data, 333) == expected
    head = feed_whole(data[:3000])
    before = batched
    assert feed_bytewise(data[:3000]) == head
    assert batched == before  # byte-at-a-time never batches: the loop alone


def test_batch_falls_back_on_a_different_op_in_the_run() -> None:
    msgs = [b"MSG a 1 2\r\nhi\r\n"] * 40
    msgs[20] = b"PING\r\n"
    msgs[30] = b"MSG a 1 reply 2\r\nho\r\n"
    data = b"".join(msgs)
    ops = feed_whole(data)
    assert ops[20] is PING and ops[30] == Msg("a", 1, "reply", b"ho")
    assert ops == feed_bytewise(data)


@pytest.mark.parametrize(
    "bad",
    [
        b"MSG a 1 3\r\nhi!X\r\n",  # payload longer than announced: no CRLF after 3 bytes
        b"MSG a 1 +2\r\nhi\r\n",
        b"MSG a 1 1_0\r\n0123456789\r\n",
        b"MSG a b\xff 1 2\r\nhi\r\n",
        b"MSG a\tb 1 2\r\nhi\r\n",
        b"MSG a 1 9999999999\r\nhi\r\n",
        b"HMSG a 1 12 12\r\nNATS/1.x\r\n\r\n\r\n",
        hmsg(b"a", 1, None, b"NATS/1.0 10x Hi\r\n\r\n", b""),
    ],
)
def test_batch_rejects_what_the_loop_rejects(bad: bytes) -> None:
    good = (
        b"MSG a 1 2\r\nhi\r\n"
        if bad.startswith(b"MSG")
        else b"HMSG a 1 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"
    )
    data = good * 30 + bad + good * 30
    p = Parser(max_payload=1 << 20)
    with pytest.raises(ProtocolError):
        p.feed(data)
    with pytest.raises(ProtocolError):
        feed_bytewise(data, Parser(max_payload=1 << 20))


GOOD_MSG = b"MSG a 1 2\r\nhi\r\n"
GOOD_HMSG = b"HMSG a 1 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"


@pytest.mark.parametrize(
    ("good", "odd", "kwargs"),
    [
        # One op of another kind with the same number of fields.
        (GOOD_MSG, b"PUB a 1 2\r\nhi\r\n", {}),
        # A signed sid, which int() would take.
        (GOOD_MSG, b"MSG a +1 2\r\nhi\r\n", {}),
        # Lines that split(b" ") cuts into whole ops only when joined: "MSG" alone, then
        # a line of seven fields whose middle is another MSG.
        (GOOD_MSG, b"MSG\r\nhi\r\n1 2 x MSG s 1 2\r\nhi\r\n", {}),
        # Limits hold inside a run too.
        (GOOD_MSG, GOOD_MSG, {"max_payload": 1}),
        (b"MSG " + b"a" * 40 + b" 1 2\r\nhi\r\n", GOOD_MSG, {"max_control_line": 30}),
        (GOOD_HMSG, GOOD_HMSG, {"max_payload": 13}),
    ],
)
def test_batch_rejects_an_odd_op_in_a_run(good: bytes, odd: bytes, kwargs: dict[str, int]) -> None:
    data = good * 30 + odd + good * 30
    for feed in (feed_whole, feed_bytewise):
        with pytest.raises(ProtocolError):
            feed(data, Parser(**kwargs))


def test_batch_takes_header_size_from_the_control_line() -> None:
    # Header size 10 of a 12-byte block: valid, and the last CRLF is payload.
    odd = b"HMSG a 1 10 14\r\nNATS/1.0\r\n\r\nhi\r\n"
    data = GOOD_HMSG * 30 + odd + GOOD_HMSG * 30
    ops = feed_whole(data)
    assert ops[30] == Msg("a", 1, None, b"\r\nhi", b"NATS/1.0\r\n", 0)
    assert ops == feed_bytewise(data)


def test_batch_is_not_fooled_by_a_nul_field() -> None:
    # Joined, these two lines look like two well-formed MSG lines; alone, the
    # first has six fields and the second is no op at all.
    good = b"MSG a 1 2\r\nhi\r\n" * 20
    data = good + b"MSG a 1 2 \0 MSG\r\nhi\r\n1 2\r\nhi\r\n" + good
    for feed in (feed_whole, feed_bytewise):
        with pytest.raises(ProtocolError, match="got 6 field"):
            feed(data)


def test_batch_is_not_fooled_by_an_empty_field() -> None:
    # In a run of MSGs with a reply, a double space gives split(b" ") five
    # fields; split() gives four: a valid MSG without reply.
    data = b"MSG a 1 r 2\r\nhi\r\n" * 20 + b"MSG a  1 2\r\nhi\r\n" + b"MSG a 1 r 2\r\nhi\r\n" * 20
    expected = (
        [Msg("a", 1, "r", b"hi")] * 20 + [Msg("a", 1, None, b"hi")] + [Msg("a", 1, "r", b"hi")] * 20
    )
    assert feed_whole(data) == expected
    assert feed_bytewise(data) == expected


def test_batch_accepts_what_the_loop_accepts() -> None:
    # Leading zeros, double spaces, a subject repeated: all valid, some off the fast path.
    data = (
        b"".join(
            b"MSG s.%d 01 %s\r\nab\r\n" % (i % 2, b"002" if i == 7 else b"2") for i in range(50)
        )
        + b"MSG  s.0  1  2\r\nab\r\n"
        + b"MSG s.1 1 2\r\nab\r\n" * 20
    )
    assert feed_whole(data) == feed_bytewise(data)
    assert (
        feed_whole(data)
        == [Msg(f"s.{i % 2}", 1, None, b"ab") for i in range(50)]
        + [Msg("s.0", 1, None, b"ab")]
        + [Msg("s.1", 1, None, b"ab")] * 20
    )


# --- every ProtocolError --------------------------------------------------------------

ERRORS: list[tuple[str, bytes, str]] = [
    ("unknown op", b"FOO bar\r\n", "expected one of INFO, MSG"),
    ("empty line", b"\r\n", "expected one of INFO, MSG"),
    ("blank line", b"  \t \r\n", "expected one of INFO, MSG"),
    ("client op", b"PUB a 1\r\nx\r\n", "expected one of INFO, MSG"),
    ("msg too few fields", b"MSG a 5\r\n", "got 3 field"),
    ("msg too many fields", b"MSG a 1 r x 5\r\n", "got 6 field"),
    ("msg only op", b"MSG\r\n", "got 1 field"),
    ("hmsg too few fields", b"HMSG a 1 5\r\n", "got 4 field"),
    ("hmsg too many fields", b"HMSG a 1 r x 5 5\r\n", "got 7 field"),
    ("ping with args", b"PING now\r\n", "alone on its line"),
    ("pong with args", b"PONG x\r\n", "alone on its line"),
    ("ok with args", b"+OK x\r\n", "alone on its line"),
    ("info without json", b"INFO\r\n", "expected 'INFO <json>'"),
    ("info bad json", b"INFO {bad\r\n", "expected INFO JSON"),
    ("info not an object", b"INFO [1,2]\r\n", "expected INFO JSON"),
    ("info wrong type", b'INFO {"port":"x"}\r\n', "expected INFO JSON"),
    ("negative size", b"MSG a 1 -5\r\n", "non-negative decimal"),
    ("non-numeric size", b"MSG a 1 five\r\n", "non-negative decimal"),
    ("signed size", b"MSG a 1 +5\r\nhello\r\n", "non-negative decimal"),
    ("underscore size", b"MSG a 1 1_0\r\n0123456789\r\n", "non-negative decimal"),
    ("negative sid", b"MSG a -1 1\r\nx\r\n", "non-negative decimal"),
    ("non-numeric sid", b"MSG a x 1\r\nx\r\n", "non-negative decimal"),
    ("non-ascii digit sid", "MSG a \u0661 1\r\nx\r\n".encode(), "non-negative decimal"),
    ("hmsg non-numeric hdr", b"HMSG a 1 x 5\r\n", "non-negative decimal"),
    ("hmsg negative total", b"HMSG a 1 2 -5\r\n", "non-negative decimal"),
    ("hmsg hdr > total", b"HMSG a 1 20 10\r\n", "header size <= total size"),
    ("size above max_payload", b"MSG a 1 2000\r\n", "max_payload=1024"),
    ("hmsg above max_payload", b"HMSG a 1 12 1025\r\n", "max_payload=1024"),
    ("missing crlf after payload", b"MSG a 1 3\r\nabcXY", "expected CRLF after"),
    ("lf only after payload", b"MSG a 1 3\r\nabc\n\r\n", "expected CRLF after"),
    ("hmsg missing crlf", b"HMSG a 1 12 12\r\nNATS/1.0\r\n\r\nXX", "expected CRLF after"),
    ("header not NATS/1.0", b"HMSG a 1 7 7\r\nHELLO\r\n\r\n", "starting with b'NATS/1.0'"),
    ("header NATS/2.0", b"HMSG a 1 12 12\r\nNATS/2.0\r\n\r\n\r\n", "starting with b'NATS/1.0'"),
    ("empty header block", b"HMSG a 1 0 2\r\nhi\r\n", "starting with b'NATS/1.0'"),
    ("header glued", hmsg(b"a", 1, None, b"NATS/1.0x\r\n\r\n", b""), "3-digit status"),
    ("status not digits", hmsg(b"a", 1, None, b"NATS/1.0 5x3\r\n\r\n", b""), "3-digit status"),
    ("status too long", hmsg(b"a", 1, None, b"NATS/1.0 5030\r\n\r\n", b""), "3-digit status"),
    ("subject not utf-8", b"MSG a\xffb 1 1\r\nx\r\n", "UTF-8"),
    ("reply not utf-8", b"MSG a 1 r\xc3 1\r\nx\r\n", "UTF-8"),
    ("long line with crlf", b"PING" + b" " * 2000 + b"\r\n", "at most 1024 bytes"),
    ("long line without crlf", b"MSG " + b"a" * 1100, "at most 1024 bytes"),
    ("long junk", b"\x00" * 5000, "at most 1024 bytes"),
]


@pytest.mark.parametrize(("data", "match"), [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_protocol_errors(data: bytes, match: str) -> None:
    for feed in (feed_whole, feed_bytewise):
        p = Parser(max_control_line=1024, max_payload=1024)
        with pytest.raises(ProtocolError, match=match) as info:
            feed(data, p)
        assert len(str(info.value)) < 400  # quoted input is truncated
        # Dead for good: every later feed fails too, even with valid bytes.
        for _ in range(2):
            with pytest.raises(ProtocolError, match="already failed"):
                p.feed(b"PING\r\n")


def test_error_after_valid_ops_in_the_same_feed() -> None:
    p = Parser()
    with pytest.raises(ProtocolError):
        p.feed(b"PING\r\nMSG a 1 1\r\nx\r\nBOGUS\r\n")
    with pytest.raises(ProtocolError):
        p.feed(b"")


def test_control_line_limit_is_exact() -> None:
    line = b"MSG " + b"s" * 1010 + b" 1 1"  # 1018 bytes
    limit = len(line)
    assert Parser(max_control_line=limit).feed(line + b"\r\nx\r\n") == [
        Msg("s" * 1010, 1, None, b"x")
    ]
    assert feed_bytewise(line + b"\r\nx\r\n", Parser(max_control_line=limit)) == [
        Msg("s" * 1010, 1, None, b"x")
    ]
    for feed in (feed_whole, feed_bytewise):
        with pytest.raises(ProtocolError, match="at most"):
            feed(line + b"1\r\nx\r\n", Parser(max_control_line=limit))
    # A pending CR at the limit may still be the start of the CRLF.
    p = Parser(max_control_line=limit)
    assert p.feed(line + b"\r") == []
    assert p.feed(b"\nx\r\n") == [Msg("s" * 1010, 1, None, b"x")]


def test_huge_digit_strings() -> None:
    p = Parser(max_control_line=20000)
    with pytest.raises(ProtocolError):
        p.feed(b"MSG a " + b"9" * 5000 + b" 1\r\nx\r\n")
    p = Parser(max_control_line=20000)
    with pytest.raises(ProtocolError, match="max_payload"):
        p.feed(b"MSG a 1 " + b"9" * 4000 + b"\r\n")


def test_constructor_limits() -> None:
    with pytest.raises(ValueError, match="max_control_line must be at least 16, got 4"):
        Parser(max_control_line=4)
    with pytest.raises(ValueError, match="max_payload must be non-negative, got -1"):
        Parser(max_payload=-1)
    p = Parser()
    assert p.max_control_line == parser_mod.DEFAULT_MAX_CONTROL_LINE == 4096
    assert p.max_payload == parser_mod.DEFAULT_MAX_PAYLOAD


@pytest.mark.parametrize(
    "line",
    [b"MSG same.subject 9 5\r\n", b"MSG s 9 _INBOX.r 5\r\n", b"MSG s 9 0\r\n"],
    ids=["plain", "reply", "empty"],
)
def test_runs_of_one_control_line(line: bytes) -> None:
    """A steady feed repeats one control line: parsed once, same ops as the loop."""
    size = int(line.split()[-1])
    data = b"".join(line + (b"%05d" % i)[:size] + b"\r\n" for i in range(400))
    whole = feed_whole(data)
    assert len(whole) == 400
    assert whole == feed_bytewise(data) == feed_chunks(data, 777)
    first = whole[0]
    assert isinstance(first, Msg) and first.sid == 9 and first.payload == b"00000"[:size]


@pytest.mark.parametrize(
    ("odd", "kwargs"),
    [
        (b"MSG a 1 2\r\nh\r\n\r\n", {}),  # same control line, payload one byte short
        (b"MSG a 1 2\r\nhi!\r\n", {}),  # same control line, payload one byte long
        (b"", {"max_payload": 1}),  # every op of the run is over the limit
        (b"", {"max_control_line": 16}),  # and here every control line
    ],
)
def test_runs_of_one_control_line_reject_what_the_loop_rejects(
    odd: bytes, kwargs: dict[str, int]
) -> None:
    good = b"MSG aaaaaaaaaaaa 1 2\r\nhi\r\n" if kwargs.get("max_control_line") else GOOD_MSG
    data = good * 40 + odd + good * 40
    for feed in (feed_whole, feed_bytewise):
        with pytest.raises(ProtocolError):
            feed(data, Parser(**kwargs))


def test_runs_of_a_few_repeating_control_lines() -> None:
    """A wildcard subscription over a few subjects: each distinct line parsed once."""
    data = b"".join(
        b"MSG s.%d %d %s2\r\n%02d\r\n" % (i % 7, 1 + i % 3, b"r " if i % 2 else b"", i % 100)
        for i in range(700)
    )
    whole = feed_whole(data)
    assert len(whole) == 700
    assert whole == feed_bytewise(data) == feed_chunks(data, 1000)
    m = whole[3]
    assert isinstance(m, Msg) and (m.subject, m.sid, m.reply, m.payload) == ("s.3", 1, "r", b"03")


@pytest.mark.parametrize(
    "odd",
    [
        b"MSG s.1 1 2\r\nabc\r\n",  # a repeated line whose payload is longer
        b"MSG s.1 1 9999999999\r\nab\r\n",  # a line over max_payload
        b"MSG s.1 +1 2\r\nab\r\n",  # a signed sid
    ],
)
def test_repeating_lines_reject_what_the_loop_rejects(odd: bytes) -> None:
    good = b"".join(b"MSG s.%d 1 2\r\nab\r\n" % (i % 5) for i in range(60))
    data = good + odd + good
    for feed in (feed_whole, feed_bytewise):
        with pytest.raises(ProtocolError):
            feed(data, Parser(max_payload=1 << 20))


def test_protocol_error_carries_the_ops_before_it() -> None:
    p = Parser()
    with pytest.raises(ProtocolError) as exc:
        p.feed(b"PING\r\nMSG a 1 2\r\nhi\r\nBOGUS\r\n")
    assert exc.value.ops == [PING, Msg("a", 1, None, b"hi")]


@pytest.mark.parametrize("line", [b"MSG big.subject 4 1500\r\n", b"MSG b 4 _INBOX.x 1500\r\n"])
def test_runs_of_one_control_line_with_large_payloads(line: bytes) -> None:
    """Too large to batch: the op-by-op loop compares the repeated line and slices."""
    payloads = [bytes([65 + i % 26]) * 1500 for i in range(60)]
    data = b"".join(line + p + b"\r\n" for p in payloads) + b"PING\r\n"
    whole = feed_whole(data)
    assert whole[-1] is PING
    msgs = whole[:-1]
    assert [m.payload for m in msgs if isinstance(m, Msg)] == payloads
    first = msgs[0]
    assert isinstance(first, Msg) and first.sid == 4 and first.subject == line.split()[1].decode()
    for size in (1, 1499, 1500, 1502, 4096, 10_000):
        assert feed_chunks(data, size) == whole


@pytest.mark.parametrize(
    "odd",
    [
        b"MSG b 4 1500\r\n" + b"x" * 1499 + b"\r\n\r\n",  # same line, payload one byte short
        b"MSG b 4 1500\r\n" + b"x" * 1501 + b"\r\n",  # same line, payload one byte long
    ],
)
def test_large_runs_of_one_control_line_reject_what_the_loop_rejects(odd: bytes) -> None:
    good = b"MSG b 4 1500\r\n" + b"y" * 1500 + b"\r\n"
    data = good * 10 + odd + good * 10
    p = Parser()
    with pytest.raises(ProtocolError) as exc:
        p.feed(data)
    assert len(exc.value.ops) == 10  # the ops before the bad one are handed over
    with pytest.raises(ProtocolError):
        feed_chunks(data, 1000)


# Run in a child process with its memory bounded: the bug this guards against made the
# parser loop without end, making the same message again and again.
_NEXT_OP_CUT = """
import resource
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
from jetstream.protocol.parser import Parser
from jetstream.protocol.ops import Msg
op = b"MSG a.b 7 1000\\r\\n" + b"x" * 1000 + b"\\r\\n"
msg = Msg("a.b", 7, None, b"x" * 1000)
p = Parser()
assert p.feed(op * 10) == [msg] * 10 and p._runs  # the run's pattern is remembered
assert p.feed(op + op[:30]) == [msg]  # the next op's line, and part of its payload
assert p.feed(op[30:] + op) == [msg, msg]
"""


def test_a_feed_ending_inside_the_op_after_a_repeated_line() -> None:
    """A run of one control line is counted with the pattern remembered from an earlier
    feed; a feed that ends after the next op's line, inside its payload, hands over the
    complete op and keeps the rest (it used to count -1 ops there, and go back)."""
    proc = subprocess.run(
        [sys.executable, "-c", _NEXT_OP_CUT], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_a_run_is_never_counted_below_zero() -> None:
    line = b"MSG a 1 5\r\n"
    sep, size = b"\r\n" + line, 5
    step = len(sep) + size
    data = line + b"hello\r\n" + line + b"he"  # the second op's payload is cut
    first = len(line) + size + 2 + len(line) + size  # where the second op's CRLF would be
    assert first > len(data)
    for rx in (run_pattern(sep, size), None):
        assert run_length(data, first, step, sep, rx) == 0


def test_control_lines_seen_before_parse_as_the_first_time() -> None:
    """A few subjects and sizes taking turns (each line parsed once, then looked up),
    with a reply now and then (never looked up), whole and in every piece size."""
    expected: list[Msg] = []
    data = b""
    for i in range(400):
        subject = f"orders.{i % 7}"
        reply = f"_INBOX.r{i}" if i % 5 == 0 else None
        payload = bytes([48 + i % 10]) * (600 + 300 * (i % 3))
        expected.append(Msg(subject, 1 + i % 2, reply, payload))
        fields = [subject.encode(), b"%d" % (1 + i % 2)] + ([reply.encode()] if reply else [])
        data += b"MSG " + b" ".join(fields) + b" %d\r\n" % len(payload) + payload + b"\r\n"
    assert feed_whole(data) == expected
    for size in (1, 7, 100, 1000, 4096, 65536):
        assert feed_chunks(data, size) == expected


def test_a_control_line_seen_before_is_held_to_a_lowered_max_payload() -> None:
    p = Parser()
    op = b"MSG a.b 1 5\r\nhello\r\n"
    assert p.feed(op * 3) == [Msg("a.b", 1, None, b"hello")] * 3
    p.max_payload = 4  # a server with a lower limit, after a reconnect
    with pytest.raises(ProtocolError, match="max_payload=4"):
        p.feed(op)


def test_the_remembered_control_lines_stay_bounded() -> None:
    p = Parser()
    body = b"x" * 300  # too large for the batch path: the op-by-op loop parses these
    count = 3 * parser_mod._LINE_CACHE
    ops = b"".join(b"MSG s.%d 1 300\r\n%s\r\n" % (i, body) for i in range(count))
    got = p.feed(ops)
    assert [m.subject for m in got if isinstance(m, Msg)] == [f"s.{i}" for i in range(count)]
    assert 0 < len(p._lines) <= parser_mod._LINE_CACHE


# --- a lone MSG or HMSG: the feed of a round trip ---------------------------------------


def loop_parse(data: bytes, parser: Parser) -> list[Op]:
    """``data`` parsed by the op-by-op loop: behind a PING, which no shortcut takes."""
    ops = parser.feed(b"PING\r\n" + data)
    assert ops[0] is PING
    return ops[1:]


LONE = [
    b"MSG _INBOX.abc.17 1 16\r\n" + b"x" * 16 + b"\r\n",  # a reply
    b"MSG svc.echo 1 _INBOX.abc.18 16\r\n" + b"y" * 16 + b"\r\n",  # a request
    b"MSG a 1 0\r\n\r\n",  # no payload
    b"MSG  a.b\t1   r.1  5\r\nhe\r\no\r\n",  # runs of whitespace, a CRLF in the payload
    b"MSG \xc3\xa9t\xc3\xa9 1 5\r\nhello\r\n",  # a UTF-8 subject
    # a direct get's answer (a KeyValue get)
    b"HMSG _INBOX.abc.19 1 72 77\r\nNATS/1.0\r\nNats-Stream: KV_b\r\nNats-Subject: $KV.b.k\r\n"
    b"Nats-Sequence: 7\r\n\r\nhello\r\n",
    b"HMSG _INBOX.abc.20 1 16 16\r\nNATS/1.0 503\r\n\r\n\r\n",  # no responders
    b"HMSG svc.echo 1 _INBOX.abc.21 12 12\r\nNATS/1.0\r\n\r\n\r\n",  # a reply, no payload
    b"HMSG  a\t1  r.1   12 14\r\nNATS/1.0\r\n\r\n\r\n\r\n",  # whitespace, CRLF payload
]


@pytest.mark.parametrize("data", LONE)
def test_a_lone_msg_seen_before_parses_as_the_loop_parses_it(data: bytes) -> None:
    p = Parser()
    first = p.feed(data)  # its sid and size are new: the loop parses and validates them
    assert first == loop_parse(data, Parser())
    assert len(first) == 1
    assert p.feed(data) == first  # now the shortcut
    assert p.feed(data) == first
    assert p.buffered == 0


def test_a_lone_msg_seen_before_skips_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    p = Parser()
    p.feed(b"MSG _INBOX.abc.1 1 16\r\n" + b"x" * 16 + b"\r\n")
    hmsg = b"HMSG _INBOX.abc.3 1 12 16\r\nNATS/1.0\r\n\r\nwxyz\r\n"
    q = Parser()
    q.feed(hmsg)

    def no_loop(*args: object) -> None:
        raise AssertionError("the op-by-op loop ran")

    monkeypatch.setattr(Parser, "_scan", no_loop)
    # another subject and reply, the same sid and size: no loop
    assert p.feed(b"MSG _INBOX.abc.2 1 r.9 16\r\n" + b"z" * 16 + b"\r\n") == [
        Msg("_INBOX.abc.2", 1, "r.9", b"z" * 16)
    ]
    # an HMSG (a direct get's answer) with its sid and both sizes seen before: no loop
    assert q.feed(hmsg.replace(b".3 ", b".4 ")) == [
        Msg("_INBOX.abc.4", 1, None, b"wxyz", b"NATS/1.0\r\n\r\n", 0)
    ]
    assert q.feed(b"HMSG s 1 16 16\r\nNATS/1.0 408\r\n\r\n\r\n") == [
        Msg("s", 1, None, b"", b"NATS/1.0 408\r\n\r\n", 408)
    ]
    # what it does not take goes to the loop: a new size, a new header size, two ops,
    # an incomplete one
    for parser, other in (
        (p, b"MSG a 1 3\r\nabc\r\n"),
        (p, hmsg),
        (p, b"MSG a 1 16\r\n" + b"x" * 16 + b"\r\nPING\r\n"),
        (q, hmsg + b"PING\r\n"),
        (p, b"MSG a 1 16\r\n" + b"x" * 10),
        (q, hmsg[:-3]),
    ):
        with pytest.raises(AssertionError, match="loop ran"):
            parser.feed(other)


def test_a_lone_msg_in_pieces_and_with_more_goes_to_the_loop() -> None:
    op = b"MSG a 1 5\r\nhello\r\n"
    p = Parser()
    assert p.feed(op) == [Msg("a", 1, None, b"hello")]
    assert p.feed(op[:9]) == []  # incomplete: kept
    assert p.feed(op[9:]) == [Msg("a", 1, None, b"hello")]
    assert p.feed(op[:-1]) == []  # all but the last LF
    assert p.feed(b"\n") == [Msg("a", 1, None, b"hello")]
    assert p.feed(op + b"PI") == [Msg("a", 1, None, b"hello")]
    assert p.feed(b"NG\r\n" + op) == [PING, Msg("a", 1, None, b"hello")]
    assert p.feed(op * 2) == [Msg("a", 1, None, b"hello")] * 2
    assert p.buffered == 0


LONE_ERRORS = [
    ("missing crlf after payload", b"MSG a 1 3\r\nabcXY", "expected CRLF after"),
    ("lf only after payload", b"MSG a 1 3\r\nabc\nX", "expected CRLF after"),
    ("subject not utf-8", b"MSG a\xffb 1 3\r\nabc\r\n", "UTF-8"),
    ("reply not utf-8", b"MSG a 1 r\xc3 3\r\nabc\r\n", "UTF-8"),
    ("too many fields", b"MSG a 1 r x 3\r\nabc\r\n", "field"),
    ("too few fields", b"MSG 1 3\r\nabc\r\n", "field"),
    ("long line", b"MSG " + b"s" * 1100 + b" 1 3\r\nabc\r\n", "at most 1024 bytes"),
    ("signed size", b"MSG a 1 +3\r\nabc\r\n", "non-negative decimal"),
    ("hmsg missing crlf", b"HMSG a 1 12 15\r\nNATS/1.0\r\n\r\nabcXY", "expected CRLF after"),
    ("hmsg not NATS/1.0", b"HMSG a 1 12 15\r\nNATS/2.0\r\n\r\nabc\r\n", "NATS/1.0"),
    ("hmsg bad status", b"HMSG a 1 15 15\r\nNATS/1.0 5x\r\n\r\n\r\n", "3-digit status"),
    ("hmsg header past total", b"HMSG a 1 15 12\r\nNATS/1.0\r\n\r\n\r\n", "header size <="),
    ("hmsg too many fields", b"HMSG a 1 r x 12 15\r\nNATS/1.0\r\n\r\nabc\r\n", "field"),
    ("hmsg too few fields", b"HMSG 1 12 15\r\nNATS/1.0\r\n\r\nabc\r\n", "field"),
    ("hmsg subject not utf-8", b"HMSG a\xff 1 12 15\r\nNATS/1.0\r\n\r\nabc\r\n", "UTF-8"),
]


@pytest.mark.parametrize(
    ("data", "match"), [e[1:] for e in LONE_ERRORS], ids=[e[0] for e in LONE_ERRORS]
)
def test_a_lone_msg_seen_before_fails_as_the_loop_fails(data: bytes, match: str) -> None:
    """With the sid and sizes seen before (the shortcut's case), every error is the
    loop's, and the parser is dead after it."""
    seen = b"MSG a 1 3\r\nabc\r\nHMSG a 1 12 15\r\nNATS/1.0\r\n\r\nabc\r\n"
    p, q = Parser(max_control_line=1024), Parser(max_control_line=1024)
    assert p.feed(seen) == q.feed(seen)
    with pytest.raises(ProtocolError, match=match) as fast:
        p.feed(data)
    with pytest.raises(ProtocolError) as loop:
        loop_parse(data, q)
    assert str(fast.value) == str(loop.value)
    with pytest.raises(ProtocolError, match="already failed"):
        p.feed(seen)


def test_a_lone_msg_seen_before_is_held_to_a_lowered_max_payload() -> None:
    p = Parser()
    op = b"MSG a.b 1 _INBOX.x.1 5\r\nhello\r\n"
    assert p.feed(op) == [Msg("a.b", 1, "_INBOX.x.1", b"hello")]
    p.max_payload = 4  # a server with a lower limit, after a reconnect
    with pytest.raises(ProtocolError, match="max_payload=4"):
        p.feed(op)


class _RunCount:
    """How many runs the parser took through its batch path (``Parser._reply_run``)."""

    taken = 0


def count_reply_runs(monkeypatch: pytest.MonkeyPatch) -> _RunCount:
    runs = _RunCount()
    original = Parser._reply_run

    def counting(self: Parser, *args: object) -> int:
        done = original(self, *args)  # type: ignore[arg-type]
        runs.taken += bool(done)
        return done

    monkeypatch.setattr(Parser, "_reply_run", counting)
    return runs


def _reply_line(i: int) -> bytes:
    return b"MSG s.x 7 $JS.ACK.S.C.1.%d.%d.1700000000.%d 2\r\nab\r\n" % (i + 9, i, 99 - i)


@pytest.mark.parametrize(
    "odd",
    [
        b"MSG s.x 7 r\tx 2\r\nab\r\n",  # a tab: six fields, refused
        b"MSG s.x 7  2\r\nab\r\n",  # a double space: no reply, valid
        b"MSG s.x 8 r.1 2\r\nab\r\n",  # another sid
        b"MSG s.y 7 r.1 2\r\nab\r\n",  # another subject
        b"MSG s.x 7 r.1 3\r\nabc\r\n",  # another size
        b"MSG s.x 7 r.1 2 2MSG s.x 7 r.2 2\r\nab\r\n",  # a line holding the next one's start
        b"MSG s.x 7 r\xff 2\r\nab\r\n",  # not UTF-8
        b"MSG s.x  7 r.1 2\r\nab\r\n",  # a double space before the reply: valid
        b"MSG s.x 7 r.1 02\r\nab\r\n",  # a leading zero: valid
    ],
)
def test_a_run_of_reply_subjects_agrees_with_the_loop(
    monkeypatch: pytest.MonkeyPatch, odd: bytes
) -> None:
    runs = count_reply_runs(monkeypatch)
    plain = b"".join(_reply_line(i) for i in range(40))
    assert feed_whole(plain) == [
        Msg("s.x", 7, f"$JS.ACK.S.C.1.{i + 9}.{i}.1700000000.{99 - i}", b"ab") for i in range(40)
    ]
    assert runs.taken == 1  # one run, through _reply_run
    data = plain + odd + plain
    assert outcome(run_whole(data)) == outcome(run_bytewise(data))


def outcome(ops: list[Op] | None) -> object:
    return "ProtocolError" if ops is None else ops


def run_whole(data: bytes) -> list[Op] | None:
    try:
        return Parser().feed(data)
    except ProtocolError:
        return None


def run_bytewise(data: bytes) -> list[Op] | None:
    try:
        return feed_bytewise(data)
    except ProtocolError:
        return None


_FC_BLOCK = b"NATS/1.0 100 FlowControl Request\r\n\r\n"
_FC = b"HMSG s.x 7 $JS.FC.S.a.1 %d %d\r\n%b\r\n" % (len(_FC_BLOCK), len(_FC_BLOCK), _FC_BLOCK)
_HB_BLOCK = b"NATS/1.0 100 Idle Heartbeat\r\n\r\n"
_HB = b"HMSG s.x 7 %d %d\r\n%b\r\n" % (len(_HB_BLOCK), len(_HB_BLOCK), _HB_BLOCK)


@pytest.mark.parametrize(
    ("layout", "batches"),
    [
        ((30, _FC, 30), 2),  # a flow-control request amid deliveries
        ((30, _HB, 30, _FC, 30), 3),  # two statuses apart
        ((30, _FC, _HB, 30), 2),  # two statuses in a row
        ((30, _FC, 3, _HB, 30), 2),  # too few between them for a batch: the loop
        ((2, _FC, 30), 0),  # too few before: the try fails, tries pause, the loop
        ((30, _FC, 30, b"MSG s.x 7 r.1 2\r\na"), 2),  # an incomplete op at the end
    ],
)
def test_statuses_amid_a_run_split_it_into_batches(
    monkeypatch: pytest.MonkeyPatch, layout: tuple[int | bytes, ...], batches: int
) -> None:
    """A status (HMSG) amid a consumer's deliveries: the messages before it and after
    it are batched, not parsed op by op; the ops are the loop's, byte for byte."""
    runs = count_reply_runs(monkeypatch)
    seq = 0
    parts = []
    for part in layout:
        if isinstance(part, bytes):
            parts.append(part)
        else:
            parts.append(b"".join(_reply_line(seq + i) for i in range(part)))
            seq += part
    data = b"".join(parts)
    got = Parser().feed(data)
    assert got == feed_bytewise(data)
    assert [op.status for op in got if isinstance(op, Msg) and op.status] == [
        100 for part in layout if isinstance(part, bytes) and part.startswith(b"HMSG")
    ]
    assert len(got) == seq + sum(isinstance(p, bytes) and p.startswith(b"HMSG") for p in layout)
    assert runs.taken == batches
