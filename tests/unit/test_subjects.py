"""Subject, reply and queue validation; NUID and inbox generation."""

from __future__ import annotations

import itertools
import os
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jetstream.errors import BadSubjectError
from jetstream.protocol import subjects
from jetstream.protocol.subjects import (
    Nuid,
    new_inbox,
    next_nuid,
    subject_matches,
    validate_queue,
    validate_subject,
    validate_subscribe_subject,
)
from tests.profiles import examples

# Every character a subject may never hold: space, tab, CR, LF, NUL, the other
# C0 controls and DEL.
FORBIDDEN_CHARS = [chr(c) for c in range(0x21)] + ["\x7f"]

VALID_PUBLISH = [
    "a",
    "foo",
    "foo.bar",
    "foo.bar.baz",
    "$JS.API.STREAM.INFO.ORDERS",
    "$JS.ACK.S.C.1.2.3.1700000000000000000.0",
    "_INBOX.abcdefghijklmnopqrstuv",
    "a-b_c~d/e\\f#g@h",
    "1.2.3",
    "a*b",  # '*' inside a longer token is an ordinary character to the server
    "a>b",
    "foo.*bar.baz>",
    "**.>>",
    "ünï.cødé",
    "日本.語",
    "foo.\xa0",  # no-break space is not a control character
    "x" * 2000,
    ".".join(["t"] * 200),
]

INVALID_PUBLISH = [
    ("", "is empty"),
    (".", "starts with '.'"),
    ("..", "starts with '.'"),
    (".foo", "starts with '.'"),
    ("foo.", "ends with '.'"),
    ("foo..bar", "'..'"),
    ("foo...bar", "'..'"),
    ("*", "wildcard token '*'"),
    (">", "wildcard token '>'"),
    ("foo.*", "wildcard token '*'"),
    ("*.foo", "wildcard token '*'"),
    ("foo.*.bar", "wildcard token '*'"),
    ("foo.>", "wildcard token '>'"),
    ("foo bar", "space"),
    (" foo", "space"),
    ("foo ", "space"),
    ("foo\tbar", "tab"),
    ("foo\rbar", "carriage return"),
    ("foo\nbar", "line feed"),
    ("foo\r\nPUB evil 1\r\nx", "carriage return"),
    ("foo\x00bar", "NUL"),
    ("foo\x01", "control character"),
    ("foo\x1b[31m", "control character"),
    ("foo\x1f", "control character"),
    ("foo\x7f", "control character"),
    ("foo\x0b", "control character"),
    ("foo\x0c", "control character"),
]

VALID_SUBSCRIBE = [
    *VALID_PUBLISH,
    "*",
    ">",
    "foo.*",
    "foo.>",
    "*.foo",
    "*.*",
    "*.>",
    "foo.*.bar.>",
    "$JS.API.>",
    "a*.b>",
]

INVALID_SUBSCRIBE = [
    ("", "is empty"),
    (".", "starts with '.'"),
    (".>", "starts with '.'"),
    ("foo.", "ends with '.'"),
    ("*.", "ends with '.'"),
    ("foo..*", "'..'"),
    (">.foo", "'>' before the last token"),
    ("foo.>.bar", "'>' before the last token"),
    (">.>", "'>' before the last token"),
    ("foo.* ", "space"),
    ("foo\t>", "tab"),
    ("foo.*\r\n", "carriage return"),
    ("foo\n.>", "line feed"),
    ("foo\x00.*", "NUL"),
    ("foo\x7f.>", "control character"),
]


@pytest.mark.parametrize("subject", VALID_PUBLISH)
def test_valid_publish_subject(subject: str) -> None:
    validate_subject(subject)


