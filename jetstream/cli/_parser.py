"""The argparse tree of ``python -m jetstream``: verbs shaped like the nats CLI's.

The connection and output options (``--server``, ``--json``, ...) are accepted both
before the verb and after it; their defaults come from ``NATS_URL``, ``NATS_CREDS``,
``NATS_USER``, ``NATS_PASSWORD``, ``NATS_TOKEN``, ``NATS_NKEY``, ``NATS_CA``,
``NATS_CERT`` and ``NATS_KEY`` (read when the parser is built). Help texts never show
the value of a secret.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

from . import _bench, _core, _counter, _kv, _obj, _service, _streams
from ._session import DEFAULT_PORT, DEFAULT_URL, ENV
from ._util import parse_duration, parse_header, parse_size

__all__ = ["build_parser"]

_FORMATTER = argparse.RawDescriptionHelpFormatter


def _typed(fn: Callable[[str], Any], name: str) -> Callable[[str], Any]:
    """An argparse ``type`` whose errors read ``invalid <name> value`` plus the reason."""

    def convert(text: str) -> Any:
        try:
            return fn(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = name
    return convert


duration = _typed(parse_duration, "duration")
size = _typed(parse_size, "size")
header = _typed(parse_header, "header")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _seconds(text: str) -> float:
    value = float(duration(text))
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, not {text!r}")
    return value


def _add_common(p: argparse.ArgumentParser, *, with_defaults: bool) -> None:
    """The connection and output options; real defaults on the top parser only, so that
    an option given before the verb is not reset by the verb's parser."""

    def d(value: Any) -> Any:
        return value if with_defaults else argparse.SUPPRESS

    def env(dest: str) -> Any:
        return d(os.environ.get(ENV[dest]) or None)

    g = p.add_argument_group("connection options")
    g.add_argument(
        "-s",
        "--server",
        metavar="URL",
        default=env("server"),
        help=f"server URL(s), comma-separated (env NATS_URL; default {DEFAULT_URL})",
    )
    g.add_argument(
        "--creds",
        metavar="FILE",
        default=env("creds"),
        help="user JWT credentials file (env NATS_CREDS)",
    )
    g.add_argument(
        "--nkey", metavar="FILE", default=env("nkey"), help="user nkey seed file (env NATS_NKEY)"
    )
    g.add_argument("--user", default=env("user"), help="user name (env NATS_USER)")
    g.add_argument("--password", default=env("password"), help="password (env NATS_PASSWORD)")
    g.add_argument("--token", default=env("token"), help="authentication token (env NATS_TOKEN)")
    g.add_argument(
        "--tls-ca",
        metavar="FILE",
        default=env("tls_ca"),
        help="CA certificate(s) to trust (env NATS_CA)",
    )
    g.add_argument(
        "--tls-cert",
        metavar="FILE",
        default=env("tls_cert"),
        help="client certificate (env NATS_CERT)",
    )
    g.add_argument(
        "--tls-key",
        metavar="FILE",
        default=env("tls_key"),
        help="client certificate key (env NATS_KEY)",
    )
    g.add_argument("--domain", default=d(None), help="JetStream domain")
    g.add_argument(
        "--timeout",
        type=_seconds,
        metavar="DURATION",
        default=d(5.0),
        help="time limit of each network operation, e.g. 500ms, 5s, 1m (default 5s)",
    )
    o = p.add_argument_group("output options")
    o.add_argument("--json", action="store_true", default=d(False), help="print JSON")
    o.add_argument(
        "--plain",
        action="store_true",
        default=d(False),
        help="plain text: no rich tables or progress bars (also JETSTREAM_CLI_PLAIN=1)",
    )


class _Tree:
    """Adds verbs that share the common options and point at their handler."""

    def __init__(self, common: argparse.ArgumentParser) -> None:
        self.common = common

    def verb(
        self,
        group: Any,
        name: str,
        help: str,
        func: Callable[..., Any],
        *,
        aliases: tuple[str, ...] = (),
    ) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = group.add_parser(
            name, help=help, description=help, parents=[self.common], aliases=list(aliases)
        )
        p.set_defaults(func=func)
        return p

    def group(self, commands: Any, name: str, help: str) -> Any:
        p = commands.add_parser(name, help=help, description=help)
        return p.add_subparsers(dest="verb", required=True, metavar="VERB")


