"""``kv add|info|put|create|get|del|rm|watch|history|ls``."""

from __future__ import annotations

from typing import Any

from ..api import StorageType
from ..kv import KeyValueEntry, KeyValueOp, KeyValueStatus
from ._core import body_of
from ._session import Session
from ._util import (
    CliError,
    bounded,
    fmt_bytes,
    fmt_duration,
    fmt_num,
    fmt_time,
    payload_doc,
    text_of,
)

__all__ = [
    "cmd_kv_add",
    "cmd_kv_create",
    "cmd_kv_del",
    "cmd_kv_get",
    "cmd_kv_history",
    "cmd_kv_info",
    "cmd_kv_ls",
    "cmd_kv_put",
    "cmd_kv_rm",
    "cmd_kv_watch",
    "entry_doc",
]


def entry_doc(e: KeyValueEntry) -> dict[str, Any]:
    """An entry as JSON-ready data (the value as text when it is valid UTF-8, else in
    base64 with ``"value_encoding": "base64"``)."""
    return {
        "bucket": e.bucket,
        "key": e.key,
        "revision": e.revision,
        "operation": e.operation.value,
        "created": e.created,
        "delta": e.delta,
        **payload_doc(e.value, "value"),
    }


def _status_doc(st: KeyValueStatus) -> dict[str, Any]:
    cfg = st.stream_info.config
    return {
        "bucket": st.bucket,
        "description": cfg.description or "",
        "values": st.values,
        "history": st.history,
        "ttl": st.ttl,
        "bytes": st.bytes,
        "storage": cfg.storage.value,
        "replicas": cfg.num_replicas or 1,
        "compressed": st.is_compressed,
        "backing_store": st.backing_store,
        "stream": cfg.name,
        "created": st.stream_info.created,
    }


def _status_view(s: Session, st: KeyValueStatus) -> None:
    doc = _status_doc(st)
    s.out.view(
        f"KeyValue bucket {st.bucket} (created {fmt_time(doc['created'])})",
        [
            (
                "Configuration",
                [
                    ("Description", doc["description"]),
                    ("History", st.history),
                    ("TTL", fmt_duration(st.ttl)),
                    ("Storage", doc["storage"]),
                    ("Replicas", doc["replicas"]),
                    ("Compressed", st.is_compressed),
                    ("Backing stream", doc["stream"]),
                ],
            ),
            ("State", [("Values", fmt_num(st.values)), ("Size", fmt_bytes(st.bytes))]),
        ],
    )


async def cmd_kv_add(s: Session) -> int:
    a = s.args
    options: dict[str, Any] = {
        "bucket": a.bucket,
        "history": a.history,
        "storage": StorageType(a.storage),
        "replicas": a.replicas,
    }
    if a.ttl is not None:
        options["ttl"] = a.ttl
    if a.max_bytes is not None:
        options["max_bytes"] = a.max_bytes
    if a.max_value_size is not None:
        options["max_value_size"] = a.max_value_size
    if a.description is not None:
        options["description"] = a.description
    kv = await s.js.create_key_value(**options)
    st = await kv.status()
    if s.out.json:
        s.out.json_doc(_status_doc(st))
    else:
        _status_view(s, st)
    return 0


async def cmd_kv_info(s: Session) -> int:
    kv = await s.js.key_value(s.args.bucket)
    st = await kv.status()
    if s.out.json:
        s.out.json_doc(_status_doc(st))
    else:
        _status_view(s, st)
    return 0


async def _write(s: Session, *, create: bool) -> int:
    a = s.args
    kv = await s.js.key_value(a.bucket)
    value = body_of(a.value)
    rev = await (kv.create if create else kv.put)(a.key, value)
    if s.out.json:
        s.out.json_doc({"bucket": a.bucket, "key": a.key, "revision": rev})
    else:
        s.out.line(f"{a.bucket} > {a.key} revision {rev}")
    return 0


async def cmd_kv_put(s: Session) -> int:
    return await _write(s, create=False)


async def cmd_kv_create(s: Session) -> int:
    return await _write(s, create=True)


