"""Properties of the server-op parser, checked with hypothesis.

(a) any split of a valid op stream gives the ops of the whole stream;
(b) MSG/HMSG encoded the way the server does come back unchanged;
(c) arbitrary or mutated bytes give ops or ProtocolError, never another
    exception, and the bytes held stay bounded;
(d) the batch path and the op-by-op loop agree, on valid and broken runs;
    a run of one repeated control line is found by a regular expression as by a loop;
(e) whatever the parser says of a feed's run (``run_end``...) is true of its ops.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from jetstream.errors import ProtocolError
from jetstream.protocol._common import run_length, run_pattern
from jetstream.protocol.ops import OK, PING, PONG, Err, Info, Msg, Op
from jetstream.protocol.parser import Parser
from tests.profiles import examples
from tests.unit.test_parser_runs import claimed

PROPERTY = settings(max_examples=examples(500), deadline=None)

# --- a tiny server-side encoder ------------------------------------------------------


def encode_msg(msg: Msg, sep: bytes = b" ") -> bytes:
    """MSG or HMSG bytes for ``msg``, as nats-server writes them (``sep`` between fields)."""
    fields = [b"MSG" if msg.hdr is None else b"HMSG", msg.subject.encode(), b"%d" % msg.sid]
    if msg.reply is not None:
        fields.append(msg.reply.encode())
    body = msg.payload
    if msg.hdr is not None:
        fields.append(b"%d" % len(msg.hdr))
        body = msg.hdr + msg.payload
    fields.append(b"%d" % len(body))
    return sep.join(fields) + b"\r\n" + body + b"\r\n"


def encode(op: Op) -> bytes:
    if isinstance(op, Msg):
        return encode_msg(op)
    if isinstance(op, Err):
        return b"-ERR '" + op.message.encode() + b"'\r\n"
    if isinstance(op, Info):
        return b"INFO " + msgspec.json.encode(op) + b"\r\n"
    return {PING: b"PING\r\n", PONG: b"PONG\r\n", OK: b"+OK\r\n"}[op]


def feed(parser: Parser, data: bytes) -> list[Op]:
    """``parser.feed``, checking what it says of the feed's run (see test_parser_runs)."""
    ops = parser.feed(data)
    claimed(parser, ops)
    return ops


def feed_pieces(parser: Parser, data: bytes, cuts: Sequence[int]) -> list[Op]:
    ops: list[Op] = []
    start = 0
    for cut in sorted(set(cuts)):
        ops += feed(parser, data[start:cut])
        start = cut
    ops += feed(parser, data[start:])
    return ops


# --- strategies ----------------------------------------------------------------------

# bytes.split() splits on these; a subject never holds them.
ASCII_SPACE = " \t\n\r\x0b\x0c"
token = st.text(
    st.characters(exclude_categories=("Cs",), exclude_characters=ASCII_SPACE),
    min_size=1,
    max_size=12,
)
header_key = st.text(
    st.characters(min_codepoint=33, max_codepoint=126, exclude_characters=":"),
    min_size=1,
    max_size=10,
)
header_value = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=12).map(
    str.strip
)
payloads = st.one_of(
    st.binary(max_size=48),
    st.sampled_from([b"", b"\r\n", b"\r\n\r\n", b"\r", b"\n", b"MSG a 1 1\r\nx\r\n", b"PING\r\n"]),
)


@st.composite
def header_blocks(draw: st.DrawFn) -> tuple[bytes, int]:
    """A header block and its status (0 when its first line has none)."""
    status = draw(st.one_of(st.just(0), st.integers(100, 999)))
    first = b"NATS/1.0"
    if status:
        first += b" %d" % status
        description = draw(st.sampled_from(["", "Idle Heartbeat", "No Messages", "x y z"]))
        if description:
            first += b" " + description.encode()
    lines = draw(st.lists(st.tuples(header_key, header_value), max_size=3))
    block = first + b"\r\n" + b"".join(b"%s: %s\r\n" % (k.encode(), v.encode()) for k, v in lines)
    return block + b"\r\n", status


@st.composite
def msgs(draw: st.DrawFn) -> Msg:
    subject = draw(token)
    sid = draw(st.integers(0, 2**64))
    reply = draw(st.none() | token)
    payload = draw(payloads)
    if draw(st.booleans()):
        return Msg(subject, sid, reply, payload)
    block, status = draw(header_blocks())
    return Msg(subject, sid, reply, payload, block, status)


