"""The reader of the server's WebSocket frames, without a server: frames made here as
RFC 6455 and RFC 7692 lay them out, fed in pieces cut anywhere."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jetstream.core._wsframes import (
    CLOSE,
    PING,
    PONG,
    Control,
    FrameError,
    FrameReader,
    frame_header,
)


def frame(opcode: int, payload: bytes, *, fin: bool = True, rsv1: bool = False) -> bytes:
    """One unmasked frame, as a server sends it."""
    b0 = (0x80 if fin else 0) | (0x40 if rsv1 else 0) | opcode
    return frame_header(b0, len(payload)) + payload


def deflated(data: bytes, deflate: zlib._Compress | None = None) -> bytes:
    deflate = deflate or zlib.compressobj(wbits=-zlib.MAX_WBITS)
    out = deflate.compress(data) + deflate.flush(zlib.Z_SYNC_FLUSH)
    assert out.endswith(b"\x00\x00\xff\xff")
    return out[:-4]


def message(payload: bytes, cuts: list[int], *, compressed: bool, ping: bytes | None) -> bytes:
    """A binary message in fragments cut at ``cuts``, a ping between the first two."""
    body = deflated(payload) if compressed else payload
    points = sorted({c % (len(body) + 1) for c in cuts})
    pieces = [body[a:b] for a, b in zip([0, *points], [*points, len(body)], strict=True)]
    out = b""
    for i, piece in enumerate(pieces):
        first, last = i == 0, i == len(pieces) - 1
        out += frame(2 if first else 0, piece, fin=last, rsv1=compressed and first)
        if first and ping is not None:
            out += frame(PING, ping)
    return out


def read_all(reader: FrameReader, data: bytes, cuts: list[int]) -> list[bytes | Control]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    out: list[bytes | Control] = []
    for a, b in zip([0, *points], [*points, len(data)], strict=True):
        out += reader.feed(data[a:b])
    return out


messages = st.lists(
    st.tuples(
        st.binary(max_size=300) | st.just(b"x" * 70_000),
        st.lists(st.integers(0, 10**6), max_size=3),
        st.booleans(),
        st.none() | st.binary(max_size=125),
    ),
    max_size=6,
)


@given(messages, st.lists(st.integers(0, 10**7), max_size=8))
def test_payloads_and_controls_come_out_in_order_however_the_bytes_are_cut(
    msgs: list[tuple[bytes, list[int], bool, bytes | None]], cuts: list[int]
) -> None:
    wire = b"".join(message(p, c, compressed=z, ping=ping) for p, c, z, ping in msgs)
    got = read_all(FrameReader(inflate=True, takeover=False), wire, cuts)
    data = b"".join(x for x in got if isinstance(x, bytes))
    assert data == b"".join(p for p, _, _, _ in msgs)
    pings = [x for x in got if isinstance(x, Control)]
    assert pings == [Control(PING, ping) for *_, ping in msgs if ping is not None]


def test_a_control_frame_keeps_its_place_among_the_payloads() -> None:
    wire = frame(2, b"MSG a") + frame(PONG, b"") + frame(2, b" 1 2\r\n") + frame(CLOSE, b"\x03\xe8")
    got = FrameReader(inflate=False, takeover=False).feed(wire)
    assert got == [b"MSG a", Control(PONG, b""), b" 1 2\r\n", Control(CLOSE, b"\x03\xe8")]


def test_a_kept_deflate_context_inflates_each_message() -> None:
    deflate = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    texts = [b"PING\r\n" * 20, b"PING\r\n" * 20, b"PONG\r\n" * 30]
    wire = b"".join(frame(2, deflated(t, deflate), rsv1=True) for t in texts)
    reader = FrameReader(inflate=True, takeover=True)
    assert b"".join(x for x in read_all(reader, wire, [7, 50]) if isinstance(x, bytes)) == b"".join(
        texts
    )


def test_frame_headers() -> None:
    assert frame_header(0x82, 5) == b"\x82\x05"
    assert frame_header(0x82, 126) == b"\x82\x7e\x00\x7e"
    assert frame_header(0xC2, 65536) == b"\xc2\x7f" + (65536).to_bytes(8, "big")


@pytest.mark.parametrize(
    ("wire", "inflate", "why"),
    [
        (bytes((0x82, 0x81)) + b"abcd" + b"x", False, "masked frame"),
        (bytes((0xA2, 0)), False, "reserved bits"),
        (frame(2, deflated(b"x" * 100), rsv1=True), False, "reserved bits"),
        (frame(0, b"x"), False, "continued a message it had not begun"),
        (frame(2, b"a", fin=False) + frame(2, b"b"), False, "before ending the last one"),
        (frame(PING, b"p", fin=False), False, "fragmented a control frame"),
        (bytes((0x89, 126)) + (200).to_bytes(2, "big") + b"p" * 200, False, "too long"),
        (frame(0x3, b""), False, "unknown opcode 3"),
        (frame(2, b"\xff\xff\xff", rsv1=True), True, "does not inflate"),
    ],
)
def test_broken_framing_is_refused(wire: bytes, inflate: bool, why: str) -> None:
    with pytest.raises(FrameError, match=why):
        FrameReader(inflate=inflate, takeover=False).feed(wire)


def test_a_message_may_not_inflate_past_the_limit() -> None:
    reader = FrameReader(inflate=True, takeover=False, max_message=1000)
    with pytest.raises(FrameError, match="inflates past 1000 bytes"):
        reader.feed(frame(2, deflated(b"z" * 5000), rsv1=True))
