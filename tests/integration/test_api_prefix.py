"""KeyValue and ObjectStore through a JetStream API prefix and through a JetStream domain.

API prefix: one server, two accounts. Account A has JetStream and exports its API
(``$JS.API.>``) and the bucket subjects (``$KV.>``, ``$O.>``) as services; account B has
no JetStream of its own and imports A's API as ``JS.A.API.>``, ``$KV.>`` as
``JS.A.API.$KV.>`` (ADR-19: KV writes go through the API prefix) and ``$O.>`` as is
(ADR-20 gives object store subjects no prefixed form; nats.go publishes them plain).
Account C imports ``$KV.>`` as it is (what nats-py expects); our bucket finds that
route with a probe before its first write. The API export needs
``response_type: stream``: a pull request (watch, history, keys, object reads) is
answered by many messages, and the default singleton response lets only the first one
through.

Domain: a hub server (domain ``hub``) and a leaf server (domain ``leaf``, JetStream of
its own) joined by a leafnode. A client of the leaf reaches the hub's buckets with
``nc.jetstream(domain="hub")``. Between domains the leafnode denies ``$KV.>``, so KV
writes must go to ``$JS.hub.API.$KV.…``, which the server maps back to ``$KV.…``.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import pytest
import pytest_asyncio

import jetstream
from jetstream import Client
from jetstream.api import ExternalStream, StreamSource
from jetstream.embedded import NatsServer
from jetstream.errors import (
    BucketNotFoundError,
    KeyDeletedError,
    KeyExistsError,
    KeyNotFoundError,
    KeyWrongLastSequenceError,
    ObjectNotFoundError,
    ObjectStoreNotFoundError,
)
from jetstream.kv import KeyValue, KeyValueEntry, KeyValueOp

pytestmark = pytest.mark.asyncio

PREFIX = "JS.A.API"

ACCOUNTS = f"""
accounts {{
  A {{
    jetstream: enabled
    users: [ {{ user: a, password: a }} ]
    exports: [
      {{ service: "$JS.API.>", response_type: stream }}
      {{ service: "$KV.>" }}
      {{ service: "$O.>" }}
    ]
  }}
  B {{
    users: [ {{ user: b, password: b }} ]
    imports: [
      {{ service: {{ account: A, subject: "$JS.API.>" }}, to: "{PREFIX}.>" }}
      {{ service: {{ account: A, subject: "$KV.>" }}, to: "{PREFIX}.$KV.>" }}
      {{ service: {{ account: A, subject: "$O.>" }} }}
    ]
  }}
  C {{
    users: [ {{ user: c, password: c }} ]
    imports: [
      {{ service: {{ account: A, subject: "$JS.API.>" }}, to: "{PREFIX}.>" }}
      {{ service: {{ account: A, subject: "$KV.>" }} }}
    ]
  }}
}}
"""


def _sha256(data: bytes) -> str:
    return "SHA-256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode()


def _shape(entries: list[KeyValueEntry]) -> list[tuple[str, bytes, int, KeyValueOp]]:
    return [(e.key, e.value, e.revision, e.operation) for e in entries]


async def _eventually(check: Callable[[], Awaitable[object]], timeout: float = 15.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            await check()
            return
        except (AssertionError, jetstream.errors.NatsError):
            if loop.time() > deadline:
                raise
            await asyncio.sleep(0.05)


async def _until_marker(w: object) -> list[KeyValueEntry]:
    out: list[KeyValueEntry] = []
    while (e := await w.next(5)) is not None:  # type: ignore[attr-defined]
        out.append(e)
    return out


# -- an API prefix across accounts --------------------------------------------------------


@pytest.fixture(scope="module")
def accounts_server() -> Iterator[NatsServer]:
    with NatsServer(auth_config=ACCOUNTS) as server:
        yield server


@pytest_asyncio.fixture
async def nc_a(accounts_server: NatsServer) -> AsyncIterator[Client]:
    """A client of account A, which owns the JetStream."""
    async with jetstream.connect(accounts_server.url, user="a", password="a") as nc:
        yield nc


@pytest_asyncio.fixture
async def nc_b(accounts_server: NatsServer) -> AsyncIterator[Client]:
    """A client of account B, which reaches A's JetStream through the prefix."""
    async with jetstream.connect(accounts_server.url, user="b", password="b") as nc:
        yield nc


