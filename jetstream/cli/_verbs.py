"""The verbs of ``python -m jetstream`` past the core, streams and consumers (those are in
``jetstream.cli._parser``): KeyValue, counters, services, object stores and bench."""

from __future__ import annotations

import argparse
from typing import Any

from ._args import Tree, duration, integer, positive, seconds, size

__all__ = ["VERBS"]


def _kv_verbs(t: Tree, commands: Any) -> None:
    g = t.group(commands, "kv", "KeyValue buckets")
    p = t.verb(g, "add", "create a bucket", "_kv:cmd_kv_add", aliases=("create-bucket",))
    p.add_argument("bucket")
    p.add_argument("--history", type=positive, default=1, help="revisions kept per key (1-64)")
    p.add_argument("--ttl", type=duration, metavar="DURATION", help="how long values live")
    p.add_argument("--storage", choices=("file", "memory"), default="file")
    p.add_argument("--replicas", type=positive, default=1)
    p.add_argument("--max-bytes", type=size, metavar="SIZE")
    p.add_argument("--max-value-size", type=size, metavar="SIZE")
    p.add_argument("--description")
    p = t.verb(g, "info", "show a bucket's status", "_kv:cmd_kv_info", aliases=("status",))
    p.add_argument("bucket")
    for name, func, help in (
        ("put", "_kv:cmd_kv_put", "store a value"),
        ("create", "_kv:cmd_kv_create", "store a value only if the key has none"),
    ):
        p = t.verb(g, name, help, func)
        p.add_argument("bucket")
        p.add_argument("key")
        p.add_argument("value", nargs="?", help="the value; stdin if missing or -")
    p = t.verb(g, "get", "print a key's value", "_kv:cmd_kv_get")
    p.add_argument("bucket")
    p.add_argument("key")
    p.add_argument("--revision", type=positive, help="a given revision")
    p.add_argument("--raw", action="store_true", help="print the value only, byte for byte")
    p = t.verb(g, "del", "delete a key", "_kv:cmd_kv_del", aliases=("delete",))
    p.add_argument("bucket")
    p.add_argument("key")
    p.add_argument(
        "-f",
        "--force",
        action="store_true",
        help="accepted for nats CLI compatibility (never asks)",
    )
    p = t.verb(g, "rm", "delete a bucket and all its keys", "_kv:cmd_kv_rm")
    p.add_argument("bucket")
    p.add_argument(
        "-f",
        "--force",
        action="store_true",
        help="accepted for nats CLI compatibility (never asks)",
    )
    p = t.verb(g, "watch", "print changes until Ctrl-C", "_kv:cmd_kv_watch")
    p.add_argument("bucket")
    p.add_argument("key", nargs="?", help="a key or filter (* and > wildcards; default all)")
    p.add_argument("--count", type=positive, help="exit after this many entries")
    p.add_argument(
        "--wait", type=seconds, metavar="DURATION", help="exit after this long without changes"
    )
    p.add_argument("--history", action="store_true", help="start with every kept revision")
    p.add_argument("--updates-only", action="store_true", help="only changes from now on")
    p = t.verb(g, "history", "list a key's kept revisions", "_kv:cmd_kv_history")
    p.add_argument("bucket")
    p.add_argument("key")
    p = t.verb(g, "ls", "list buckets, or the keys of BUCKET", "_kv:cmd_kv_ls", aliases=("list",))
    p.add_argument("bucket", nargs="?")


def _counter_verbs(t: Tree, commands: Any) -> None:
    g = t.group(commands, "counter", "distributed counters (a stream made with --allow-counter)")
    p = t.verb(g, "add", "add to a counter and print its new total", "_counter:cmd_counter_add")
    p.add_argument("stream")
    p.add_argument("subject")
    p.add_argument(
        "value", nargs="?", type=integer, default=1, help="what to add, e.g. 5 or -2 (default 1)"
    )
    p.add_argument("--msg-id", help="count this increment once however often it is sent")
    p = t.verb(
        g,
        "get",
        "print counters: one subject's, or all matching filters",
        "_counter:cmd_counter_get",
    )
    p.add_argument("stream")
    p.add_argument(
        "subjects", nargs="*", metavar="SUBJECT", help="a subject or filters (default all)"
    )
    p.add_argument("--raw", action="store_true", help="print the totals only")


