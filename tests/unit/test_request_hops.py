"""benchmarks.request_hops splits a round trip at the marks of its reads and writes."""

from __future__ import annotations

import pytest

from benchmarks.request_hops import split


def test_a_round_splits_into_seven_parts_that_make_it_up() -> None:
    # requester on connection 1, responder on connection 2
    log = [
        ("w", 1, 10.0, 12.0),
        ("r", 2, 15.0, 15.0),
        ("w", 2, 17.0, 18.5),
        ("r", 1, 25.0, 25.0),
    ]
    (parts,) = split([(9.0, 26.0)], log)
    assert parts == [1.0, 2.0, 3.0, 2.0, 1.5, 6.5, 1.0]
    assert sum(parts) == pytest.approx(26.0 - 9.0)


def test_rounds_with_other_reads_or_writes_are_left_out() -> None:
    good = [("w", 1, 1.0, 2.0), ("r", 2, 3.0, 3.0), ("w", 2, 4.0, 5.0), ("r", 1, 6.0, 6.0)]
    # a PONG written amid the round, then a reply read on the responder's connection
    pong = [("w", 1, 11.0, 12.0), ("r", 2, 13.0, 13.0), ("w", 2, 13.5, 13.6)]
    pong += [("w", 2, 14.0, 15.0), ("r", 1, 16.0, 16.0)]
    wrong = [("w", 1, 21.0, 22.0), ("r", 2, 23.0, 23.0), ("w", 2, 24.0, 25.0)]
    wrong += [("r", 2, 26.0, 26.0)]
    rounds = [(0.5, 7.0), (10.0, 17.0), (20.0, 27.0), (30.0, 31.0)]  # the last saw nothing
    assert split(rounds, good + pong + wrong) == [[0.5, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]]
