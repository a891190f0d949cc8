"""Command line: ``python -m jetstream <command>``.

Commands:
    server   run one nats-server (JetStream on) in the foreground until Ctrl-C or SIGTERM
    demo     start an embedded server and run the confirmed-ack example on it
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType

from jetstream.embedded import EmbeddedServerError, NatsServer

__all__ = ["main", "run_demo", "run_server"]


def run_server(*, port: int = 0, store_dir: str | None = None, jetstream: bool = True) -> int:
    """Run one server in the foreground; return the exit status for the shell.

    Prints the client URL, then waits for SIGINT or SIGTERM and stops the server cleanly.
    Returns 1 when the server cannot start or dies on its own.
    """
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        server = NatsServer(port=port, store_dir=store_dir, jetstream=jetstream)
        try:
            server.start()
        except EmbeddedServerError as exc:
            server.close()
            print(f"error: {exc}", file=sys.stderr)
            return 1
        try:
            js = "JetStream on, store " + server.store_dir if jetstream else "JetStream off"
            print(f"nats-server listening on {server.url} ({js})", flush=True)
            print(f"monitoring on {server.http_url}; log in {server.log_path}", flush=True)
            print("Press Ctrl-C to stop.", flush=True)
            while not stop.wait(0.5):
                if not server.running:
                    print("error: nats-server exited on its own; log tail:", file=sys.stderr)
                    print(server.log_tail(), file=sys.stderr)
                    return 1
            print("stopping...", flush=True)
            return 0
        finally:
            server.close()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_demo() -> int:
    """Start an embedded server and run the seed's confirmed-ack example on it."""
    import asyncio

    import jetstream
    from jetstream._demo import confirmed_ack

    async def demo(url: str) -> None:
        async with jetstream.connect(url) as nc:
            await confirmed_ack(nc)

    with NatsServer() as server:
        version = server.varz().get("version", "?")
        print(f"embedded nats-server {version} at {server.url}, JetStream enabled")
        print()
        asyncio.run(demo(server.url))
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m jetstream", description="jetstream: asyncio NATS JetStream client tools"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    server = commands.add_parser("server", help="run a local nats-server until Ctrl-C")
    server.add_argument("--port", type=int, default=0, help="client port (default: a free one)")
    server.add_argument(
        "--store-dir", default=None, help="JetStream store directory (default: a temporary one)"
    )
    server.add_argument(
        "--no-jetstream", dest="jetstream", action="store_false", help="run without JetStream"
    )

    commands.add_parser("demo", help="run the confirmed-ack example on an embedded server")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m jetstream`` and the ``jetstream`` script; the exit status."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "server":
            return run_server(port=args.port, store_dir=args.store_dir, jetstream=args.jetstream)
        if args.command == "demo":
            return run_demo()
    except EmbeddedServerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    raise AssertionError(f"unhandled command {args.command!r}")  # argparse rejects others


if __name__ == "__main__":
    sys.exit(main())