def _service_verbs(t: Tree, commands: Any) -> None:
    g = t.group(commands, "service", "services (ADR-32) answering on $SRV, of any client")

    def wait(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--wait", type=float, default=1.0, metavar="SECONDS", help="gather answers this long"
        )

    p = t.verb(
        g, "ls", "list the services that answer", "_service:cmd_service_ls", aliases=("list",)
    )
    p.add_argument("name", nargs="?", help="only the instances of this service")
    wait(p)
    p = t.verb(g, "info", "a service's description and endpoints", "_service:cmd_service_info")
    p.add_argument("name")
    p.add_argument("id", nargs="?", help="one instance only")
    wait(p)
    p = t.verb(g, "stats", "a service's requests, errors and times", "_service:cmd_service_stats")
    p.add_argument("name")
    p.add_argument("id", nargs="?", help="one instance only")
    wait(p)


def _obj_verbs(t: Tree, commands: Any) -> None:
    g = t.group(commands, "obj", "object store buckets")
    p = t.verb(g, "add", "create a bucket", "_obj:cmd_obj_add", aliases=("create-bucket",))
    p.add_argument("bucket")
    p.add_argument("--ttl", type=duration, metavar="DURATION", help="how long objects live")
    p.add_argument("--storage", choices=("file", "memory"), default="file")
    p.add_argument("--replicas", type=positive, default=1)
    p.add_argument("--max-bytes", type=size, metavar="SIZE")
    p.add_argument("--description")
    p = t.verb(g, "put", "store a file (with a progress bar)", "_obj:cmd_obj_put")
    p.add_argument("bucket")
    p.add_argument("file", help="the file; - for stdin (then --name is needed)")
    p.add_argument("--name", help="the object's name (default: the file's name)")
    p.add_argument("--description")
    p = t.verb(g, "get", "fetch an object into a file (with a progress bar)", "_obj:cmd_obj_get")
    p.add_argument("bucket")
    p.add_argument("name")
    p.add_argument(
        "-O", "--output", metavar="FILE", help="where to write it; - for stdout (default: its name)"
    )
    p.add_argument("-f", "--force", action="store_true", help="overwrite an existing file")
    p = t.verb(
        g, "ls", "list buckets, or the objects of BUCKET", "_obj:cmd_obj_ls", aliases=("list",)
    )
    p.add_argument("bucket", nargs="?")
    p = t.verb(g, "info", "show a bucket's or an object's info", "_obj:cmd_obj_info")
    p.add_argument("bucket")
    p.add_argument("name", nargs="?")
    p = t.verb(
        g,
        "rm",
        "delete an object (or, with --force and no NAME, the bucket)",
        "_obj:cmd_obj_rm",
        aliases=("del",),
    )
    p.add_argument("bucket")
    p.add_argument("name", nargs="?")
    p.add_argument("-f", "--force", action="store_true", help="needed to delete a whole bucket")


def _bench_verb(t: Tree, commands: Any) -> None:
    p = t.verb(commands, "bench", "measure publish/subscribe throughput", "_bench:cmd_bench")
    p.add_argument("subject")
    p.add_argument(
        "--msgs", type=positive, default=100_000, help="messages to publish (default 100,000)"
    )
    p.add_argument(
        "--size", type=size, default=128, help="payload size, e.g. 128, 1KB (default 128)"
    )
    p.add_argument("--pub", type=positive, default=1, help="publishers (default 1)")
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


#: command -> the function that adds it (``jetstream.cli._parser.BUILDERS`` has them all)
VERBS = {
    "kv": _kv_verbs,
    "counter": _counter_verbs,
    "service": _service_verbs,
    "obj": _obj_verbs,
    "bench": _bench_verb,
}
