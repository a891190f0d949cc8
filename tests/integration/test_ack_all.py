"""``ack_all``: the plain acks of a batch, formatted together, against a real server (and
what it shares with ``ack_sync_all``: refusals before anything is sent)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

import jetstream
from jetstream import (
    Client,
    ConnectionClosedError,
    Consumer,
    ConsumerConfig,
    ConsumerInfo,
    JetStream,
    JsMsg,
    MsgAlreadyAckedError,
    NatsError,
    ack_all,
    ack_sync_all,
)
from tests.integration._consumer import eventually, fetched

pytestmark = pytest.mark.asyncio


async def settled(c: Consumer, acked: int) -> ConsumerInfo:
    """The consumer's info once nothing awaits an ack and its ack floor is at ``acked``."""
    return await eventually(
        c, lambda i: i.num_ack_pending == 0 and i.ack_floor.stream_seq == acked, 15.0
    )


async def test_a_batch_is_acked_as_each_ack_would(js: JetStream, nc: Client) -> None:
    msgs = await fetched(js, "ACKALL", 250)
    out = nc.stats.out_msgs
    await ack_all(msgs)
    assert all(m.acked for m in msgs)
    # one ack a message, as ack() counts them
    assert nc.stats.out_msgs == out + 250
    c = await (await js.stream("ACKALL")).consumer("c")
    info = await settled(c, 250)
    assert info.num_ack_pending == 0 and info.num_pending == 0
    assert info.ack_floor.stream_seq == 250
    # nothing comes back: every message was acked, none is redelivered
    assert await c.fetch_no_wait(10) == []
    await ack_all([])  # nothing to do


@pytest.mark.parametrize("ack", [ack_all, ack_sync_all])
async def test_refusals_send_nothing(
    js: JetStream, nc: Client, ack: Callable[[list[JsMsg]], Awaitable[None]]
) -> None:
    name = "REF" + ack.__name__.replace("_", "").upper()
    msgs = await fetched(js, name, 3, ack_wait=1.0)
    await msgs[1].ack()
    out = nc.stats.out_msgs
    with pytest.raises(MsgAlreadyAckedError):
        await ack(msgs)
    no_reply = nc.msg_class(JsMsg)("x", 0, None, b"")
    with pytest.raises(NatsError, match="no reply subject"):
        await ack([msgs[0], no_reply])
    assert nc.stats.out_msgs == out
    assert not msgs[0].acked and not msgs[2].acked
    # the refused ones were not acked: after ack_wait they come again, and go this time
    c = await (await js.stream(name)).consumer("c")
    again = await c.fetch(2, expires=5)
    assert sorted(m.data for m in again) == [b"0", b"2"]
    await ack(again)
    assert all(m.acked for m in again)
    info = await settled(c, 3)
    assert info.num_ack_pending == 0 and info.ack_floor.stream_seq == 3


async def test_a_closed_client_is_refused(js: JetStream, nc: Client) -> None:
    msgs = await fetched(js, "ACKCLOSED", 2)
    await nc.close()
    with pytest.raises(ConnectionClosedError):
        await ack_all(msgs)
    with pytest.raises(ConnectionClosedError, match="connection is closed"):
        await msgs[0].ack()  # the single ack's own write path refuses the same way
    assert not any(m.acked for m in msgs)


async def test_messages_of_two_clients_are_acked_through_each(
    js: JetStream, nc: Client, nats_url: str
) -> None:
    mine = await fetched(js, "ACKTWO", 4)
    async with jetstream.connect(nats_url) as other:
        s = await other.jetstream().stream("ACKTWO")
        c = await s.create_consumer(ConsumerConfig(durable_name="d"))
        theirs = await c.fetch(4, expires=5)
        assert len(theirs) == 4
        out_mine, out_theirs = nc.stats.out_msgs, other.stats.out_msgs
        # a message without a client among them: refused before anything is sent
        with pytest.raises(NatsError, match="no reply subject"):
            await ack_all([*mine, JsMsg("x", 0, "r", b""), *theirs])
        assert (nc.stats.out_msgs, other.stats.out_msgs) == (out_mine, out_theirs)
        await ack_all([*mine[:2], *theirs, *mine[2:]])
        # each client wrote the acks of its own messages
        assert nc.stats.out_msgs == out_mine + 4
        assert other.stats.out_msgs == out_theirs + 4
        assert (await settled(c, 4)).num_ack_pending == 0
    info = await settled(await (await js.stream("ACKTWO")).consumer("c"), 4)
    assert info.num_ack_pending == 0