def _core_verbs(t: _Tree, commands: Any) -> None:
    p = t.verb(commands, "pub", "publish a message", _core.cmd_pub)
    p.add_argument("subject")
    p.add_argument(
        "body", nargs="?", help="the body ({{Count}} is the message number); stdin if missing or -"
    )
    p.add_argument("--count", type=_positive, default=1, help="publish this many messages")
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

    p = t.verb(commands, "sub", "subscribe and print messages until Ctrl-C", _core.cmd_sub)
    p.add_argument("subject")
    p.add_argument("--queue", help="join this queue group")
    p.add_argument("--count", type=_positive, help="exit after this many messages")
    p.add_argument(
        "--wait", type=_seconds, metavar="DURATION", help="exit after this long without messages"
    )
    p.add_argument("--raw", action="store_true", help="print bodies only")

    p = t.verb(
        commands, "req", "send a request and print the reply", _core.cmd_req, aliases=("request",)
    )
    p.add_argument("subject")
    p.add_argument("body", nargs="?", help="the body; stdin if missing or -")
    p.add_argument(
        "-H", "--header", type=header, action="append", metavar="K:V", help="a header (repeatable)"
    )
    p.add_argument("--raw", action="store_true", help="print the reply body only")

    p = t.verb(commands, "reply", "answer requests with a fixed body", _core.cmd_reply)
    p.add_argument("subject")
    p.add_argument(
        "body", nargs="?", help="the reply ({{Count}} is the request number); stdin if missing"
    )
    p.add_argument("--queue", help="join this queue group")
    p.add_argument("--count", type=_positive, help="exit after this many requests")
    p.add_argument(
        "--wait", type=_seconds, metavar="DURATION", help="exit after this long without requests"
    )


def _stream_verbs(t: _Tree, commands: Any) -> None:
    g = t.group(commands, "stream", "manage streams")
    p = t.verb(g, "ls", "list streams", _streams.cmd_stream_ls, aliases=("list",))
    p.add_argument("--subject", help="only streams holding this subject")
    p.add_argument("--names", action="store_true", help="names only")
    p = t.verb(g, "info", "show a stream's config and state", _streams.cmd_stream_info)
    p.add_argument("stream")
    p = t.verb(g, "add", "create a stream", _streams.cmd_stream_add, aliases=("create",))
    p.add_argument("stream")
    p.add_argument(
        "--subjects",
        action="append",
        metavar="SUBJECTS",
        help="subjects, comma-separated or repeated (default: the name)",
    )
    p.add_argument("--description")
    p.add_argument("--storage", choices=("file", "memory"), default="file")
    p.add_argument("--replicas", type=_positive)
    p.add_argument("--retention", choices=("limits", "interest", "workqueue"), default="limits")
    p.add_argument("--discard", choices=("old", "new"), default="old")
    p.add_argument("--max-msgs", type=int, metavar="N")
    p.add_argument("--max-msgs-per-subject", type=int, metavar="N")
    p.add_argument("--max-bytes", type=size, metavar="SIZE")
    p.add_argument("--max-age", type=duration, metavar="DURATION")
    p.add_argument("--max-msg-size", type=size, metavar="SIZE")
    p.add_argument("--dupe-window", type=duration, metavar="DURATION", help="deduplication window")
    p.add_argument("--allow-direct", action="store_true", help="allow direct gets")
    p.add_argument(
        "--allow-counter",
        action="store_true",
        help="every subject a distributed counter (see counter add/get)",
    )
    p.add_argument("--allow-schedules", action="store_true", help="allow message schedules")
    p.add_argument("--allow-msg-ttl", action="store_true", help="allow per-message TTLs")
    p = t.verb(
        g, "rm", "delete a stream and its messages", _streams.cmd_stream_rm, aliases=("delete",)
    )
    p.add_argument("stream")
    p.add_argument(
        "-f",
        "--force",
        action="store_true",
        help="accepted for nats CLI compatibility (never asks)",
    )
    p = t.verb(g, "purge", "remove a stream's messages", _streams.cmd_stream_purge)
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
    p = t.verb(g, "get", "print one message of a stream", _streams.cmd_stream_get)
    p.add_argument("stream")
    p.add_argument("seq", type=_positive, nargs="?", help="the sequence")
    p.add_argument("--last-for", metavar="SUBJECT", help="the last message on SUBJECT")
    p.add_argument("--raw", action="store_true", help="print the body only")


def _consumer_verbs(t: _Tree, commands: Any) -> None:
    g = t.group(commands, "consumer", "manage consumers and read through them")
    p = t.verb(g, "ls", "list a stream's consumers", _streams.cmd_consumer_ls, aliases=("list",))
    p.add_argument("stream")
    p = t.verb(g, "info", "show a consumer's config and state", _streams.cmd_consumer_info)
    p.add_argument("stream")
    p.add_argument("consumer")
    p = t.verb(
        g, "add", "create a durable consumer", _streams.cmd_consumer_add, aliases=("create",)
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
        "--start-seq", type=_positive, metavar="SEQ", help="start at this stream sequence"
    )
    p.add_argument("--replay", choices=("instant", "original"), default="instant")
    p.add_argument("--ack-wait", type=duration, metavar="DURATION")
    p.add_argument("--max-deliver", type=int, metavar="N")
    p.add_argument("--max-ack-pending", type=int, metavar="N")
    p.add_argument("--description")
    p = t.verb(g, "rm", "delete a consumer", _streams.cmd_consumer_rm, aliases=("delete",))
    p.add_argument("stream")
    p.add_argument("consumer")
    p.add_argument(
        "-f",
        "--force",
        action="store_true",
        help="accepted for nats CLI compatibility (never asks)",
    )
    p = t.verb(
        g, "next", "fetch messages from a pull consumer and ack them", _streams.cmd_consumer_next
    )
    p.add_argument("stream")
    p.add_argument("consumer")
    p.add_argument("--count", type=_positive, default=1, help="how many messages (default 1)")
    p.add_argument("--no-ack", action="store_true", help="do not acknowledge")
    p.add_argument("--raw", action="store_true", help="print bodies only")


