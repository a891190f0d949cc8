"""The argparse tree of ``python -m jetstream``: verbs shaped like the nats CLI's.

A verb's options go anywhere among its arguments (``pub demo.y --count 3 'msg
{{Count}}'``), and an error shows the verb's usage (``jetstream._args.VerbParser``). The
connection and output options (``--server``, ``--json``, ...) are accepted before the
command, between it and its verb, and after it; their defaults come from ``NATS_URL``,
``NATS_CREDS``, ``NATS_USER``, ``NATS_PASSWORD``, ``NATS_TOKEN``, ``NATS_NKEY``,
``NATS_CA``, ``NATS_CERT`` and ``NATS_KEY`` (read when the parser is built). Help texts
never show the value of a secret.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from ._args import (
    DEFAULT_PORT,
    DEFAULT_URL,
    ENV,
    Tree,
    VerbParser,
    duration,
    header,
    positive,
    seconds,
    size,
)
from ._verbs import VERBS

__all__ = ["BUILDERS", "build_parser", "parser_for"]

_FORMATTER = argparse.RawDescriptionHelpFormatter


def _add_common(p: argparse.ArgumentParser, *, with_defaults: bool) -> set[str]:
    """The connection and output options; real defaults on the top parser only, so that
    an option given before the verb is not reset by the verb's parser. Returns the
    option strings that take a value."""

    def d(value: Any) -> Any:
        return value if with_defaults else argparse.SUPPRESS

    def env(dest: str) -> Any:
        return d(os.environ.get(ENV[dest]) or None)

    takes_value: set[str] = set()

    def arg(group: Any, *names: str, **kw: Any) -> None:
        action = group.add_argument(*names, **kw)
        if action.nargs != 0:
            takes_value.update(action.option_strings)

    g = p.add_argument_group("connection options")
    arg(
        g,
        "-s",
        "--server",
        metavar="URL",
        default=env("server"),
        help=f"server URL(s), comma-separated (env NATS_URL; default {DEFAULT_URL})",
    )
    arg(
        g,
        "--creds",
        metavar="FILE",
        default=env("creds"),
        help="user JWT credentials file (env NATS_CREDS)",
    )
    arg(
        g, "--nkey", metavar="FILE", default=env("nkey"), help="user nkey seed file (env NATS_NKEY)"
    )
    arg(g, "--user", default=env("user"), help="user name (env NATS_USER)")
    arg(g, "--password", default=env("password"), help="password (env NATS_PASSWORD)")
    arg(g, "--token", default=env("token"), help="authentication token (env NATS_TOKEN)")
    arg(
        g,
        "--tls-ca",
        metavar="FILE",
        default=env("tls_ca"),
        help="CA certificate(s) to trust (env NATS_CA)",
    )
    arg(
        g,
        "--tls-cert",
        metavar="FILE",
        default=env("tls_cert"),
        help="client certificate (env NATS_CERT)",
    )
    arg(
        g,
        "--tls-key",
        metavar="FILE",
        default=env("tls_key"),
        help="client certificate key (env NATS_KEY)",
    )
    arg(g, "--domain", default=d(None), help="JetStream domain")
    arg(
        g,
        "--timeout",
        type=seconds,
        metavar="DURATION",
        default=d(5.0),
        help="time limit of each network operation, e.g. 500ms, 5s, 1m (default 5s)",
    )
    o = p.add_argument_group("output options")
    arg(o, "--json", action="store_true", default=d(False), help="print JSON")
    arg(
        o,
        "--plain",
        action="store_true",
        default=d(False),
        help="plain text: no rich tables or progress bars (also JETSTREAM_CLI_PLAIN=1)",
    )
    return takes_value


def _core_verbs(t: Tree, commands: Any) -> None:
    p = t.verb(commands, "pub", "publish a message", "_core:cmd_pub")
    p.add_argument("subject")
    p.add_argument(
        "body", nargs="?", help="the body ({{Count}} is the message number); stdin if missing or -"
    )
    p.add_argument("--count", type=positive, default=1, help="publish this many messages")
    p.add_argument(
        "-H", "--header", type=header, action="append", metavar="K:V", help="a header (repeatable)"
    )
    p.add_argument("--reply", help="reply subject (core publish)")
    p.add_argument(
        "--sleep", type=duration, default=0.0, metavar="DURATION", help="pause between messages"
    )
    p.add_argument(
        "-J",
        "--jetstream",
        "--js",
        action="store_true",
        help="publish to a stream and wait for its ack",
    )
    p.add_argument("--msg-id", help="Nats-Msg-Id for deduplication (with --js; {{Count}} allowed)")

    p = t.verb(commands, "sub", "subscribe and print messages until Ctrl-C", "_core:cmd_sub")
    p.add_argument("subject")
    p.add_argument("--queue", help="join this queue group")
    p.add_argument("--count", type=positive, help="exit after this many messages")
    p.add_argument(
        "--wait", type=seconds, metavar="DURATION", help="exit after this long without messages"
    )
    p.add_argument("--raw", action="store_true", help="print bodies only, one a line")

    p = t.verb(
        commands, "req", "send a request and print the reply", "_core:cmd_req", aliases=("request",)
    )
    p.add_argument("subject")
    p.add_argument("body", nargs="?", help="the body; stdin if missing or -")
    p.add_argument(
        "-H", "--header", type=header, action="append", metavar="K:V", help="a header (repeatable)"
    )
    p.add_argument("--raw", action="store_true", help="print the reply body only, byte for byte")

    p = t.verb(commands, "reply", "answer requests with a fixed body", "_core:cmd_reply")
    p.add_argument("subject")
    p.add_argument(
        "body", nargs="?", help="the reply ({{Count}} is the request number); stdin if missing"
    )
    p.add_argument("--queue", help="join this queue group")
    p.add_argument("--count", type=positive, help="exit after this many requests")
    p.add_argument(
        "--wait", type=seconds, metavar="DURATION", help="exit after this long without requests"
    )


def _stream_options(p: argparse.ArgumentParser, *, edit: bool) -> None:
    """The options of ``stream add`` and ``stream edit`` but storage and retention (which
    an existing stream keeps). An option ``edit`` is not given keeps its value (None)."""
    flag = argparse.BooleanOptionalAction if edit else "store_true"
    p.add_argument(
        "--subjects",
        action="append",
        metavar="SUBJECTS",
        help="subjects, comma-separated or repeated"
        + (" (replace the stream's)" if edit else " (default: the name)"),
    )
    p.add_argument("--description")
    p.add_argument("--replicas", type=positive)
    p.add_argument("--discard", choices=("old", "new"), default=None if edit else "old")
    p.add_argument("--max-msgs", type=int, metavar="N")
    p.add_argument("--max-msgs-per-subject", type=int, metavar="N")
    p.add_argument("--max-bytes", type=size, metavar="SIZE")
    p.add_argument("--max-age", type=duration, metavar="DURATION")
    p.add_argument("--max-msg-size", type=size, metavar="SIZE")
    p.add_argument("--dupe-window", type=duration, metavar="DURATION", help="deduplication window")
    p.add_argument("--allow-direct", action=flag, help="allow direct gets")
    p.add_argument(
        "--allow-counter",
        action=flag,
        help="every subject a distributed counter (see counter add/get)",
    )
    p.add_argument("--allow-schedules", action=flag, help="allow message schedules")
    p.add_argument("--allow-msg-ttl", action=flag, help="allow per-message TTLs")


def _stream_verbs(t: Tree, commands: Any) -> None:
    g = t.group(commands, "stream", "manage streams")
    p = t.verb(g, "ls", "list streams", "_streams:cmd_stream_ls", aliases=("list",))
    p.add_argument("--subject", help="only streams holding this subject")
    p.add_argument("--names", action="store_true", help="names only")
    p.add_argument(
        "-a",
        "--all",
        action="store_true",
        help="the streams of KeyValue and object store buckets too (KV_*, OBJ_*)",
    )
    p = t.verb(g, "info", "show a stream's config and state", "_streams:cmd_stream_info")
    p.add_argument("stream")
    p = t.verb(g, "add", "create a stream", "_streams:cmd_stream_add", aliases=("create",))
    p.add_argument("stream")
    p.add_argument("--storage", choices=("file", "memory"), default="file")
    p.add_argument("--retention", choices=("limits", "interest", "workqueue"), default="limits")
    _stream_options(p, edit=False)
    p = t.verb(
        g,
        "edit",
        "change a stream's config: the options given, the rest kept as it is",
        "_streams:cmd_stream_edit",
        aliases=("update",),
    )
    p.add_argument("stream")
    _stream_options(p, edit=True)
    p = t.verb(
        g, "rm", "delete a stream and its messages", "_streams:cmd_stream_rm", aliases=("delete",)
    )
    p.add_argument("stream")
    p.add_argument(
        "-f",
        "--force",
        action="store_true",
        help="accepted for nats CLI compatibility (never asks)",
    )
    p = t.verb(g, "purge", "remove a stream's messages", "_streams:cmd_stream_purge")
    p.add_argument("stream")
    p.add_argument("--subject", help="only messages on this subject")
    p.add_argument("--seq", type=int, help="messages below this sequence")
    p.add_argument("--keep", type=int, help="keep this many of the newest")
    p.add_argument(
        "-f",
        "--force",
        action="store_true",
        help="accepted for nats CLI compatibility (never asks)",
    )
    p = t.verb(g, "get", "print one message of a stream", "_streams:cmd_stream_get")
    p.add_argument("stream")
    p.add_argument("seq", type=positive, nargs="?", help="the sequence")
    p.add_argument("--last-for", metavar="SUBJECT", help="the last message on SUBJECT")
    p.add_argument("--raw", action="store_true", help="print the body only, byte for byte")


def _consumer_verbs(t: Tree, commands: Any) -> None:
    g = t.group(commands, "consumer", "manage consumers and read through them")
    p = t.verb(g, "ls", "list a stream's consumers", "_streams:cmd_consumer_ls", aliases=("list",))
    p.add_argument("stream")
    p = t.verb(g, "info", "show a consumer's config and state", "_streams:cmd_consumer_info")
    p.add_argument("stream")
    p.add_argument("consumer")
    p = t.verb(
        g, "add", "create a durable consumer", "_streams:cmd_consumer_add", aliases=("create",)
    )
    p.add_argument("stream")
    p.add_argument("consumer")
    p.add_argument(
        "--filter",
        action="append",
        metavar="SUBJECTS",
        help="filter subjects, comma-separated or repeated",
    )
    p.add_argument(
        "--ack",
        choices=("explicit", "none", "all"),
        default="explicit",
        help="ack policy (default explicit)",
    )
    p.add_argument("--pull", action="store_true", help="a pull consumer (the default)")
    p.add_argument("--deliver", metavar="SUBJECT", help="a push consumer delivering to SUBJECT")
    p.add_argument("--deliver-group", metavar="GROUP", help="queue group of a push consumer")
    p.add_argument(
        "--deliver-policy",
        choices=("all", "last", "new", "last_per_subject"),
        default="all",
        help="where to start (default all)",
    )
    p.add_argument(
        "--start-seq", type=positive, metavar="SEQ", help="start at this stream sequence"
    )
    p.add_argument("--replay", choices=("instant", "original"), default="instant")
    p.add_argument("--ack-wait", type=duration, metavar="DURATION")
    p.add_argument("--max-deliver", type=int, metavar="N")
    p.add_argument("--max-ack-pending", type=int, metavar="N")
    p.add_argument("--description")
    p = t.verb(g, "rm", "delete a consumer", "_streams:cmd_consumer_rm", aliases=("delete",))
    p.add_argument("stream")
    p.add_argument("consumer")
    p.add_argument(
        "-f",
        "--force",
        action="store_true",
        help="accepted for nats CLI compatibility (never asks)",
    )
    p = t.verb(
        g, "next", "fetch messages from a pull consumer and ack them", "_streams:cmd_consumer_next"
    )
    p.add_argument("stream")
    p.add_argument("consumer")
    p.add_argument("--count", type=positive, default=1, help="how many messages (default 1)")
    p.add_argument("--no-ack", action="store_true", help="do not acknowledge")
    p.add_argument(
        "--raw",
        action="store_true",
        help="print bodies only (one message: byte for byte; more: one a line)",
    )


def _local_verbs(t: Tree, commands: Any) -> None:
    server = commands.add_parser("server", help="run a local nats-server until Ctrl-C")
    server.add_argument(
        "--port",
        type=int,
        default=None,
        help=f"client port (default {DEFAULT_PORT}, where the other commands look; "
        "a free one if it is taken; 0: a free one)",
    )
    server.add_argument(
        "--store-dir",
        default=None,
        help="JetStream store directory (default: a temporary one, removed on exit); "
        "give one to keep streams across runs",
    )
    server.add_argument(
        "--no-jetstream", dest="jetstream", action="store_false", help="run without JetStream"
    )
    commands.add_parser("demo", help="run the confirmed-ack example on an embedded server")


#: command (and alias) -> the function that adds it (with its neighbours), in help order
BUILDERS: dict[str, Callable[[Tree, Any], None]] = {
    **dict.fromkeys(("server", "demo"), _local_verbs),
    **dict.fromkeys(("pub", "sub", "req", "request", "reply"), _core_verbs),
    "stream": _stream_verbs,
    "consumer": _consumer_verbs,
    **VERBS,
}


def build_parser() -> argparse.ArgumentParser:
    """The whole parser (environment defaults are read now)."""
    return _build(None)


def parser_for(argv: Sequence[str]) -> argparse.ArgumentParser:
    """The parser of the command ``argv`` names, with that command alone (a tenth of the
    whole tree, built in a millisecond instead of ten); the whole parser when it names
    none that is known (``--help``, a typo: argparse then lists them all)."""
    return _build(argv)


def _command(argv: Sequence[str], takes_value: set[str]) -> str | None:
    """The command ``argv`` names: its first argument that is neither an option nor an
    option's value."""
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--":
            return None
        elif arg.startswith("-") and len(arg) > 1:
            skip = arg in takes_value
        else:
            return arg
    return None


def _build(argv: Sequence[str] | None) -> argparse.ArgumentParser:
    script = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    parser = argparse.ArgumentParser(
        prog="jetstream" if script.startswith("jetstream") else "python -m jetstream",
        description="jetstream: asyncio NATS JetStream client tools, shaped like the nats CLI",
        epilog="Errors print one line on stderr and exit with status 1 (2 for usage errors).",
        formatter_class=_FORMATTER,
    )
    takes_value = _add_common(parser, with_defaults=True)
    common = argparse.ArgumentParser(add_help=False)
    _add_common(common, with_defaults=False)
    t = Tree(common)
    parser.set_defaults(prog=parser.prog)
    commands = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=VerbParser
    )
    only = BUILDERS.get(_command(argv, takes_value) or "") if argv is not None else None
    for add in [only] if only is not None else dict.fromkeys(BUILDERS.values()):
        add(t, commands)
    return parser
