"""The Stream handle: info, purge, message get (API and direct), message delete.

Consumer management on a stream lives in ``_stream_consumers.py``, the base of
``Stream``, so that ``stream.create_or_update_consumer(...)`` reads as in the Go client.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from ._context import Context
from ._retry import Backoff
from ._stream_consumers import StreamConsumers
from .api import (
    MsgDeleteRequest,
    MsgDeleteResponse,
    MsgGetRequest,
    MsgGetResponse,
    StreamInfo,
    StreamInfoRequest,
    StreamInfoResponse,
    StreamPurgeRequest,
    StreamPurgeResponse,
)
from .errors import (
    JetStreamApiError,
    JetStreamNotEnabledError,
    MessageNotFoundError,
    ProtocolError,
)
from .errors import TimeoutError as NatsTimeoutError
from .ordered import OrderedConsumer
from .protocol.headers import (
    NATS_SEQUENCE,
    NATS_SUBJECT,
    NATS_TIME_STAMP,
    Headers,
    parse_headers,
)

if TYPE_CHECKING:
    from .core.message import Msg

__all__ = ["Stream", "StreamMsg"]

_EMPTY = Headers()
_TS = msgspec.json.Decoder(_dt.datetime)


class StreamMsg(msgspec.Struct):
    """A message read from a stream by sequence or subject (not through a consumer).

    ``headers`` holds the message's own headers; a direct get also adds the
    server's ``Nats-Stream``, ``Nats-Sequence``, ``Nats-Time-Stamp`` and
    ``Nats-Subject``.
    """

    subject: str
    seq: int
    data: bytes
    time: _dt.datetime
    raw_headers: bytes | None = None
    _headers: Headers | None = None

    @property
    def headers(self) -> Headers:
        h = self._headers
        if h is None:
            h = parse_headers(self.raw_headers)[2] if self.raw_headers else _EMPTY
            self._headers = h
        return h


_SEQ_LINE = b"\r\n" + NATS_SEQUENCE.encode() + b":"
_SUBJECT_LINE = b"\r\n" + NATS_SUBJECT.encode() + b":"
_TS_LINE = b"\r\n" + NATS_TIME_STAMP.encode() + b":"


def _line_value(raw: bytes, line: bytes) -> bytes | None:
    """The value of the first header spelled exactly as ``line`` (``b"\\r\\nName:"``)
    names it, or None."""
    i = raw.find(line)
    if i < 0:
        return None
    i += len(line)
    j = raw.find(b"\r\n", i)
    return raw[i:j].strip(b" \t") if j >= 0 else None


def _direct_msg(msg: Msg, stream: str) -> StreamMsg:
    """Turn a direct-get reply into a StreamMsg (its metadata rides in headers)."""
    raw = msg.raw_headers
    if raw is not None:
        # The server spells its three headers exactly so: find them without parsing
        # the whole block (the first of a repeated key wins, as in Headers). Anything
        # else (another spelling, a bad value) takes the full parse below.
        seq_b = _line_value(raw, _SEQ_LINE)
        subject_b = _line_value(raw, _SUBJECT_LINE)
        stamp = _line_value(raw, _TS_LINE)
        if seq_b and subject_b and stamp and seq_b.isdigit():
            try:
                stored = _TS.decode(b'"' + stamp + b'"')
            except msgspec.DecodeError:
                pass
            else:
                subj = subject_b.decode("utf-8", "replace")
                return StreamMsg(subj, int(seq_b), msg.data, stored, raw)
    h = msg.headers
    try:
        seq = int(h[NATS_SEQUENCE])
        subject = h[NATS_SUBJECT]
        ts = _TS.decode(b'"' + h.get(NATS_TIME_STAMP, "").encode() + b'"')
    except (KeyError, ValueError, msgspec.DecodeError) as exc:
        raise ProtocolError(
            f"direct get on stream {stream!r}: the reply lacks valid Nats-Sequence, "
            f"Nats-Subject or Nats-Time-Stamp headers ({exc})"
        ) from None
    return StreamMsg(subject, seq, msg.data, ts, msg.raw_headers)


def _status_error(msg: Msg, stream: str, request: str) -> JetStreamApiError:
    desc = msg.description or "error"
    if msg.status == 404:
        return MessageNotFoundError(404, 10037, f"stream {stream!r}: {desc}", request=request)
    return JetStreamApiError(msg.status, 0, f"stream {stream!r}: {desc}", request=request)


class Stream(StreamConsumers):
    """A handle on one stream. ``cached_info`` is the info from when it was made."""

    def __repr__(self) -> str:
        return f"<Stream {self.name!r}>"

    @property
    def js(self) -> Context:
        return self._js

    async def ordered_consumer(self, **options: Any) -> OrderedConsumer:
        """An ordered consumer: every message of the stream exactly once, in order,
        recreated from the next expected sequence whenever it breaks (see ``ordered.py``)."""
        return await OrderedConsumer.create(self._js, self.name, handle=self, **options)

    async def info(
        self, *, deleted_details: bool = False, subjects_filter: str | None = None
    ) -> StreamInfo:
        """Fetch the stream's config and state (and refresh ``cached_info``).

        Args:
            deleted_details: also list the deleted sequences (``state.deleted``).
            subjects_filter: also count messages per subject matching this filter
                (``state.subjects``); every page is fetched.
        """
        subjects: dict[str, int] = {}
        offset = 0
        while True:
            req: Any = None
            if deleted_details or subjects_filter:
                req = StreamInfoRequest(
                    deleted_details=deleted_details or msgspec.UNSET,
                    subjects_filter=subjects_filter or msgspec.UNSET,
                    offset=offset or msgspec.UNSET,
                )
            info = await self._js._api(f"STREAM.INFO.{self.name}", req, StreamInfoResponse)
            if not subjects_filter:
                break
            page = info.state.subjects
            subjects.update(page)
            offset += len(page)
            if not page or offset >= info.total:
                info = msgspec.structs.replace(
                    info, state=msgspec.structs.replace(info.state, subjects=subjects)
                )
                break
        self.cached_info = info
        return info

    async def purge(
        self,
        *,
        filter: str | None = None,
        subject: str | None = None,
        seq: int | None = None,
        keep: int | None = None,
    ) -> int:
        """Remove messages; returns how many were purged.

        Args:
            filter: only messages on subjects matching this (``subject`` is an alias).
            seq: purge everything below this sequence.
            keep: keep this many of the newest messages.

        Raises:
            ValueError: ``seq`` and ``keep`` together (nothing is sent).
        """
        if seq is not None and keep is not None:
            raise ValueError("purge takes seq or keep, not both")
        subj = filter if filter is not None else subject
        req = StreamPurgeRequest(
            filter=subj if subj is not None else msgspec.UNSET,
            seq=seq if seq is not None else msgspec.UNSET,
            keep=keep if keep is not None else msgspec.UNSET,
        )
        resp = await self._js._api(f"STREAM.PURGE.{self.name}", req, StreamPurgeResponse)
        return resp.purged

    async def delete_msg(self, seq: int, *, erase: bool = True) -> bool:
        """Delete the message at ``seq``; ``erase`` overwrites it on disk too.

        Raises:
            MessageNotFoundError: no message at that sequence.
        """
        req = MsgDeleteRequest(seq=seq, no_erase=(not erase) or msgspec.UNSET)
        resp = await self._js._api(f"STREAM.MSG.DELETE.{self.name}", req, MsgDeleteResponse)
        return resp.success

    async def get_msg(
        self,
        seq: int | None = None,
        *,
        last_by_subject: str | None = None,
        next_by_subject: str | None = None,
        direct: bool | None = None,
    ) -> StreamMsg:
        """Read one message: by sequence, the last on a subject, or the next on a subject
        at or after ``seq``.

        ``direct`` picks the direct-get API (any replica answers, no JSON); by default
        it is used when the stream has ``allow_direct``.

        Raises:
            MessageNotFoundError: no such message.
        """
        if seq is None and last_by_subject is None and next_by_subject is None:
            raise ValueError("get_msg needs seq, last_by_subject or next_by_subject")
        if last_by_subject is not None and (seq is not None or next_by_subject is not None):
            raise ValueError("last_by_subject cannot be combined with seq or next_by_subject")
        if direct is None:
            direct = bool(self.cached_info.config.allow_direct)
        req = MsgGetRequest()
        if last_by_subject is not None:
            req.last_by_subj = last_by_subject
        else:
            if seq is not None:
                req.seq = seq
            if next_by_subject is not None:
                req.next_by_subj = next_by_subject
                if seq is None:
                    req.seq = 0
        if direct:
            return await self._direct_get(req, last_by_subject)
        resp = await self._js._api(f"STREAM.MSG.GET.{self.name}", req, MsgGetResponse)
        m = resp.message
        return StreamMsg(m.subject, m.seq, m.data, m.time, m.hdrs or None)

    async def get_last_msg_for(self, subject: str, *, direct: bool | None = None) -> StreamMsg:
        """The last message on ``subject`` (see ``get_msg``)."""
        return await self.get_msg(last_by_subject=subject, direct=direct)

    async def _direct_get(self, req: MsgGetRequest, last_by_subject: str | None) -> StreamMsg:
        js = self._js
        if last_by_subject is not None:
            suffix = f"DIRECT.GET.{self.name}.{last_by_subject}"
            body = b""
        else:
            suffix = f"DIRECT.GET.{self.name}"
            body = msgspec.json.encode(req)
        # The 503 policy of direct gets (see _direct_batch).
        backoff = Backoff.within(js.timeout)
        while True:
            try:
                msg = await js._request(suffix, body, timeout=max(backoff.left(), 0.05))
                break
            except JetStreamNotEnabledError:
                if not await backoff.pause():
                    raise
        if msg.status:
            raise _status_error(msg, self.name, js.api_subject(suffix))
        return _direct_msg(msg, self.name)

    async def get_msgs(
        self,
        *,
        batch: int,
        seq: int | None = None,
        start_time: _dt.datetime | None = None,
        subject: str | None = None,
        max_bytes: int | None = None,
        timeout: float | None = None,
    ) -> list[StreamMsg]:
        """Batched direct get: up to ``batch`` messages from ``seq`` (or ``start_time``),
        optionally only on subjects matching ``subject``. Needs ``allow_direct``."""
        req = MsgGetRequest(batch=batch)
        if start_time is not None:
            req.start_time = start_time
        else:
            req.seq = seq if seq is not None else 1
        if subject is not None:
            req.next_by_subj = subject
        if max_bytes is not None:
            req.max_bytes = max_bytes
        return await self._direct_msgs(req, timeout)

    async def get_last_msgs_for(
        self,
        subjects: Sequence[str],
        *,
        up_to_seq: int | None = None,
        up_to_time: _dt.datetime | None = None,
        batch: int | None = None,
        timeout: float | None = None,
    ) -> list[StreamMsg]:
        """The last message of each subject matching ``subjects`` (multi-last direct get),
        as of ``up_to_seq`` / ``up_to_time`` when given. Needs ``allow_direct``."""
        req = MsgGetRequest(multi_last=list(subjects))
        if up_to_seq is not None:
            req.up_to_seq = up_to_seq
        if up_to_time is not None:
            req.up_to_time = up_to_time
        if batch is not None:
            req.batch = batch
        return await self._direct_msgs(req, timeout)

    async def _direct_msgs(self, req: MsgGetRequest, timeout: float | None) -> list[StreamMsg]:
        """The messages of one batched direct get; nothing matched is an error."""
        out, end = await self._direct_batch(req, timeout)
        if end.status != 204 and not out:
            raise _status_error(end, self.name, self._js.api_subject(f"DIRECT.GET.{self.name}"))
        return out

    async def _direct_batch(
        self, req: MsgGetRequest, timeout: float | None
    ) -> tuple[list[StreamMsg], Msg]:
        """One batched direct get (every batched read of the package is this one): the
        messages, and the status that ended the batch: 204 (its headers say what is
        left, ``Nats-Num-Pending``, and up to which sequence the server looked), 404
        (nothing matched) or 413 (too many subjects matched).

        The one 503 policy of direct gets, ``get_msg``'s too: a stream's replicas answer
        direct gets only while they are current, and their interest reaches the other
        servers a moment late (a stream just made or moved, a replica catching up), so
        no responders before any message came is asked again with backoff within the
        timeout; then it fails as an unanswered JetStream API request does
        (``JetStreamNotEnabledError``).
        """
        js = self._js
        nc = js.client
        t = js.timeout if timeout is None else timeout
        subject = js.api_subject(f"DIRECT.GET.{self.name}")
        body = msgspec.json.encode(req)
        backoff = Backoff.within(t)
        while True:
            inbox = nc.new_inbox()
            sub = await nc.subscribe(inbox)
            out: list[StreamMsg] = []
            try:
                await nc.publish(subject, body, reply=inbox)
                while True:
                    try:
                        msg = await sub.next_msg(timeout=max(backoff.left(), 0.01))
                    except NatsTimeoutError:
                        raise NatsTimeoutError(
                            f"direct get batch on {self.name!r}: no reply within {t}s "
                            f"after {len(out)} message(s)"
                        ) from None
                    if msg.status in (204, 404, 413):  # the batch ended
                        return out, msg
                    if msg.status == 503 and not out:
                        break
                    if msg.status:
                        raise _status_error(msg, self.name, subject)
                    out.append(_direct_msg(msg, self.name))
            finally:
                await sub.unsubscribe()
            if not await backoff.pause():
                raise JetStreamNotEnabledError(
                    503, 10076, f"no JetStream responded on {subject} within {t}s", request=subject
                )
