"""The object store against a real server: every operation, interop with nats-py both
ways, bounded memory on a 256 MiB object, and digest checking."""

from __future__ import annotations

import asyncio
import base64
import ctypes
import gc
import hashlib
import io
import os
import resource
from collections.abc import AsyncIterator
from pathlib import Path

import nats
import pytest
import pytest_asyncio

import jetstream
from jetstream import JetStream
from jetstream.embedded import NatsServer
from jetstream.errors import (
    DigestMismatchError,
    JetStreamApiError,
    ObjectAlreadyExistsError,
    ObjectLinkError,
    ObjectNotFoundError,
    ObjectStoreExistsError,
    ObjectStoreNotFoundError,
)
from jetstream.objectstore import (
    DEFAULT_CHUNK_SIZE,
    ObjectInfo,
    ObjectMeta,
    ObjectStore,
    ObjectStoreConfig,
)
from jetstream.objectstore.meta import decode_digest, decode_info, encode_info, format_digest
from jetstream.objectstore.store import encode_name

pytestmark = pytest.mark.asyncio

MiB = 1024 * 1024


@pytest_asyncio.fixture
async def obs(js: JetStream) -> ObjectStore:
    return await js.create_object_store(bucket="files")


def sha(data: bytes) -> str:
    return format_digest(hashlib.sha256(data).digest())


# -- buckets ------------------------------------------------------------------------------


async def test_bucket_layout_and_management(js: JetStream) -> None:
    obs = await js.create_object_store(
        bucket="docs", description="papers", metadata={"team": "a"}, max_bytes=64 * MiB
    )
    stream = await js.stream("OBJ_docs")
    cfg = stream.cached_info.config
    assert cfg.subjects == ["$O.docs.C.>", "$O.docs.M.>"]
    assert cfg.allow_rollup_hdrs is True and cfg.allow_direct is True
    assert cfg.discard == "new" and cfg.max_bytes == 64 * MiB
    # Creating again with the same config is fine; another config is refused.
    await js.create_object_store(
        bucket="docs", description="papers", metadata={"team": "a"}, max_bytes=64 * MiB
    )
    with pytest.raises(ObjectStoreExistsError):
        await js.create_object_store(bucket="docs", description="other")
    await js.update_object_store(bucket="docs", description="other", max_bytes=64 * MiB)
    status = await obs.status()
    assert status.bucket == "docs" and status.description == "other"
    assert status.metadata.get("team") is None or status.metadata["team"] == "a"
    assert not status.sealed and status.backing_store == "JetStream"
    await js.create_or_update_object_store(ObjectStoreConfig(bucket="more", ttl=60.0))
    assert (await (await js.object_store("more")).status()).ttl == 60.0
    assert sorted([n async for n in js.object_store_names()]) == ["docs", "more"]
    assert sorted([s.bucket async for s in js.object_stores()]) == ["docs", "more"]
    with pytest.raises(ObjectStoreNotFoundError):
        await js.object_store("nope")
    with pytest.raises(ValueError, match=r"invalid object store bucket name 'bad\.name'"):
        await js.create_object_store(bucket="bad.name")
    with pytest.raises(TypeError, match="bucket='named'"):  # a name where the config goes
        await js.create_object_store("named")  # type: ignore[arg-type]
    assert await js.delete_object_store("more")
    with pytest.raises(ObjectStoreNotFoundError):
        await js.delete_object_store("more")
    assert await obs.destroy()
    assert [n async for n in js.object_store_names()] == []


# -- put / get ------------------------------------------------------------------------------