err_text = st.text(
    st.characters(exclude_categories=("Cs",), exclude_characters="\r\n"), max_size=30
)
infos = st.builds(
    Info,
    server_id=st.text(max_size=8),
    version=st.sampled_from(["2.10.22", "2.11.0", ""]),
    port=st.integers(0, 65535),
    headers=st.booleans(),
    max_payload=st.integers(0, 2**31),
    connect_urls=st.lists(st.text(max_size=8), max_size=2),
)
ops_strategy = st.one_of(
    msgs(),
    st.sampled_from([PING, PONG, OK]),
    err_text.map(Err),
    infos,
)


def cuts_for(data: bytes) -> st.SearchStrategy[list[int]]:
    return st.lists(st.integers(0, len(data)), max_size=12)


# --- (a) any split gives the same ops -------------------------------------------------


@PROPERTY
@given(st.lists(ops_strategy, max_size=12), st.data())
def test_any_split_gives_the_same_ops(ops: list[Op], data: st.DataObject) -> None:
    stream = b"".join(map(encode, ops))
    whole = Parser().feed(stream)
    assert whole == ops
    cuts = data.draw(cuts_for(stream))
    parser = Parser()
    assert feed_pieces(parser, stream, cuts) == ops
    assert parser.buffered == 0


# --- (b) encode -> parse round trip --------------------------------------------------


@PROPERTY
@given(msgs(), st.sampled_from([b" ", b"  ", b"\t", b" \t "]), st.sampled_from([0, 1, 2, 5]))
def test_msg_round_trip(msg: Msg, sep: bytes, chunk: int) -> None:
    stream = encode_msg(msg, sep)
    parser = Parser()
    if chunk:
        got = feed_pieces(parser, stream, range(chunk, len(stream), chunk))
    else:
        got = parser.feed(stream)
    assert got == [msg]
    (parsed,) = got
    assert isinstance(parsed, Msg)
    assert type(parsed.payload) is bytes
    assert parsed.hdr is None or type(parsed.hdr) is bytes
    # again, whole: its sid and sizes are known now (the shortcut of a lone MSG or HMSG)
    assert parser.feed(stream) == [msg]


# --- (c) garbage in: ops or ProtocolError, bounded memory ------------------------------

LIMITS = {"max_control_line": 64, "max_payload": 256}


def feed_garbage(data: bytes, cuts: Sequence[int]) -> None:
    """Feed ``data`` in pieces: only ops or ProtocolError, and the buffer stays bounded: by
    what was fed, by ``max_control_line + 1`` while no MSG or HMSG came (only a control
    line can be held), by ``max_payload + 1`` (a message's incomplete payload) after one."""
    parser = Parser(**LIMITS)
    line_bound = LIMITS["max_control_line"] + 1
    payload_bound = LIMITS["max_payload"] + 1
    start = 0
    failed = False
    for cut in [*sorted(set(cuts)), len(data)]:
        chunk = data[start:cut]
        start = cut
        try:
            ops = feed(parser, chunk)
        except ProtocolError:
            failed = True
            continue
        assert not failed, "a feed after a ProtocolError must raise ProtocolError"
        assert all(isinstance(op, Info | Msg | Err) or op in (PING, PONG, OK) for op in ops)
        fed = data[:cut]
        bound = payload_bound if b"MSG" in fed.upper() else line_bound
        assert parser.buffered <= min(bound, len(fed)), (parser.buffered, bound, len(fed))


@PROPERTY
@given(st.binary(max_size=400), st.data())
def test_random_bytes(data: bytes, draw: st.DataObject) -> None:
    feed_garbage(data, draw.draw(cuts_for(data)))


@PROPERTY
@given(
    st.sampled_from([b"MSG ", b"HMSG ", b"INFO ", b"-ERR ", b"PING", b"msg a 1 ", b"HMSG a 1 "]),
    st.binary(max_size=300),
    st.data(),
)
def test_random_bytes_after_an_op_name(prefix: bytes, rest: bytes, draw: st.DataObject) -> None:
    data = prefix + rest
    feed_garbage(data, draw.draw(cuts_for(data)))


