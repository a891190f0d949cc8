"""The KeyValue sink's commit records (``kv_sink(commit_bucket=...)``): the last batch a
query wrote whole, kept under the query's name in a bucket, so that a batch written again
at any distance in time (a restart between the writes and Spark's commit log, a job re-run
days later, after later batches wrote newer values) puts nothing back.

Before a batch is written its record is read: a batch at or below the one recorded was
written whole before, and is skipped. Once every key of a batch is confirmed the record
moves to it by compare-and-set (``create``, or ``update`` with the revision read), so two
runs of a query at once cannot move it back.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..errors import BadNameError, KeyNotFoundError, KeyWrongLastSequenceError
from ..kv import validate_key
from ._common import ConnectSpec, SparkConfigError

__all__ = ["check_commit_bucket", "check_record_name", "last_batch", "record_batch"]


class _Record(msgspec.Struct):
    batch: int


_decode = msgspec.json.Decoder(_Record)


def check_record_name(what: str, name: str) -> str:
    """``name`` as a record's key (a KeyValue key), or a ``SparkConfigError``."""
    try:
        validate_key(name)
    except BadNameError as exc:
        raise SparkConfigError(f"{what}={name!r} cannot name a commit record: {exc}") from None
    return name


async def _bucket(conn: ConnectSpec, nc: Any, bucket: str) -> Any:
    from ..errors import BucketNotFoundError

    try:
        return await conn.jetstream(nc).key_value(bucket)
    except BucketNotFoundError:
        raise SparkConfigError(
            f"commit_bucket={bucket!r}: there is no bucket {bucket!r}; create it "
            f"(js.create_key_value(bucket=...)) before writing"
        ) from None


async def check_commit_bucket(conn: ConnectSpec, bucket: str) -> None:
    """The bucket of the records exists."""
    nc = await conn.connect()
    try:
        await _bucket(conn, nc, bucket)
    finally:
        await nc.close()


async def _read(kv: Any, name: str) -> tuple[int | None, int | None]:
    """(the batch recorded, the record's revision); (None, None) without a record."""
    try:
        entry = await kv.get(name)
    except KeyNotFoundError:
        return None, None
    try:
        return _decode.decode(entry.value).batch, entry.revision
    except msgspec.DecodeError:
        raise SparkConfigError(
            f"commit record {name!r} holds {entry.value[:80]!r}, not a batch record: the "
            f"key is used by something else"
        ) from None


async def last_batch(conn: ConnectSpec, bucket: str, name: str) -> int | None:
    """The last batch recorded for ``name`` (None: none yet)."""
    nc = await conn.connect()
    try:
        return (await _read(await _bucket(conn, nc, bucket), name))[0]
    finally:
        await nc.close()


async def record_batch(conn: ConnectSpec, bucket: str, name: str, batch: int) -> None:
    """Move ``name``'s record to ``batch`` (never back)."""
    nc = await conn.connect()
    try:
        kv = await _bucket(conn, nc, bucket)
        value = msgspec.json.encode(_Record(batch))
        while True:
            had, revision = await _read(kv, name)
            if had is not None and had >= batch:
                return
            try:
                if revision is None:
                    await kv.create(name, value)
                else:
                    await kv.update(name, value, last=revision)
                return
            except KeyWrongLastSequenceError:
                continue  # another run moved it meanwhile: read it again
    finally:
        await nc.close()