@pytest.mark.parametrize(("subject", "reason"), INVALID_PUBLISH)
def test_invalid_publish_subject(subject: str, reason: str) -> None:
    with pytest.raises(BadSubjectError) as info:
        validate_subject(subject)
    message = str(info.value)
    assert repr(subject) in message
    assert reason in message
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("char", FORBIDDEN_CHARS)
@pytest.mark.parametrize("template", ["{}", "{}foo", "foo{}", "foo.{}", "foo.b{}r.baz"])
def test_every_forbidden_character_is_refused(char: str, template: str) -> None:
    subject = template.format(char)
    with pytest.raises(BadSubjectError, match="invalid subject"):
        validate_subject(subject)
    with pytest.raises(BadSubjectError, match="invalid subscribe subject"):
        validate_subscribe_subject(subject)


@pytest.mark.parametrize("subject", VALID_SUBSCRIBE)
def test_valid_subscribe_subject(subject: str) -> None:
    validate_subscribe_subject(subject)


@pytest.mark.parametrize(("subject", "reason"), INVALID_SUBSCRIBE)
def test_invalid_subscribe_subject(subject: str, reason: str) -> None:
    with pytest.raises(BadSubjectError) as info:
        validate_subscribe_subject(subject)
    assert repr(subject) in str(info.value)
    assert reason in str(info.value)


@pytest.mark.parametrize("queue", ["q", "workers", "a.b", "*", ">", "grp-1_x", "ünï"])
def test_valid_queue(queue: str) -> None:
    validate_queue(queue)


@pytest.mark.parametrize(
    ("queue", "reason"),
    [
        ("", "is empty"),
        ("a b", "space"),
        ("a\tb", "tab"),
        ("a\r", "carriage return"),
        ("a\n", "line feed"),
        ("\x00", "NUL"),
        ("a\x7f", "control character"),
        ("a\x1e", "control character"),
    ],
)
def test_invalid_queue(queue: str, reason: str) -> None:
    with pytest.raises(BadSubjectError) as info:
        validate_queue(queue)
    assert repr(queue) in str(info.value)
    assert reason in str(info.value)


# --- properties: the fast path agrees with a plain reference definition -------


def _char_ok(ch: str) -> bool:
    return ord(ch) > 0x20 and ch != "\x7f"


def reference_publish_ok(subject: str) -> bool:
    tokens = subject.split(".")
    return all(t and t not in ("*", ">") and all(map(_char_ok, t)) for t in tokens)


def reference_subscribe_ok(subject: str) -> bool:
    tokens = subject.split(".")
    if ">" in tokens[:-1]:
        return False
    return all(t and all(map(_char_ok, t)) for t in tokens)


# An alphabet dense in the characters that matter, plus some of everything else.
_tricky = st.sampled_from(["a", "b", ".", "*", ">", " ", "\t", "\r", "\n", "\x00", "\x7f", "é"])
subject_text = st.text(alphabet=st.one_of(_tricky, st.characters()), max_size=24)


@settings(max_examples=examples(2000), deadline=None)
@given(subject_text)
def test_publish_validation_matches_reference(subject: str) -> None:
    try:
        validate_subject(subject)
    except BadSubjectError:
        assert not reference_publish_ok(subject)
    else:
        assert reference_publish_ok(subject)


@settings(max_examples=examples(2000), deadline=None)
@given(subject_text)
def test_subscribe_validation_matches_reference(subject: str) -> None:
    try:
        validate_subscribe_subject(subject)
    except BadSubjectError:
        assert not reference_subscribe_ok(subject)
    else:
        assert reference_subscribe_ok(subject)


@settings(max_examples=examples(500), deadline=None)
@given(subject_text)
def test_queue_validation_matches_reference(queue: str) -> None:
    try:
        validate_queue(queue)
    except BadSubjectError:
        assert not (queue and all(map(_char_ok, queue)))
    else:
        assert queue and all(map(_char_ok, queue))


# --- NUID and inboxes ------------------------------------------------------------

NUID_RE = re.compile(r"[0-9A-Za-z]{22}")
BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _decode62(text: str) -> int:
    value = 0
    for ch in text:
        value = value * 62 + BASE62.index(ch)
    return value