@st.composite
def mutated_streams(draw: st.DrawFn) -> bytes:
    """A valid op stream with a few bytes replaced, inserted or deleted."""
    stream = b"".join(map(encode, draw(st.lists(ops_strategy, min_size=1, max_size=6))))
    return mutate(draw, stream, draw(st.integers(1, 4)))


def mutate(draw: st.DrawFn, data: bytes, times: int) -> bytes:
    """``data`` with ``times`` bytes replaced, inserted or deleted."""
    stream = bytearray(data)
    interesting = st.sampled_from(b" \t\r\n0123456789-+_\x00\xffMSGHNAT/.'")
    for _ in range(times):
        i = draw(st.integers(0, len(stream)))
        kind = draw(st.sampled_from(["replace", "insert", "delete"]))
        if kind == "insert" or i == len(stream):
            stream.insert(i, draw(interesting | st.integers(0, 255)))
        elif kind == "replace":
            stream[i] = draw(interesting | st.integers(0, 255))
        else:
            del stream[i]
    return bytes(stream)


@PROPERTY
@given(mutated_streams(), st.data())
def test_mutated_streams(data: bytes, draw: st.DataObject) -> None:
    feed_garbage(data, draw.draw(cuts_for(data)))


# --- (d) the batch path agrees with the op-by-op loop ----------------------------------


@st.composite
def lone_msgs(draw: st.DrawFn) -> tuple[bytes, bytes]:
    """A MSG or an HMSG, then that op with up to three bytes changed: the second is fed
    alone to a parser that knows its sid and sizes from the first (the shortcut of a
    round trip's feed: a reply, a PubAck, a direct get's answer)."""
    subject, sid, reply, payload = (
        draw(token),
        draw(st.integers(0, 20)),
        draw(st.none() | token),
        draw(payloads),
    )
    if draw(st.booleans()):
        msg = Msg(subject, sid, reply, payload)
    else:
        block, status = draw(header_blocks())
        msg = Msg(subject, sid, reply, payload, block, status)
    seen = encode_msg(msg)
    return seen, mutate(
        draw, encode_msg(msg, draw(st.sampled_from([b" ", b"  ", b"\t"]))), draw(st.integers(0, 3))
    )


def ops_or_error(parse: Callable[[], list[Op]]) -> list[Op] | str:
    try:
        return parse()
    except ProtocolError as exc:
        return str(exc)


@PROPERTY
@given(lone_msgs())
def test_a_lone_msg_and_the_loop_agree(pair: tuple[bytes, bytes]) -> None:
    seen, data = pair
    fast, loop = Parser(), Parser()
    assert fast.feed(seen) == loop.feed(seen)
    got = ops_or_error(lambda: fast.feed(data))
    want = ops_or_error(lambda: loop.feed(b"PING\r\n" + data)[1:])
    assert got == want
    if isinstance(got, list):
        assert fast.buffered == loop.buffered


@st.composite
def runs(draw: st.DrawFn) -> list[Msg]:
    """Many messages of one shape: what a subscription or a consumer receives.

    Now and then a message has another header block, which breaks the shape.
    """
    count = draw(st.integers(8, 20))
    usual = draw(st.none() | header_blocks())
    subjects = draw(
        st.lists(
            st.sampled_from(draw(st.lists(token, min_size=1, max_size=3))),
            min_size=count,
            max_size=count,
        )
    )
    sids = draw(
        st.lists(
            st.sampled_from(draw(st.lists(st.integers(0, 10**6), min_size=1, max_size=3))),
            min_size=count,
            max_size=count,
        )
    )
    replies = draw(st.none() | st.lists(token, min_size=count, max_size=count)) or [None] * count
    bodies = draw(st.lists(st.binary(max_size=8), min_size=count, max_size=count))
    # Rarely a payload with a CRLF in it, or another header block: both break the shape.
    for i in draw(st.sets(st.integers(0, count - 1), max_size=1)):
        bodies[i] = b"\r\n"
    blocks = [usual] * count
    if usual is not None:
        for i in draw(st.sets(st.integers(0, count - 1), max_size=1)):
            blocks[i] = draw(header_blocks())
    out = []
    for subject, sid, reply, body, block in zip(
        subjects, sids, replies, bodies, blocks, strict=True
    ):
        if block is None:
            out.append(Msg(subject, sid, reply, body))
        else:
            out.append(Msg(subject, sid, reply, body, block[0], block[1]))
    return out


