"""``kv.create`` on a key with no value, while the key changes under it (issue 50).

The nemesis run found ``create`` raising ``KeyExistsError`` on a key that had held no
value all along (``tests/nemesis``; see the reliability page). ``create`` is a write that
may be refused, a read, and a write again: the read went to whichever replica answered
first, and one behind the others (here a paused node just continued) showed an older
revision of the key, holding a value; and a delete made by someone else between the
read and the second write made that write fail as if the key held one. Both are made
here on one server: the reply to create's read is held at a proxy while another client
deletes the key again.
"""

from __future__ import annotations

import asyncio

import pytest

import jetstream
from jetstream.embedded import NatsServer
from tests.faults.proxy import FaultProxy

pytestmark = pytest.mark.asyncio


async def test_create_over_a_delete_made_while_it_reads(nats_server: NatsServer) -> None:
    async with (
        FaultProxy(nats_server.port) as proxy,
        jetstream.connect(proxy.url) as nc,
        jetstream.connect(nats_server.url) as other,
    ):
        kv = await nc.jetstream().create_key_value(bucket="kc", history=5)
        okv = await other.jetstream().key_value("kc")
        await kv.put("k", b"old")
        await kv.delete("k")
        refused = held = False
        hold = asyncio.Event()

        def watch(line: bytes, payload: bytes) -> bool:
            """Hold what comes after the refusal of create's first write: its read."""
            nonlocal refused, held
            if b"wrong last sequence" in payload:
                refused = True
            elif refused and not held:
                held = proxy.blackhole = True
                hold.set()
            return False

        proxy.drop_op = watch
        create = asyncio.create_task(kv.create("k", b"new"))
        await asyncio.wait_for(hold.wait(), 5)
        again = await okv.delete("k")  # deleted again: the key still holds no value
        proxy.blackhole = False
        rev = await asyncio.wait_for(create, 10)
        assert rev > again
        entry = await okv.get("k")
        assert (entry.value, entry.revision) == (b"new", rev)


async def test_create_of_a_key_holding_a_value_still_fails(nats_server: NatsServer) -> None:
    """The read is of the revision the refusal named: a value there is a value."""
    async with jetstream.connect(nats_server.url) as nc:
        kv = await nc.jetstream().create_key_value(bucket="kd", history=5)
        await kv.put("k", b"v1")
        await kv.delete("k")
        rev = await kv.put("k", b"v2")
        with pytest.raises(jetstream.KeyExistsError, match="exists"):
            await kv.create("k", b"v3")
        assert (await kv.get("k")).revision == rev
