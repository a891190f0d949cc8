"""API errors name what they are about and say what to do, against a real server.

A stream or consumer that is not there is named (``stream 'EVENTS' not found``); a
stream or consumer that exists with another config names the calls that change or
replace it. Either way the server's codes and the request subject follow.
"""

from __future__ import annotations

import pytest

from jetstream import (
    AckPolicy,
    Client,
    ConsumerConfig,
    ConsumerNotFoundError,
    JetStream,
    StreamConfig,
    StreamNotFoundError,
)
from jetstream.errors import (
    BucketNotFoundError,
    ConsumerDoesNotExistError,
    ConsumerExistsError,
    ConsumerNameInUseError,
    StreamNameInUseError,
    StreamSubjectOverlapError,
)

pytestmark = pytest.mark.asyncio


async def test_a_missing_stream_is_named(js: JetStream) -> None:
    with pytest.raises(StreamNotFoundError) as caught:
        await js.stream("EVENTS")
    exc = caught.value
    assert str(exc) == (
        "stream 'EVENTS' not found [code 404, err_code 10059] (request $JS.API.STREAM.INFO.EVENTS)"
    )
    assert (exc.stream, exc.consumer, exc.err_code) == ("EVENTS", "", 10059)
    assert exc.description == "stream not found"  # the server's own text, as it came
    with pytest.raises(StreamNotFoundError) as caught:
        await js.delete_stream("EVENTS")
    assert str(caught.value) == (
        "stream 'EVENTS' not found [code 404, err_code 10059] "
        "(request $JS.API.STREAM.DELETE.EVENTS)"
    )
    with pytest.raises(StreamNotFoundError, match=r"^stream 'EVENTS' not found \[code 404"):
        await js.update_stream(StreamConfig(name="EVENTS", subjects=["events.>"]))
    # a bucket keeps its own wording
    with pytest.raises(BucketNotFoundError, match=r"^no bucket 'EVENTS'"):
        await js.key_value("EVENTS")


async def test_a_missing_consumer_is_named_with_its_stream(js: JetStream) -> None:
    stream = await js.create_stream(StreamConfig(name="ORDERS", subjects=["orders.>"]))
    with pytest.raises(ConsumerNotFoundError) as caught:
        await stream.consumer("worker")
    exc = caught.value
    assert str(exc) == (
        "consumer 'worker' of stream 'ORDERS' not found [code 404, err_code 10014] "
        "(request $JS.API.CONSUMER.INFO.ORDERS.worker)"
    )
    assert (exc.stream, exc.consumer) == ("ORDERS", "worker")
    with pytest.raises(ConsumerNotFoundError) as caught:
        await stream.delete_consumer("worker")
    assert str(caught.value) == (
        "consumer 'worker' of stream 'ORDERS' not found [code 404, err_code 10014] "
        "(request $JS.API.CONSUMER.DELETE.ORDERS.worker)"
    )
    with pytest.raises(ConsumerDoesNotExistError) as caught:
        await stream.update_consumer(ConsumerConfig(durable_name="worker"))
    assert str(caught.value) == (
        "consumer 'worker' of stream 'ORDERS' not found [code 400, err_code 10149] "
        "(request $JS.API.CONSUMER.CREATE.ORDERS.worker)"
    )
    # the stream went away under a handle: the stream is what is missing
    await js.delete_stream("ORDERS")
    with pytest.raises(StreamNotFoundError) as caught:
        await stream.consumer("worker")
    assert str(caught.value) == (
        "stream 'ORDERS' not found [code 404, err_code 10059] "
        "(request $JS.API.CONSUMER.INFO.ORDERS.worker)"
    )


async def test_a_stream_with_another_config_says_how_to_change_it(js: JetStream) -> None:
    await js.create_stream(StreamConfig(name="ORDERS", subjects=["orders.>"]))
    changed = StreamConfig(name="ORDERS", subjects=["orders.>", "refunds.>"])
    with pytest.raises(StreamNameInUseError) as caught:
        await js.create_stream(changed)
    assert str(caught.value) == (
        "stream 'ORDERS' exists with another config: change it with update_stream() "
        "or create_or_update_stream(), or delete it first (delete_stream('ORDERS')) "
        "[code 400, err_code 10058] (request $JS.API.STREAM.CREATE.ORDERS)"
    )
    # the calls it names do it
    stream = await js.create_or_update_stream(changed)
    assert stream.cached_info.config.subjects == ["orders.>", "refunds.>"]


