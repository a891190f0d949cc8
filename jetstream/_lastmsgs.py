"""The last message of every subject that matches some filters, page by page.

What a counter's ``get_many`` and the list of pending schedules read. On a stream with
``allow_direct`` it is one batched direct get (``multi_last``) a page: the server answers
with the messages, then an end-of-batch status (204) that says how many are left
(``Nats-Num-Pending``) and up to which sequence it looked (``Nats-UpTo-Sequence``); the next
page asks from after the last sequence up to that same sequence, so that the pages are one
snapshot. The server refuses a batch that would match more than 1,024 subjects (413 Too
Many Results): then the subjects are listed (stream info with a subject filter) and read
in chunks named one by one. Without ``allow_direct``, each subject is read with the
message-get API. Either way the messages come in stream order.
"""

from __future__ import annotations

from collections.abc import Sequence

from .api import MsgGetRequest
from .errors import JetStreamApiError, MessageNotFoundError
from .protocol.headers import NATS_NUM_PENDING
from .stream import Stream, StreamMsg, _status_error

__all__ = ["LastMsgs"]

#: subjects named in one multi-last request after a 413 (the server's cap is 1,024)
_CHUNK = 512
#: subjects read one by one a page, without direct gets
_API_PAGE = 64
_UP_TO_SEQUENCE = "Nats-UpTo-Sequence"


class LastMsgs:
    """Reads the last message of each subject matching ``filters``; ``page()`` returns
    the next messages, ``[]`` once all were read."""

    def __init__(self, stream: Stream, filters: Sequence[str], timeout: float | None) -> None:
        self._stream = stream
        self._filters = list(filters)
        self._timeout = stream.js.timeout if timeout is None else timeout
        self._direct = bool(stream.cached_info.config.allow_direct)
        #: subjects left to read, once they are listed (after a 413, or without direct)
        self._subjects: list[str] | None = None
        self._from_seq = 0
        self._up_to = 0
        self._done = False

    async def page(self) -> list[StreamMsg]:
        """The next messages in stream order; ``[]`` once all were read. (Subjects that
        had to be listed are read to the end first, to be given in stream order too.)"""
        held: list[StreamMsg] = []
        while not self._done:
            msgs = await (self._direct_page() if self._direct else self._api_page())
            if self._subjects is not None:
                held.extend(msgs)
            elif msgs:
                return msgs
        held.sort(key=lambda m: m.seq)
        return held

    async def _list_subjects(self) -> list[str]:
        subjects: set[str] = set()
        for f in self._filters:
            info = await self._stream.info(subjects_filter=f)
            subjects.update(info.state.subjects)
        return sorted(subjects)

    async def _api_page(self) -> list[StreamMsg]:
        if self._subjects is None:
            self._subjects = await self._list_subjects()
        take, self._subjects = self._subjects[:_API_PAGE], self._subjects[_API_PAGE:]
        self._done = not self._subjects
        out = []
        for subject in take:
            try:
                out.append(await self._stream.get_msg(last_by_subject=subject, direct=False))
            except MessageNotFoundError:  # purged since it was listed
                continue
        return out

    async def _direct_page(self) -> list[StreamMsg]:
        req = MsgGetRequest(multi_last=self._filters)
        if self._from_seq:
            req.seq = self._from_seq
        if self._up_to:
            req.up_to_seq = self._up_to
        status, msgs, pending, up_to = await self._ask(req)
        if status == 413:  # more than the server reads at once: name the subjects
            if self._subjects is not None:
                raise JetStreamApiError(413, 0, f"stream {self._stream.name!r}: too many results")
            self._subjects = await self._list_subjects()
            self._next_chunk()
            return []
        if up_to and not self._up_to:
            self._up_to = up_to
        if msgs and pending:
            self._from_seq = msgs[-1].seq + 1
        else:
            self._next_chunk()
        return msgs

    def _next_chunk(self) -> None:
        """Go on with the next chunk of listed subjects, or end."""
        self._from_seq = 0
        if self._subjects:
            self._filters, self._subjects = self._subjects[:_CHUNK], self._subjects[_CHUNK:]
        else:
            self._done = True

    async def _ask(self, req: MsgGetRequest) -> tuple[int, list[StreamMsg], int, int]:
        """One batched direct get: (status, messages, pending after them, up-to sequence).

        The status is 0 for a batch that ended, 404 when nothing matched, 413 when too
        much did (``Stream._direct_batch``, with its 503 policy).
        """
        stream = self._stream
        out, end = await stream._direct_batch(req, self._timeout)
        if end.status == 204:
            h = end.headers
            pending = int(h.get(NATS_NUM_PENDING, "0") or 0)
            return 0, out, pending, int(h.get(_UP_TO_SEQUENCE, "0") or 0)
        if not out:
            return end.status, out, 0, 0
        raise _status_error(end, stream.name, stream.js.api_subject(f"DIRECT.GET.{stream.name}"))
