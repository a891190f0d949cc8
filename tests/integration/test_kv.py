"""KeyValue buckets against a real nats-server: layout, operations, errors, watchers."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import nats
import nats.js.errors
import pytest
import pytest_asyncio

import jetstream
from jetstream import Client, JetStream, StreamConfig
from jetstream.api import RePublish, StorageType, StoreCompression, StreamSource
from jetstream.embedded import NatsServer
from jetstream.errors import (
    BadBucketError,
    BadNameError,
    BucketExistsError,
    BucketNotFoundError,
    JetStreamApiError,
    KeyDeletedError,
    KeyExistsError,
    KeyNotFoundError,
    KeyWrongLastSequenceError,
    MessageSizeExceedsMaximumError,
)
from jetstream.kv import KeyValue, KeyValueConfig, KeyValueEntry, KeyValueOp

T = TypeVar("T")
pytestmark = pytest.mark.asyncio

FAST = {"reconnect_time_wait": 0.1, "max_reconnect_attempts": -1}


@pytest_asyncio.fixture
async def nc(nats_url: str) -> AsyncIterator[Client]:
    async with jetstream.connect(nats_url, **FAST) as client:
        yield client


async def drain_until_marker(w: object) -> list[KeyValueEntry]:
    out: list[KeyValueEntry] = []
    while True:
        e = await w.next(5)  # type: ignore[attr-defined]
        if e is None:
            return out
        out.append(e)


def shape(entries: list[KeyValueEntry]) -> list[tuple[str, bytes, int, str]]:
    return [(e.key, e.value, e.revision, e.operation.value) for e in entries]


async def until_gone(read: Callable[[], Awaitable[object]], timeout: float = 15.0) -> None:
    """Read until it raises KeyNotFoundError (the server expires messages on its own
    schedule, later on a loaded machine); a timeout when it never does."""
    async with asyncio.timeout(timeout):
        while True:
            try:
                await read()
            except KeyNotFoundError:
                return
            await asyncio.sleep(0.1)


# -- buckets ------------------------------------------------------------------------------


async def test_bucket_layout_and_status(js: JetStream) -> None:
    kv = await js.create_key_value(bucket="cfg", history=5, ttl=60, description="d")
    cfg = (await js.stream("KV_cfg")).cached_info.config
    assert cfg.subjects == ["$KV.cfg.>"]
    assert cfg.max_msgs_per_subject == 5
    assert cfg.allow_rollup_hdrs and cfg.deny_delete and cfg.allow_direct
    assert cfg.discard.value == "new"
    assert cfg.max_age == 60 and cfg.duplicate_window == 60
    assert cfg.description == "d"
    await kv.put("a", b"1")
    st = await kv.status()
    assert (st.bucket, st.values, st.history, st.ttl, st.backing_store) == (
        "cfg",
        1,
        5,
        60.0,
        "JetStream",
    )
    assert st.bytes > 0 and st.stream_info.config.name == "KV_cfg"
    assert st.config.history == 5


async def test_bucket_management_and_errors(js: JetStream) -> None:
    kv = await js.create_key_value(bucket="b1")
    assert kv.bucket == "b1"
    again = await js.create_key_value(bucket="b1")  # same config: the same bucket
    assert again.stream_name == "KV_b1"
    with pytest.raises(BucketExistsError):
        await js.create_key_value(bucket="b1", history=3)
    kv2 = await js.update_key_value(bucket="b1", history=3)
    assert (await kv2.status()).history == 3
    with pytest.raises(BucketNotFoundError):
        await js.update_key_value(bucket="nope")
    kv3 = await js.create_or_update_key_value(KeyValueConfig(bucket="b2", history=2))
    assert (await kv3.status()).history == 2
    kv3 = await js.create_or_update_key_value(KeyValueConfig(bucket="b2", history=4))
    assert (await kv3.status()).history == 4
    assert (await js.key_value("b2")).bucket == "b2"
    assert sorted([n async for n in js.key_value_store_names()]) == ["b1", "b2"]
    assert sorted([s.bucket async for s in js.key_values()]) == ["b1", "b2"]
    with pytest.raises(BucketNotFoundError):
        await js.key_value("nope")
    with pytest.raises(BadNameError):
        await js.key_value("bad.name")
    with pytest.raises(BadNameError):
        await js.create_key_value(bucket="a b")
    with pytest.raises(ValueError, match="history"):
        await js.create_key_value(bucket="h", history=65)
    with pytest.raises(TypeError, match="give a KeyValueConfig or keywords, not both"):
        await js.create_key_value(KeyValueConfig(bucket="x"), history=2)
    with pytest.raises(TypeError, match="bucket='named'"):  # a name where the config goes
        await js.create_key_value("named")  # type: ignore[arg-type]
    await js.create_stream(StreamConfig(name="KV_odd", subjects=["odd"]))
    with pytest.raises(BadBucketError):
        await js.key_value("odd")
    assert await js.delete_key_value("b1")
    with pytest.raises(BucketNotFoundError):
        await js.delete_key_value("b1")
    assert await kv3.destroy()
    assert [n async for n in js.key_value_store_names()] == []


async def test_bucket_options(js: JetStream, nc: Client) -> None:
    kv = await js.create_key_value(
        bucket="opt",
        storage=StorageType.MEMORY,
        replicas=1,
        compression=True,
        max_value_size=10,
        metadata={"team": "x"},
        republish=RePublish(src="$KV.opt.>", dest="re.>"),
    )
    st = await kv.status()
    cfg = st.stream_info.config
    assert cfg.storage == StorageType.MEMORY and cfg.num_replicas == 1
    assert cfg.compression == StoreCompression.S2 and st.is_compressed
    assert st.metadata["team"] == "x"
    sub = await nc.subscribe("re.>")
    await nc.flush()
    await kv.put("k", b"v")
    msg = await sub.next_msg(timeout=2)
    assert msg.subject == "re.k" and msg.data == b"v"
    await sub.unsubscribe()
    with pytest.raises(MessageSizeExceedsMaximumError):
        await kv.put("big", b"x" * 11)

    small = await js.create_key_value(bucket="small", max_bytes=400)
    with pytest.raises(JetStreamApiError):
        for i in range(100):
            await small.put(f"k{i}", b"x" * 50)


# -- operations ---------------------------------------------------------------------------


async def test_put_get_and_wire_layout(js: JetStream, nc: Client) -> None:
    kv = await js.create_key_value(bucket="w", history=10)
    wire = await nc.subscribe("$KV.w.>")
    await nc.flush()
    r1 = await kv.put("a.b", b"1")
    r2 = await kv.put("a.b", b"2")
    await kv.put("other", b"o")
    e = await kv.get("a.b")
    assert (e.bucket, e.key, e.value, e.revision, e.operation, e.delta) == (
        "w",
        "a.b",
        b"2",
        r2,
        KeyValueOp.PUT,
        0,
    )
    assert e.created.tzinfo is not None
    assert (await kv.get("a.b", revision=r1)).value == b"1"
    with pytest.raises(KeyNotFoundError, match="not of key"):
        await kv.get("other", revision=r1)
    with pytest.raises(KeyNotFoundError):
        await kv.get("missing")
    with pytest.raises(KeyNotFoundError):
        await kv.get("a.b", revision=999)
    rd = await kv.delete("a.b")
    with pytest.raises(KeyDeletedError) as info:
        await kv.get("a.b")
    assert info.value.entry.revision == rd and info.value.entry.operation is KeyValueOp.DEL
    with pytest.raises(KeyDeletedError):
        await kv.get("a.b", revision=rd)
    rp = await kv.purge("other")
    msgs = [await wire.next_msg(timeout=2) for _ in range(5)]
    assert [m.subject for m in msgs] == ["$KV.w.a.b"] * 2 + ["$KV.w.other", "$KV.w.a.b"] + [
        "$KV.w.other"
    ]
    assert msgs[3].headers["KV-Operation"] == "DEL" and msgs[3].data == b""
    assert msgs[4].headers["KV-Operation"] == "PURGE"
    assert msgs[4].headers["Nats-Rollup"] == "sub"
    hist = await kv.history("other")
    assert shape(hist) == [("other", b"", rp, "PURGE")]  # the rollup removed the put
    await wire.unsubscribe()
    for bad in ["", ".a", "a.", "a..b", "a b", "a*", "a>", "ü"]:
        with pytest.raises(BadNameError):
            await kv.put(bad, b"x")
        with pytest.raises(BadNameError):
            await kv.get(bad)


async def test_reads_use_direct_get(js: JetStream, nc: Client) -> None:
    kv = await js.create_key_value(bucket="d")
    await kv.put("k", b"v")
    spy = await nc.subscribe("$JS.API.>")
    await nc.flush()
    await kv.get("k")
    req = await spy.next_msg(timeout=2)
    assert req.subject == "$JS.API.DIRECT.GET.KV_d.$KV.d.k"
    await spy.unsubscribe()


async def test_create_update_delete_purge(js: JetStream) -> None:
    kv = await js.create_key_value(bucket="c", history=5)
    r1 = await kv.create("k", b"1")
    with pytest.raises(KeyExistsError) as exists:
        await kv.create("k", b"again")
    assert isinstance(exists.value, KeyWrongLastSequenceError)
    r2 = await kv.update("k", b"2", last=r1)
    with pytest.raises(KeyWrongLastSequenceError):
        await kv.update("k", b"3", last=r1)
    with pytest.raises(KeyWrongLastSequenceError):
        await kv.update("fresh", b"3", last=5)
    assert await kv.update("fresh", b"f", last=0) > r2
    with pytest.raises(KeyWrongLastSequenceError):
        await kv.delete("k", last=r1)
    rd = await kv.delete("k", last=r2)
    r3 = await kv.create("k", b"after-delete")  # a deleted key can be created again
    assert r3 > rd and (await kv.get("k")).value == b"after-delete"
    with pytest.raises(KeyWrongLastSequenceError):
        await kv.purge("k", last=r1)
    await kv.purge("k", last=r3)
    await kv.create("k", b"after-purge")
    assert [e.operation for e in await kv.history("k")] == [KeyValueOp.PURGE, KeyValueOp.PUT]


async def test_put_async_and_delete_async_in_flight_together(js: JetStream) -> None:
    kv = await js.create_key_value(bucket="pa", history=2)
    futs = [await kv.put_async(f"k.{i}", str(i).encode()) for i in range(500)]
    acks = await asyncio.gather(*futs)
    assert sorted(a.seq for a in acks) == list(range(1, 501))
    assert (await kv.get("k.7")).value == b"7"
    assert (await kv.get("k.7")).revision == acks[7].seq
    marker = await (await kv.delete_async("k.7"))
    with pytest.raises(KeyDeletedError) as deleted:
        await kv.get("k.7")
    assert deleted.value.entry.revision == marker.seq
    assert deleted.value.entry.operation is KeyValueOp.DEL
    for bad in ("a b", ".a", ""):
        with pytest.raises(BadNameError):
            await kv.put_async(bad, b"x")
        with pytest.raises(BadNameError):
            await kv.delete_async(bad)
    assert (await kv.status()).values == 501  # nothing of the refused ones was sent


async def test_purge_deletes(js: JetStream) -> None:
    kv = await js.create_key_value(bucket="pd", history=5)
    for k in ("a", "b", "c"):
        await kv.put(k, b"1")
        await kv.put(k, b"2")
    await kv.delete("a")
    await kv.purge("b")
    assert await kv.purge_deletes() == 2  # markers are young: only what is behind them goes
    assert len(await kv.history("a")) == 1
    assert (await kv.status()).values == 4
    assert await kv.purge_deletes(older_than=0) == 2
    with pytest.raises(KeyNotFoundError):
        await kv.history("a")
    assert (await kv.status()).values == 2
    assert await kv.keys() == ["c"]


async def test_keys_and_list_keys_filter_on_the_server(js: JetStream, nc: Client) -> None:
    kv = await js.create_key_value(bucket="ks")
    assert await kv.keys() == []
    for k in ("a.1", "a.2", "b.1", "c"):
        await kv.put(k, b"v")
    await kv.delete("a.2")
    assert sorted(await kv.keys()) == ["a.1", "b.1", "c"]
    spy = await nc.subscribe("$JS.API.CONSUMER.CREATE.KV_ks.>")
    await nc.flush()
    assert sorted(await kv.keys("a.*", "c")) == ["a.1", "c"]
    req = await spy.next_msg(timeout=2)
    assert b'"filter_subjects":["$KV.ks.a.*","$KV.ks.c"]' in req.data
    assert b'"headers_only":true' in req.data
    await spy.unsubscribe()
    got = [k async for k in kv.list_keys("b.>")]
    assert got == ["b.1"]
    with pytest.raises(BadNameError):
        await kv.keys("a*b")


async def test_history(js: JetStream) -> None:
    kv = await js.create_key_value(bucket="h", history=3)
    revs = [await kv.put("k", str(i).encode()) for i in range(5)]
    await kv.put("other", b"x")
    hist = await kv.history("k")
    assert [e.revision for e in hist] == revs[-3:]
    assert [e.value for e in hist] == [b"2", b"3", b"4"]
    with pytest.raises(KeyNotFoundError):
        await kv.history("missing")


async def test_bucket_ttl(js: JetStream) -> None:
    kv = await js.create_key_value(bucket="t", ttl=1)
    await kv.put("k", b"v")
    assert (await kv.get("k")).value == b"v"
    await until_gone(lambda: kv.get("k"))


async def test_per_key_ttl_and_limit_markers(js: JetStream) -> None:
    kv = await js.create_key_value(bucket="m", limit_marker_ttl=5)
    cfg = (await kv.status()).stream_info.config
    assert cfg.allow_msg_ttl and cfg.subject_delete_marker_ttl == 5
    async with kv.watch_all(updates_only=True) as w:
        assert await w.next(2) is None
        await kv.create("k", b"v", ttl=1)
        await kv.put("forever", b"v")
        assert (await w.next(2)).key == "k"  # type: ignore[union-attr]
        assert (await w.next(2)).key == "forever"  # type: ignore[union-attr]
        marker = await w.next(15)  # the server removes "k" and leaves a marker
        assert marker is not None and marker.key == "k"
        assert marker.operation is KeyValueOp.PURGE
    with pytest.raises(KeyNotFoundError):
        await kv.get("k")
    assert (await kv.get("forever")).value == b"v"
    plain = await js.create_key_value(bucket="pk", allow_msg_ttl=True)
    await plain.put("p", b"v", ttl=1)
    await plain.put("q", b"v")
    await plain.purge("q", ttl=1)  # the purge marker itself goes after a second
    assert len(await plain.history("q")) == 1
    await until_gone(lambda: plain.get("p"))
    await until_gone(lambda: plain.history("q"))


# -- watchers -----------------------------------------------------------------------------


async def test_watch_options(js: JetStream) -> None:
    kv = await js.create_key_value(bucket="wo", history=5)
    async with kv.watch_all() as w:  # empty bucket: the marker first
        assert await w.next(2) is None and w.up_to_date
        r = await kv.put("a", b"1")
        e = await w.next(2)
        assert e is not None and (e.key, e.revision) == ("a", r)
        assert e.created.tzinfo is not None and e.delta == 0
    await kv.put("a", b"2")
    await kv.put("b.x", b"1")
    await kv.delete("b.x")
    async with kv.watch_all() as w:
        assert shape(await drain_until_marker(w)) == [
            ("a", b"2", 2, "PUT"),
            ("b.x", b"", 4, "DEL"),
        ]
    async with kv.watch_all(include_history=True) as w:
        assert [e.revision for e in await drain_until_marker(w)] == [1, 2, 3, 4]
    async with kv.watch_all(ignore_deletes=True) as w:
        assert [e.key for e in await drain_until_marker(w)] == ["a"]
    async with kv.watch("a", meta_only=True) as w:
        (only,) = await drain_until_marker(w)
        assert only.value == b"" and only.revision == 2
    async with kv.watch(["a", "b.*"], resume_from_revision=3) as w:
        assert [e.revision for e in await drain_until_marker(w)] == [3, 4]
    async with kv.watch_all(resume_from_revision=99) as w:
        assert await w.next(2) is None
    async with kv.watch_all(updates_only=True) as w:
        assert await w.next(2) is None
        await kv.put("c", b"new")
        e = await w.next(2)
        assert e is not None and e.key == "c" and e.delta == 0
    w = kv.watch("b.>")  # iterated without ``async with``
    assert [e.operation async for e in _until_marker(w)] == [KeyValueOp.DEL]
    await w.stop()
    with pytest.raises(StopAsyncIteration):
        await w.__anext__()
    with pytest.raises(ValueError, match="updates_only cannot be combined with include_history"):
        kv.watch_all(updates_only=True, include_history=True)
    with pytest.raises(BadNameError):
        kv.watch("a.>.b")


async def test_watch_entries_are_entries_and_the_marker_follows_the_filter(
    js: JetStream,
) -> None:
    """A watcher's entries are ``KeyValueEntry`` instances equal to what ``get`` reads;
    with ``ignore_deletes``, the marker comes right after the last live value even when
    the snapshot's revision is a delete left out, amid a few hundred deliveries."""
    kv = await js.create_key_value(bucket="filtered", history=1)
    for i in range(300):
        await kv.put(f"k.{i}", b"v%d" % i)
    for i in range(0, 300, 3):
        await kv.delete(f"k.{i}")
    last = await kv.delete("k.299")  # the snapshot's revision: a delete
    live = [f"k.{i}" for i in range(300) if i % 3 and i != 299]
    async with kv.watch_all(ignore_deletes=True) as w:
        got = await drain_until_marker(w)
        assert w.snapshot_revision == last
        assert [e.key for e in got] == live
        assert all(isinstance(e, KeyValueEntry) and e.operation is KeyValueOp.PUT for e in got)
        assert got[0] == await kv.get(got[0].key)
        assert repr(got[0]) == repr(await kv.get(got[0].key))
        assert got[-1].delta > 0  # the deletes after it were pending
        r = await kv.put("k.new", b"n")
        after = await w.next(5)
        assert after is not None and (after.key, after.revision, after.value) == ("k.new", r, b"n")
    async with kv.watch_all() as w:
        every = {e.key: e for e in await drain_until_marker(w)}
        gone = every["k.299"]
        assert (gone.revision, gone.operation, gone.value) == (last, KeyValueOp.DEL, b"")
        assert every["k.new"].delta == 0 and gone.bucket == "filtered"


