"""JetStream stream management and publishing against a real server.

Mirrors the stream-management part of the JavaScript README seed: add, info, update,
find, get message, delete message, every purge variant, msgID dedup, every expectation.
"""

from __future__ import annotations

import asyncio

import pytest

import jetstream
from jetstream import (
    Client,
    JetStream,
    MessageNotFoundError,
    StreamConfig,
    StreamNotFoundError,
)
from jetstream.api import RetentionPolicy, StorageType
from jetstream.embedded import NatsServer
from jetstream.errors import (
    BadNameError,
    ConnectionClosedError,
    JetStreamApiError,
    JetStreamNotEnabledError,
    NoRespondersError,
    NoStreamError,
    PublishWindowFullError,
    RequiredApiLevelError,
    StreamNameInUseError,
    StreamNotMatchError,
    WrongLastMsgIdError,
    WrongLastSequenceError,
)

pytestmark = pytest.mark.asyncio
BOTH_LOOPS = True  # run every test here on asyncio and on uvloop


async def test_stream_lifecycle_like_the_seed(nc: Client, js: JetStream) -> None:
    stream = await js.create_stream(StreamConfig(name="mystream", subjects=["mystream.*"]))
    assert stream.cached_info.config.name == "mystream"
    assert [s.config.name async for s in js.streams()] == ["mystream"]
    for _ in range(100):
        await nc.publish("mystream.a", b"")
    await nc.flush()
    assert await js.find_stream("mystream.A") == "mystream"
    # core publishes are stored asynchronously after the server got them: wait for it
    async with asyncio.timeout(10):
        while (info := await stream.info()).state.messages < 100:
            await asyncio.sleep(0.02)
    assert info.state.messages == 100
    info.config.description = "updated"
    info.config.max_msgs = 1000
    updated = await js.update_stream(info.config)
    assert updated.cached_info.config.description == "updated"
    assert updated.cached_info.config.max_msgs == 1000
    sm = await stream.get_msg(1)
    assert sm.seq == 1 and sm.subject == "mystream.a"
    assert await stream.delete_msg(5)
    with pytest.raises(MessageNotFoundError):
        await stream.get_msg(5)
    info = await stream.info(deleted_details=True)
    assert info.state.messages == 99 and info.state.deleted == [5]
    assert await stream.purge() == 99
    assert (await stream.info()).state.messages == 0
    assert await js.delete_stream("mystream")
    with pytest.raises(StreamNotFoundError):
        await js.stream("mystream")


async def test_purge_variants(js: JetStream) -> None:
    stream = await js.create_stream(StreamConfig(name="P", subjects=["a.*"]))
    for i in range(100):
        await js.publish(f"a.{'bcd'[i % 3]}", str(i).encode())
    # subject filter
    n_b = (await stream.info(subjects_filter="a.b")).state.subjects["a.b"]
    assert await stream.purge(filter="a.b") == n_b
    # subject filter keeping some
    n_c = (await stream.info(subjects_filter="a.c")).state.subjects["a.c"]
    assert await stream.purge(filter="a.c", keep=5) == n_c - 5
    assert (await stream.info(subjects_filter="a.c")).state.subjects["a.c"] == 5
    # up to a sequence with a subject filter
    before = (await stream.info(subjects_filter="a.d")).state.subjects["a.d"]
    purged = await stream.purge(filter="a.d", seq=50)
    assert 0 < purged < before
    # up to a sequence (not including it)
    await stream.purge(seq=90)
    info = await stream.info()
    assert info.state.first_seq >= 90
    with pytest.raises(ValueError, match="purge takes seq or keep, not both"):
        await stream.purge(seq=1, keep=1)


