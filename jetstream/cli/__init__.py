"""The command line, ``python -m jetstream`` (or ``jetstream`` with the ``cli`` extra).

Verbs shaped like the nats CLI's: ``server``, ``demo``, ``pub``, ``sub``, ``req``,
``reply``, ``stream``, ``consumer``, ``kv``, ``counter``, ``service``, ``obj`` and
``bench``; ``--help`` on each lists its options. Expected failures (a server that cannot
be reached, a missing stream or key, a bad subject, a missing file...) print
``error: <one line>`` on stderr and exit with status 1; usage errors exit with 2; Ctrl-C
exits with 130 and SIGTERM with 143, both after closing the connection. No output ever
shows a password or token.

rich (the ``cli`` extra) is optional: see ``jetstream.cli._output``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from ._parser import build_parser, parser_for

if TYPE_CHECKING:
    from ._output import Output
    from ._session import Session

__all__ = ["build_parser", "main", "run_demo", "run_server"]


def _handler(args: argparse.Namespace) -> Callable[[Session], Awaitable[int]]:
    """The function that runs the parsed command (``args.func``, ``"<module>:<name>"``),
    its module imported now: a command imports what it needs, and parsing nothing."""
    module, _, name = str(args.func).partition(":")
    run: Callable[[Session], Awaitable[int]] = getattr(
        importlib.import_module(f".{module}", __name__), name
    )
    return run


async def _run(args: argparse.Namespace, out: Output) -> int:
    import asyncio
    import contextlib

    from ._session import open_session

    # SIGTERM cancels the command like Ctrl-C does, so its cleanup runs (the connection
    # is closed, a bench stream deleted, a partial download removed).
    task = asyncio.current_task()
    if task is not None:
        with contextlib.suppress(NotImplementedError, RuntimeError):  # not on Windows
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    run = _handler(args)
    async with open_session(args, out) as session:
        return await run(session)


def run_server(
    *, port: int | None = None, store_dir: str | None = None, jetstream: bool = True
) -> int:
    """Run one nats-server in the foreground until Ctrl-C or SIGTERM; the exit status.

    ``port`` None: the default port (4222), or a free one when that is taken; 0: a free one.

    (``jetstream.embedded`` is imported only for the commands that start a server.)
    """
    from ._local import run_server as run

    return run(port=port, store_dir=store_dir, jetstream=jetstream)


def run_demo() -> int:
    """Start an embedded server and run the confirmed-ack example on it; the exit status."""
    from ._local import run_demo as run

    return run()


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr, flush=True)
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default ``sys.argv[1:]``), run the command; the exit status.

    Raises:
        SystemExit: a usage error (status 2) or ``--help`` (status 0), from argparse.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser_for(argv).parse_args(argv)
    # What a run needs is imported once the command line is known to be right.
    import asyncio

    from ..errors import NatsError
    from ._args import secrets_of
    from ._util import CliError, one_line

    if args.command in ("server", "demo"):
        try:
            if args.command == "server":
                return run_server(
                    port=args.port, store_dir=args.store_dir, jetstream=args.jetstream
                )
            return run_demo()
        except NatsError as exc:  # EmbeddedServerError: no binary, no free port...
            return _fail(one_line(exc))
        except KeyboardInterrupt:
            return 130
    from ._output import Output

    out = Output(json=args.json, plain=args.plain)
    secrets = secrets_of(args)
    try:
        return asyncio.run(_run(args, out))
    except KeyboardInterrupt:
        return 130
    except asyncio.CancelledError:  # SIGTERM
        return 128 + signal.SIGTERM
    except BrokenPipeError:
        # stdout was closed early (``| head``): nothing more can be said there.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except (CliError, NatsError, OSError, ValueError) as exc:
        return _fail(one_line(exc, secrets))
