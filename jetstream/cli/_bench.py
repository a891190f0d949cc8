"""``bench``: publish and subscribe throughput, core NATS or JetStream, with live rates.

Core (the default): ``--sub`` subscribers (each on its own connection) listen on the
subject, then ``--pub`` publishers (each on its own connection) send ``--msgs``
messages between them. JetStream (``--js``): a memory stream is made for the subject,
the messages are published with ``publish_async`` (every one acknowledged), and each
subscriber reads them all through its own pull consumer. The stream is deleted at the
end unless ``--keep``.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from ..api import AckPolicy, ConsumerConfig, StorageType, StreamConfig
from ..client import Client, connect
from ..core.message import Msg
from ..errors import StreamNotFoundError
from ._output import ProgressBars
from ._session import DEFAULT_URL, Session, connect_options
from ._util import CliError, bounded, fmt_bytes, fmt_num, redact_url

__all__ = ["Result", "cmd_bench"]

_STEP = 500  # messages between progress updates


@dataclass
class Result:
    """The outcome of one side (publishers or subscribers) of a run."""

    role: str
    clients: int
    msgs: int
    size: int
    seconds: float

    @property
    def msgs_per_sec(self) -> float:
        return self.msgs / self.seconds if self.seconds > 0 else 0.0

    @property
    def bytes_per_sec(self) -> float:
        return self.msgs * self.size / self.seconds if self.seconds > 0 else 0.0

    def doc(self) -> dict[str, Any]:
        return {
            "clients": self.clients,
            "msgs": self.msgs,
            "size": self.size,
            "seconds": round(self.seconds, 6),
            "msgs_per_sec": round(self.msgs_per_sec, 1),
            "bytes_per_sec": round(self.bytes_per_sec, 1),
            "mb_per_sec": round(self.bytes_per_sec / 1e6, 3),
        }

    def line(self) -> str:
        who = f"{self.clients} {'publisher' if self.role == 'pub' else 'subscriber'}"
        who += "s" if self.clients != 1 else ""
        return (
            f"{'Pub' if self.role == 'pub' else 'Sub'} stats: {fmt_num(self.msgs_per_sec)} "
            f"msgs/sec ~ {fmt_bytes(self.bytes_per_sec)}/sec "
            f"({self.bytes_per_sec / 1e6:.2f} MB/sec; {fmt_num(self.msgs)} msgs in "
            f"{self.seconds:.3f}s, {who})"
        )


def _split(total: int, parts: int) -> list[int]:
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


async def _connect_more(s: Session, count: int) -> list[Client]:
    """``count`` extra connections with the session's options (one per bench client)."""
    a = s.args
    url = a.server or DEFAULT_URL
    clients: list[Client] = []
    try:
        for _ in range(count):
            nc = await bounded(
                connect(
                    url,
                    name="jetstream-cli-bench",
                    **connect_options(a),
                    pending_msgs_limit=max(a.msgs + 1, 65536),
                    pending_bytes_limit=max((a.msgs + 1) * (a.size + 128), 64 * 1024 * 1024),
                ),
                s.timeout * 2 + 1,
                f"connect to {redact_url(url)}",
            )
            clients.append(nc)
    except BaseException:
        await _close_all(clients, s.timeout)
        raise
    return clients


async def _close_all(clients: list[Client], timeout: float) -> None:
    for nc in clients:
        try:
            await bounded(nc.close(), timeout, "close a bench connection")
        except Exception:
            pass


async def _wait_counts(
    s: Session, counts: list[int], want: int, bars: ProgressBars, tasks: list[Any]
) -> float:
    """Wait until every counter reaches ``want``; fail when none moves for ``--timeout``.
    Returns when the last one got there."""
    last_total, last_move = -1, time.monotonic()
    while True:
        for task, n in zip(tasks, counts, strict=True):
            bars.update(task, n)
        total = sum(counts)
        now = time.monotonic()
        if all(n >= want for n in counts):
            return now
        if total != last_total:
            last_total, last_move = total, now
        elif now - last_move > s.timeout:
            raise CliError(
                f"subscribers received {fmt_num(total)} of {fmt_num(want * len(counts))} "
                f"messages; none for {s.timeout:g}s"
            )
        await asyncio.sleep(0.05)


