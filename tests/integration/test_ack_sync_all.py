"""``ack_sync_all``: the confirmed ack of a batch, against a real server."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

import pytest

import jetstream
from jetstream import (
    Client,
    JetStream,
    JsMsg,
    NoRespondersError,
    ack_sync_all,
)
from tests.integration._consumer import fetched

pytestmark = pytest.mark.asyncio


async def test_a_batch_is_confirmed_in_one_wait(js: JetStream, nc: Client) -> None:
    msgs = await fetched(js, "ALL", 300)
    out = nc.stats.out_msgs
    await ack_sync_all(msgs, timeout=10)
    assert nc.stats.out_msgs == out + 300
    assert all(m.acked for m in msgs)
    # confirmed: the consumer's state changed before ack_sync_all returned
    info = await (await (await js.stream("ALL")).consumer("c")).info()
    assert info.num_ack_pending == 0 and info.num_pending == 0
    assert nc.pending_requests == 0
    await ack_sync_all([])  # nothing to do


async def test_a_gone_consumer_is_no_responders(js: JetStream, nc: Client) -> None:
    msgs = await fetched(js, "GONE", 5)
    await (await js.stream("GONE")).delete_consumer("c")
    with pytest.raises(NoRespondersError):
        await ack_sync_all(msgs, timeout=10)
    assert not any(m.acked for m in msgs)
    assert nc.pending_requests == 0


async def test_a_timeout_marks_only_the_confirmed(nc: Client) -> None:
    """A responder that confirms every other ack: the call times out, naming how many
    were not confirmed; the confirmed ones count as acknowledged, the rest may be sent
    again."""
    seen: list[str] = []

    async def half(msg: jetstream.Msg) -> None:
        seen.append(msg.subject)
        if int(msg.subject.rsplit(".", 1)[1]) % 2 == 0 and msg.reply:
            await nc.publish(msg.reply, b"")

    sub = await nc.subscribe("acks.*", cb=half)
    await nc.flush()
    msgs = [nc.msg_class(JsMsg)("work", 0, f"acks.{i}", b"") for i in range(10)]
    with pytest.raises(jetstream.TimeoutError, match="5 of 10 acks not confirmed"):
        await ack_sync_all(msgs, timeout=0.5)
    assert [m.acked for m in msgs] == [i % 2 == 0 for i in range(10)]
    assert sorted(seen) == sorted(f"acks.{i}" for i in range(10))
    assert nc.pending_requests == 0
    await sub.unsubscribe()


@pytest.mark.parametrize("each", [False, True], ids=["ack_sync_all", "ack_sync_gathered"])
async def test_cancelled_leaves_nothing_behind(nc: Client, each: bool) -> None:
    """Cancelled while waiting, the batch's requests (or each ``ack_sync``'s, gathered)
    are all dropped, and no message counts as acknowledged."""
    sink = await nc.subscribe("sink.*")  # takes the acks, never answers
    await nc.flush()
    msgs = [nc.msg_class(JsMsg)("work", 0, f"sink.{i}", b"") for i in range(20)]
    confirming: Awaitable[object] = (
        asyncio.gather(*(m.ack_sync(timeout=30) for m in msgs))
        if each
        else ack_sync_all(msgs, timeout=30)
    )
    task = asyncio.ensure_future(confirming)
    async with asyncio.timeout(10):  # every ack out and awaited
        while nc.pending_requests < 20:
            await asyncio.sleep(0.01)
    assert nc.pending_requests == 20 and not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert nc.pending_requests == 0
    assert not any(m.acked for m in msgs)
    await sink.unsubscribe()


async def test_a_closed_client_refuses_before_sending(nats_url: str) -> None:
    nc = await jetstream.connect(nats_url)
    msgs = [nc.msg_class(JsMsg)("work", 0, "sink.1", b"")]
    await nc.close()
    with pytest.raises(jetstream.ConnectionClosedError):
        await ack_sync_all(msgs)
    assert not msgs[0].acked


# ``ack_sync`` a message, gathered as users write it: each is its own request, and
# answers, fails or is given up on by itself


async def test_gathered_ack_syncs_each_confirm_or_time_out_alone(nc: Client) -> None:
    """Against a responder that confirms every other ack, each gathered ``ack_sync``
    returns or raises its own timeout; answered requests leave at once, the others
    when they time out: nothing is left waiting."""

    async def half(msg: jetstream.Msg) -> None:
        if int(msg.subject.rsplit(".", 1)[1]) % 2 == 0 and msg.reply:
            await nc.publish(msg.reply, b"")

    sub = await nc.subscribe("each.*", cb=half)
    await nc.flush()
    msgs = [nc.msg_class(JsMsg)("work", 0, f"each.{i}", b"") for i in range(10)]
    got = await asyncio.gather(*(m.ack_sync(timeout=0.5) for m in msgs), return_exceptions=True)
    for i, (msg, res) in enumerate(zip(msgs, got, strict=True)):
        if i % 2 == 0:
            assert res is None and msg.acked
        else:
            assert isinstance(res, jetstream.TimeoutError) and not msg.acked
            assert "the ack of the message on 'work' was not confirmed within 0.5s" in str(res)
    assert nc.pending_requests == 0
    with pytest.raises(jetstream.MsgAlreadyAckedError, match="already acknowledged"):
        await msgs[0].ack_sync()
    await sub.unsubscribe()


async def test_an_ack_sync_nobody_answers_and_a_closed_client(nats_url: str) -> None:
    nc = await jetstream.connect(nats_url)
    lost = nc.msg_class(JsMsg)("work", 0, "nobody.listens", b"")
    with pytest.raises(NoRespondersError, match=r"no responders on 'nobody\.listens'"):
        await lost.ack_sync(timeout=5)
    assert not lost.acked and nc.pending_requests == 0
    await nc.close()
    with pytest.raises(jetstream.ConnectionClosedError, match="closed"):
        await lost.ack_sync()
    assert not lost.acked


async def test_gathered_ack_syncs_are_futures_without_a_task_apiece(nc: Client) -> None:
    """``ack_sync`` returns its confirmation, a future the reply completes: gathering 20
    of them starts no task (a coroutine apiece would be wrapped in one), and a task that
    awaits one may still be made with ``ensure_future``."""
    sink = await nc.subscribe("quiet.*")  # takes the acks, never answers
    await nc.flush()
    msgs = [nc.msg_class(JsMsg)("work", 0, f"quiet.{i}", b"") for i in range(20)]
    before = len(asyncio.all_tasks())
    pending = [m.ack_sync(timeout=0.5) for m in msgs]
    assert all(asyncio.isfuture(p) for p in pending)
    gathered = asyncio.gather(*pending, return_exceptions=True)
    assert len(asyncio.all_tasks()) == before
    assert nc.pending_requests == 20
    got = await gathered
    assert all(isinstance(r, jetstream.TimeoutError) for r in got)
    assert nc.pending_requests == 0 and not any(m.acked for m in msgs)
    one = asyncio.ensure_future(msgs[0].ack_sync(timeout=0.2))
    with pytest.raises(jetstream.TimeoutError, match=r"not confirmed within 0\.2s"):
        await one
    await sink.unsubscribe()


async def test_an_ack_sync_waiting_when_the_client_closes(nats_url: str) -> None:
    """Closed under it, a confirmation nobody answered fails with the close, and its
    request is gone with it."""
    nc = await jetstream.connect(nats_url)
    await nc.subscribe("closing.*")  # takes the ack, never answers
    await nc.flush()
    msg = nc.msg_class(JsMsg)("work", 0, "closing.1", b"")
    waiting = msg.ack_sync(timeout=30)
    assert nc.pending_requests == 1
    await nc.close()
    with pytest.raises(jetstream.ConnectionClosedError):
        await waiting
    assert nc.pending_requests == 0 and not msg.acked