async def test_publish_ack_dedup_and_expectations(js: JetStream) -> None:
    await js.create_stream(StreamConfig(name="a", subjects=["a.*"]))
    pa = await js.publish("a.b", b"")
    assert (pa.stream, pa.seq, pa.duplicate) == ("a", 1, False)
    first = await js.publish("a.b", b"", msg_id="a")
    again = await js.publish("a.b", b"", msg_id="a")
    assert again.duplicate and again.seq == first.seq
    await js.publish("a.b", b"", expected_last_msg_id="a")
    with pytest.raises(WrongLastMsgIdError):
        await js.publish("a.b", b"", expected_last_msg_id="not-a")
    await js.publish("a.b", b"", expected_last_seq=3)
    with pytest.raises(WrongLastSequenceError) as exc_info:
        await js.publish("a.b", b"", expected_last_seq=3)
    assert exc_info.value.err_code == 10071
    assert exc_info.value.code == 400
    pa = await js.publish("a.b", b"", expected_stream="a")
    with pytest.raises(StreamNotMatchError):
        await js.publish("a.b", b"", expected_stream="other")
    futs = [await js.publish_async("a.a", b"") for _ in range(100)]
    await asyncio.gather(*futs)
    await js.publish("a.b", b"", expected_last_subject_seq=pa.seq)
    with pytest.raises(WrongLastSequenceError):
        await js.publish("a.b", b"", expected_last_subject_seq=pa.seq)


async def test_publish_headers_reach_the_stream(js: JetStream) -> None:
    stream = await js.create_stream(StreamConfig(name="H", subjects=["h"]))
    await js.publish("h", b"body", headers={"X-Key": ["1", "2"]}, msg_id="m1")
    got = await stream.get_msg(1)
    assert got.data == b"body"
    assert got.headers.get_all("X-Key") == ["1", "2"]
    assert got.headers["Nats-Msg-Id"] == "m1"


async def test_get_msg_by_subject_and_direct(js: JetStream) -> None:
    plain = await js.create_stream(StreamConfig(name="G", subjects=["g.>"]))
    direct = await js.create_stream(StreamConfig(name="D", subjects=["d.>"], allow_direct=True))
    for i in range(1, 7):
        await js.publish(f"g.{i % 2}", str(i).encode())
        await js.publish(f"d.{i % 2}", str(i).encode(), headers={"n": str(i)})
    for stream in (plain, direct):
        prefix = stream.name.lower()
        last = await stream.get_msg(last_by_subject=f"{prefix}.1")
        assert last.data == b"5" and last.seq == 5
        nxt = await stream.get_msg(2, next_by_subject=f"{prefix}.1")
        assert nxt.data == b"3" and nxt.seq == 3
        by_seq = await stream.get_msg(4)
        assert by_seq.data == b"4" and by_seq.time.year >= 2024
        with pytest.raises(MessageNotFoundError):
            await stream.get_msg(last_by_subject=f"{prefix}.none")
        with pytest.raises(MessageNotFoundError):
            await stream.get_msg(99)
    # the direct answer carries the stream's headers as well as the message's own
    got = await direct.get_msg(6, direct=True)
    assert got.headers["n"] == "6"
    assert got.headers["Nats-Stream"] == "D"
    # explicit API path on a direct stream too
    assert (await direct.get_msg(6, direct=False)).headers["n"] == "6"


async def test_direct_get_without_responders_asks_again_within_the_timeout(
    nc: Client,
) -> None:
    """No responders to a direct get (a replica not current yet, interest not yet
    propagated) is asked again with backoff: a responder that comes late is heard; one
    that never comes ends in JetStreamNotEnabledError at the context's timeout."""
    patient = await nc.jetstream(timeout=10.0).create_stream(
        StreamConfig(name="L", subjects=["l.>"], allow_direct=True)
    )
    brief = await nc.jetstream(timeout=1.0).stream("L")
    await nc.jetstream().delete_stream("L")  # the handles still say allow_direct; no one answers

    async def replica(msg: jetstream.Msg) -> None:  # stands in for a replica come back
        await msg.respond(
            b"late",
            headers={
                "Nats-Stream": "L",
                "Nats-Subject": "l.x",
                "Nats-Sequence": "7",
                "Nats-Time-Stamp": "2026-01-01T00:00:00Z",
            },
        )

    async def comes_late() -> jetstream.Subscription:
        await asyncio.sleep(0.5)
        return await nc.subscribe("$JS.API.DIRECT.GET.L.l.x", cb=replica)

    late = asyncio.create_task(comes_late())
    got = await patient.get_msg(last_by_subject="l.x")
    assert (got.seq, got.subject, got.data) == (7, "l.x", b"late")
    await (await late).unsubscribe()
    sent = nc.stats.out_msgs
    with pytest.raises(JetStreamNotEnabledError):
        await brief.get_msg(last_by_subject="l.x")
    assert nc.stats.out_msgs - sent >= 2  # asked again before giving up