def _kv_verbs(t: _Tree, commands: Any) -> None:
    g = t.group(commands, "kv", "KeyValue buckets")
    p = t.verb(g, "add", "create a bucket", _kv.cmd_kv_add, aliases=("create-bucket",))
    p.add_argument("bucket")
    p.add_argument("--history", type=_positive, default=1, help="revisions kept per key (1-64)")
    p.add_argument("--ttl", type=duration, metavar="DURATION", help="how long values live")
    p.add_argument("--storage", choices=("file", "memory"), default="file")
    p.add_argument("--replicas", type=_positive, default=1)
    p.add_argument("--max-bytes", type=size, metavar="SIZE")
    p.add_argument("--max-value-size", type=size, metavar="SIZE")
    p.add_argument("--description")
    p = t.verb(g, "info", "show a bucket's status", _kv.cmd_kv_info, aliases=("status",))
    p.add_argument("bucket")
    for name, func, help in (
        ("put", _kv.cmd_kv_put, "store a value"),
        ("create", _kv.cmd_kv_create, "store a value only if the key has none"),
    ):
        p = t.verb(g, name, help, func)
        p.add_argument("bucket")
        p.add_argument("key")
        p.add_argument("value", nargs="?", help="the value; stdin if missing or -")
    p = t.verb(g, "get", "print a key's value", _kv.cmd_kv_get)
    p.add_argument("bucket")
    p.add_argument("key")
    p.add_argument("--revision", type=_positive, help="a given revision")
    p.add_argument("--raw", action="store_true", help="print the value only")
    p = t.verb(g, "del", "delete a key", _kv.cmd_kv_del, aliases=("delete",))
    p.add_argument("bucket")
    p.add_argument("key")
    p.add_argument(
        "-f",
        "--force",
        action="store_true",
        help="accepted for nats CLI compatibility (never asks)",
    )
    p = t.verb(g, "rm", "delete a bucket and all its keys", _kv.cmd_kv_rm)
    p.add_argument("bucket")
    p.add_argument(
        "-f",
        "--force",
        action="store_true",
        help="accepted for nats CLI compatibility (never asks)",
    )
    p = t.verb(g, "watch", "print changes until Ctrl-C", _kv.cmd_kv_watch)
    p.add_argument("bucket")
    p.add_argument("key", nargs="?", help="a key or filter (* and > wildcards; default all)")
    p.add_argument("--count", type=_positive, help="exit after this many entries")
    p.add_argument(
        "--wait", type=_seconds, metavar="DURATION", help="exit after this long without changes"
    )
    p.add_argument("--history", action="store_true", help="start with every kept revision")
    p.add_argument("--updates-only", action="store_true", help="only changes from now on")
    p = t.verb(g, "history", "list a key's kept revisions", _kv.cmd_kv_history)
    p.add_argument("bucket")
    p.add_argument("key")
    p = t.verb(g, "ls", "list buckets, or the keys of BUCKET", _kv.cmd_kv_ls, aliases=("list",))
    p.add_argument("bucket", nargs="?")


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None


def _counter_verbs(t: _Tree, commands: Any) -> None:
    g = t.group(commands, "counter", "distributed counters (a stream made with --allow-counter)")
    p = t.verb(g, "add", "add to a counter and print its new total", _counter.cmd_counter_add)
    p.add_argument("stream")
    p.add_argument("subject")
    p.add_argument(
        "value", nargs="?", type=_integer, default=1, help="what to add, e.g. 5 or -2 (default 1)"
    )
    p.add_argument("--msg-id", help="count this increment once however often it is sent")
    p = t.verb(
        g, "get", "print counters: one subject's, or all matching filters", _counter.cmd_counter_get
    )
    p.add_argument("stream")
    p.add_argument(
        "subjects", nargs="*", metavar="SUBJECT", help="a subject or filters (default all)"
    )
    p.add_argument("--raw", action="store_true", help="print the totals only")


