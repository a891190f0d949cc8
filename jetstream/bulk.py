"""Bulk reading and writing: for integrations that move many messages a call.

An application reads and writes a message at a time (``messages()``, ``publish_async``)
and needs nothing here. A bulk integration (the PySpark source and sink,
``jetstream.spark``) moves rows by the thousand, and these calls spare it an object per
message:

- **reading in runs**: ``use_bulk_parse`` gives a connection a bulk parser (a
  ``protocol.ops.BulkParse``, such as the Spark source's NumPy one), ``ordered_runs``
  makes an ordered consumer's stream read in runs of messages (``protocol.ops.MsgRun``)
  and ``take_runs`` takes them, with no message object made;
- **writing rows**: ``publish_rows`` publishes pre-encoded rows through the
  ``publish_async`` window with no future per row, an ``AckTracker`` hearing of each
  ack or failure; ``msg_id_headers`` makes the headers of a row with a message id
  (as ``publish(..., msg_id=...)`` sends them); ``abandon_publishes`` fails what still
  waits for its ack, for a writer that gives up and will publish those rows again;
- **retrying until a deadline**: ``Backoff``, the pauses between the attempts of a call
  that ends at a deadline (from about 50 ms, doubling to about 1 s, with jitter), the
  one retry helper of the package, for an integration's own resends.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ._pubasync import AckTracker
from ._publish import Publishing
from ._pull import PullOptions
from ._retry import Backoff
from .errors import TimeoutError as NatsTimeoutError
from .ordered import OrderedConsumer, OrderedStream
from .protocol.headers import HeadersLike

if TYPE_CHECKING:
    from .core import Client
    from .protocol.ops import BulkParse, MsgRun

__all__ = [
    "AckTracker",
    "Backoff",
    "abandon_publishes",
    "msg_id_headers",
    "ordered_runs",
    "publish_rows",
    "take_runs",
    "use_bulk_parse",
]


def use_bulk_parse(nc: Client, bulk: BulkParse | None) -> None:
    """Parse the feeds of ``nc`` with ``bulk`` first, now and after every reconnect:
    where ``bulk`` cuts a run of messages out of a feed, the run goes whole to its
    subscription (read with ``take_runs``). None goes back to the parser's own ops."""
    nc.use_bulk_parse(bulk)


def ordered_runs(
    oc: OrderedConsumer,
    *,
    max_messages: int = 500,
    expires: float = 30.0,
    heartbeat: float | None = None,
) -> OrderedStream:
    """``oc.messages()`` read in runs (pull consumers only): every message in order,
    taken with ``take_runs``, with no message object made."""
    hb = heartbeat if heartbeat is not None else min(expires / 2, 5.0)
    opts = PullOptions(batch=max_messages, expires=expires, heartbeat=hb)
    return OrderedStream(oc, opts, runs=True)


async def take_runs(stream: OrderedStream, timeout: float = 30.0) -> list[MsgRun]:
    """``take_many`` of a stream of ``ordered_runs``: the messages as runs, the last one
    cut where the messages in order end.

    Raises:
        TypeError: ``stream`` was not made by ``ordered_runs``.
        TimeoutError: nothing came in time.
    """
    return await stream._take_runs(timeout)


def msg_id_headers(headers: HeadersLike | None, msg_id: str) -> HeadersLike:
    """The headers of a publish with ``msg_id``: ``headers`` and the ``Nats-Msg-Id``
    (what ``publish(..., msg_id=...)`` sends), for a writer that encodes its rows
    itself (``publish_rows``)."""
    h = Publishing._publish_headers(headers, msg_id, None, None, None, None, None)
    assert h is not None
    return h


async def publish_rows(
    js: Publishing,
    rows: Sequence[tuple[str, bytes | bytearray | memoryview, bytes | None, Any]],
    tracker: AckTracker,
    *,
    timeout: float | None = None,
) -> None:
    """Publish many messages through ``js``'s ``publish_async`` window with no future of
    their own.

    Each row is ``(subject, data, header block or None, anything)``, the header block
    already encoded (``protocol.headers.encode_headers``); ``tracker.acked(ack)`` or
    ``tracker.failed(row, exc)`` hears of each, from the read path. Returns once every
    row is written, waiting for room in the window as a ``publish_async`` does (for at
    most ``timeout`` seconds at a time; default: the context's timeout); then
    ``js.publish_async_complete()`` waits for the acks.

    Raises:
        PublishWindowFullError: no room came within ``timeout``.
        BadSubjectError, MaxPayloadError: a row refused before it is sent (the rows
            before it are sent and tracked).
    """
    pub = js._publisher
    sent = 0
    while True:
        sent = pub.try_publish_rows(rows, sent, tracker)
        if sent == len(rows):
            return
        await pub._wait_room(pub.timeout if timeout is None else timeout)
        await js._nc.wait_writable()


def abandon_publishes(js: Publishing, reason: str) -> None:
    """Fail every ``publish_async`` and ``publish_rows`` message of ``js`` still waiting
    for its ack, now, with a ``TimeoutError(reason)`` (a keyed message, one with a
    ``msg_id``, is kept to be sent again while its deadline lasts): for a writer that
    gave up waiting in ``publish_async_complete`` and will publish those again."""
    js._publisher._on_loss(NatsTimeoutError(reason))