async def test_batch_and_multi_last_direct_get(js: JetStream) -> None:
    stream = await js.create_stream(StreamConfig(name="B", subjects=["b.>"], allow_direct=True))
    for i in range(1, 21):
        await js.publish(f"b.{i % 4}", str(i).encode())
    batch = await stream.get_msgs(batch=5, seq=3)
    assert [m.seq for m in batch] == [3, 4, 5, 6, 7]
    filtered = await stream.get_msgs(batch=3, seq=1, subject="b.1")
    assert [m.data for m in filtered] == [b"1", b"5", b"9"]
    everything = await stream.get_msgs(batch=100, seq=15)
    assert [m.seq for m in everything] == [15, 16, 17, 18, 19, 20]
    last = await stream.get_last_msgs_for(["b.>"])
    assert sorted(m.data for m in last) == [b"17", b"18", b"19", b"20"]
    as_of = await stream.get_last_msgs_for(["b.1", "b.2"], up_to_seq=10)
    assert sorted(m.data for m in as_of) == [b"10", b"9"]
    with pytest.raises(MessageNotFoundError):
        await stream.get_msgs(batch=5, seq=1, subject="b.none")


async def test_stream_listing_walks_every_page(js: JetStream) -> None:
    # the server pages STREAM.NAMES by 1024 and STREAM.LIST by 256
    names = [f"S{i:03d}" for i in range(300)]
    await asyncio.gather(
        *(js.create_stream(StreamConfig(name=n, subjects=[f"s.{n}"])) for n in names)
    )
    assert sorted([n async for n in js.stream_names()]) == names
    infos = [i async for i in js.streams()]
    assert len(infos) == 300
    assert [n async for n in js.stream_names(subject="s.S007")] == ["S007"]
    account = await js.account_info()
    assert account.streams == 300


async def test_api_errors_are_typed(js: JetStream) -> None:
    await js.create_stream(StreamConfig(name="E", subjects=["e"]))
    with pytest.raises(StreamNameInUseError) as exc:
        await js.create_stream(StreamConfig(name="E", subjects=["other"]))
    assert isinstance(exc.value, JetStreamApiError)
    assert exc.value.description
    assert "E" in str(exc.value)
    with pytest.raises(StreamNotFoundError):
        await js.update_stream(StreamConfig(name="missing", subjects=["m"]))
    with pytest.raises(StreamNotFoundError):
        await js.delete_stream("missing")
    for bad in ["", "a.b", "a b", "a*", "a>", "a/b"]:
        with pytest.raises(BadNameError):
            await js.create_stream(StreamConfig(name=bad, subjects=["x"]))
    # create_or_update: creates, then updates
    s = await js.create_or_update_stream(StreamConfig(name="CU", subjects=["cu"]))
    s = await js.create_or_update_stream(StreamConfig(name="CU", subjects=["cu", "cu2"]))
    assert s.cached_info.config.subjects == ["cu", "cu2"]


async def test_publish_without_stream_raises_no_stream_error_at_once(js: JetStream) -> None:
    """Not after a retry (2.5 to 5 s later here): the first 503 asks whether a stream
    stores the subject, and the answer cuts the backoff short."""
    with pytest.raises(NoStreamError, match=r"no stream stores subject 'no\.stream\.here'") as info:
        await js.publish("no.stream.here", b"", retry_attempts=1, retry_wait=5)
    assert info.value.attempts == 1


async def test_required_api_level_header(nc: Client, js: JetStream) -> None:
    spy = await nc.subscribe("$JS.API.STREAM.CREATE.*")
    await nc.flush()
    await js.create_stream(StreamConfig(name="Plain", subjects=["plain"]))
    await js.create_stream(StreamConfig(name="TTL", subjects=["ttl"], allow_msg_ttl=True))
    plain = await spy.next_msg(timeout=5)
    ttl = await spy.next_msg(timeout=5)
    assert "Nats-Required-Api-Level" not in plain.headers
    assert int(ttl.headers["Nats-Required-Api-Level"]) >= 1
    # a server that is too old for a request refuses it clearly
    reply = await nc.request(
        "$JS.API.STREAM.CREATE.Future",
        b'{"name":"Future","subjects":["future"]}',
        headers={"Nats-Required-Api-Level": "99"},
        timeout=5,
    )
    from jetstream.api import StreamInfoResponse, decode_response

    with pytest.raises(RequiredApiLevelError):
        decode_response(reply.data, StreamInfoResponse, "$JS.API.STREAM.CREATE.Future")