async def test_put_get_wire_layout(js: JetStream, obs: ObjectStore) -> None:
    data = os.urandom(3 * DEFAULT_CHUNK_SIZE + 5)
    info = await obs.put(
        "dir/a file.bin", data, description="d", headers={"X-A": "1"}, metadata={"k": "v"}
    )
    assert info.size == len(data) and info.chunks == 4 and info.digest == sha(data)
    assert info.options is not None and info.options.max_chunk_size == DEFAULT_CHUNK_SIZE
    stream = await js.stream("OBJ_files")
    raw = await stream.get_msg(last_by_subject=f"$O.files.M.{encode_name('dir/a file.bin')}")
    assert raw.headers.get("Nats-Rollup") == "sub"
    wire = decode_info(raw.data)
    assert wire.nuid == info.nuid and wire.bucket == "files" and wire.headers == {"X-A": ["1"]}
    chunks = await stream.info(subjects_filter=f"$O.files.C.{info.nuid}")
    assert chunks.state.subjects == {f"$O.files.C.{info.nuid}": 4}
    assert await obs.get_bytes("dir/a file.bin") == data
    got = await obs.info("dir/a file.bin")
    assert got.description == "d" and got.metadata == {"k": "v"}
    assert got.modified is not None
    async with obs.get("dir/a file.bin") as reader:
        assert reader.info.size == len(data)
        parts = [chunk async for chunk in reader]
    assert [len(p) for p in parts] == [DEFAULT_CHUNK_SIZE] * 3 + [5]
    with pytest.raises(ObjectNotFoundError):
        await obs.get_bytes("missing")
    with pytest.raises(ValueError, match="an object name is required"):
        await obs.put("", b"x")
    await obs.list()
    # readers and watchers remove their consumers when they close
    assert (await stream.info()).state.consumer_count == 0


async def test_put_sources(obs: ObjectStore, tmp_path: Path) -> None:
    data = os.urandom(1000)
    await obs.put("bytes", bytearray(data), chunk_size=64)
    assert await obs.get_bytes("bytes") == data
    await obs.put("file", io.BytesIO(data), chunk_size=100)
    assert (await obs.info("file")).chunks == 10
    path = tmp_path / "src.bin"
    path.write_bytes(data)
    await obs.put("path", path, chunk_size=300)
    assert (await obs.info("path")).chunks == 4
    await obs.put_file("path2", str(path))
    assert await obs.get_bytes("path2") == data
    with pytest.raises(TypeError, match=r"put got a str: pass a pathlib\.Path"):
        await obs.put("text", "not bytes")  # type: ignore[arg-type]

    async def agen() -> AsyncIterator[bytes]:
        for i in range(0, len(data), 7):  # odd pieces are re-cut into whole chunks
            yield data[i : i + 7]

    info = await obs.put("agen", agen(), chunk_size=128)
    assert info.chunks == 8 and info.size == 1000
    await obs.put("list", [data[:10], data[10:]], chunk_size=500)
    for name in ("file", "path", "agen", "list"):
        assert await obs.get_bytes(name) == data
    out = tmp_path / "out.bin"
    got = await obs.get_file("agen", out)
    assert out.read_bytes() == data and got.digest == sha(data)
    empty = await obs.put("empty", b"")
    assert empty.size == 0 and empty.chunks == 0 and empty.digest == sha(b"")
    assert await obs.get_bytes("empty") == b""
    meta = await obs.put(ObjectMeta(name="meta", description="from meta"), b"m")
    assert meta.description == "from meta"

    class AsyncReader:  # aiofiles-like: read(n) is a coroutine, short reads allowed
        def __init__(self, data: bytes) -> None:
            self.buf = io.BytesIO(data)

        async def read(self, n: int) -> bytes:
            return self.buf.read(min(n, 33))

    info = await obs.put("async-file", AsyncReader(data), chunk_size=100)  # type: ignore[arg-type]
    assert info.chunks == 10 and await obs.get_bytes("async-file") == data


async def test_put_source_failing_midway(js: JetStream, obs: ObjectStore) -> None:
    await obs.put("keep", b"old content")

    async def broken() -> AsyncIterator[bytes]:
        for _ in range(20):
            yield os.urandom(1000)
        raise OSError("disk gone")

    with pytest.raises(OSError, match="disk gone"):
        await obs.put("keep", broken(), chunk_size=1000)
    assert await obs.get_bytes("keep") == b"old content"  # the old object is intact
    stream = await js.stream("OBJ_files")
    assert (await stream.info()).state.messages == 2  # its chunk and its info only


