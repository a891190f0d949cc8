"""Where one round of fetch + ack goes, in its parts (the performance page's figures).

A consumer of ``--count`` stored messages is read as bench_js's fetch+ack reads it:
``fetch(batch)``, then ``ack()`` each message, round after round. Each round is timed in
five parts, averaged over the rounds:

- ``acks``: acking the batch (buffered, nothing written yet), a call a message, or with
  ``--ack-all`` in one ``ack_all``;
- ``before pull``: the fetch's own work up to its pull request;
- ``write``: the write that sends the buffered acks and the pull to the server;
- ``batch``: until the last message of the batch is in (the server's turn and our parse);
- ``return``: from there until ``fetch()`` returns.

The parts are marked by wrapping two methods of the fetch (``_Fetch._send_pull`` and
``_Fetch._end``): a diagnostic of this client, not a comparison; the other clients have
no such parts to time.

Run: ``.venv/bin/python -m benchmarks.fetch_rounds [--batch 100] [--count N] [--loop uvloop]
[--ack-all]``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import jetstream
from benchmarks._report import run_on_loop
from benchmarks.bench_js import Ours
from jetstream import _fetch
from jetstream.api import ConsumerConfig
from jetstream.embedded import NatsServer

PARTS = ("acks", "before pull", "write", "batch", "return")


class _Marks:
    """The times the wrapped methods were last called at."""

    pull_start = 0.0
    pull_sent = 0.0
    batch_in = 0.0


def _wrap(marks: _Marks) -> Callable[[], None]:
    """Wrap the fetch's two methods to note the times; returns what undoes it."""
    send_pull, end = _fetch._Fetch._send_pull, _fetch._Fetch._end

    def timed_send_pull(self: Any, expires: float) -> None:
        marks.pull_start = time.perf_counter()
        send_pull(self, expires)
        marks.pull_sent = time.perf_counter()

    def timed_end(self: Any, error: BaseException | None) -> None:
        marks.batch_in = time.perf_counter()
        end(self, error)

    _fetch._Fetch._send_pull = timed_send_pull  # type: ignore[method-assign]
    _fetch._Fetch._end = timed_end  # type: ignore[method-assign]

    def undo() -> None:
        _fetch._Fetch._send_pull = send_pull  # type: ignore[method-assign]
        _fetch._Fetch._end = end  # type: ignore[method-assign]

    return undo


async def rounds(url: str, count: int, batch: int, ack_all: bool = False) -> dict[str, float]:
    """Seconds per round of each part, and ``round`` (the whole round)."""
    async with Ours(url) as ours:
        await ours.fresh_stream(count)  # the stream of bench_js's fetch+ack
        nc, js = ours.nc, ours.js
        stream = await js.stream("BENCH")
        c = await stream.create_consumer(ConsumerConfig(durable_name="r", max_ack_pending=-1))
        marks = _Marks()
        total = dict.fromkeys(PARTS, 0.0)
        n = 0
        undo = _wrap(marks)
        try:
            t_start = time.perf_counter()
            got = 0
            while got < count:
                t0 = time.perf_counter()
                msgs = await c.fetch(min(batch, count - got), expires=5)
                t1 = time.perf_counter()
                if ack_all:
                    await jetstream.ack_all(msgs)
                else:
                    for m in msgs:
                        await m.ack()
                t2 = time.perf_counter()
                total["before pull"] += marks.pull_start - t0
                total["write"] += marks.pull_sent - marks.pull_start
                total["batch"] += marks.batch_in - marks.pull_sent
                total["return"] += t1 - marks.batch_in
                total["acks"] += t2 - t1
                got += len(msgs)
                n += 1
            await nc.flush()
            elapsed = time.perf_counter() - t_start
        finally:
            undo()
        await js.delete_stream("BENCH")
    out = {part: t / n for part, t in total.items()}
    out["round"] = elapsed / n
    return out


async def main_async(args: Any) -> dict[str, float]:
    with NatsServer() as server:
        return await rounds(server.url, args.count, args.batch, args.ack_all)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    ap.add_argument("--count", type=int, default=100_000, help="messages in all")
    ap.add_argument("--batch", type=int, default=100, help="messages a fetch")
    ap.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio")
    ap.add_argument("--ack-all", action="store_true", help="ack each batch with ack_all")
    args = ap.parse_args(argv)
    parts = run_on_loop(main_async(args), args.loop)
    whole = parts.pop("round")
    acks = "ack_all" if args.ack_all else "ack"
    print(f"fetch({args.batch}) + {acks}, {args.loop} loop: {whole * 1e6:.0f} us a round")
    for part, seconds in parts.items():
        print(f"  {part:12s} {seconds * 1e6:7.1f} us  {seconds / whole:5.0%}")


if __name__ == "__main__":
    main()
