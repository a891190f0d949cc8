"""``obj add|info|ls|put|get|rm``: object store buckets, with progress bars for transfers."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import AsyncIterator
from typing import IO, Any

from ..api import StorageType
from ..objectstore import ObjectInfo, ObjectStoreStatus
from ._session import Session
from ._util import CliError, bounded, fmt_bytes, fmt_duration, fmt_num, fmt_time

__all__ = [
    "cmd_obj_add",
    "cmd_obj_get",
    "cmd_obj_info",
    "cmd_obj_ls",
    "cmd_obj_put",
    "cmd_obj_rm",
]

_READ_SIZE = 128 * 1024


def _status_doc(st: ObjectStoreStatus) -> dict[str, Any]:
    return {
        "bucket": st.bucket,
        "description": st.description,
        "ttl": st.ttl,
        "storage": st.storage.value,
        "replicas": st.replicas,
        "sealed": st.sealed,
        "size": st.size,
        "compressed": st.compressed,
        "backing_store": st.backing_store,
    }


def _status_view(s: Session, st: ObjectStoreStatus) -> None:
    s.out.view(
        f"Object store bucket {st.bucket}",
        [
            (
                "Configuration",
                [
                    ("Description", st.description),
                    ("TTL", fmt_duration(st.ttl)),
                    ("Storage", st.storage.value),
                    ("Replicas", st.replicas),
                    ("Compressed", st.compressed),
                    ("Sealed", st.sealed),
                ],
            ),
            ("State", [("Size", fmt_bytes(st.size))]),
        ],
    )


def _info_view(s: Session, info: ObjectInfo) -> None:
    link = info.link
    s.out.view(
        f"Object {info.name} in bucket {info.bucket}",
        [
            (
                "Object",
                [
                    ("Description", info.description),
                    ("Size", f"{fmt_bytes(info.size)} ({fmt_num(info.size)} bytes)"),
                    ("Chunks", fmt_num(info.chunks)),
                    ("Modified", fmt_time(info.modified)),
                    ("Digest", info.digest),
                    ("Link", f"{link.bucket}/{link.name}" if link is not None else None),
                    ("Deleted", info.deleted or None),
                ],
            )
        ],
    )


async def cmd_obj_add(s: Session) -> int:
    a = s.args
    store = await s.js.create_object_store(
        bucket=a.bucket,
        description=a.description,
        ttl=a.ttl,
        max_bytes=a.max_bytes,
        storage=StorageType(a.storage),
        replicas=a.replicas,
    )
    st = await store.status()
    if s.out.json:
        s.out.json_doc(_status_doc(st))
    else:
        _status_view(s, st)
    return 0


async def cmd_obj_info(s: Session) -> int:
    a = s.args
    store = await s.js.object_store(a.bucket)
    if a.name is None:
        st = await store.status()
        if s.out.json:
            s.out.json_doc(_status_doc(st))
        else:
            _status_view(s, st)
        return 0
    info = await store.info(a.name)
    if s.out.json:
        s.out.json_doc(info)
    else:
        _info_view(s, info)
    return 0


async def cmd_obj_ls(s: Session) -> int:
    a, out = s.args, s.out
    if a.bucket is None:
        statuses = sorted([st async for st in s.js.object_stores()], key=lambda st: st.bucket)
        if out.json:
            out.json_doc([_status_doc(st) for st in statuses])
        elif not statuses:
            out.line("No object store buckets defined")
        else:
            brows = [(st.bucket, st.description, fmt_bytes(st.size), st.sealed) for st in statuses]
            bcols = ("Bucket", "Description", "Size", "Sealed")
            out.table(f"Object store buckets ({len(statuses)})", bcols, brows, right=(2,))
        return 0
    store = await s.js.object_store(a.bucket)
    infos = sorted(
        await bounded(store.list(), s.timeout * 3, f"list {a.bucket}"), key=lambda i: i.name
    )
    if out.json:
        out.json_doc(infos)
    elif not infos:
        out.line(f"No objects in bucket {a.bucket}")
    else:
        rows = [
            (i.name, fmt_bytes(i.size), fmt_num(i.chunks), fmt_time(i.modified), i.digest or "")
            for i in infos
        ]
        cols = ("Name", "Size", "Chunks", "Modified", "Digest")
        out.table(f"Objects in {a.bucket} ({len(infos)})", cols, rows, right=(1, 2))
    return 0


def _open_source(path: str) -> tuple[IO[bytes], int | None]:
    """The file to put (stdin for ``-``) and its size when known."""
    if path == "-":
        return sys.stdin.buffer, None
    src = open(path, "rb")  # noqa: SIM115  (closed by the caller)
    st = os.fstat(src.fileno())
    return src, st.st_size if stat.S_ISREG(st.st_mode) else None


def _check_target(path: str, force: bool) -> None:
    if os.path.exists(path) and not force:
        raise CliError(f"{path} exists; pass --force to overwrite it")


def _open_target(path: str) -> IO[bytes]:
    return open(path, "wb")  # closed by the caller


async def cmd_obj_put(s: Session) -> int:
    a = s.args
    from_stdin = a.file == "-"
    name = a.name or ("" if from_stdin else os.path.basename(a.file))
    if not name:
        raise CliError("reading from stdin needs --name NAME")
    src, total = _open_source(a.file)
    try:
        store = await s.js.object_store(a.bucket)
        with s.out.progress() as bars:
            task = bars.add(f"put {name}", total, "bytes")

            async def chunks() -> AsyncIterator[bytes]:
                done = 0
                while True:
                    # Local reads stay on the loop: one chunk read is short.
                    chunk = src.read(_READ_SIZE)
                    if not chunk:
                        return
                    done += len(chunk)
                    bars.update(task, done)
                    yield chunk

            info = await store.put(name, chunks(), description=a.description, timeout=s.timeout)
    finally:
        if not from_stdin:
            src.close()
    if s.out.json:
        s.out.json_doc(info)
    else:
        _info_view(s, info)
    return 0


async def cmd_obj_get(s: Session) -> int:
    a = s.args
    target = a.output or os.path.basename(a.name)
    if not target:
        raise CliError(f"cannot name a file after object {a.name!r}; pass -O FILE")
    to_stdout = target == "-"
    if not to_stdout:
        _check_target(target, a.force)
    store = await s.js.object_store(a.bucket)
    part = f"{target}.part"
    async with store.get(a.name) as reader:
        info = reader.info
        # Written next to the target and renamed at the end: a failed or corrupt
        # transfer never leaves a partial file under the target's name.
        dest = sys.stdout.buffer if to_stdout else _open_target(part)
        try:
            with s.out.progress() as bars:
                task = bars.add(f"get {a.name}", info.size, "bytes")
                done = 0
                it = reader.__aiter__()
                while True:
                    try:
                        chunk = await bounded(
                            it.__anext__(), s.timeout, f"read a chunk of {a.name}"
                        )
                    except StopAsyncIteration:
                        break
                    dest.write(chunk)
                    done += len(chunk)
                    bars.update(task, done)
            dest.flush()
        except BaseException:
            if not to_stdout:
                dest.close()
                os.unlink(part)
            raise
        if not to_stdout:
            dest.close()
            os.replace(part, target)
    if s.out.json:
        doc = {"bucket": a.bucket, "name": a.name, "file": target, "size": info.size}
        s.out.json_doc({**doc, "digest": info.digest})
    elif not to_stdout:
        s.out.line(f"Wrote {fmt_bytes(info.size)} ({fmt_num(info.size)} bytes) to {target}")
    return 0


async def cmd_obj_rm(s: Session) -> int:
    a = s.args
    if a.name is None:
        if not a.force:
            raise CliError(
                f"this would delete bucket {a.bucket} and every object in it; "
                "name an object, or pass --force to delete the bucket"
            )
        await s.js.delete_object_store(a.bucket)
        if s.out.json:
            s.out.json_doc({"bucket": a.bucket, "deleted": True})
        else:
            s.out.line(f"Object store bucket {a.bucket} deleted")
        return 0
    store = await s.js.object_store(a.bucket)
    await store.delete(a.name)
    if s.out.json:
        s.out.json_doc({"bucket": a.bucket, "name": a.name, "deleted": True})
    else:
        s.out.line(f"Object {a.name} deleted from bucket {a.bucket}")
    return 0