async def test_subjects_that_overlap_another_streams_name_it(js: JetStream) -> None:
    """The server says only that the subjects overlap "an existing stream": the error
    names the streams in the way and the subjects on both sides."""
    await js.create_stream(StreamConfig(name="PAYMENTS", subjects=["payments.>", "pay.eu"]))
    await js.create_stream(StreamConfig(name="REFUNDS", subjects=["refunds.*"]))
    with pytest.raises(StreamSubjectOverlapError) as caught:
        await js.create_stream(
            StreamConfig(name="LEDGER", subjects=["ledger.>", "payments.card", "refunds.x"])
        )
    assert str(caught.value) == (
        "subjects overlap with an existing stream: stream 'PAYMENTS' holds 'payments.>'; "
        "stream 'REFUNDS' holds 'refunds.*', which 'payments.card', 'refunds.x' of 'LEDGER' "
        "overlap (a subject is stored by one stream only) "
        "[code 400, err_code 10065] (request $JS.API.STREAM.CREATE.LEDGER)"
    )
    assert caught.value.err_code == 10065 and caught.value.stream == "LEDGER"
    # an update is checked against the other streams, not against itself
    named = r"stream 'PAYMENTS' holds 'pay\.eu', which 'pay\.\*' of 'REFUNDS' overlap"
    with pytest.raises(StreamSubjectOverlapError, match=named):
        await js.update_stream(StreamConfig(name="REFUNDS", subjects=["refunds.*", "pay.*"]))


async def test_a_consumer_with_another_config_says_how_to_change_it(
    nc: Client, js: JetStream
) -> None:
    stream = await js.create_stream(StreamConfig(name="ORDERS", subjects=["orders.>"]))
    await stream.create_consumer(
        ConsumerConfig(durable_name="worker", ack_policy=AckPolicy.EXPLICIT)
    )
    changed = ConsumerConfig(durable_name="worker", ack_policy=AckPolicy.EXPLICIT, max_deliver=3)
    with pytest.raises(ConsumerExistsError) as caught:
        await stream.create_consumer(changed)
    assert str(caught.value) == (
        "consumer 'worker' of stream 'ORDERS' exists with another config: change it with "
        "create_or_update_consumer() or update_consumer(), or delete it first "
        "(delete_consumer('worker')) [code 400, err_code 10148] "
        "(request $JS.API.CONSUMER.CREATE.ORDERS.worker)"
    )
    consumer = await stream.create_or_update_consumer(changed)
    assert consumer.cached_info.config.max_deliver == 3

    # A push consumer whose deliver subject has a subscriber cannot move to another.
    await stream.create_consumer(
        ConsumerConfig(
            durable_name="pusher", deliver_subject="deliver.a", ack_policy=AckPolicy.EXPLICIT
        )
    )
    sub = await nc.subscribe("deliver.a")
    await nc.flush()
    moved = ConsumerConfig(
        durable_name="pusher", deliver_subject="deliver.b", ack_policy=AckPolicy.EXPLICIT
    )
    with pytest.raises(ConsumerNameInUseError) as caught:
        await stream.create_or_update_consumer(moved)
    text = str(caught.value)
    assert text.startswith(
        "consumer 'pusher' of stream 'ORDERS' exists with another config and cannot take this one ("
    ), text
    assert text.endswith(
        "change it with create_or_update_consumer() or update_consumer(), or delete it "
        "first (delete_consumer('pusher')) [code 400, err_code 10013] "
        "(request $JS.API.CONSUMER.CREATE.ORDERS.pusher)"
    ), text
    assert "deliver subject" in text
    await sub.unsubscribe()
    await stream.delete_consumer("pusher")
    assert (await stream.create_consumer(moved)).cached_info.config.deliver_subject == "deliver.b"
