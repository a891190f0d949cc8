"""An echo responder of one client, in a process of its own, for ``bench_core``'s row
``request p50, responder in another process (1/latency)``.

It serves ``SUBJECT`` with the same responder as the in-process row (``bench_core``'s
``responder_ours``, ``responder_natspy``, or a peer's ``responder``: an async callback
that publishes the reply), prints ``ready`` once the server has its interest, and
serves until its standard input ends (the benchmark closes it), then closes its
connection and exits.

Run (``bench_core`` does): ``python -m benchmarks.responder IMPL URL SUBJECT [--loop uvloop]``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from benchmarks import _peers
from benchmarks._report import run_on_loop
from benchmarks.bench_core import CLIENTS, Responder


def responder_of(impl: str) -> Responder:
    """The echo responder of the client named ``impl`` (ours, nats-py or a peer)."""
    if impl in CLIENTS:
        return CLIENTS[impl][0]
    for peer in _peers.load():
        if impl == peer.NAME:
            responder: Responder = peer.responder
            return responder
    raise SystemExit(f"no responder for {impl!r} here")


async def serve(impl: str, url: str, subject: str) -> None:
    async with responder_of(impl)(url, subject):
        print("ready", flush=True)
        # until the benchmark closes our input (a thread waits for it: no loop reads it)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.buffer.read)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    ap.add_argument("impl", help="the client: jetstream, nats-py, natsio, nats-core")
    ap.add_argument("url")
    ap.add_argument("subject")
    ap.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio")
    args = ap.parse_args()
    run_on_loop(serve(args.impl, args.url, args.subject), args.loop)


if __name__ == "__main__":
    main()
