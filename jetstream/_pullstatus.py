"""The statuses a pull's inbox receives, and what each means: one table for every pull.

A pull request is answered on its inbox by messages and by status messages (an HMSG
whose header block has a status line and no payload). The one-shot fetches
(``_fetch.py``) and the continuous ``MessageStream`` (``_pull.py``) read them through
``pull_status``, and each decides what to do for each kind:

===============  ===================================================================
kind             statuses
===============  ===================================================================
``HEARTBEAT``    100 idle heartbeat: proof of life (a flag the heartbeat timer reads)
``ENDED``        404 no messages, 408 request timeout, 409 "Message Size Exceeds
                 MaxBytes" / "Batch Completed": a pull request ended; the counts of
                 what it will no longer deliver come in Nats-Pending-Messages/-Bytes
                 (ADR-37)
``REFUSED``      409 "Exceeded MaxWaiting": the request ended without being queued
                 (too many pulls wait on the consumer); its counts come as above
``LEADER``       409 "Leadership Change": the requests are gone with the old leader;
                 a new one is in place
``SHUTDOWN``     409 "Server Shutdown": the requests are gone with the server
``PIN_STALE``    423 pin id mismatch (pinned priority groups): forget the pin
``NO_LEADER``    503: no consumer leader answered (an election, a restart)
``DELETED``      409 "Consumer Deleted": terminal
``TERMINAL``     any other (409 "Consumer is push based", 400, ...): terminal
===============  ===================================================================
"""

from __future__ import annotations

__all__ = [
    "DELETED",
    "ENDED",
    "HEARTBEAT",
    "LEADER",
    "NO_LEADER",
    "PIN_STALE",
    "REFUSED",
    "SHUTDOWN",
    "TERMINAL",
    "pull_status",
]

HEARTBEAT = 0
ENDED = 1
REFUSED = 2
LEADER = 3
SHUTDOWN = 4
PIN_STALE = 5
NO_LEADER = 6
DELETED = 7
TERMINAL = 8

#: the statuses whose code alone says what they are
_BY_CODE = {100: HEARTBEAT, 404: ENDED, 408: ENDED, 423: PIN_STALE, 503: NO_LEADER}
#: 409's descriptions, matched in lower case by substring (servers vary the wording)
_CONFLICTS = (
    ("exceeds maxbytes", ENDED),
    ("batch completed", ENDED),
    ("maxwaiting", REFUSED),
    ("leadership change", LEADER),
    ("server shutdown", SHUTDOWN),
    ("consumer deleted", DELETED),
)


def pull_status(status: int, description: str) -> int:
    """The kind of a pull's status message: one of the constants of this module."""
    kind = _BY_CODE.get(status)
    if kind is not None:
        return kind
    if status == 409:
        low = description.lower()
        for text, kind in _CONFLICTS:
            if text in low:
                return kind
    return TERMINAL