def test_nuid_format_and_uniqueness_over_100k() -> None:
    gen = Nuid()
    ids = [gen.next() for _ in range(100_000)]
    assert len(set(ids)) == len(ids)
    assert all(NUID_RE.fullmatch(i) for i in ids)


def test_nuid_sequence_increases_by_a_bounded_step_under_one_prefix() -> None:
    gen = Nuid()
    ids = [gen.next() for _ in range(10_000)]
    prefixes = {i[:12] for i in ids}
    steps = set()
    for before, after in itertools.pairwise(ids):
        if before[:12] == after[:12]:
            steps.add(_decode62(after[12:]) - _decode62(before[12:]))
    # One prefix rolls over at most once or twice in 10k ids (62**10 is vast).
    assert len(prefixes) <= 2
    assert len(steps) == 1
    (step,) = steps
    assert 33 <= step < 333


def test_nuid_instances_differ() -> None:
    a, b = Nuid(), Nuid()
    assert a.next()[:12] != b.next()[:12]


def test_nuid_rolls_prefix_when_the_sequence_is_used_up() -> None:
    gen = Nuid()
    first = gen.next()
    # Put the sequence at its very last value: the next step must overflow.
    gen._high = subjects._HIGH_SPAN - 1
    gen._low = subjects._LOW_SPAN - 1
    gen._head = gen._prefix + subjects._base62(gen._high, 8)
    assert _decode62(gen._head[12:] + "zz") == 62**10 - 1
    rolled = gen.next()
    assert NUID_RE.fullmatch(rolled)
    assert rolled[:12] != first[:12]
    assert NUID_RE.fullmatch(gen.next())


def test_nuid_carry_into_high_digits() -> None:
    gen = Nuid()
    gen._low = subjects._LOW_SPAN - 1
    before = gen.next()
    assert NUID_RE.fullmatch(before)
    assert before[:12] == gen._prefix
    # The low digits wrapped, so the next value is strictly greater.
    after = gen.next()
    assert _decode62(after[12:]) > _decode62(before[12:])


def test_reset_draws_a_new_prefix() -> None:
    gen = Nuid()
    old = gen.next()
    gen.reset()
    assert gen.next()[:12] != old[:12]


def test_next_nuid_uses_one_shared_generator() -> None:
    a, b = next_nuid(), next_nuid()
    assert NUID_RE.fullmatch(a) and NUID_RE.fullmatch(b)
    assert a != b
    assert subjects._shared.next()[:12] == subjects._shared._prefix


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_gets_a_new_prefix() -> None:
    parent = next_nuid()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        try:
            os.write(write_end, next_nuid().encode())
        finally:
            os._exit(0)
    os.close(write_end)
    child = os.read(read_end, 64).decode()
    os.close(read_end)
    os.waitpid(pid, 0)
    assert NUID_RE.fullmatch(child)
    assert child[:12] != parent[:12]


def test_new_inbox() -> None:
    inbox = new_inbox()
    prefix, _, nuid = inbox.partition(".")
    assert prefix == "_INBOX"
    assert NUID_RE.fullmatch(nuid)
    validate_subject(inbox)
    assert new_inbox() != inbox


def test_new_inbox_custom_prefix() -> None:
    inbox = new_inbox("_INBOX.app.7")
    assert inbox.startswith("_INBOX.app.7.")
    assert NUID_RE.fullmatch(inbox.rsplit(".", 1)[1])
    validate_subject(inbox)


@pytest.mark.parametrize(
    ("pattern", "subject", "matches"),
    [
        ("a.b", "a.b", True),
        ("a.b", "a.c", False),
        ("a.*", "a.b", True),
        ("a.*", "a.b.c", False),
        ("a.>", "a.b.c", True),
        ("a.>", "a", False),
        ("*.b", "a.b", True),
        ("a.b.c", "a.b", False),
        (">", "x", True),
    ],
)
def test_subject_matches_a_filter(pattern: str, subject: str, matches: bool) -> None:
    assert subject_matches(pattern, subject) is matches
