"""The nemesis run's workload: every kind of work at once, each call in the history.

The processes (each a task; its operations are sequential, but a ``publish_async``
producer's are many at once), by the client connection they run on:

* ``pub``: ``pub-0`` and ``pub-1`` call ``js.publish`` with a unique value as the
  payload and the ``msg_id``, each call with a ``timeout`` (its deadline); the
  retries are the library's, within it.
* ``apub``: ``apub-0`` calls ``js.publish_async`` the same way, up to ``WINDOW`` at once.
* ``pull``: ``pull`` reads the durable pull consumer with ``consume()`` and acks each
  message; ``ordered`` reads an ordered pull consumer with ``messages()``.
* ``push``: ``push`` reads the durable push consumer (flow control, heartbeats) and
  acks; ``ordered-push`` reads an ordered push consumer (flow control too).
* ``kv-a`` and ``kv-b``: ``kv-0`` .. ``kv-3`` call ``create``, ``update(last=...)``
  (compare-and-set against the revision they last saw), ``get`` and ``delete`` on
  ``KEYS``, few enough that they contend; ``watch`` (on ``kv-a``) records every entry
  of a ``watch(">")``.
* ``svc`` serves ``svc.echo`` (a service endpoint) and records each request;
  ``req-0`` and ``req-1`` (on ``req``) call it with ``request(timeout=...)``.

What an operation's failure means: a refused compare-and-set (``KeyWrongLastSequenceError``),
a key not there, a request nobody received (``NoRespondersError``) certainly did not
happen (``fail``); every other failure is unknown (``info``): a publish whose deadline
passed may have been stored by an attempt whose ack was lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import random
from collections.abc import Awaitable, Callable
from typing import Any

import jetstream
from jetstream import (
    Client,
    JetStream,
    JsMsg,
    KeyDeletedError,
    KeyNotFoundError,
    KeyWrongLastSequenceError,
    NoRespondersError,
)
from jetstream.service import EndpointConfig, Request, ServiceConfig
from tests.faults.ids import IdTracker
from tests.nemesis.history import History

__all__ = [
    "BUCKET",
    "CLIENTS",
    "CONSUMERS",
    "KEYS",
    "KV_TIMEOUT",
    "PUB_TIMEOUT",
    "READERS",
    "REQ_TIMEOUT",
    "STREAM",
    "Workload",
]

STREAM = "NEM"
BUCKET = "nem"
KEYS = ("k0", "k1", "k2")
#: the durable consumers: (name, push)
CONSUMERS = (("nem-pull", False), ("nem-push", True))
#: the client connections, each through proxies of its own
CLIENTS = ("pub", "apub", "pull", "push", "kv-a", "kv-b", "svc", "req")
#: the readers of the stream: durable ones (at least once) and ordered ones
READERS = {"pull": "durable", "push": "durable", "ordered": "ordered", "ordered-push": "ordered"}
PUB_TIMEOUT = 5.0
KV_TIMEOUT = 5.0
REQ_TIMEOUT = 2.0
#: publish_async futures a producer keeps in flight
WINDOW = 16
#: seconds between a process's operations, by kind of process
PAUSE = {"pub": (0.01, 0.05), "kv": (0.08, 0.2), "req": (0.1, 0.3)}


def _api_outcome(exc: BaseException) -> str:
    """A KV write's failure: ``fail`` for a refused precondition, else unknown."""
    return "fail" if isinstance(exc, KeyWrongLastSequenceError) else "info"


