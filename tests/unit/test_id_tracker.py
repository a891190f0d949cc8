"""The soak's id tracker: small for millions of ids, and still exact."""

from __future__ import annotations

import random

import pytest

from tests.faults.ids import IdTracker

N = 2_000_000


def test_two_million_ids_fit_in_under_a_megabyte() -> None:
    seen = IdTracker()
    for i in range(N):
        seen.add(i)
    assert seen.nbytes() < 1024 * 1024
    assert seen.nbytes() >= N // 8  # one bit an id: the measure sees the bitmap
    assert seen.distinct == N
    assert seen.duplicates == 0
    assert seen.missing_count(N) == 0
    assert seen.missing(N) == []


def test_finds_a_missing_and_a_duplicated_id_among_two_million() -> None:
    seen = IdTracker()
    for i in range(N):
        if i != 1_234_567:
            seen.add(i)
    assert seen.add(42) is False  # a redelivery
    assert seen.nbytes() < 1024 * 1024
    assert seen.distinct == N - 1
    assert seen.duplicates == 1
    assert seen.missing_count(N) == 1
    assert seen.missing(N) == [1_234_567]
    assert 1_234_567 not in seen
    assert 42 in seen


def test_out_of_order_ids() -> None:
    ids = list(range(10_000))
    random.Random(7).shuffle(ids)
    seen = IdTracker()
    for i in ids[:-3]:
        assert seen.add(i) is True
    assert seen.missing_count(10_000) == 3
    assert seen.missing(10_000) == sorted(ids[-3:])
    assert seen.missing(10_000, limit=2) == sorted(ids[-3:])[:2]
    for i in ids[-3:]:
        seen.add(i)
    assert seen.missing_count(10_000) == 0
    assert seen.duplicates == 0


def test_edges() -> None:
    seen = IdTracker()
    assert seen.missing_count(0) == 0
    assert seen.missing_count(9) == 9
    assert seen.missing(3) == [0, 1, 2]
    seen.add(7)
    seen.add(8)
    assert seen.high == 9
    assert seen.missing_count(9) == 7
    assert seen.missing_count(8) == 7  # 8 is beyond
    assert seen.missing(9) == [0, 1, 2, 3, 4, 5, 6]
    assert -1 not in seen
    with pytest.raises(ValueError, match="ids are non-negative, not -1"):
        seen.add(-1)


def test_a_set_of_the_same_ids_would_not_fit() -> None:
    # What the tracker replaces: the bound above is one a set of ints cannot meet.
    as_set = set(range(N))
    assert as_set.__sizeof__() > 1024 * 1024
