"""KeyValue names, keys, key filters and operations, without a server."""

from __future__ import annotations

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from jetstream.errors import BadNameError
from jetstream.kv import (
    KeyValueConfig,
    KeyValueOp,
    validate_bucket,
    validate_key,
    validate_key_filter,
)
from jetstream.kv.entry import operation_of
from jetstream.protocol.headers import Headers

KEY_CHARS = "abcXYZ019-/_="
BUCKET_CHARS = "abcXYZ019-_"


@pytest.mark.parametrize(
    "key", ["a", "a.b", "A-b_c/d=e", "1.2.3", "x" * 200, "_kv", "a.b.c.d.e", "=", "/"]
)
def test_valid_keys(key: str) -> None:
    validate_key(key)
    validate_key_filter(key)


@pytest.mark.parametrize(
    "key", ["", ".", ".a", "a.", "a..b", "a b", "a*", "*", ">", "a.>", "ü", "a\tb", "a\r\n"]
)
def test_invalid_keys(key: str) -> None:
    with pytest.raises(BadNameError):
        validate_key(key)


@pytest.mark.parametrize("f", ["*", ">", "a.*", "a.>", "*.b.>", "a.*.c", "a"])
def test_valid_filters(f: str) -> None:
    validate_key_filter(f)


@pytest.mark.parametrize("f", ["", "a*", "a.b>", ">.a", "a.>.b", "a..*", ".*", "*.", "a b"])
def test_invalid_filters(f: str) -> None:
    with pytest.raises(BadNameError):
        validate_key_filter(f)


@pytest.mark.parametrize("b", ["cfg", "A_b-1", "x" * 64])
def test_valid_buckets(b: str) -> None:
    validate_bucket(b)


@pytest.mark.parametrize("b", ["", "a.b", "a b", "a*", "a>", "a/b", "ü"])
def test_invalid_buckets(b: str) -> None:
    with pytest.raises(BadNameError):
        validate_bucket(b)


@settings(deadline=None)
@given(st.lists(st.text(KEY_CHARS, min_size=1, max_size=8), min_size=1, max_size=5))
def test_tokens_joined_by_dots_are_keys(tokens: list[str]) -> None:
    validate_key(".".join(tokens))


@settings(deadline=None)
@given(
    st.one_of(
        st.text(max_size=20).map(lambda k: (k, "any")),  # mostly refused
        st.lists(st.text(KEY_CHARS, min_size=1, max_size=8), min_size=1, max_size=5).map(
            lambda tokens: (".".join(tokens), "key")
        ),
        st.text(BUCKET_CHARS, min_size=1, max_size=20).map(lambda b: (b, "bucket")),
    )
)
def test_validation_never_raises_anything_else(drawn: tuple[str, str]) -> None:
    key, kind = drawn
    # what each kind of input must pass: a bucket name is a valid key and filter too
    takes = {
        "any": (),
        "key": ("validate_key", "validate_key_filter"),
        "bucket": ("validate_key", "validate_key_filter", "validate_bucket"),
    }[kind]
    for check in (validate_key, validate_key_filter, validate_bucket):
        try:
            check(key)
        except BadNameError:
            event(f"{check.__name__}: refused")
            assert check.__name__ not in takes, f"{check.__name__} refused the {kind} {key!r}"
        else:
            event(f"{check.__name__}: taken")


def test_operation_from_headers() -> None:
    assert operation_of(None) is KeyValueOp.PUT
    assert operation_of(Headers({"KV-Operation": "DEL"})) is KeyValueOp.DEL
    assert operation_of(Headers({"KV-Operation": "PURGE"})) is KeyValueOp.PURGE
    assert operation_of(Headers({"Nats-Msg-Size": "3"})) is KeyValueOp.PUT
    assert operation_of(Headers({"Nats-Marker-Reason": "MaxAge"})) is KeyValueOp.PURGE
    assert operation_of(Headers({"Nats-Marker-Reason": "Purge"})) is KeyValueOp.PURGE
    assert operation_of(Headers({"Nats-Marker-Reason": "Remove"})) is KeyValueOp.DEL


def test_stream_config_of_a_bucket() -> None:
    cfg = KeyValueConfig(bucket="b", history=3, ttl=30).to_stream_config()
    assert cfg.name == "KV_b" and cfg.subjects == ["$KV.b.>"]
    assert cfg.max_msgs_per_subject == 3 and cfg.max_age == 30 and cfg.duplicate_window == 30
    assert cfg.allow_rollup_hdrs and cfg.deny_delete and cfg.allow_direct
    assert cfg.discard.value == "new"
    assert KeyValueConfig(bucket="b").to_stream_config().duplicate_window == 120
    with pytest.raises(ValueError, match="history must be 1 to 64, not 65"):
        KeyValueConfig(bucket="b", history=65).to_stream_config()
    with pytest.raises(ValueError, match="ttl and limit_marker_ttl must not be negative"):
        KeyValueConfig(bucket="b", ttl=-1).to_stream_config()
    with pytest.raises(BadNameError):
        KeyValueConfig(bucket="b.c").to_stream_config()
    back = KeyValueConfig.from_stream_config(cfg)
    assert (back.bucket, back.history, back.ttl) == ("b", 3, 30.0)


def test_mirror_and_sources_configs() -> None:
    from jetstream.api import StreamSource

    m = KeyValueConfig(bucket="m", mirror=StreamSource(name="origin")).to_stream_config()
    assert m.mirror and m.mirror.name == "KV_origin" and m.mirror_direct
    assert not m.subjects  # a mirror has no subjects of its own
    s = KeyValueConfig(
        bucket="agg", sources=[StreamSource(name="a"), StreamSource(name="KV_b")]
    ).to_stream_config()
    assert s.subjects == ["$KV.agg.>"]
    assert s.sources
    assert [src.name for src in s.sources] == ["KV_a", "KV_b"]
    transforms = [src.subject_transforms for src in s.sources]
    assert [(t[0].src, t[0].dest) for t in transforms if t] == [
        ("$KV.a.>", "$KV.agg.>"),
        ("$KV.b.>", "$KV.agg.>"),
    ]
    marker = KeyValueConfig(bucket="t", limit_marker_ttl=2).to_stream_config()
    assert marker.allow_msg_ttl and marker.subject_delete_marker_ttl == 2
    c = KeyValueConfig(bucket="c", compression=True, metadata={"a": "b"}).to_stream_config()
    assert c.compression.value == "s2" and c.metadata == {"a": "b"}