class Workload:
    """The processes of the run, writing to ``history`` (see the module docstring)."""

    def __init__(self, history: History, seed: int, clients: dict[str, Client]) -> None:
        self.h = history
        self.seed = seed
        self.clients = clients
        #: set at the end: processes finish the operation they are in and return
        self.stop = asyncio.Event()
        #: each reader's deliveries so far (stream sequences), and errors raised to it
        self.seen: dict[str, IdTracker] = {name: IdTracker() for name in READERS}
        self.last: dict[str, int] = dict.fromkeys(READERS, 0)
        self.watched = 0
        #: set once the watch has delivered the bucket's current values
        self.watching = asyncio.Event()
        self.raised: dict[str, int] = dict.fromkeys([*READERS, "watch"], 0)
        self.reported = 0

    def rng(self, p: str) -> random.Random:
        return random.Random(f"{self.seed}:{p}")

    async def _pause(self, rng: random.Random, kind: str) -> None:
        await asyncio.sleep(rng.uniform(*PAUSE[kind]))

    async def _call(
        self,
        p: str,
        f: str,
        value: Any,
        timeout: float,
        call: Callable[[], Awaitable[Any]],
        outcome: Callable[[BaseException], str],
    ) -> tuple[str, Any]:
        """Run ``call()`` as one operation; its outcome and result (or exception)."""
        op = self.h.invoke(p, f, value, timeout=timeout)
        try:
            result = await call()
        except jetstream.NatsError as exc:
            kind = outcome(exc)
            self.h.complete(op, p, f, kind, error=exc)
            return kind, exc
        self.h.complete(op, p, f, "ok", result)
        return "ok", result

    # ------------------------------------------------------------------------- producers

    async def publisher(self, p: str, js: JetStream) -> None:
        rng = self.rng(p)
        n = 0
        while not self.stop.is_set():
            value = f"{p}-{n}"
            n += 1

            async def publish(value: str = value) -> dict[str, Any]:
                ack = await js.publish(
                    f"nem.{p}", value.encode(), msg_id=value, timeout=PUB_TIMEOUT
                )
                return {"seq": ack.seq, "dup": ack.duplicate}

            await self._call(p, "publish", value, PUB_TIMEOUT, publish, lambda e: "info")
            await self._pause(rng, "pub")

    async def async_publisher(self, p: str, js: JetStream) -> None:
        rng = self.rng(p)
        pending: set[asyncio.Future[Any]] = set()
        n = 0
        while not self.stop.is_set():
            value = f"{p}-{n}"
            n += 1
            op = self.h.invoke(p, "publish_async", value, timeout=PUB_TIMEOUT)
            try:
                fut = await js.publish_async(
                    f"nem.{p}", value.encode(), msg_id=value, timeout=PUB_TIMEOUT
                )
            except jetstream.NatsError as exc:
                self.h.complete(op, p, "publish_async", "info", error=exc)
                continue
            pending.add(fut)
            fut.add_done_callback(pending.discard)
            fut.add_done_callback(functools.partial(self._acked, op, p))
            if len(pending) >= WINDOW:
                await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            await self._pause(rng, "pub")
        if pending:
            await asyncio.wait(pending)

    def _acked(self, op: int, p: str, fut: asyncio.Future[Any]) -> None:
        exc = fut.exception()
        if exc is not None:
            self.h.complete(op, p, "publish_async", "info", error=exc)
        else:
            ack = fut.result()
            self.h.complete(op, p, "publish_async", "ok", {"seq": ack.seq, "dup": ack.duplicate})

    # ------------------------------------------------------------------------- readers

    def _take(self, p: str, m: JsMsg) -> None:
        meta = m.metadata
        seq = meta.sequence.stream
        self.h.event(p, "recv", seq=seq, id=m.data.decode(), n=meta.num_delivered)
        self.seen[p].add(seq)
        self.last[p] = max(self.last[p], seq)

    def _report(self, p: str) -> Callable[[BaseException], None]:
        def report(exc: BaseException) -> None:
            self.reported += 1
            self.h.event(p, "reported", error=f"{type(exc).__name__}: {exc}"[:300])

        return report

    async def _again(self, p: str, body: Callable[[], Awaitable[None]]) -> None:
        """``body()`` until cancelled; what it raises reached the application: recorded
        (the checker counts it against the reader), and the reader goes on."""
        while True:
            try:
                await body()
            except jetstream.NatsError as exc:
                self.raised[p] += 1
                self.h.event(p, "raised", error=f"{type(exc).__name__}: {exc}"[:300])
                await asyncio.sleep(0.5)
            else:
                self.raised[p] += 1
                self.h.event(p, "raised", error="the reader ended")
                return

    async def pull_reader(self, consumer: jetstream.Consumer) -> None:
        async def handler(m: JsMsg) -> None:
            self._take("pull", m)
            await m.ack()

        async def body() -> None:
            async with await consumer.consume(handler, error_cb=self._report("pull")) as ctx:
                await ctx.wait()

        await self._again("pull", body)

    async def push_reader(self, consumer: jetstream.Consumer) -> None:
        async def body() -> None:
            async with consumer.messages(error_cb=self._report("push")) as it:
                async for m in it:
                    self._take("push", m)
                    await m.ack()

        await self._again("push", body)

    async def ordered_reader(self, p: str, oc: jetstream.OrderedConsumer) -> None:
        async def body() -> None:
            async with oc.messages() as it:
                async for m in it:
                    self._take(p, m)

        await self._again(p, body)

    async def watcher(self, kv: jetstream.KeyValue) -> None:
        async def body() -> None:
            async with kv.watch(">") as w:
                async for e in w:
                    if e is None:
                        self.watching.set()
                        continue
                    value = e.value.decode() if e.operation.name == "PUT" else None
                    self.h.event(
                        "watch",
                        "watch",
                        key=e.key,
                        rev=e.revision,
                        value=value,
                        kvop=e.operation.name,
                    )
                    self.watched = max(self.watched, e.revision)

        await self._again("watch", body)

    # ------------------------------------------------------------------------- KeyValue

    async def kv_process(self, p: str, kv: jetstream.KeyValue) -> None:
        rng = self.rng(p)
        known: dict[str, int] = {}  # the revision of each key this process saw last
        n = 0
        while not self.stop.is_set():
            key = rng.choice(KEYS)
            r = rng.random()
            if r < 0.35 or (r < 0.65 and key not in known):
                kind, res = await self._call(
                    p,
                    "get",
                    {"key": key},
                    KV_TIMEOUT,
                    functools.partial(_get, kv, key),
                    lambda e: "info",
                )
                if kind == "ok":
                    known[key] = res.get("rev", 0)
            elif r < 0.65:
                value, last = f"{p}-{n}", known[key]
                n += 1

                async def update(key: str = key, value: str = value, last: int = last) -> Any:
                    return {"rev": await kv.update(key, value.encode(), last)}

                kind, res = await self._call(
                    p,
                    "update",
                    {"key": key, "value": value, "last": last},
                    KV_TIMEOUT,
                    update,
                    _api_outcome,
                )
                self._learn(known, key, kind, res)
            elif r < 0.85:
                value = f"{p}-{n}"
                n += 1

                async def create(key: str = key, value: str = value) -> Any:
                    return {"rev": await kv.create(key, value.encode())}

                # create writes and reads for the context's timeout, and the calls made
                # by then end within two more
                kind, res = await self._call(
                    p,
                    "create",
                    {"key": key, "value": value},
                    3 * KV_TIMEOUT,
                    create,
                    _api_outcome,
                )
                self._learn(known, key, kind, res)
            else:

                async def delete(key: str = key) -> Any:
                    return {"rev": await kv.delete(key)}

                kind, res = await self._call(
                    p, "delete", {"key": key}, KV_TIMEOUT, delete, lambda e: "info"
                )
                self._learn(known, key, kind, res)
            await self._pause(rng, "kv")

    @staticmethod
    def _learn(known: dict[str, int], key: str, kind: str, res: Any) -> None:
        if kind == "ok":
            known[key] = res["rev"]
        else:
            known.pop(key, None)

    # ------------------------------------------------------------------------- request/reply

    async def service(self, nc: Client) -> Any:
        """Start the echo service on ``nc``; returns it (stop it at the end)."""

        async def echo(req: Request) -> None:
            self.h.event("svc", "serve", value=req.data.decode())
            await req.respond(req.data)

        config = ServiceConfig(
            name="nemesis",
            version="1.0.0",
            endpoints=[EndpointConfig(name="echo", subject="svc.echo", handler=echo)],
        )
        return await nc.add_service(config)

    async def caller(self, p: str, nc: Client) -> None:
        rng = self.rng(p)
        n = 0
        while not self.stop.is_set():
            value = f"{p}-{n}"
            n += 1

            async def call(value: str = value) -> Any:
                reply = await nc.request("svc.echo", value.encode(), timeout=REQ_TIMEOUT)
                return {"reply": reply.data.decode()}

            await self._call(
                p,
                "request",
                value,
                REQ_TIMEOUT,
                call,
                lambda e: "fail" if isinstance(e, NoRespondersError) else "info",
            )
            await self._pause(rng, "req")


async def _get(kv: jetstream.KeyValue, key: str) -> dict[str, Any]:
    """A get's result: the revision and value, the revision of a delete, or absent."""
    try:
        e = await kv.get(key)
    except KeyDeletedError as exc:
        return {"rev": exc.entry.revision, "deleted": True}
    except KeyNotFoundError:
        return {"absent": True}
    return {"rev": e.revision, "value": e.value.decode()}


async def cancel_all(tasks: list[asyncio.Task[Any]]) -> None:
    """Cancel ``tasks`` and wait for them (what they raise is not ours any more)."""
    for t in tasks:
        t.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.gather(*tasks, return_exceptions=True)