async def _until_marker(w: object) -> AsyncIterator[KeyValueEntry]:
    async for e in w:  # type: ignore[attr-defined]
        if e is None:
            return
        yield e


async def test_watch_is_up_to_date_under_concurrent_writers(js: JetStream) -> None:
    """The marker comes after every value stored when the watch started and before any
    later write, while 10 writers keep writing (it neither waits for them nor jumps
    ahead)."""
    # history keeps every revision a writer makes during the test, so none that was
    # current at the snapshot is discarded before the watcher reaches it
    kv = await js.create_key_value(bucket="busy", history=64)
    acks: list[tuple[int, str]] = []
    stop = asyncio.Event()

    async def writer(i: int) -> None:
        n = 0
        while not stop.is_set():
            key = f"w{i}.k{n % 50}"
            acks.append((await kv.put(key, str(n).encode()), key))
            n += 1

    writers = [asyncio.create_task(writer(i)) for i in range(10)]
    try:
        while len(acks) < 2000:
            await asyncio.sleep(0.02)
        async with kv.watch_all() as w:
            before: list[KeyValueEntry] = []
            while (e := await w.next(10)) is not None:
                before.append(e)
            writes_at_marker = len(acks)
            assert not stop.is_set()  # the writers were busy all along
            after = [await w.next(10) for _ in range(200)]
    finally:
        stop.set()
        await asyncio.gather(*writers)
    snap = w.snapshot_revision
    # the state of the bucket at the snapshot, from the writers' own acks
    latest = {key: seq for seq, key in sorted(acks) if seq <= snap}
    seen: dict[str, int] = {}
    for e in before:
        seen[e.key] = max(seen.get(e.key, 0), e.revision)
    assert all(e.revision <= snap for e in before)  # nothing later leaked in early
    assert seen == latest  # every key's value at the snapshot, nothing missed
    revs = [e.revision for e in after if e is not None]
    assert len(revs) == 200 and revs[0] > snap and revs == sorted(revs)
    assert writes_at_marker > 2000


