"""Sans-IO NATS wire protocol: bytes in, ops out; commands out as bytes. No asyncio, no socket."""

from __future__ import annotations

from .commands import PING, PONG, encode_connect, encode_pub, encode_sub, encode_unsub
from .headers import Headers, HeadersLike, encode_headers, parse_headers
from .ops import Err, Info, Msg, Ok, Op, Ping, Pong
from .parser import Parser
from .subjects import (
    Nuid,
    new_inbox,
    next_nuid,
    validate_queue,
    validate_subject,
    validate_subscribe_subject,
)

__all__ = [
    "PING",
    "PONG",
    "Err",
    "Headers",
    "HeadersLike",
    "Info",
    "Msg",
    "Nuid",
    "Ok",
    "Op",
    "Parser",
    "Ping",
    "Pong",
    "encode_connect",
    "encode_headers",
    "encode_pub",
    "encode_sub",
    "encode_unsub",
    "new_inbox",
    "next_nuid",
    "parse_headers",
    "validate_queue",
    "validate_subject",
    "validate_subscribe_subject",
]
