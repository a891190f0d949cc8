"""Commands that need no connection: ``server`` (a local nats-server in the foreground)
and ``demo`` (the confirmed-ack example on an embedded server)."""

from __future__ import annotations

import signal
import socket
import sys
import threading
from types import FrameType

from ..testing import LOOPBACK, EmbeddedServerError, NatsServer
from ._session import DEFAULT_PORT

__all__ = ["run_demo", "run_server"]


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((LOOPBACK, port))
        except OSError:
            return False
    return True


def run_server(
    *, port: int | None = None, store_dir: str | None = None, jetstream: bool = True
) -> int:
    """Run one server in the foreground; return the exit status for the shell.

    Listens on ``port``; None means the default port (4222, where every other command
    and ``jetstream.connect()`` look), or a free one, said in one line, when that one is
    taken; 0 means a free one. Prints the client URL (and, on any port but the default,
    the ``NATS_URL`` to export), then waits for SIGINT or SIGTERM and stops the server
    cleanly. Returns 1 when the server cannot start or dies on its own.
    """
    if port is None:
        port = DEFAULT_PORT
        if not _port_free(port):
            print(
                f"port {port} is in use (another nats-server?): listening on a free port instead",
                file=sys.stderr,
                flush=True,
            )
            port = 0
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
            if server.port != DEFAULT_PORT:
                print(f"export NATS_URL={server.url}", flush=True)
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

    from ..client import connect
    from ..demo import confirmed_ack

    async def demo(url: str) -> None:
        async with connect(url) as nc:
            await confirmed_ack(nc)

    with NatsServer() as server:
        version = server.varz().get("version", "?")
        print(f"embedded nats-server {version} at {server.url}, JetStream enabled")
        print()
        asyncio.run(demo(server.url))
    return 0
