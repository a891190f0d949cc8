"""Counting, on the driver, the sequences a streaming query's tasks skip.

With ``fail_on_data_loss=false`` a task that finds part of its range removed before it
read it (limits or a purge between the planning and the read, or the stream deleted)
skips it. The driver counts what it skips itself in the offsets (``"lost"``); what a task
skips it hears from the task: the driver's ``LossLedger`` answers on a subject of its own
(handed to the tasks in their partitions), each task reports its gaps there before it
ends (``report_losses``) and waits for the answer, and the next batch's offset adds them
to the query's count. So the progress shows every skipped sequence, and the warning is
logged on the driver (in the process that plans the query), where the query's own log
is, as well as on the executor.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

import msgspec

from ..errors import NatsError
from ._common import ConnectSpec, patiently

if TYPE_CHECKING:
    from jetstream import Client
    from jetstream.core.message import Msg

__all__ = ["Loss", "LossLedger", "report_losses"]

log = logging.getLogger("jetstream.spark")

_START_TIMEOUT = 30.0


class Loss(msgspec.Struct, frozen=True, array_like=True):
    """Sequences ``first``..``last`` of ``stream`` that a task skipped, and why."""

    stream: str
    first: int
    last: int
    why: str


_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(list[Loss]).decode


class LossLedger:
    """The driver's end: a responder on a subject of its own, on a connection of its
    own, in a thread of its own (the driver's planning calls come on threads with no
    event loop). ``subject`` starts it; ``take`` returns the sequences reported since the
    last take; ``stop`` ends it. The same gap reported twice (a task run again) counts
    once."""

    def __init__(self, conn: ConnectSpec) -> None:
        self.conn = conn
        self._lock = threading.Lock()
        self._seen: set[tuple[str, int, int]] = set()
        self._total = 0
        self._taken = 0
        self._subject: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._nc: Client | None = None

    @property
    def subject(self) -> str:
        """Where the tasks report (the responder is started on first use)."""
        if self._subject is None:
            self._start()
        assert self._subject is not None
        return self._subject

    def _start(self) -> None:
        loop = asyncio.new_event_loop()
        ready = threading.Event()
        failed: list[BaseException] = []

        async def serve() -> None:
            try:
                nc = await self.conn.connect(max_reconnect_attempts=-1)
                self._subject = nc.new_inbox()
                await nc.subscribe(self._subject, cb=self._on_report)
                await nc.flush(timeout=self.conn.timeout)
                self._nc = nc
            except BaseException as exc:
                failed.append(exc)
            finally:
                ready.set()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.run_until_complete(serve())
            if not failed:
                loop.run_forever()
            loop.close()

        self._loop = loop
        self._thread = threading.Thread(target=run, name="jetstream-losses", daemon=True)
        self._thread.start()
        ready.wait(_START_TIMEOUT)
        if failed:
            raise failed[0]
        if self._subject is None:
            raise NatsError(f"the data loss ledger did not start within {_START_TIMEOUT:g}s")

    async def _on_report(self, msg: Msg) -> None:
        try:
            losses = _decode(msg.data)
        except msgspec.DecodeError:
            return
        self.add(losses)
        if msg.reply:
            await msg.respond(b"")

    def add(self, losses: Sequence[Loss]) -> None:
        """Count in (and log) the gaps of a task's report not counted yet."""
        with self._lock:
            for loss in losses:
                key = (loss.stream, loss.first, loss.last)
                if key in self._seen:
                    continue
                self._seen.add(key)
                self._total += loss.last - loss.first + 1
                log.warning(
                    "stream %r: %s; skipped by a task (fail_on_data_loss=false)",
                    loss.stream,
                    loss.why,
                )

    def take(self) -> int:
        """The sequences reported since the last ``take``."""
        with self._lock:
            new, self._taken = self._total - self._taken, self._total
            return new

    def give_back(self, n: int) -> None:
        """``n`` sequences taken but not written into an offset: counted next time."""
        with self._lock:
            self._taken -= n

    def stop(self) -> None:
        loop, nc, thread = self._loop, self._nc, self._thread
        self._loop = self._nc = self._thread = None
        if loop is None or thread is None:
            return
        if nc is not None:
            done = asyncio.run_coroutine_threadsafe(nc.close(), loop)
            try:
                done.result(self.conn.timeout + 5)
            except Exception:  # closing anyway
                pass
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


async def report_losses(
    conn: ConnectSpec, subject: str, losses: Sequence[Loss], read_timeout: float
) -> None:
    """A task's report of the gaps it skipped to the driver's ``LossLedger``, on a
    connection of its own; waits for the answer, through faults for up to
    ``read_timeout`` (then it fails loudly: a skip the query's count would miss is not
    made silently)."""
    if not losses:
        return
    body = _encode(list(losses))
    what = f"reporting {len(losses)} skipped range(s) of stream {losses[0].stream!r} to the driver"

    async def send() -> None:
        nc = await conn.connect()
        try:
            await nc.request(subject, body, timeout=conn.timeout)
        finally:
            await nc.close()

    await patiently(what, read_timeout, send)