async def test_key_value_where_kv_subjects_are_imported_as_they_are(
    accounts_server: NatsServer, nc_a: Client
) -> None:
    # Account C imports $KV.> without the prefix (the set-up nats-py expects): the first
    # write finds that only the plain subject is answered and the bucket keeps using it.
    js_a = nc_a.jetstream()
    await js_a.create_key_value(bucket="plain", history=5)
    try:
        async with jetstream.connect(accounts_server.url, user="c", password="c") as nc_c:
            kv = await nc_c.jetstream(api_prefix=PREFIX).key_value("plain")
            wire = await nc_c.subscribe(f"{PREFIX}.$KV.plain.>")
            await nc_c.flush()
            r1 = await kv.put("k", b"1")
            r2 = await kv.update("k", b"2", last=r1)
            await kv.delete("k")
            with pytest.raises(KeyDeletedError):
                await kv.get("k")
            assert (await kv.history("k"))[1].revision == r2
            # once the route is known, later writes go straight to the plain subject
            await nc_c.flush()
            prefixed = 0
            while True:
                try:
                    await wire.next_msg(timeout=0.2)
                    prefixed += 1
                except jetstream.errors.TimeoutError:
                    break
            assert prefixed == 1
        assert (await (await js_a.key_value("plain")).get("k", revision=r2)).value == b"2"
    finally:
        await js_a.delete_key_value("plain")


async def test_account_b_has_no_jetstream_of_its_own(nc_b: Client) -> None:
    with pytest.raises(jetstream.errors.JetStreamNotEnabledError):
        await nc_b.jetstream(timeout=1.0).account_info()
    js = nc_b.jetstream(api_prefix=PREFIX)
    assert js.api_prefix == PREFIX
    assert (await js.account_info()).api.level >= 1


async def test_key_value_through_an_api_prefix(nc_a: Client, nc_b: Client) -> None:
    js = nc_b.jetstream(api_prefix=PREFIX)
    js_a = nc_a.jetstream()
    kv = await js.create_key_value(bucket="cfg", history=5)
    try:
        # The bucket lives in account A.
        kv_a = await js_a.key_value("cfg")
        assert kv_a.stream_name == "KV_cfg"

        # A put leaves B on the prefixed subject and lands in A on the plain one.
        wire_b = await nc_b.subscribe(f"{PREFIX}.$KV.cfg.>")
        wire_a = await nc_a.subscribe("$KV.cfg.>")
        await nc_b.flush()
        await nc_a.flush()
        r1 = await kv.put("a.b", b"one")
        # the first write of the handle is preceded by a probe of the route (it carries
        # an impossible expected sequence, so nothing is stored)
        probe = await wire_b.next_msg(timeout=2)
        assert (probe.subject, probe.data) == (f"{PREFIX}.$KV.cfg.a.b", b"")
        assert probe.headers["Nats-Expected-Last-Subject-Sequence"] == str(2**63 - 1)
        await wire_a.next_msg(timeout=2)
        sent = await wire_b.next_msg(timeout=2)
        landed = await wire_a.next_msg(timeout=2)
        assert (sent.subject, sent.data) == (f"{PREFIX}.$KV.cfg.a.b", b"one")
        assert (landed.subject, landed.data) == ("$KV.cfg.a.b", b"one")
        await wire_b.unsubscribe()
        await wire_a.unsubscribe()

        e = await kv.get("a.b")
        assert (e.key, e.value, e.revision, e.operation) == ("a.b", b"one", r1, KeyValueOp.PUT)
        assert (await kv_a.get("a.b")).revision == r1

        r2 = await kv.update("a.b", b"two", last=r1)
        assert r2 == r1 + 1
        with pytest.raises(KeyWrongLastSequenceError):
            await kv.update("a.b", b"stale", last=r1)
        assert (await kv.get("a.b", revision=r1)).value == b"one"

        r3 = await kv.create("c", b"new")
        with pytest.raises(KeyExistsError):
            await kv.create("c", b"again")
        r4 = await kv.delete("c")
        with pytest.raises(KeyDeletedError):
            await kv.get("c")
        r5 = await kv.create("c", b"reborn")  # create over a delete marker
        assert r3 < r4 < r5
        assert (await kv_a.get("c")).value == b"reborn"

        r6 = await kv.put("p", b"x")
        r7 = await kv.purge("p")
        with pytest.raises(KeyNotFoundError):
            await kv.get("p")

        assert _shape(await kv.history("a.b")) == [
            ("a.b", b"one", r1, KeyValueOp.PUT),
            ("a.b", b"two", r2, KeyValueOp.PUT),
        ]
        assert _shape(await kv.history("c")) == [
            ("c", b"new", r3, KeyValueOp.PUT),
            ("c", b"", r4, KeyValueOp.DEL),
            ("c", b"reborn", r5, KeyValueOp.PUT),
        ]
        assert _shape(await kv.history("p")) == [("p", b"", r7, KeyValueOp.PURGE)]
        assert r6 < r7
        assert sorted(await kv.keys()) == ["a.b", "c"]
        assert await kv.keys("a.>") == ["a.b"]

        async with kv.watch_all() as w:
            initial = await _until_marker(w)
            assert sorted(_shape(initial)) == [
                ("a.b", b"two", r2, KeyValueOp.PUT),
                ("c", b"reborn", r5, KeyValueOp.PUT),
                ("p", b"", r7, KeyValueOp.PURGE),
            ]
            # Live changes, written by either account, arrive in order.
            ra = await kv_a.put("live", b"from A")
            rb = await kv.put("live", b"from B")
            got = [await w.next(5), await w.next(5)]
            assert _shape([e for e in got if e is not None]) == [
                ("live", b"from A", ra, KeyValueOp.PUT),
                ("live", b"from B", rb, KeyValueOp.PUT),
            ]

        status = await kv.status()
        assert (status.bucket, status.history) == ("cfg", 5)
        # Every revision is kept but r6, which the purge removed.
        assert status.values == (await kv_a.status()).values == rb - 1
        assert [n async for n in js.key_value_store_names()] == ["cfg"]
        assert (await js.key_value("cfg")).bucket == "cfg"
    finally:
        await js.delete_key_value("cfg")
    with pytest.raises(BucketNotFoundError):
        await js_a.key_value("cfg")