async def test_a_stopped_watch_yields_nothing_more(js: JetStream) -> None:
    """Entries made ahead from the buffered messages are dropped by stop(): after it the
    iteration ends, with none of them."""
    kv = await js.create_key_value(bucket="stopped")
    for i in range(20):
        await kv.put(f"k{i}", b"v")
    w = kv.watch_all()
    first = await w.next(10)
    assert first is not None and first.key == "k0"
    await w.stop()
    assert [e async for e in w] == []
    with pytest.raises(StopAsyncIteration):
        await w.next(1)


async def test_cas_counter_under_contention(js: JetStream) -> None:
    kv = await js.create_key_value(bucket="cas")
    await kv.put("n", b"0")

    async def adder() -> None:
        for _ in range(100):
            while True:
                e = await kv.get("n")
                try:
                    await kv.update("n", str(int(e.value) + 1).encode(), last=e.revision)
                    break
                except KeyWrongLastSequenceError:
                    await asyncio.sleep(random.random() * 0.002)

    await asyncio.gather(*(adder() for _ in range(20)))
    assert (await kv.get("n")).value == b"2000"


async def test_watch_survives_a_server_restart() -> None:
    with NatsServer() as server:
        async with jetstream.connect(server.url, **FAST) as nc:
            kv = await nc.jetstream().create_key_value(bucket="r")
            async with kv.watch_all() as w:
                assert await w.next(2) is None
                for i in range(20):
                    await kv.put(f"k{i}", b"before")
                got = [await w.next(5) for _ in range(20)]
                await asyncio.to_thread(server.restart)
                for i in range(20):
                    while True:
                        try:
                            await kv.put(f"k{i}", b"after")
                            break
                        except jetstream.NatsError:
                            await asyncio.sleep(0.1)
                got += [await w.next(15) for _ in range(20)]
                assert w._oc is not None and w._oc.resets >= 1  # its consumer was remade
            revs = [e.revision for e in got if e is not None]
            assert revs == list(range(1, 41))
            assert [e.value for e in got if e is not None][20:] == [b"after"] * 20


