"""The one table of a pull's statuses (``jetstream._pullstatus``): each status the
server sends on a pull's inbox has one kind, whichever pull reads it."""

from __future__ import annotations

import pytest

from jetstream import _pullstatus as ps


@pytest.mark.parametrize(
    ("status", "description", "kind"),
    [
        (100, "Idle Heartbeat", ps.HEARTBEAT),
        (404, "No Messages", ps.ENDED),
        (408, "Request Timeout", ps.ENDED),
        (409, "Message Size Exceeds MaxBytes", ps.ENDED),
        (409, "Batch Completed", ps.ENDED),
        (409, "Exceeded MaxWaiting", ps.REFUSED),
        (409, "Leadership Change", ps.LEADER),
        (409, "Server Shutdown", ps.SHUTDOWN),
        (409, "Consumer Deleted", ps.DELETED),
        (409, "Consumer is push based", ps.TERMINAL),
        (400, "Bad Request", ps.TERMINAL),
        (423, "Nats-Pin-Id mismatch", ps.PIN_STALE),
        (503, "", ps.NO_LEADER),
    ],
)
def test_each_status_has_one_kind(status: int, description: str, kind: int) -> None:
    assert ps.pull_status(status, description) == kind
    assert ps.pull_status(status, description.upper()) == kind  # wording's case varies