async def test_message_ttl(js: JetStream) -> None:
    stream = await js.create_stream(
        StreamConfig(name="T", subjects=["t"], allow_msg_ttl=True, storage=StorageType.MEMORY)
    )
    await js.publish("t", b"short", ttl=1)
    await js.publish("t", b"long", ttl="1h")
    assert (await stream.info()).state.messages == 2
    async with asyncio.timeout(20):
        while (await stream.info()).state.messages != 1:
            await asyncio.sleep(0.2)
    # the one left is the long-lived one (sequence 2)
    info = await stream.info()
    assert (info.state.first_seq, info.state.last_seq) == (2, 2)
    assert (await stream.get_msg(2)).data == b"long"


async def test_publish_async_window_and_completion(nc: Client) -> None:
    js = nc.jetstream(publish_async_max_pending=10)
    await js.create_stream(StreamConfig(name="W", subjects=["w"]))
    futs = [await js.publish_async("w", str(i).encode()) for i in range(500)]
    assert js.publish_async_pending <= 10
    await js.publish_async_complete(timeout=10)
    acks = [f.result() for f in futs]
    assert [a.seq for a in acks] == list(range(1, 501))
    assert js.publish_async_pending == 0


async def test_publish_async_writes_a_refill_as_it_goes(nc: Client) -> None:
    """A burst of async publishes is written in pieces as it is made, not all at the
    end of the loop iteration: the server starts on the first ones meanwhile."""
    js = nc.jetstream(publish_async_max_pending=1000)
    await js.create_stream(StreamConfig(name="P", subjects=["p"]))
    futs = [await js.publish_async("p", b"x" * 128) for _ in range(500)]
    # no loop turn yet (there was room for all): all but the last piece is written
    # (the burst is some 95 KB; what is left to write, at most one piece)
    assert nc.buffered_bytes < 16 * 1024
    await js.publish_async_complete(timeout=10)
    assert [f.result().seq for f in futs] == list(range(1, 501))


async def test_publish_async_payload_forms_and_refusals(nc: Client) -> None:
    """The async publisher writes small payloads with their control line in one go and
    larger ones, header blocks and memoryviews apart: every form is stored as sent,
    and a refused publish (bad data, bad subject) leaves nothing behind."""
    js = nc.jetstream(publish_async_max_pending=64)  # no wait for room: nothing flushed
    await js.create_stream(StreamConfig(name="F", subjects=["f.>"]))
    big = bytes(range(256)) * 20  # past the inline size
    sent: list[tuple[bytes, dict[str, str] | None]] = [
        (b"", None),
        (b"small", None),
        (b"x" * 1024, None),
        (big, None),
        (b"with headers", {"k": "v"}),
        (big, {"k": "big"}),
    ]
    futs = [await js.publish_async("f.a", data, headers=h) for data, h in sent]
    futs.append(await js.publish_async("f.a", memoryview(b"view")))
    futs.append(await js.publish_async("f.a", bytearray(b"array")))
    before = nc.buffered_bytes
    with pytest.raises(TypeError, match="must be bytes, bytearray or memoryview, not str"):
        await js.publish_async("f.a", "text")  # type: ignore[arg-type]
    with pytest.raises(jetstream.BadSubjectError):
        await js.publish_async("f. a", b"x")
    assert nc.buffered_bytes == before
    assert js.publish_async_pending <= len(futs)  # the refused ones are not in the window
    acks = [await f for f in futs]
    assert [a.seq for a in acks] == list(range(1, 9))
    stream = await js.stream("F")
    for seq, (data, h) in enumerate(sent, 1):
        raw = await stream.get_msg(seq)
        assert raw.data == data
        assert (raw.headers.get("k") if h else None) == (h or {}).get("k")
    assert (await stream.get_msg(7)).data == b"view"
    assert (await stream.get_msg(8)).data == b"array"