def outcome(ops: list[Op] | None) -> object:
    return "ProtocolError" if ops is None else ops


def run_whole(data: bytes) -> list[Op] | None:
    try:
        return feed(Parser(), data)
    except ProtocolError:
        return None


def run_bytewise(data: bytes) -> list[Op] | None:
    parser = Parser()
    ops: list[Op] = []
    try:
        for i in range(len(data)):
            ops += feed(parser, data[i : i + 1])
    except ProtocolError:
        return None
    return ops


@PROPERTY
@given(runs(), st.data())
def test_runs_batch_and_loop_agree(run: list[Msg], data: st.DataObject) -> None:
    stream = b"".join(map(encode_msg, run))
    parser = Parser()
    assert feed(parser, stream) == run  # whole: mostly the batch path
    lines = {encode_msg(m).split(b"\r\n")[0] for m in run}
    if len(lines) == 1 and run[0].hdr is None and not any(b"\r\n" in m.payload for m in run):
        # one control line, repeated (a subscription's steady feed): said to be one run
        assert claimed(parser, run) and parser.run_start == 0
    assert run_bytewise(stream) == run  # byte by byte: the loop only
    assert feed_pieces(Parser(), stream, data.draw(cuts_for(stream))) == run


@PROPERTY
@given(runs(), st.data())
def test_broken_runs_batch_and_loop_agree(run: list[Msg], data: st.DataObject) -> None:
    stream = bytearray(b"".join(map(encode_msg, run)))
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(stream) - 1))
        stream[i] = data.draw(st.sampled_from(b" \t\r\n\x000123456789+_MSGH") | st.integers(0, 255))
    broken = bytes(stream)
    assert outcome(run_whole(broken)) == outcome(run_bytewise(broken))


@st.composite
def reply_runs(draw: st.DrawFn) -> bytes:
    """A consumer's deliveries: one subject, sid and size, a reply subject each (what
    ``_reply_run`` takes), now and then an odd reply (any bytes: whitespace, a newline,
    not UTF-8, none at all) or an odd byte anywhere."""
    subject = draw(st.sampled_from(["s.x", "ORDERS.new", "é.x"]) | token).encode()
    sid = draw(st.integers(0, 10**6))
    body = draw(st.binary(max_size=6))
    ack = st.builds(
        lambda a, b, c: b"$JS.ACK.S.C.1.%d.%d.17%d.0" % (a, b, c),
        st.integers(0, 10**9),
        st.integers(0, 10**9),
        st.integers(0, 10**6),
    )
    odd = st.sampled_from([b"r\nx", b"r x", b"", b"r\tx", b"r\x0bx", b"\xc3\xa9", b"r\r"])
    odd |= st.binary(max_size=6)
    replies = draw(st.lists(ack, min_size=8, max_size=30))
    for i in draw(st.sets(st.integers(0, len(replies) - 1), max_size=2)):
        replies[i] = draw(odd)
    stream = b"".join(
        b"MSG %b %d %b %d\r\n%b\r\n" % (subject, sid, r, len(body), body) for r in replies
    )
    return with_odd_bytes(draw, stream)


def with_odd_bytes(draw: st.DrawFn, stream: bytes) -> bytes:
    """``stream`` with up to two bytes changed, anywhere."""
    out = bytearray(stream)
    for _ in range(draw(st.integers(0, 2))):
        out[draw(st.integers(0, len(out) - 1))] = draw(st.integers(0, 255))
    return bytes(out)


def batch_and_loop_agree(stream: bytes, data: st.DataObject) -> None:
    """Whole, byte by byte and in pieces, the parser gives the same ops or refuses alike."""
    assert outcome(run_whole(stream)) == outcome(run_bytewise(stream))
    pieces = outcome(_or_none(lambda: feed_pieces(Parser(), stream, data.draw(cuts_for(stream)))))
    assert pieces == outcome(run_bytewise(stream))


@PROPERTY
@given(reply_runs(), st.data())
def test_reply_runs_batch_and_loop_agree(stream: bytes, data: st.DataObject) -> None:
    batch_and_loop_agree(stream, data)


