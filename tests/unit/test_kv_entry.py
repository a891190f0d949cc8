"""KeyValue entries: those made of their fields, and a watcher's, which are the messages
its consumer delivered, read on first access; both are ``KeyValueEntry``."""

from __future__ import annotations

import datetime as dt

import msgspec
import pytest

from jetstream.kv import KeyValueEntry, KeyValueOp
from jetstream.kv.entry import Watched, watched_class

V1 = "$JS.ACK.KV_cfg.c1.1.{seq}.{seq}.1700000000123456789.{pending}"
V2 = "$JS.ACK.hub.ACCHASH.KV_cfg.c1.1.{seq}.{seq}.1700000000123456789.{pending}.tok"


def watched(seq: int, pending: int, hdr: bytes | None = None, layout: str = V1) -> Watched:
    cls = watched_class("cfg", "$KV.cfg.")
    reply = layout.format(seq=seq, pending=pending)
    return cls("$KV.cfg.a.b", 7, reply, b"" if hdr else b"value", hdr)


@pytest.mark.parametrize("layout", [V1, V2])
def test_a_watched_entry_reads_its_message(layout: str) -> None:
    e = watched(42, 3, layout=layout)
    assert (e.bucket, e.key, e.value, e.revision, e.delta) == ("cfg", "a.b", b"value", 42, 3)
    assert e.operation is KeyValueOp.PUT
    assert e.created == dt.datetime(2023, 11, 14, 22, 13, 20, 123457, tzinfo=dt.UTC)
    assert isinstance(e, KeyValueEntry)
    assert issubclass(type(e), KeyValueEntry)
    assert not isinstance(object(), KeyValueEntry)


@pytest.mark.parametrize(
    ("hdr", "op"),
    [
        (b"NATS/1.0\r\nKV-Operation: DEL\r\n\r\n", KeyValueOp.DEL),
        (b"NATS/1.0\r\nKV-Operation: PURGE\r\nNats-Rollup: sub\r\n\r\n", KeyValueOp.PURGE),
        (b"NATS/1.0\r\nNats-Marker-Reason: MaxAge\r\n\r\n", KeyValueOp.PURGE),
        (b"NATS/1.0\r\nNats-Marker-Reason: Remove\r\n\r\n", KeyValueOp.DEL),
        (b"NATS/1.0\r\nNats-Msg-Size: 5\r\n\r\n", KeyValueOp.PUT),  # meta_only
    ],
)
def test_a_watched_entry_reads_its_operation_from_its_headers(hdr: bytes, op: KeyValueOp) -> None:
    assert watched(5, 0, hdr).operation is op


def test_watched_and_stored_entries_compare_and_show_alike() -> None:
    stored = KeyValueEntry("cfg", "a.b", b"value", 42, 1700000000123456789, 3)
    e = watched(42, 3)
    assert e == stored and stored == e
    assert repr(e) == repr(stored) == "<KeyValueEntry cfg/a.b rev=42 PUT b'value'>"
    assert e != KeyValueEntry("cfg", "a.b", b"value", 43, 0)
    assert e.created == stored.created
    with pytest.raises(TypeError, match="unhashable"):
        hash(e)
    with pytest.raises(TypeError, match="unhashable"):
        hash(stored)


def test_a_stored_entry_keeps_its_fields() -> None:
    when = dt.datetime(2026, 1, 2, tzinfo=dt.UTC)
    e = KeyValueEntry("b", "k", b"v", 3, when, operation=KeyValueOp.DEL)
    assert type(e) is KeyValueEntry
    assert (e.bucket, e.key, e.value, e.revision, e.created, e.delta, e.operation) == (
        "b",
        "k",
        b"v",
        3,
        when,
        0,
        KeyValueOp.DEL,
    )
    assert msgspec.structs.asdict(e)["revision"] == 3


def test_one_entry_class_per_bucket() -> None:
    a = watched_class("one", "$KV.one.")
    assert watched_class("one", "$KV.one.") is a
    assert watched_class("two", "$KV.two.") is not a
    assert a.__name__ == "KeyValueEntry"