async def test_publish_async_futures_always_resolve(nc: Client, nats_url: str) -> None:
    js = nc.jetstream(timeout=0.5)  # for the ack that never comes
    await js.create_stream(StreamConfig(name="R", subjects=["r"], retention=RetentionPolicy.LIMITS))
    # the answers that do come get time for a loaded machine
    ok = await js.publish_async("r", b"x", timeout=10)
    api_err = await js.publish_async("r", b"x", expected_last_seq=99, timeout=10)
    no_stream = await js.publish_async("nobody", b"x", timeout=10)
    assert (await ok).seq == 1
    with pytest.raises(WrongLastSequenceError):
        await api_err
    with pytest.raises(NoRespondersError):
        await no_stream
    # an ack that never comes: a subject some plain subscriber takes but never answers
    silent = await nc.subscribe("silent")
    await nc.flush()
    lost = await js.publish_async("silent", b"x")
    with pytest.raises(jetstream.TimeoutError):
        await asyncio.wait_for(lost, 5)
    await silent.unsubscribe()
    # close resolves what is still pending
    other = await jetstream.connect(nats_url)
    js2 = other.jetstream(timeout=30)
    await other.subscribe("silent")
    await other.flush()
    pending = [await js2.publish_async("silent", b"x") for _ in range(5)]
    await other.close()
    for fut in pending:
        with pytest.raises(ConnectionClosedError):
            await fut


async def test_publish_async_window_full_times_out(nc: Client) -> None:
    js = nc.jetstream(publish_async_max_pending=2, timeout=0.3)
    await nc.subscribe("stuck")  # takes publishes, never acks
    await nc.flush()
    await js.publish_async("stuck", b"1", timeout=30)
    await js.publish_async("stuck", b"2", timeout=30)
    with pytest.raises(PublishWindowFullError):
        await js.publish_async("stuck", b"3")
    await nc.close()


async def test_jetstream_not_enabled() -> None:
    async with (
        NatsServer(jetstream=False) as server,
        jetstream.connect(server.url) as nc,
    ):
        with pytest.raises(JetStreamNotEnabledError):
            await nc.jetstream().account_info()


async def test_domain_prefix(nats_server: NatsServer) -> None:
    async with NatsServer(domain="hub") as server, jetstream.connect(server.url) as nc:
        js = nc.jetstream(domain="hub")
        assert js.api_prefix == "$JS.hub.API"
        await js.create_stream(StreamConfig(name="DOM", subjects=["dom"]))
        ack = await js.publish("dom", b"x")
        assert ack.domain == "hub"
        info = await js.account_info()
        assert info.streams == 1
        # the same API through an explicit prefix
        js2 = nc.jetstream(api_prefix="$JS.hub.API")
        assert (await js2.stream("DOM")).name == "DOM"


async def test_atomic_batch_publish(js: JetStream) -> None:
    stream = await js.create_stream(StreamConfig(name="AT", subjects=["at.*"], allow_atomic=True))
    ack = await js.publish_batch([(f"at.{i}", str(i).encode()) for i in range(10)])
    assert ack.count == 10 and ack.batch and ack.seq == 10
    got = await stream.get_msg(4)
    assert got.data == b"3" and got.headers["Nats-Batch-Id"] == ack.batch
    one = await js.publish_batch([("at.x", b"only", {"k": "v"})])
    assert one.count == 1 and one.seq == 11
    # a failed expectation anywhere rejects the whole batch: nothing is stored
    with pytest.raises(WrongLastSequenceError):
        await js.publish_batch(
            [("at.a", b"1", None), ("at.b", b"2", {"Nats-Expected-Last-Sequence": "1"})]
        )
    assert (await stream.info()).state.messages == 11
    with pytest.raises(ValueError, match=r"an atomic batch holds 1 to 1000 messages, not 0$"):
        await js.publish_batch([])
    with pytest.raises(ValueError, match="an atomic batch holds 1 to 1000 messages, not 1001"):
        await js.publish_batch([("at.x", b"")] * 1001)
    # a stream without allow_atomic refuses
    await js.create_stream(StreamConfig(name="NA", subjects=["na"]))
    with pytest.raises(JetStreamApiError):
        await js.publish_batch([("na", b"1"), ("na", b"2")])