def _or_none(parse: Callable[[], list[Op]]) -> list[Op] | None:
    try:
        return parse()
    except ProtocolError:
        return None


@PROPERTY
@given(
    st.binary(min_size=1, max_size=30),
    st.integers(0, 40),
    st.integers(0, 60),
    st.binary(max_size=8),
    st.data(),
)
def test_run_pattern_counts_as_the_loop_does(
    line: bytes, size: int, count: int, lead: bytes, data: st.DataObject
) -> None:
    """Runs of CRLF and a line every ``len(sep) + size`` bytes, with the bytes between,
    the end and a few bytes anywhere drawn at will (between may hold ``sep`` itself, a
    run may stop part-way through it or through a payload): the regular expression
    finds the run the op-by-op loop finds, and neither counts below zero."""
    sep = b"\r\n" + line  # as in the parser: one op's CRLF, then the next op's line
    step = len(sep) + size
    filler = st.binary(min_size=size, max_size=size) | st.just(
        (sep * (size // len(sep) + 1))[:size]
    )
    stream = bytearray(lead)
    for _ in range(count):
        stream += sep + data.draw(filler)
    stream += data.draw(st.sampled_from([b"", sep[: len(sep) // 2], sep, b"\r\n", b"\r"]))
    for _ in range(data.draw(st.integers(0, 2))):
        if stream:
            stream[data.draw(st.integers(0, len(stream) - 1))] = data.draw(st.integers(0, 255))
    whole = bytes(stream)
    rx = run_pattern(sep, size)
    # ``first`` past the end too: the op before it ends beyond the data (cut by a feed)
    for first in {len(lead), 0, data.draw(st.integers(0, len(whole) + step))}:
        k = run_length(whole, first, step, sep, rx)
        assert k == run_length(whole, first, step, sep, None)
        assert k >= 0


# --- (e) the stream fuzz of the fault suite: 10k streams, hostile and valid mixed ----


@settings(max_examples=examples(10_000), deadline=None)
@given(mutated_streams() | st.binary(max_size=200), st.data())
def test_stream_fuzz_10k(data: bytes, draw: st.DataObject) -> None:
    """Ops or a ProtocolError, never another exception, never unbounded memory."""
    feed_garbage(data, draw.draw(cuts_for(data)))


@st.composite
def unique_runs(draw: st.DrawFn) -> bytes:
    """Deliveries with a line each of its own, for one sid (what ``_text_run`` takes): a
    KeyValue watch's (a subject and an ack subject each, payloads of any size) or the
    replies of requests (a subject each, no reply), then another op or a piece of one;
    now and then an odd subject (whitespace, a newline, not ASCII, none) or an odd byte."""
    sid = draw(st.integers(0, 10**6))
    count = draw(st.integers(4, 30))
    with_reply = draw(st.booleans())
    sizes = draw(st.sampled_from(["same", "any"]))
    size = draw(st.integers(0, 8))
    odd = st.sampled_from([b"k\nx", b"k x", b"", b"k\tx", b"k\x0bx", b"\xc3\xa9", b"k\r", b"MSG"])
    subjects = [b"$KV.B.k.%d" % i for i in range(count)]
    for i in draw(st.sets(st.integers(0, count - 1), max_size=2)):
        subjects[i] = draw(odd)
    out = bytearray()
    for i, subject in enumerate(subjects):
        body = b"v" * (size if sizes == "same" else draw(st.integers(0, 8)))
        reply = b" $JS.ACK.KV_B.c.1.%d.%d.17%d.%d" % (i + 1, i + 1, i, count - i - 1)
        out += b"MSG %b %d%b %d\r\n%b\r\n" % (
            subject,
            sid,
            reply if with_reply else b"",
            len(body),
            body,
        )
    out += draw(st.sampled_from([b"", b"PING\r\n", b"MSG other 1 2\r\nxy\r\n", b"MSG a 1 5\r\nab"]))
    return with_odd_bytes(draw, bytes(out))


@PROPERTY
@given(unique_runs(), st.data())
def test_unique_line_runs_batch_and_loop_agree(stream: bytes, data: st.DataObject) -> None:
    batch_and_loop_agree(stream, data)