async def test_object_store_through_an_api_prefix(nc_a: Client, nc_b: Client) -> None:
    js = nc_b.jetstream(api_prefix=PREFIX)
    js_a = nc_a.jetstream()
    obs = await js.create_object_store(bucket="files")
    try:
        obs_a = await js_a.object_store("files")
        chunk = 64 * 1024
        data = os.urandom(3 * chunk + 1000)

        wire_b = await nc_b.subscribe("$O.files.M.>")
        await nc_b.flush()
        info = await obs.put("x.bin", data, chunk_size=chunk, metadata={"k": "v"})
        meta = await wire_b.next_msg(timeout=2)  # the info goes out on the plain subject
        assert meta.subject == "$O.files.M." + base64.urlsafe_b64encode(b"x.bin").decode()
        await wire_b.unsubscribe()
        assert (info.size, info.chunks, info.digest) == (len(data), 4, _sha256(data))

        assert await obs.get_bytes("x.bin") == data
        assert await obs_a.get_bytes("x.bin") == data
        got = await obs.info("x.bin")
        assert (got.size, got.chunks, got.digest, got.metadata) == (
            len(data),
            4,
            _sha256(data),
            {"k": "v"},
        )
        async with obs.get("x.bin") as reader:  # streamed, digest checked at the end
            parts = [part async for part in reader]
        assert [len(p) for p in parts] == [chunk, chunk, chunk, 1000]
        assert b"".join(parts) == data

        # Replacing an object purges the old chunks (a purge through the API).
        small = os.urandom(1000)
        await obs.put("x.bin", small, chunk_size=chunk)
        assert await obs.get_bytes("x.bin") == small
        assert (await obs.status()).stream_info.state.messages == 2  # 1 chunk + 1 info

        # Written in account A, read in account B.
        from_a = os.urandom(5000)
        await obs_a.put("from-a", from_a)
        assert await obs.get_bytes("from-a") == from_a
        assert sorted(i.name for i in await obs.list()) == ["from-a", "x.bin"]

        deleted = await obs.delete("x.bin")
        assert deleted.deleted and deleted.size == 0
        with pytest.raises(ObjectNotFoundError):
            await obs.info("x.bin")
        with pytest.raises(ObjectNotFoundError):
            await obs_a.get_bytes("x.bin")
        assert [i.name for i in await obs.list()] == ["from-a"]
        shown = {i.name: i.deleted for i in await obs.list(show_deleted=True)}
        assert shown == {"from-a": False, "x.bin": True}
        assert [n async for n in js.object_store_names()] == ["files"]
    finally:
        await js.delete_object_store("files")
    with pytest.raises(ObjectStoreNotFoundError):
        await js_a.object_store("files")


# -- a JetStream domain across a leafnode ---------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def hub_and_leaf() -> Iterator[tuple[NatsServer, NatsServer]]:
    """A hub (domain ``hub``) and a leaf with a JetStream of its own (domain ``leaf``)."""
    port = _free_port()
    listen = f'leafnodes {{ listen: "127.0.0.1:{port}" }}'
    remote = f'leafnodes {{ remotes: [ {{ url: "nats-leaf://127.0.0.1:{port}" }} ] }}'
    with (
        NatsServer(domain="hub", extra_config=listen) as hub,
        NatsServer(domain="leaf", extra_config=remote) as leaf,
    ):
        yield hub, leaf


