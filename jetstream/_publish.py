"""Publishing to streams: ``publish`` (awaits the PubAck, retried within its deadline),
``publish_async`` (a bounded window of outstanding acks, ``_pubasync.py``) and the
atomic ``publish_batch``; mixed into the JetStream context (``js.py``)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

from ._leaders import NO_STREAM, SubjectStreams, no_stream_error
from ._pubasync import AsyncPublisher
from ._retry import RETRY_BASE, RETRY_CAP, Backoff, attempt_timeout
from .api import PubAck, decode_response
from .core.client import Client
from .errors import (
    DisconnectedError,
    DuplicateMessageConflictError,
    JetStreamApiError,
    NatsError,
    NoRespondersError,
)
from .errors import TimeoutError as NatsTimeoutError
from .protocol.headers import (
    NATS_EXPECTED_LAST_MSG_ID,
    NATS_EXPECTED_LAST_SEQUENCE,
    NATS_EXPECTED_LAST_SUBJECT_SEQUENCE,
    NATS_EXPECTED_STREAM,
    NATS_MSG_ID,
    NATS_TTL,
    Headers,
    HeadersLike,
)
from .protocol.subjects import next_nuid

__all__ = ["Publishing", "ttl_value"]

NATS_BATCH_ID = "Nats-Batch-Id"
NATS_BATCH_SEQUENCE = "Nats-Batch-Sequence"
NATS_BATCH_COMMIT = "Nats-Batch-Commit"


def ttl_value(ttl: float | str) -> str:
    """The ``Nats-TTL`` header value for a per-message TTL in seconds (or 'never')."""
    if isinstance(ttl, str):
        return ttl
    if ttl <= 0:
        raise ValueError("ttl must be positive (or 'never')")
    if float(ttl).is_integer():
        return f"{int(ttl)}s"
    return f"{round(ttl * 1000)}ms"


class Publishing:
    """Mixed into the JetStream context: publishing, with and without waiting for acks."""

    _nc: Client
    timeout: float
    _publisher: AsyncPublisher
    _streams: SubjectStreams

    @staticmethod
    def _publish_headers(
        headers: HeadersLike | None,
        msg_id: str | None,
        expected_stream: str | None,
        expected_last_seq: int | None,
        expected_last_subject_seq: int | None,
        expected_last_msg_id: str | None,
        ttl: float | str | None,
    ) -> HeadersLike | None:
        if (
            msg_id is None
            and expected_stream is None
            and expected_last_seq is None
            and expected_last_subject_seq is None
            and expected_last_msg_id is None
            and ttl is None
        ):
            return headers
        only_id = (
            expected_stream is None
            and expected_last_seq is None
            and expected_last_subject_seq is None
            and expected_last_msg_id is None
            and ttl is None
        )
        if only_id and headers is None and msg_id is not None:
            return {NATS_MSG_ID: msg_id}  # an id alone: a plain dict encodes fastest
        h = Headers(headers) if isinstance(headers, Mapping) else Headers()
        if msg_id is not None:
            h[NATS_MSG_ID] = msg_id
        if expected_stream is not None:
            h[NATS_EXPECTED_STREAM] = expected_stream
        if expected_last_seq is not None:
            h[NATS_EXPECTED_LAST_SEQUENCE] = str(expected_last_seq)
        if expected_last_subject_seq is not None:
            h[NATS_EXPECTED_LAST_SUBJECT_SEQUENCE] = str(expected_last_subject_seq)
        if expected_last_msg_id is not None:
            h[NATS_EXPECTED_LAST_MSG_ID] = expected_last_msg_id
        if ttl is not None:
            h[NATS_TTL] = ttl_value(ttl)
        return h

    async def publish(
        self,
        subject: str,
        data: bytes | bytearray | memoryview = b"",
        *,
        headers: HeadersLike | None = None,
        msg_id: str | None = None,
        expected_stream: str | None = None,
        expected_last_seq: int | None = None,
        expected_last_subject_seq: int | None = None,
        expected_last_msg_id: str | None = None,
        ttl: float | str | None = None,
        timeout: float | None = None,
        retry_attempts: int | None = None,
        retry_wait: float = RETRY_BASE,
    ) -> PubAck:
        """Publish to a stream and wait for its ``PubAck``, for at most ``timeout`` seconds.

        ``timeout`` is the deadline of the whole call, retries included. No
        responders (a 503: nothing was stored) while a stream stores the subject (it is
        electing a leader, restarting) is retried with backoff and jitter, from about
        ``retry_wait`` seconds up to about 1 s (or ``retry_wait``, if more), until the
        deadline, and at once when the stream's new leader is announced. If no stream
        stores the subject (asked of the server after the first 503), the call fails at
        once with ``NoStreamError``. With a ``msg_id``, a
        lost connection and an attempt left unanswered are retried too: the stream
        deduplicates the id inside its duplicate window, so a retry never stores the
        message twice, and so is the answer that an earlier attempt of the id is still
        being stored (10158, on a replicated stream). Without one those raise at once,
        since the message may have been stored.

        Args:
            msg_id: ``Nats-Msg-Id``, for deduplication (and safe retries).
            expected_stream: the stream that must store it (checked by the server,
                like the other ``expected_*`` options).
            expected_last_seq: the stream's last sequence must be this.
            expected_last_subject_seq: the last sequence on ``subject`` must be this.
            expected_last_msg_id: the stream's last ``Nats-Msg-Id`` must be this.
            ttl: per-message TTL in seconds (the stream needs ``allow_msg_ttl``).
            timeout: seconds for the whole call (default: the context's).
            retry_attempts: an optional cap on the retries (None: until the deadline).
            retry_wait: the first backoff, in seconds (above 1 s: every backoff's until the
                stream's new leader is announced, then the short one).

        Raises:
            NoStreamError: no stream stores ``subject`` (a ``NoRespondersError``).
            NoRespondersError: still no stream answered at the deadline (or after
                ``retry_attempts`` retries); ``attempts`` says how many were made.
            WrongLastSequenceError, WrongLastMsgIdError, StreamNotMatchError...: a
                failed expectation (a ``JetStreamApiError``).
            TimeoutError: no ack in time (``attempts`` and ``__cause__`` say more).
            DisconnectedError: the connection was lost before the ack, without a
                ``msg_id`` (the message may have been stored).
        """
        h = self._publish_headers(
            headers,
            msg_id,
            expected_stream,
            expected_last_seq,
            expected_last_subject_seq,
            expected_last_msg_id,
            ttl,
        )
        nc = self._nc
        total = self.timeout if timeout is None else timeout
        if nc.tracing is not None:
            from . import _tracing

            return await _tracing.publish(
                nc.tracing,
                subject,
                h,
                len(data),
                lambda th: self._attempts(
                    subject, data, th, msg_id, total, retry_attempts, retry_wait
                ),
            )
        return await self._attempts(subject, data, h, msg_id, total, retry_attempts, retry_wait)

    async def _attempts(
        self,
        subject: str,
        data: bytes | bytearray | memoryview,
        h: HeadersLike | None,
        msg_id: str | None,
        total: float,
        retry_attempts: int | None,
        retry_wait: float,
    ) -> PubAck:
        """``publish`` once its headers are made: the first attempt, then (when it
        failed in a way worth another) ``_publish_retry`` until the deadline."""
        nc = self._nc
        start = nc.loop.time()
        try:  # the common case: answered at the first attempt
            first_wait = total if msg_id is None else attempt_timeout(total)
            msg = await nc.request(subject, data, timeout=first_wait, headers=h)
            return decode_response(msg.data, PubAck, subject)
        except NoRespondersError as exc:
            first: NatsError = exc
        except (DisconnectedError, NatsTimeoutError, DuplicateMessageConflictError) as exc:
            # A 10158 (only with an id): an earlier attempt of this id is still being
            # stored; asked again, the stream answers with its ack (as a duplicate).
            if msg_id is None:
                raise
            first = exc
        return await self._publish_retry(
            subject, data, h, msg_id is not None, start + total, first, retry_attempts, retry_wait
        )

    async def _publish_retry(
        self,
        subject: str,
        data: bytes | bytearray | memoryview,
        headers: HeadersLike | None,
        keyed: bool,
        deadline: float,
        cause: NatsError,
        retry_attempts: int | None,
        retry_wait: float,
    ) -> PubAck:
        """The rest of ``publish`` after a first attempt that failed with ``cause``."""
        nc = self._nc
        streams = self._streams
        # started again from the shortest when the stream's new leader is announced
        backoff = Backoff(deadline, base=retry_wait, cap=max(RETRY_CAP, retry_wait), floor=0.01)
        attempts = 1
        while True:
            if retry_attempts is not None and attempts > retry_attempts:
                raise _gave_up(cause, subject, attempts, f"(retry_attempts={retry_attempts})")
            delay = backoff.next_pause(share=0.5)
            if delay is None:
                raise _gave_up(cause, subject, attempts, "before the call's deadline")
            if isinstance(cause, NoRespondersError):
                # Is there a stream to wait for? (Asked once, after the first 503.)
                if streams.stream_of(subject) == NO_STREAM:
                    raise no_stream_error(subject, attempts) from cause
                woken = await streams.pause(subject, delay)
                if woken is False:
                    raise no_stream_error(subject, attempts) from cause
                if woken:
                    # the new leader is there: a 503 now only means that its interest
                    # has not reached this server yet, so the short backoff from here on
                    # (not the caller's long retry_wait)
                    backoff.restart()
            else:
                await asyncio.sleep(delay)
            left = backoff.left()
            attempts += 1
            try:
                msg = await nc.request(
                    subject, data, timeout=attempt_timeout(left) if keyed else left, headers=headers
                )
                return decode_response(msg.data, PubAck, subject)
            except NoRespondersError as exc:
                cause = exc
            except (DisconnectedError, NatsTimeoutError, DuplicateMessageConflictError) as exc:
                if not keyed:
                    raise _gave_up(exc, subject, attempts, "(no msg_id: not retried)") from exc
                cause = exc

    async def publish_batch(
        self,
        messages: Sequence[tuple[str, bytes] | tuple[str, bytes, HeadersLike | None]],
        *,
        timeout: float | None = None,
    ) -> PubAck:
        """Publish up to 1000 messages as one atomic batch: all are stored, or none.

        The stream needs ``allow_atomic`` (server 2.12+). The first message opens the
        batch (the server confirms it), the middle ones follow without waiting, and the
        last one commits it; its ``PubAck`` has ``batch`` and ``count`` set and ``seq``
        is the sequence of the last message.

        Raises:
            ValueError: no messages, or more than 1000 (nothing is sent).
            JetStreamApiError: the server refused the batch (then nothing was stored).
        """
        n = len(messages)
        if not 0 < n <= 1000:
            raise ValueError(f"an atomic batch holds 1 to 1000 messages, not {n}")
        t = self.timeout if timeout is None else timeout
        batch_id = next_nuid()
        nc = self._nc
        for i, item in enumerate(messages, 1):
            subject, data = item[0], item[1]
            extra = item[2] if len(item) > 2 else None
            h = Headers(extra) if extra else Headers()
            h[NATS_BATCH_ID] = batch_id
            h[NATS_BATCH_SEQUENCE] = str(i)
            if i == n:
                h[NATS_BATCH_COMMIT] = "1"
                msg = await nc.request(subject, data, timeout=t, headers=h)
                if msg.status == 503:
                    raise NoRespondersError(f"no stream answered the batch on {subject!r}")
                return decode_response(msg.data, PubAck, subject)
            if i == 1:
                msg = await nc.request(subject, data, timeout=t, headers=h)
                if msg.status == 503:
                    raise NoRespondersError(f"no stream answered the batch on {subject!r}")
                if msg.data:  # an empty reply opens the batch; a PubAck here is an error
                    decode_response(msg.data, PubAck, subject)
            else:
                await nc.publish(subject, data, headers=h)
        raise AssertionError("unreachable")  # pragma: no cover

    async def publish_async(
        self,
        subject: str,
        data: bytes | bytearray | memoryview = b"",
        *,
        headers: HeadersLike | None = None,
        msg_id: str | None = None,
        expected_stream: str | None = None,
        expected_last_seq: int | None = None,
        expected_last_subject_seq: int | None = None,
        expected_last_msg_id: str | None = None,
        ttl: float | str | None = None,
        timeout: float | None = None,
    ) -> asyncio.Future[PubAck]:
        """Publish without waiting for the ack; returns a future of the ``PubAck``.

        At most ``publish_async_max_pending`` publishes (default 4000) are outstanding:
        when the window is full this waits for room (at most the ack timeout, then
        ``PublishWindowFullError``). ``timeout`` is the future's deadline: no
        responders while a stream stores the subject is sent again with backoff until
        then (and at once when the stream's new leader is announced), and so, with a
        ``msg_id``, is an attempt left unanswered or cut by a lost connection (sent
        again once reconnected). The future always resolves: with the ack, the API
        error, ``NoStreamError`` at once when no stream stores the subject (worded as
        ``publish`` words it), ``NoRespondersError`` or ``TimeoutError`` at the deadline
        (``attempts`` says how many were made), ``DisconnectedError`` when the
        connection is lost (without a ``msg_id``), or ``ConnectionClosedError`` on close.
        """
        h = (
            self._publish_headers(
                headers,
                msg_id,
                expected_stream,
                expected_last_seq,
                expected_last_subject_seq,
                expected_last_msg_id,
                ttl,
            )
            if msg_id is not None
            or ttl is not None
            or expected_stream is not None
            or expected_last_seq is not None
            or expected_last_subject_seq is not None
            or expected_last_msg_id is not None
            else headers
        )
        pub = self._publisher
        keyed = msg_id is not None
        tracing = self._nc.tracing
        if tracing is not None:
            # a send span that ends when the future resolves; its context in the headers
            span, h = tracing.start_send(subject, h, len(data), "publish_async")
        try:
            # The common case without a coroutine of its own: room in the window, socket
            # writable.
            fut = pub.try_publish(subject, data, h, timeout, keyed)
            if fut is None:
                fut = await pub.publish(subject, data, h, timeout, keyed)
            else:
                if self._nc.write_paused:
                    await self._nc.wait_writable()
        except BaseException as exc:
            if tracing is not None:
                tracing.end_send(span, None, exc)
            raise
        if tracing is not None:
            from . import _tracing

            _tracing.end_with(tracing, span, fut)
        return fut

    async def publish_async_complete(self, timeout: float | None = None) -> None:
        """Wait until every ``publish_async`` future has resolved.

        Raises:
            TimeoutError: some are still outstanding after ``timeout`` seconds.
        """
        await self._publisher.wait_all(self.timeout * 2 if timeout is None else timeout)

    @property
    def publish_async_pending(self) -> int:
        """How many ``publish_async`` acks are outstanding."""
        return self._publisher.pending


def _gave_up(cause: NatsError, subject: str, attempts: int, how: str) -> NatsError:
    """The error a retried publish ends with: the last cause's kind, saying how many
    attempts were made (also as ``attempts``), with the last cause as ``__cause__``."""
    if isinstance(cause, NoRespondersError):
        what = "no stream answered"
    elif isinstance(cause, DisconnectedError):
        what = "the connection was lost during"
    else:
        what = "no ack came for"
    # an API answer (an id still being stored) as the last cause: no ack in time
    kind = NatsTimeoutError if isinstance(cause, JetStreamApiError) else type(cause)
    exc = kind(f"{what} a publish to {subject!r}: {attempts} attempt(s) {how}; last: {cause}")
    exc.attempts = attempts
    exc.__cause__ = cause
    return exc