async def _core(s: Session, payload: bytes, bars: ProgressBars) -> list[Result]:
    a = s.args
    subs = await _connect_more(s, a.sub)
    pubs: list[Client] = []
    try:
        pubs = await _connect_more(s, a.pub)
        counts = [0] * a.sub

        def counter(i: int) -> Any:
            def on_msg(msg: Msg) -> None:
                counts[i] += 1

            return on_msg

        for i, nc in enumerate(subs):
            await nc.subscribe(a.subject, cb=counter(i))
            await nc.flush(timeout=s.timeout)
        sub_tasks = [bars.add(f"sub #{i + 1}", a.msgs, "msgs") for i in range(a.sub)]
        pub_task = bars.add("pub", a.msgs, "msgs")
        sent = [0] * a.pub

        async def publisher(i: int, nc: Client, n: int) -> None:
            for k in range(n):
                await nc.publish(a.subject, payload)
                if k % _STEP == 0:
                    sent[i] = k
                    bars.update(pub_task, sum(sent))
                    for task, got in zip(sub_tasks, counts, strict=True):
                        bars.update(task, got)
                    await asyncio.sleep(0)  # let the subscribers' reads in
            sent[i] = n
            await nc.flush(timeout=s.timeout)

        start = time.monotonic()
        shares = _split(a.msgs, a.pub)
        await asyncio.gather(
            *(publisher(i, nc, n) for i, (nc, n) in enumerate(zip(pubs, shares, strict=True)))
        )
        pub_end = time.monotonic()
        bars.update(pub_task, a.msgs)
        results = [Result("pub", a.pub, a.msgs, a.size, pub_end - start)]
        if subs:
            end = await _wait_counts(s, counts, a.msgs, bars, sub_tasks)
            results.append(Result("sub", a.sub, a.msgs * a.sub, a.size, end - start))
        return results
    finally:
        await _close_all(subs + pubs, s.timeout)


async def _jetstream(s: Session, payload: bytes, bars: ProgressBars) -> list[Result]:
    a = s.args
    try:
        await s.js.stream(a.stream)
    except StreamNotFoundError:
        pass
    else:
        raise CliError(
            f"stream {a.stream} exists; bench makes its own stream: pass another --stream "
            f"or delete it (stream rm {a.stream})"
        )
    cfg = StreamConfig(name=a.stream, subjects=[a.subject], storage=StorageType(a.storage))
    await s.js.create_stream(cfg)
    subs: list[Client] = []
    readers: list[asyncio.Task[None]] = []
    try:
        subs = await _connect_more(s, a.sub)
        counts = [0] * a.sub
        consumers = []
        for i, nc in enumerate(subs):
            st = await nc.jetstream(timeout=s.timeout).stream(a.stream)
            consumers.append(
                await st.create_consumer(
                    ConsumerConfig(
                        name=f"bench{i + 1}", ack_policy=AckPolicy.NONE, inactive_threshold=60.0
                    )
                )
            )

        async def reader(i: int) -> None:
            async with consumers[i].messages(max_messages=1000) as it:
                async for _ in it:
                    counts[i] += 1
                    if counts[i] >= a.msgs:
                        return

        sub_tasks = [bars.add(f"sub #{i + 1}", a.msgs, "msgs") for i in range(a.sub)]
        pub_task = bars.add("pub (acked)", a.msgs, "msgs")
        start = time.monotonic()
        readers = [asyncio.create_task(reader(i)) for i in range(a.sub)]
        acked = 0

        def on_ack(fut: asyncio.Future[Any]) -> None:
            nonlocal acked
            acked += 1

        futures = []
        for k in range(a.msgs):
            fut = await s.js.publish_async(a.subject, payload, timeout=s.timeout)
            fut.add_done_callback(on_ack)
            futures.append(fut)
            if k % _STEP == 0:
                bars.update(pub_task, acked)
        while acked < a.msgs:  # every future resolves: acked, failed or timed out
            bars.update(pub_task, acked)
            await asyncio.sleep(0.05)
        failures = [f.exception() for f in futures]  # each retrieved: no "never retrieved"
        first = next((e for e in failures if e is not None), None)
        if first is not None:
            raise first
        bars.update(pub_task, acked)
        results = [Result("pub", 1, a.msgs, a.size, time.monotonic() - start)]
        if subs:
            end = await _wait_counts(s, counts, a.msgs, bars, sub_tasks)
            results.append(Result("sub", a.sub, a.msgs * a.sub, a.size, end - start))
        return results
    finally:
        for task in readers:
            task.cancel()
        if readers:
            await asyncio.gather(*readers, return_exceptions=True)
        await _close_all(subs, s.timeout)
        if not a.keep:
            try:
                await s.js.delete_stream(a.stream)
            except Exception as exc:  # report, but keep the run's own outcome
                s.out.warn(f"could not delete the bench stream {a.stream}: {exc}")


async def cmd_bench(s: Session) -> int:
    a = s.args
    if a.msgs < 1 or a.size < 0 or a.pub < 1 or a.sub < 0:
        raise CliError("bench needs --msgs >= 1, --size >= 0, --pub >= 1 and --sub >= 0")
    if a.jetstream and a.pub != 1:
        raise CliError("bench --js runs one publisher (publish_async); drop --pub")
    payload = bytes(a.size)
    kind = "JetStream" if a.jetstream else "core NATS"
    s.out.info(
        f"Starting {kind} benchmark on {a.subject!r}: {fmt_num(a.msgs)} msgs of "
        f"{fmt_bytes(a.size)}, {a.pub} publisher(s), {a.sub} subscriber(s)"
    )
    with s.out.progress() as bars:
        run = _jetstream if a.jetstream else _core
        results = await run(s, payload, bars)
    if s.out.json:
        s.out.json_doc(
            {"kind": "jetstream" if a.jetstream else "core"} | {r.role: r.doc() for r in results}
        )
    else:
        for r in results:
            s.out.line(r.line())
    return 0