async def test_put_replaces_and_purges_old_chunks(js: JetStream, obs: ObjectStore) -> None:
    first = await obs.put("obj", os.urandom(5000), chunk_size=1000)
    second = await obs.put("obj", b"new", chunk_size=1000)
    assert first.nuid != second.nuid
    stream = await js.stream("OBJ_files")
    state = (await stream.info(subjects_filter="$O.files.>")).state
    assert f"$O.files.C.{first.nuid}" not in state.subjects
    assert state.subjects[f"$O.files.C.{second.nuid}"] == 1
    assert state.subjects[f"$O.files.M.{encode_name('obj')}"] == 1  # rolled up
    assert await obs.get_bytes("obj") == b"new"


async def test_failed_put_purges_its_chunks(js: JetStream) -> None:
    obs = await js.create_object_store(bucket="small", max_bytes=50_000)
    with pytest.raises(JetStreamApiError):
        await obs.put("too-big", os.urandom(200_000), chunk_size=10_000)
    with pytest.raises(ObjectNotFoundError):
        await obs.info("too-big")
    stream = await js.stream("OBJ_small")
    assert (await stream.info()).state.messages == 0


# -- meta, delete, links ---------------------------------------------------------------------


async def test_update_meta_and_rename(obs: ObjectStore) -> None:
    await obs.put("old", b"content", description="one")
    await obs.put("other", b"x")
    info = await obs.update_meta("old", description="two", metadata={"a": "b"})
    assert info.description == "two" and (await obs.info("old")).metadata == {"a": "b"}
    with pytest.raises(ObjectAlreadyExistsError):
        await obs.update_meta("old", new_name="other")
    await obs.update_meta("old", ObjectMeta(name="new", description="three"))
    with pytest.raises(ObjectNotFoundError):
        await obs.info("old")
    moved = await obs.info("new")
    assert moved.description == "three" and moved.metadata is None
    assert await obs.get_bytes("new") == b"content"
    with pytest.raises(ObjectNotFoundError):
        await obs.update_meta("gone", description="x")


async def test_delete_leaves_marker(js: JetStream, obs: ObjectStore) -> None:
    info = await obs.put("doomed", os.urandom(3000), chunk_size=1000)
    await obs.delete("doomed")
    with pytest.raises(ObjectNotFoundError):
        await obs.info("doomed")
    with pytest.raises(ObjectNotFoundError):
        await obs.get_bytes("doomed")
    marker = await obs.info("doomed", show_deleted=True)
    assert marker.deleted and marker.size == 0 and marker.chunks == 0 and not marker.digest
    stream = await js.stream("OBJ_files")
    state = (await stream.info(subjects_filter="$O.files.>")).state
    assert f"$O.files.C.{info.nuid}" not in state.subjects
    assert [i.name for i in await obs.list(show_deleted=True)] == ["doomed"]
    assert await obs.list() == []
    with pytest.raises(ObjectNotFoundError):
        await obs.delete("never")
    await obs.put("doomed", b"back")  # a put over a deleted name revives it
    assert await obs.get_bytes("doomed") == b"back"


async def test_links(js: JetStream, obs: ObjectStore) -> None:
    target = await obs.put("target", b"linked content")
    link = await obs.add_link("alias", target)
    assert link.link is not None and link.link.name == "target"
    assert await obs.get_bytes("alias") == b"linked content"
    other = await js.create_object_store(bucket="other")
    await other.add_link("cross", target)
    assert await other.get_bytes("cross") == b"linked content"
    with pytest.raises(ObjectLinkError):
        await obs.add_link("a2", link)  # no link to a link
    blink = await obs.add_bucket_link("dir", other)
    assert blink.link is not None and blink.link.bucket == "other" and not blink.link.name
    with pytest.raises(ObjectLinkError):
        await obs.get_bytes("dir")
    with pytest.raises(ObjectAlreadyExistsError):
        await obs.add_link("target", target)
    await obs.delete("target")
    deleted = await obs.info("target", show_deleted=True)
    with pytest.raises(ObjectLinkError):
        await obs.add_link("a3", deleted)
    with pytest.raises(ObjectNotFoundError):
        await obs.get_bytes("alias")


# -- list, watch, seal -----------------------------------------------------------------------