async def cmd_kv_get(s: Session) -> int:
    a = s.args
    kv = await s.js.key_value(a.bucket)
    e = await kv.get(a.key, revision=a.revision)
    if s.out.json:
        s.out.json_doc(entry_doc(e))
    elif a.raw:
        s.out.raw(e.value)
    else:
        s.out.line(f"{a.bucket} > {e.key} revision {e.revision} created {fmt_time(e.created)}")
        s.out.line()
        s.out.line(text_of(e.value))
    return 0


async def cmd_kv_del(s: Session) -> int:
    a = s.args
    kv = await s.js.key_value(a.bucket)
    rev = await kv.delete(a.key)
    if s.out.json:
        s.out.json_doc({"bucket": a.bucket, "key": a.key, "revision": rev, "deleted": True})
    else:
        s.out.line(f"{a.bucket} > {a.key} deleted (revision {rev})")
    return 0


async def cmd_kv_rm(s: Session) -> int:
    a = s.args
    await s.js.delete_key_value(a.bucket)
    if s.out.json:
        s.out.json_doc({"bucket": a.bucket, "deleted": True})
    else:
        s.out.line(f"KeyValue bucket {a.bucket} deleted")
    return 0


def _entry_line(e: KeyValueEntry) -> str:
    head = f"[{fmt_time(e.created)}] {e.operation.value} {e.bucket} > {e.key}"
    if e.operation is KeyValueOp.PUT:
        return f"{head}: {text_of(e.value)}"
    return head


async def cmd_kv_watch(s: Session) -> int:
    a = s.args
    kv = await s.js.key_value(a.bucket)
    key = a.key or ">"
    n = 0
    watcher = kv.watch(key, include_history=a.history, updates_only=a.updates_only)
    await bounded(watcher.__aenter__(), s.timeout * 3, f"start watching {a.bucket} > {key}")
    try:
        s.out.info(f"Watching {a.bucket} > {key}")
        while a.count is None or n < a.count:
            try:
                entry = await watcher.next(timeout=a.wait)
            except StopAsyncIteration:
                break
            except TimeoutError:
                if a.count is not None:
                    raise CliError(
                        f"watched {n} of {a.count} changes: none for {a.wait:g}s"
                    ) from None
                break
            if entry is None:  # every current value has been shown
                continue
            n += 1
            if s.out.json:
                s.out.json_line(entry_doc(entry))
            else:
                s.out.line(_entry_line(entry))
    finally:
        await bounded(watcher.stop(), s.timeout, "stop the watch")
    return 0


async def cmd_kv_history(s: Session) -> int:
    a = s.args
    kv = await s.js.key_value(a.bucket)
    entries = await bounded(kv.history(a.key), s.timeout * 3, f"history of {a.bucket} > {a.key}")
    if s.out.json:
        s.out.json_doc([entry_doc(e) for e in entries])
        return 0
    rows = [
        (
            e.key,
            e.revision,
            e.operation.value,
            fmt_time(e.created),
            len(e.value),
            text_of(e.value, 40),
        )
        for e in entries
    ]
    cols = ("Key", "Revision", "Op", "Created", "Length", "Value")
    s.out.table(f"History of {a.bucket} > {a.key}", cols, rows, right=(1, 4))
    return 0


async def cmd_kv_ls(s: Session) -> int:
    a, out = s.args, s.out
    if a.bucket:
        kv = await s.js.key_value(a.bucket)
        keys = sorted(await bounded(kv.keys(), s.timeout * 3, f"keys of {a.bucket}"))
        if out.json:
            out.json_doc(keys)
        elif not keys:
            out.info(f"No keys in bucket {a.bucket}")
        else:
            for key in keys:
                out.line(key)
        return 0
    buckets = sorted([st async for st in s.js.key_values()], key=lambda st: st.bucket)
    if out.json:
        out.json_doc([_status_doc(st) for st in buckets])
        return 0
    if not buckets:
        out.line("No KeyValue buckets defined")
        return 0
    rows = [
        (
            st.bucket,
            st.stream_info.config.description or "",
            fmt_time(st.stream_info.created),
            fmt_bytes(st.bytes),
            fmt_num(st.values),
            st.history,
        )
        for st in buckets
    ]
    cols = ("Bucket", "Description", "Created", "Size", "Values", "History")
    out.table(f"KeyValue buckets ({len(buckets)})", cols, rows, right=(3, 4, 5))
    return 0