# -- mirrors, sources, domains ----------------------------------------------------------


async def _eventually(check: object, timeout: float = 15.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            await check()  # type: ignore[operator]
            return
        except (AssertionError, KeyNotFoundError):
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.05)


async def test_mirrored_and_sourced_buckets(js: JetStream) -> None:
    src = await js.create_key_value(bucket="src", history=3)
    other = await js.create_key_value(bucket="oth")
    await src.put("a", b"1")
    await other.put("b", b"2")
    mirror = await js.create_key_value(bucket="mir", mirror=StreamSource(name="src"))
    cfg = (await mirror.status()).stream_info.config
    assert cfg.mirror and cfg.mirror.name == "KV_src" and cfg.mirror_direct

    async def mirrored() -> None:
        assert (await mirror.get("a")).value == b"1"

    await _eventually(mirrored)
    assert await mirror.keys() == ["a"]
    rev = await mirror.put("c", b"via-mirror")  # writes go to the origin
    # The origin's stream holds it at once (read from its leader, not by direct
    # get: with mirror_direct the mirror answers the origin's direct gets too,
    # and it has the key only once it has caught up).
    origin = await js.stream("KV_src")
    stored = await origin.get_msg(last_by_subject="$KV.src.c", direct=False)
    assert (stored.seq, stored.data) == (rev, b"via-mirror")

    async def caught_up() -> None:
        assert (await src.get("c")).value == b"via-mirror"
        assert (await mirror.get("c")).revision == rev

    await _eventually(caught_up)

    agg = await js.create_key_value(
        bucket="agg", sources=[StreamSource(name="src"), StreamSource(name="KV_oth")]
    )

    async def sourced() -> None:
        assert sorted(await agg.keys()) == ["a", "b", "c"]

    await _eventually(sourced)
    assert (await agg.get("b")).value == b"2"