async def test_list_and_watch(obs: ObjectStore) -> None:
    assert await obs.list() == []
    await obs.put("a", b"1")
    await obs.put("b", b"2")
    await obs.put("a", b"3")
    assert sorted(i.name for i in await obs.list()) == ["a", "b"]
    async with obs.watch() as w:
        first = [await w.__anext__() for _ in range(3)]
        assert [i.name if i else None for i in first] == ["b", "a", None]
        await obs.put("c", b"4")
        nxt = await asyncio.wait_for(w.__anext__(), 5)
        assert nxt is not None and nxt.name == "c"
        await obs.delete("b")
        gone = await asyncio.wait_for(w.__anext__(), 5)
        assert gone is not None and gone.name == "b" and gone.deleted
    async with obs.watch(include_history=True) as w:
        names = []
        async for i in w:
            if i is None:
                break
            names.append(i.name)
    assert names == ["a", "c", "b"]  # rollups keep one info per name, in stream order
    async with obs.watch(updates_only=True, ignore_deletes=True) as w:
        await obs.delete("c")
        await obs.put("d", b"5")
        upd = await asyncio.wait_for(w.__anext__(), 5)
        assert upd is not None and upd.name == "d"


async def test_seal(obs: ObjectStore) -> None:
    await obs.put("kept", b"x")
    status = await obs.seal()
    assert status.sealed
    with pytest.raises(JetStreamApiError):
        await obs.put("new", b"y")
    assert await obs.get_bytes("kept") == b"x"


# -- digests ---------------------------------------------------------------------------------


async def test_rewritten_chunk_gives_digest_mismatch(js: JetStream, obs: ObjectStore) -> None:
    data = os.urandom(4000)
    info = await obs.put("victim", data, chunk_size=1000)
    stream = await js.stream("OBJ_files")
    subject = f"$O.files.C.{info.nuid}"
    msg = await stream.get_msg(next_by_subject=subject)
    await stream.delete_msg(msg.seq)
    await js.publish(subject, b"\x00" * 1000)  # same size, other bytes
    with pytest.raises(DigestMismatchError):
        await obs.get_bytes("victim")
    # A missing chunk is caught by the size check.
    await stream.purge(filter=subject, keep=1)
    with pytest.raises(DigestMismatchError):
        await obs.get_bytes("victim")


async def test_digest_forms() -> None:
    digest = hashlib.sha256(b"abc").digest()
    padded = format_digest(digest)
    assert padded.startswith("SHA-256=") and padded.endswith("=")
    assert decode_digest(padded) == digest
    assert decode_digest("sha-256=" + base64.urlsafe_b64encode(digest).decode().rstrip("=")) == (
        digest
    )
    assert decode_digest("SHA-256=" + digest.hex()) == digest
    assert decode_digest(base64.b64encode(b"\xfb" * 32).decode()) == b"\xfb" * 32
    assert decode_digest("SHA-256=###") is None
    info = ObjectInfo(name="n", bucket="b", nuid="x")
    wire = encode_info(info)
    assert b'"size":0' in wire and b'"chunks":0' in wire and b'"mtime"' in wire


async def test_digest_in_hex_and_std_base64_accepted(js: JetStream, obs: ObjectStore) -> None:
    data = os.urandom(2000)
    info = await obs.put("hexed", data, chunk_size=1000)
    digest = hashlib.sha256(data).digest()
    for form in (digest.hex(), "SHA-256=" + base64.b64encode(digest).decode()):
        forged = ObjectInfo(
            name="hexed",
            bucket="files",
            nuid=info.nuid,
            size=info.size,
            chunks=info.chunks,
            digest=form,
        )
        await js.publish(
            f"$O.files.M.{encode_name('hexed')}",
            encode_info(forged),
            headers={"Nats-Rollup": "sub"},
        )
        assert await obs.get_bytes("hexed") == data


# -- interop with nats-py ----------------------------------------------------------------------

SIZES = [0, 1, DEFAULT_CHUNK_SIZE, 10 * MiB + 1]