@pytest_asyncio.fixture
async def leaf_nc(hub_and_leaf: tuple[NatsServer, NatsServer]) -> AsyncIterator[Client]:
    """A client of the leaf server, once the hub's JetStream answers through the leafnode."""
    async with jetstream.connect(hub_and_leaf[1].url) as nc:
        hub_js = nc.jetstream(domain="hub", timeout=0.5)
        await _eventually(hub_js.account_info, timeout=10.0)
        yield nc


@pytest_asyncio.fixture
async def hub_nc(hub_and_leaf: tuple[NatsServer, NatsServer]) -> AsyncIterator[Client]:
    async with jetstream.connect(hub_and_leaf[0].url) as nc:
        yield nc


async def test_key_value_in_another_domain(leaf_nc: Client, hub_nc: Client) -> None:
    js = leaf_nc.jetstream(domain="hub")
    assert js.api_prefix == "$JS.hub.API"
    kv = await js.create_key_value(bucket="dom", history=3)
    local = leaf_nc.jetstream()  # the leaf's own JetStream (domain "leaf")
    try:
        with pytest.raises(BucketNotFoundError):
            await local.key_value("dom")
        kv_hub: KeyValue = await hub_nc.jetstream().key_value("dom")

        wire = await leaf_nc.subscribe("$JS.hub.API.$KV.dom.>")
        await leaf_nc.flush()
        r1 = await kv.put("k", b"v1")
        assert (await wire.next_msg(timeout=2)).subject == "$JS.hub.API.$KV.dom.k"
        await wire.unsubscribe()
        assert (await kv_hub.get("k")).value == b"v1"

        r2 = await kv.update("k", b"v2", last=r1)
        with pytest.raises(KeyWrongLastSequenceError):
            await kv.update("k", b"v3", last=r1)
        r3 = await kv.create("other", b"o")
        r4 = await kv.delete("other")
        e = await kv.get("k")
        assert (e.value, e.revision) == (b"v2", r2)
        assert _shape(await kv.history("other")) == [
            ("other", b"o", r3, KeyValueOp.PUT),
            ("other", b"", r4, KeyValueOp.DEL),
        ]
        assert await kv.keys() == ["k"]
        async with kv.watch("k") as w:
            assert _shape(await _until_marker(w)) == [("k", b"v2", r2, KeyValueOp.PUT)]
            r5 = await kv_hub.put("k", b"from the hub")
            e5 = await w.next(5)
            assert e5 is not None and (e5.value, e5.revision) == (b"from the hub", r5)

        # A mirror in the leaf's own domain writes to the origin in the hub through the
        # mirror's external API prefix, and reads the origin's keys from its own stream.
        mirror = await local.create_key_value(
            bucket="mir", mirror=StreamSource(name="dom", external=ExternalStream.for_domain("hub"))
        )
        try:
            r6 = await mirror.put("via-mirror", b"m")
            assert (await kv_hub.get("via-mirror")).revision == r6

            async def mirrored() -> None:
                assert (await mirror.get("via-mirror")).value == b"m"

            await _eventually(mirrored)
            assert (await mirror.get("k")).value == b"from the hub"
        finally:
            await local.delete_key_value("mir")
    finally:
        await js.delete_key_value("dom")


async def test_object_store_in_another_domain(leaf_nc: Client, hub_nc: Client) -> None:
    js = leaf_nc.jetstream(domain="hub")
    obs = await js.create_object_store(bucket="remote")
    try:
        with pytest.raises(ObjectStoreNotFoundError):
            await leaf_nc.jetstream().object_store("remote")
        obs_hub = await hub_nc.jetstream().object_store("remote")
        data = os.urandom(300_000)
        info = await obs.put("blob", data, chunk_size=100_000)
        assert (info.chunks, info.digest) == (3, _sha256(data))
        assert await obs_hub.get_bytes("blob") == data
        assert await obs.get_bytes("blob") == data
        assert (await obs.info("blob")).digest == _sha256(data)
        hub_data = os.urandom(1234)
        await obs_hub.put("from-hub", hub_data)
        assert await obs.get_bytes("from-hub") == hub_data
        assert sorted(i.name for i in await obs.list()) == ["blob", "from-hub"]
        await obs.delete("blob")
        with pytest.raises(ObjectNotFoundError):
            await obs_hub.info("blob")
        assert [i.name for i in await obs.list()] == ["from-hub"]
    finally:
        await js.delete_object_store("remote")