async def test_bucket_through_a_domain() -> None:
    with NatsServer(domain="hub") as server:
        async with jetstream.connect(server.url) as nc:
            js = nc.jetstream(domain="hub")
            kv = await js.create_key_value(bucket="dom", history=2)
            wire = await nc.subscribe("$KV.dom.>")
            await nc.flush()
            r = await kv.put("k", b"v")
            assert (await wire.next_msg(timeout=2)).subject == "$KV.dom.k"
            await wire.unsubscribe()
            assert (await kv.get("k")).revision == r
            assert await kv.keys() == ["k"]
            assert [n async for n in js.key_value_store_names()] == ["dom"]
            async with kv.watch_all() as w:
                assert (await w.next(2)).value == b"v"  # type: ignore[union-attr]
                assert await w.next(2) is None
            assert (await js.key_value("dom")).bucket == "dom"


# -- interop with nats-py -----------------------------------------------------------------


async def _their(read: Callable[..., Awaitable[T]], *args: Any) -> T:
    """A nats-py KV read (keys, history), tried again when it says there is nothing.

    nats-py's watcher decides it is up to date by asking for the consumer info right
    after subscribing: when the server has already pushed every message (pending 0) but
    none has been handled yet, it signals "done" before the first entry, and keys() or
    history() raise NoKeysError. On a loaded machine that happens now and then.
    """
    for _ in range(9):
        try:
            return await read(*args)
        except nats.js.errors.NoKeysError:
            await asyncio.sleep(0.1)
    return await read(*args)