async def test_interop_with_nats_py(nats_url: str, js: JetStream) -> None:
    ours = await js.create_object_store(bucket="interop")
    peer = await nats.connect(nats_url)
    try:
        pobs = await peer.jetstream().object_store("interop")
        for size in SIZES:
            data = os.urandom(size)
            # we write, nats-py reads
            info = await ours.put(f"ours-{size}", data)
            res = await pobs.get(f"ours-{size}")
            assert res.data == data and res.info.digest == info.digest == sha(data)
            assert res.info.size == size
            # nats-py writes, we read
            pinfo = await pobs.put(f"theirs-{size}", data)
            assert await ours.get_bytes(f"theirs-{size}") == data
            mine = await ours.info(f"theirs-{size}")
            assert mine.digest == pinfo.digest == sha(data) and mine.size == size
        # a delete marker written by nats-py reads fine here, and ours there
        await pobs.delete("theirs-1")
        assert (await ours.info("theirs-1", show_deleted=True)).deleted
        await ours.delete("ours-1")
        assert (await pobs.get_info("ours-1", show_deleted=True)).deleted
        names = {i.name for i in await ours.list()}
        assert "theirs-0" in names and "ours-1" not in names
    finally:
        await peer.close()


async def test_nats_py_creates_bucket(nats_url: str, js: JetStream) -> None:
    peer = await nats.connect(nats_url)
    try:
        await peer.jetstream().create_object_store("pybucket")
        ours = await js.object_store("pybucket")
        await ours.put("x", b"from us")
        assert (await (await peer.jetstream().object_store("pybucket")).get("x")).data == (
            b"from us"
        )
    finally:
        await peer.close()


# -- domains -----------------------------------------------------------------------------------


async def test_through_a_domain() -> None:
    with NatsServer(domain="hub") as server:
        async with jetstream.connect(server.url) as nc:
            js = nc.jetstream(domain="hub")
            obs = await js.create_object_store(bucket="dom")
            data = os.urandom(300_000)
            await obs.put("x", data)
            assert await (await js.object_store("dom")).get_bytes("x") == data
            await obs.delete("x")
            assert [n async for n in js.object_store_names()] == ["dom"]


# -- bounded memory ----------------------------------------------------------------------------


def _status(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _reset_peak_rss() -> int:
    """Start a fresh peak measurement; returns the baseline in bytes.

    Earlier tests of the same process may have set a higher peak, which would hide
    any growth here: the peak is reset to the current RSS first (Linux's
    ``/proc/self/clear_refs``). Where it cannot be, the measurement could not fail, so
    the test fails instead, saying why.
    """
    gc.collect()
    try:  # give freed heap back to the system, so that reusing it shows as growth
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError as exc:
        raise AssertionError(f"cannot reset the peak RSS (/proc/self/clear_refs): {exc}") from exc
    rss, peak = _status("VmRSS"), _status("VmHWM")
    assert rss is not None and peak is not None, "no VmRSS / VmHWM in /proc/self/status"
    # the reset took: the peak is the current size again, well under an earlier peak
    assert peak - rss < 16 * MiB, f"the peak RSS was not reset ({peak} B against {rss} B)"
    return rss


def _peak_rss() -> int:
    peak = _status("VmHWM")
    if peak is not None:
        return peak
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _write_file(path: Path, size: int) -> hashlib._Hash:
    """Write ``size`` bytes of varied content one MiB at a time; returns their hash."""
    block = os.urandom(MiB)
    h = hashlib.sha256()
    with open(path, "wb") as f:
        for i in range(size // MiB):
            piece = block[i:] + block[:i]
            f.write(piece)
            h.update(piece)
    return h


def _file_sha(path: Path) -> bytes:
    check = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(4 * MiB):
            check.update(chunk)
    return check.digest()


async def test_256mib_streams_with_bounded_memory(obs: ObjectStore, tmp_path: Path) -> None:
    size = 256 * MiB
    src = tmp_path / "src.bin"
    h = _write_file(src, size)
    before = _reset_peak_rss()
    info = await obs.put("big", src)
    assert info.size == size and info.digest == format_digest(h.digest())
    out = tmp_path / "out.bin"
    await obs.get_file("big", out)
    grown = _peak_rss() - before
    print(f"peak RSS growth over a 256 MiB put + get: {grown / MiB:.1f} MiB")
    assert out.stat().st_size == size
    assert _file_sha(out) == h.digest()
    assert grown < 64 * MiB, f"peak RSS grew by {grown / MiB:.1f} MiB"
