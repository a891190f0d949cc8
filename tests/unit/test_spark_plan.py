"""The ``jetstream`` source's batch planning (``spark/_plan.py``): read limits, the
``availableNow`` target, data loss; a pure function of offsets and the stream's state."""

from __future__ import annotations

import logging

import pytest

from jetstream.spark import SparkConfigError, SparkDataLossError
from jetstream.spark._plan import Limits, plan, stored_size

ALL = Limits()


def test_reads_up_to_the_stream_and_the_row_limit() -> None:
    assert plan("S", {"seq": 1}, 1, 100, ALL).offset({"seq": 1}) == {"seq": 101}
    limits = Limits(max_rows=25)
    assert plan("S", {"seq": 1}, 1, 100, limits).offset({"seq": 1}) == {"seq": 26}
    # ReadAllAvailable from Spark ignores the source's own limits
    assert plan("S", {"seq": 1}, 1, 100, limits, read_all=True).end == 101
    # nothing new: the start offset itself
    assert plan("S", {"seq": 101}, 1, 100, limits).offset({"seq": 101}) == {"seq": 101}


def test_the_available_now_target_caps_every_batch() -> None:
    limits = Limits(max_rows=30)
    ends = []
    start = {"seq": 1}
    while True:
        end = plan("S", start, 1, 500, limits, target=101).offset(start)
        if end == start:
            break
        ends.append(end["seq"])
        start = end
    assert ends == [31, 61, 91, 101]


def test_min_rows_waits_until_the_delay_has_passed() -> None:
    limits = Limits(min_rows=50, max_trigger_delay=60.0)
    p = plan("S", {"seq": 1}, 1, 10, limits, waited=1.0)
    assert p.wait and p.offset({"seq": 1}) == {"seq": 1}
    assert plan("S", {"seq": 1}, 1, 10, limits, waited=61.0).end == 11
    assert plan("S", {"seq": 1}, 1, 60, limits, waited=1.0).end == 61
    # never under availableNow: it would wait forever at the end
    assert plan("S", {"seq": 1}, 1, 10, limits, waited=1.0, target=11).end == 11


def test_a_removed_head_is_data_loss_unless_told_otherwise(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with pytest.raises(SparkDataLossError) as err:
        plan("S", {"seq": 5}, 40, 100, ALL)
    text = str(err.value)
    assert "stream 'S'" in text and "sequences 5-39 were removed" in text
    assert "fail_on_data_loss=false" in text
    skip = Limits(max_rows=10, fail_on_data_loss=False)
    with caplog.at_level(logging.WARNING, logger="jetstream.spark"):
        p = plan("S", {"seq": 5, "lost": 3}, 40, 100, skip)
    assert (p.first, p.end, p.lost) == (40, 50, 38)
    assert p.offset({"seq": 5, "lost": 3}) == {"seq": 50, "from": 40, "lost": 38}
    assert [r.getMessage() for r in caplog.records] == [
        "stream 'S': sequences 5-39 were removed (limits or a purge) before this query "
        "read them; skipped (fail_on_data_loss=false)"
    ]
    # the running total goes on in later offsets
    assert plan("S", {"seq": 50, "lost": 38}, 40, 100, skip).offset({"seq": 50, "lost": 38}) == {
        "seq": 60,
        "lost": 38,
    }


def test_a_stream_made_again_is_data_loss() -> None:
    with pytest.raises(SparkDataLossError, match="deleted and made again"):
        plan("S", {"seq": 101}, 1, 20, ALL)
    skip = Limits(fail_on_data_loss=False)
    p = plan("S", {"seq": 101}, 1, 20, skip)
    assert (p.first, p.end) == (1, 21)
    assert p.offset({"seq": 101}) == {"seq": 21, "from": 1}


def test_options_are_checked() -> None:
    parse = Limits.parse
    assert parse({"max_trigger_delay": "2m"}).max_trigger_delay == 120.0
    assert parse({"max_trigger_delay": "500ms"}).max_trigger_delay == 0.5
    assert parse({"fail_on_data_loss": "False"}).fail_on_data_loss is False
    for bad in (
        {"fail_on_data_loss": "no"},
        {"max_bytes_per_batch": "0"},
        {"min_rows_per_batch": "many"},
        {"max_trigger_delay": "-1s"},
        {"max_trigger_delay": "soon"},
    ):
        key = next(iter(bad))
        with pytest.raises(SparkConfigError, match=key):
            parse(bad)


def test_stored_size_counts_payload_subject_and_own_headers() -> None:
    class H(dict[str, str]):
        pass

    plain = b"NATS/1.0\r\nNats-Msg-Size: 100\r\n\r\n"
    assert stored_size("a.b", plain, H({"Nats-Msg-Size": "100"})) == 103
    own = b"NATS/1.0\r\nk: v\r\nNats-Msg-Size: 7\r\n\r\n"
    assert stored_size("a", own, H({"Nats-Msg-Size": "7"})) == 7 + 1 + len(
        b"NATS/1.0\r\nk: v\r\n\r\n"
    )