async def test_interop_with_nats_py(nats_url: str, js: JetStream) -> None:
    theirs = await nats.connect(nats_url)
    try:
        tjs = theirs.jetstream()
        # written by nats-py, read by us
        tkv = await tjs.create_key_value(bucket="fromthem", history=5)
        await tkv.put("a.b", b"1")
        await tkv.put("a.b", b"2")
        await tkv.create("c", b"3")
        await tkv.delete("c")
        await tkv.put("p", b"x")
        await tkv.purge("p")
        ours = await js.key_value("fromthem")
        assert (await ours.get("a.b")).value == b"2"
        with pytest.raises(KeyDeletedError):
            await ours.get("c")
        assert sorted(await ours.keys()) == sorted(await _their(tkv.keys))
        for key in ("a.b", "c", "p"):
            mine = await ours.history(key)
            their = await _their(tkv.history, key)
            assert [(e.key, e.value or b"", e.revision, e.operation.value) for e in mine] == [
                (e.key, e.value or b"", e.revision, e.operation or "PUT") for e in their
            ]
        # written by us, read by nats-py
        kv: KeyValue = await js.create_key_value(bucket="fromus", history=5)
        await kv.put("x.y", b"1")
        await kv.update("x.y", b"2", last=1)
        await kv.create("z", b"3")
        await kv.delete("z")
        await kv.put("q", b"q")
        await kv.purge("q")
        tkv2 = await tjs.key_value("fromus")
        e = await tkv2.get("x.y")
        assert (e.value, e.revision) == (b"2", 2)
        assert sorted(await _their(tkv2.keys)) == sorted(await kv.keys()) == ["x.y"]
        for key in ("x.y", "z", "q"):
            mine = await kv.history(key)
            their = await _their(tkv2.history, key)
            assert [(e.key, e.value, e.revision, e.operation.value) for e in mine] == [
                (e.key, e.value or b"", e.revision, e.operation or "PUT") for e in their
            ]
        st = await tkv2.status()
        assert st.history == 5
    finally:
        await theirs.close()