def _service_verbs(t: _Tree, commands: Any) -> None:
    g = t.group(commands, "service", "services (ADR-32) answering on $SRV, of any client")

    def wait(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--wait", type=float, default=1.0, metavar="SECONDS", help="gather answers this long"
        )

    p = t.verb(g, "ls", "list the services that answer", _service.cmd_service_ls, aliases=("list",))
    p.add_argument("name", nargs="?", help="only the instances of this service")
    wait(p)
    p = t.verb(g, "info", "a service's description and endpoints", _service.cmd_service_info)
    p.add_argument("name")
    p.add_argument("id", nargs="?", help="one instance only")
    wait(p)
    p = t.verb(g, "stats", "a service's requests, errors and times", _service.cmd_service_stats)
    p.add_argument("name")
    p.add_argument("id", nargs="?", help="one instance only")
    wait(p)


def _obj_verbs(t: _Tree, commands: Any) -> None:
    g = t.group(commands, "obj", "object store buckets")
    p = t.verb(g, "add", "create a bucket", _obj.cmd_obj_add, aliases=("create-bucket",))
    p.add_argument("bucket")
    p.add_argument("--ttl", type=duration, metavar="DURATION", help="how long objects live")
    p.add_argument("--storage", choices=("file", "memory"), default="file")
    p.add_argument("--replicas", type=_positive, default=1)
    p.add_argument("--max-bytes", type=size, metavar="SIZE")
    p.add_argument("--description")
    p = t.verb(g, "put", "store a file (with a progress bar)", _obj.cmd_obj_put)
    p.add_argument("bucket")
    p.add_argument("file", help="the file; - for stdin (then --name is needed)")
    p.add_argument("--name", help="the object's name (default: the file's name)")
    p.add_argument("--description")
    p = t.verb(g, "get", "fetch an object into a file (with a progress bar)", _obj.cmd_obj_get)
    p.add_argument("bucket")
    p.add_argument("name")
    p.add_argument(
        "-O", "--output", metavar="FILE", help="where to write it; - for stdout (default: its name)"
    )
    p.add_argument("-f", "--force", action="store_true", help="overwrite an existing file")
    p = t.verb(
        g, "ls", "list buckets, or the objects of BUCKET", _obj.cmd_obj_ls, aliases=("list",)
    )
    p.add_argument("bucket", nargs="?")
    p = t.verb(g, "info", "show a bucket's or an object's info", _obj.cmd_obj_info)
    p.add_argument("bucket")
    p.add_argument("name", nargs="?")
    p = t.verb(
        g,
        "rm",
        "delete an object (or, with --force and no NAME, the bucket)",
        _obj.cmd_obj_rm,
        aliases=("del",),
    )
    p.add_argument("bucket")
    p.add_argument("name", nargs="?")
    p.add_argument("-f", "--force", action="store_true", help="needed to delete a whole bucket")


def _bench_verb(t: _Tree, commands: Any) -> None:
    p = t.verb(commands, "bench", "measure publish/subscribe throughput", _bench.cmd_bench)
    p.add_argument("subject")
    p.add_argument(
        "--msgs", type=_positive, default=100_000, help="messages to publish (default 100,000)"
    )
    p.add_argument(
        "--size", type=size, default=128, help="payload size, e.g. 128, 1KB (default 128)"
    )
    p.add_argument("--pub", type=_positive, default=1, help="publishers (default 1)")
    p.add_argument("--sub", type=int, default=0, help="subscribers (default 0)")
    p.add_argument(
        "--js",
        dest="jetstream",
        action="store_true",
        help="JetStream: publish to a stream, read through consumers",
    )
    p.add_argument(
        "--stream", default="benchstream", help="the stream --js creates (default benchstream)"
    )
    p.add_argument(
        "--storage",
        choices=("file", "memory"),
        default="memory",
        help="its storage (default memory)",
    )
    p.add_argument("--keep", action="store_true", help="keep the stream afterwards")


def build_parser() -> argparse.ArgumentParser:
    """The whole parser (environment defaults are read now)."""
    script = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    parser = argparse.ArgumentParser(
        prog="jetstream" if script.startswith("jetstream") else "python -m jetstream",
        description="jetstream: asyncio NATS JetStream client tools, shaped like the nats CLI",
        epilog="Errors print one line on stderr and exit with status 1 (2 for usage errors).",
        formatter_class=_FORMATTER,
    )
    _add_common(parser, with_defaults=True)
    common = argparse.ArgumentParser(add_help=False)
    _add_common(common, with_defaults=False)
    t = _Tree(common)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

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

    _core_verbs(t, commands)
    _stream_verbs(t, commands)
    _consumer_verbs(t, commands)
    _kv_verbs(t, commands)
    _counter_verbs(t, commands)
    _service_verbs(t, commands)
    _obj_verbs(t, commands)
    _bench_verb(t, commands)
    return parser
