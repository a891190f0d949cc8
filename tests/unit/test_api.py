"""JetStream API Structs: exact request JSON, durations, decoding server replies, errors."""

from __future__ import annotations

import datetime as dt
import enum
import typing

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jetstream import api, errors
from jetstream.api import (
    ZERO_TIME,
    AccountInfo,
    AckPolicy,
    ConsumerAction,
    ConsumerConfig,
    ConsumerInfo,
    ConsumerListResponse,
    ConsumerNamesResponse,
    ConsumerPauseRequest,
    ConsumerPauseResponse,
    ConsumerResetResponse,
    ConsumerUnpinResponse,
    CreateConsumerRequest,
    DeliverPolicy,
    DiscardPolicy,
    ExternalStream,
    MsgDeleteRequest,
    MsgGetRequest,
    MsgGetResponse,
    PersistMode,
    PriorityPolicy,
    PubAck,
    PullRequest,
    ReplayPolicy,
    RetentionPolicy,
    StorageType,
    StoreCompression,
    StreamConfig,
    StreamConsumerLimits,
    StreamConsumerSource,
    StreamDeleteResponse,
    StreamInfo,
    StreamInfoRequest,
    StreamInfoResponse,
    StreamListRequest,
    StreamListResponse,
    StreamNamesResponse,
    StreamPurgeRequest,
    StreamPurgeResponse,
    StreamSource,
    decode_response,
    encode,
    required_api_level,
)
from jetstream.api import _base as _api_base

UTC = dt.UTC
NS = 1_000_000_000


# --- Requests: exact JSON (pitfall P1) ---------------------------------------------


def test_consumer_config_default_json_sends_the_policies() -> None:
    # ack_policy=explicit must be on the wire: the server's zero value is "none".
    assert encode(ConsumerConfig()) == (
        b'{"deliver_policy":"all","ack_policy":"explicit","replay_policy":"instant"}'
    )


def test_durable_consumer_json() -> None:
    assert encode(ConsumerConfig(durable_name="C")) == (
        b'{"durable_name":"C","deliver_policy":"all","ack_policy":"explicit",'
        b'"replay_policy":"instant"}'
    )


def test_stream_config_default_json() -> None:
    assert encode(StreamConfig(name="S")) == (
        b'{"name":"S","retention":"limits","discard":"old","storage":"file"}'
    )


def test_unset_fields_are_omitted_but_explicit_zero_values_are_sent() -> None:
    cfg = StreamConfig(name="S", max_msgs=0, no_ack=False, subjects=[])
    assert msgspec.json.decode(encode(cfg)) == {
        "name": "S",
        "subjects": [],
        "retention": "limits",
        "max_msgs": 0,
        "discard": "old",
        "storage": "file",
        "no_ack": False,
    }


def test_full_stream_config_json() -> None:
    cfg = StreamConfig(
        name="S",
        subjects=["s.>"],
        retention=RetentionPolicy.WORK_QUEUE,
        max_age=3600,
        duplicate_window=0.5,
        storage=StorageType.MEMORY,
        discard=DiscardPolicy.NEW,
        compression=StoreCompression.S2,
        mirror=StreamSource(
            name="O",
            opt_start_time=dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC),
            external=ExternalStream.for_domain("hub"),
            consumer=StreamConsumerSource(name="dur"),
        ),
        consumer_limits=StreamConsumerLimits(inactive_threshold=10, max_ack_pending=5),
        subject_delete_marker_ttl=60,
        persist_mode=PersistMode.ASYNC,
        metadata={"k": "v"},
    )
    assert msgspec.json.decode(encode(cfg)) == {
        "name": "S",
        "subjects": ["s.>"],
        "retention": "workqueue",
        "max_age": 3600 * NS,
        "discard": "new",
        "storage": "memory",
        "duplicate_window": NS // 2,
        "mirror": {
            "name": "O",
            "opt_start_time": "2024-01-02T03:04:05Z",
            "external": {"api": "$JS.hub.API", "deliver": ""},
            "consumer": {"name": "dur"},
        },
        "compression": "s2",
        "consumer_limits": {"inactive_threshold": 10 * NS, "max_ack_pending": 5},
        "subject_delete_marker_ttl": 60 * NS,
        "persist_mode": "async",
        "metadata": {"k": "v"},
    }


def test_create_consumer_request_json() -> None:
    req = CreateConsumerRequest(
        stream_name="S",
        config=ConsumerConfig(name="C", ack_policy=AckPolicy.NONE),
        action=ConsumerAction.CREATE,
    )
    assert encode(req) == (
        b'{"stream_name":"S","config":{"name":"C","deliver_policy":"all","ack_policy":"none",'
        b'"replay_policy":"instant"},"action":"create"}'
    )
    # create-or-update is the empty action, which the server requires spelled as ""
    assert b'"action":""' in encode(CreateConsumerRequest(stream_name="S", config=ConsumerConfig()))


@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        (PullRequest(), b'{"batch":1}'),
        (
            PullRequest(batch=10, expires=30, idle_heartbeat=15, max_bytes=1024),
            b'{"batch":10,"expires":30000000000,"max_bytes":1024,"idle_heartbeat":15000000000}',
        ),
        (
            PullRequest(batch=5, no_wait=True, group="g", min_pending=3, id="pin", priority=2),
            b'{"batch":5,"no_wait":true,"group":"g","min_pending":3,"id":"pin","priority":2}',
        ),
        (StreamInfoRequest(), b"{}"),
        (StreamInfoRequest(subjects_filter=">", offset=5), b'{"subjects_filter":">","offset":5}'),
        (StreamListRequest(), b'{"offset":0}'),
        (StreamListRequest(offset=256, subject="a.*"), b'{"offset":256,"subject":"a.*"}'),
        (StreamPurgeRequest(), b"{}"),
        (StreamPurgeRequest(filter="a.>", keep=1), b'{"filter":"a.>","keep":1}'),
        (MsgGetRequest(seq=5), b'{"seq":5}'),
        (MsgGetRequest(last_by_subj="a.b"), b'{"last_by_subj":"a.b"}'),
        (
            MsgGetRequest(batch=10, multi_last=["a.>"], up_to_seq=100, no_hdr=True),
            b'{"batch":10,"multi_last":["a.>"],"up_to_seq":100,"no_hdr":true}',
        ),
        (MsgDeleteRequest(seq=3), b'{"seq":3}'),
        (MsgDeleteRequest(seq=3, no_erase=True), b'{"seq":3,"no_erase":true}'),
        (ConsumerPauseRequest(), b"{}"),
        (
            ConsumerPauseRequest(pause_until=dt.datetime(2099, 1, 1, tzinfo=UTC)),
            b'{"pause_until":"2099-01-01T00:00:00Z"}',
        ),
    ],
)
def test_request_json(request_: msgspec.Struct, expected: bytes) -> None:
    assert encode(request_) == expected


# --- Durations ---------------------------------------------------------------------


def test_duration_round_trip() -> None:
    cfg = ConsumerConfig(ack_wait=30, idle_heartbeat=0.5, backoff=[1, 2.5, 60])
    wire = msgspec.json.decode(encode(cfg))
    assert wire["ack_wait"] == 30 * NS
    assert wire["idle_heartbeat"] == 500_000_000
    assert wire["backoff"] == [NS, 2_500_000_000, 60 * NS]

    info = decode_response(_consumer_info_json(config=wire), ConsumerInfo, "r")
    assert info.config.ack_wait == 30.0
    assert info.config.idle_heartbeat == 0.5
    assert info.config.backoff == (1.0, 2.5, 60.0)
    assert encode(info.config) == encode(cfg)


def test_durations_are_normalised_on_construction_assignment_and_replace() -> None:
    cfg = ConsumerConfig(ack_wait=30)
    assert type(cfg.ack_wait) is api.Seconds
    cfg.ack_wait = 5  # seconds, never 5 ns
    cfg.max_expires = 0.25
    cfg.backoff = [1, 2]
    backoff: object = cfg.backoff  # stored as a tuple of Seconds, so appends cannot bypass it
    assert backoff == (1.0, 2.0)
    wire = msgspec.json.decode(encode(cfg))
    assert (wire["ack_wait"], wire["max_expires"]) == (5 * NS, 250_000_000)
    assert wire["backoff"] == [NS, 2 * NS]

    again = msgspec.structs.replace(cfg, inactive_threshold=60)
    assert msgspec.json.decode(encode(again))["inactive_threshold"] == 60 * NS

    cfg.ack_wait = msgspec.UNSET
    assert "ack_wait" not in msgspec.json.decode(encode(cfg))


def test_stream_durations() -> None:
    cfg = StreamConfig(name="S", max_age=86400, duplicate_window=120)
    cfg.subject_delete_marker_ttl = 1.5
    wire = msgspec.json.decode(encode(cfg))
    assert wire["max_age"] == 86400 * NS
    assert wire["duplicate_window"] == 120 * NS
    assert wire["subject_delete_marker_ttl"] == 1_500_000_000


@pytest.mark.parametrize("bad", ["30s", None, b"1", dt.timedelta(seconds=1)])
def test_durations_reject_non_numbers(bad: object) -> None:
    with pytest.raises(TypeError, match="ack_wait"):
        ConsumerConfig(ack_wait=bad)  # type: ignore[arg-type]
    cfg = ConsumerConfig()
    with pytest.raises(TypeError, match="ack_wait"):
        cfg.ack_wait = bad  # type: ignore[assignment]


@settings(deadline=None)
@given(st.integers(min_value=0, max_value=2**63 - 1))
def test_decoded_nanoseconds_encode_back_exactly(ns: int) -> None:
    # Floats hold nanoseconds exactly only up to ~100 days; decoded values keep them.
    cfg = StreamConfig(name="S")
    data = encode(cfg).replace(b'"name":"S"', b'"name":"S","max_age":%d' % ns)
    info = decode_response(_stream_info_json(config=data), StreamInfo, "r")
    assert info.config.max_age == pytest.approx(ns / NS)
    assert msgspec.json.decode(encode(info.config))["max_age"] == ns


@settings(deadline=None)
@given(st.floats(min_value=0, max_value=1e6, allow_nan=False))
def test_seconds_encode_as_rounded_nanoseconds(seconds: float) -> None:
    assert msgspec.json.decode(encode(PullRequest(expires=seconds)))["expires"] == round(
        seconds * NS
    )


def _seconds_fields(cls: type[msgspec.Struct]) -> set[str]:
    hints = typing.get_type_hints(cls)
    return {name for name in cls.__struct_fields__ if "Seconds" in repr(hints[name])}


def _datetime_fields(cls: type[msgspec.Struct]) -> set[str]:
    hints = typing.get_type_hints(cls)
    return {name for name in cls.__struct_fields__ if "datetime" in repr(hints[name])}


_REQUEST_TYPES = [
    obj
    for obj in vars(api).values()
    if isinstance(obj, type) and issubclass(obj, _api_base._Request)
]


@pytest.mark.parametrize("cls", _REQUEST_TYPES, ids=lambda c: c.__name__)
def test_duration_and_timestamp_lists_match_the_annotations(cls: type[msgspec.Struct]) -> None:
    assert set(cls._durations) == _seconds_fields(cls)  # type: ignore[attr-defined]
    assert set(cls._timestamps) == _datetime_fields(cls)  # type: ignore[attr-defined]


def test_naive_datetimes_are_refused() -> None:
    naive = dt.datetime(2024, 1, 1)
    with pytest.raises(ValueError, match="timezone-aware"):
        ConsumerConfig(opt_start_time=naive)
    cfg = ConsumerConfig()
    with pytest.raises(ValueError, match="pause_until"):
        cfg.pause_until = naive
    with pytest.raises(ValueError, match="start_time"):
        MsgGetRequest(start_time=naive)
    offset = dt.timezone(dt.timedelta(hours=2))
    aware = ConsumerConfig(opt_start_time=dt.datetime(2024, 1, 1, 2, tzinfo=offset))
    assert b'"opt_start_time":"2024-01-01T02:00:00+02:00"' in encode(aware)


# --- Enums -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("enum", "values"),
    [
        (AckPolicy, {"none", "all", "explicit", "flow_control"}),
        (
            DeliverPolicy,
            {"all", "last", "new", "by_start_sequence", "by_start_time", "last_per_subject"},
        ),
        (ReplayPolicy, {"instant", "original"}),
        (RetentionPolicy, {"limits", "interest", "workqueue"}),
        (StorageType, {"file", "memory"}),
        (DiscardPolicy, {"old", "new"}),
        (StoreCompression, {"none", "s2"}),
        (PersistMode, {"default", "async"}),
        (PriorityPolicy, {"none", "overflow", "pinned_client", "prioritized"}),
        (ConsumerAction, {"", "create", "update"}),
    ],
)
def test_enum_spellings(enum: type[api.AckPolicy], values: set[str]) -> None:
    assert {m.value for m in enum} == values


# --- Replies as nats-server 2.15 sends them ----------------------------------------

STREAM_CREATE_REPLY = b"""{"type":"io.nats.jetstream.api.v1.stream_create_response",
"config":{"name":"ORDERS","subjects":["orders.\\u003e"],"retention":"limits","max_consumers":-1,
"max_msgs":-1,"max_bytes":-1,"max_age":0,"max_msgs_per_subject":-1,"max_msg_size":-1,
"discard":"old","storage":"file","num_replicas":3,"duplicate_window":120000000000,
"placement":{"cluster":"east","tags":["ssd"]},
"sources":[{"name":"A","opt_start_seq":5,"filter_subject":"a.>",
  "subject_transforms":[{"src":"a.>","dest":"b.>"}],"external":{"api":"$JS.hub.API","deliver":""},
  "shiny_new_source_option":true}],
"compression":"none","allow_direct":true,"mirror_direct":false,"sealed":false,
"deny_delete":false,"deny_purge":false,"allow_rollup_hdrs":true,
"consumer_limits":{"inactive_threshold":5000000000},"allow_msg_ttl":true,
"subject_delete_marker_ttl":60000000000,
"metadata":{"_nats.level":"5","_nats.req.level":"1","_nats.ver":"2.15.1"},
"a_config_field_from_the_future":{"x":[1,2]}},
"created":"2026-03-01T10:20:30.123456789Z",
"state":{"messages":0,"bytes":0,"first_seq":0,"first_ts":"0001-01-01T00:00:00Z","last_seq":0,
"last_ts":"0001-01-01T00:00:00Z","consumer_count":0},
"cluster":{"name":"east","raft_group":"S-R3F-abc","leader":"n1",
"leader_since":"2026-03-01T10:20:30.2Z",
"replicas":[{"name":"n2","current":true,"active":1500000,"peer":"p2"},
{"name":"n3","current":false,"offline":true,"active":-1,"lag":7,"peer":"p3"}]},
"sources":[{"name":"A","external":{"api":"$JS.hub.API","deliver":""},"lag":3,"active":-1,
"filter_subject":"a.>","subject_transforms":[{"src":"a.>","dest":"b.>"}],
"error":{"code":503,"err_code":10008,"description":"JetStream system temporarily unavailable"}}],
"alternates":[{"name":"ORDERS","cluster":"east"},{"name":"M","domain":"hub","cluster":"west"}],
"ts":"2026-03-01T10:20:30.5Z","did_create":true}"""


def test_decode_stream_create_reply() -> None:
    info = decode_response(STREAM_CREATE_REPLY, StreamInfoResponse, "$JS.API.STREAM.CREATE.ORDERS")
    assert isinstance(info, StreamInfo)
    assert info.did_create is True
    cfg = info.config
    assert cfg.name == "ORDERS"
    assert cfg.subjects == ["orders.>"]
    assert cfg.retention is RetentionPolicy.LIMITS
    assert cfg.storage is StorageType.FILE
    assert cfg.num_replicas == 3
    assert cfg.max_age == 0.0
    assert cfg.duplicate_window == 120.0
    assert cfg.subject_delete_marker_ttl == 60.0
    assert cfg.consumer_limits == StreamConsumerLimits(inactive_threshold=5)
    assert cfg.placement == api.Placement(cluster="east", tags=["ssd"])
    assert cfg.sources == [
        StreamSource(
            name="A",
            opt_start_seq=5,
            filter_subject="a.>",
            subject_transforms=[api.SubjectTransformConfig(src="a.>", dest="b.>")],
            external=ExternalStream(api="$JS.hub.API"),
        )
    ]
    assert cfg.mirror is msgspec.UNSET
    assert cfg.metadata == {"_nats.level": "5", "_nats.req.level": "1", "_nats.ver": "2.15.1"}
    # nanoseconds are rounded to microseconds; Go's zero time is ZERO_TIME
    assert info.created == dt.datetime(2026, 3, 1, 10, 20, 30, 123457, tzinfo=UTC)
    assert info.state.first_ts == ZERO_TIME == dt.datetime(1, 1, 1, tzinfo=UTC)
    assert info.state.subjects == {} and info.state.deleted == []
    assert info.cluster is not None
    assert info.cluster.leader == "n1"
    assert info.cluster.replicas[0].active == 0.0015
    assert info.cluster.replicas[1].offline and info.cluster.replicas[1].lag == 7
    src = info.sources[0]
    assert (src.lag, src.active) == (3, -1e-9)
    assert src.error == api.ApiError(
        code=503, err_code=10008, description="JetStream system temporarily unavailable"
    )
    assert isinstance(src.error.exception(), errors.JetStreamUnavailableError)
    assert [a.cluster for a in info.alternates] == ["east", "west"]
    assert info.ts == dt.datetime(2026, 3, 1, 10, 20, 30, 500000, tzinfo=UTC)
    # the same reply decodes as a plain StreamInfo too
    assert decode_response(STREAM_CREATE_REPLY, StreamInfo, "r").config == cfg


def test_decoded_stream_config_encodes_back() -> None:
    info = decode_response(STREAM_CREATE_REPLY, StreamInfo, "r")
    wire = msgspec.json.decode(encode(info.config))
    assert wire["duplicate_window"] == 120 * NS
    assert wire["consumer_limits"] == {"inactive_threshold": 5 * NS}
    assert wire["sources"][0]["external"] == {"api": "$JS.hub.API", "deliver": ""}
    assert "a_config_field_from_the_future" not in wire


def test_decode_stream_info_with_subjects_and_paging() -> None:
    reply = (
        b'{"type":"io.nats.jetstream.api.v1.stream_info_response","total":2,"offset":0,'
        b'"limit":100000,"config":{"name":"S","retention":"interest","discard":"new",'
        b'"storage":"memory","compression":"s2","persist_mode":"async"},'
        b'"created":"2026-11-22T01:19:36.276105779Z","state":{"messages":2,"bytes":108,'
        b'"first_seq":1,"first_ts":"2026-11-22T01:19:36.27904629Z","last_seq":4,'
        b'"last_ts":"2026-11-22T01:19:36.279311973Z","num_subjects":2,'
        b'"subjects":{"s.1":1,"s.2":1},"num_deleted":2,"deleted":[2,3],'
        b'"lost":{"msgs":[9],"bytes":10},"consumer_count":1}}'
    )
    info = decode_response(reply, StreamInfoResponse, "r")
    assert (info.total, info.offset, info.limit) == (2, 0, 100000)
    assert info.config.retention is RetentionPolicy.INTEREST
    assert info.config.persist_mode is PersistMode.ASYNC
    assert info.state.subjects == {"s.1": 1, "s.2": 1}
    assert info.state.deleted == [2, 3]
    assert info.state.lost == api.LostStreamData(msgs=[9], bytes=10)
    assert info.ts is None and info.cluster is None


def _stream_info_json(config: bytes) -> bytes:
    return (
        b'{"config":' + config + b',"created":"2026-01-01T00:00:00Z",'
        b'"state":{"messages":0,"bytes":0,"first_seq":0,"first_ts":"0001-01-01T00:00:00Z",'
        b'"last_seq":0,"last_ts":"0001-01-01T00:00:00Z","consumer_count":0}}'
    )


CONSUMER_INFO_REPLY = b"""{"type":"io.nats.jetstream.api.v1.consumer_info_response",
"stream_name":"S","name":"C","created":"2026-11-22T01:19:36.280730835Z",
"config":{"durable_name":"C","name":"C","deliver_policy":"all","ack_policy":"explicit",
"ack_wait":1000000000,"max_deliver":5,"backoff":[1000000000,2000000000],
"replay_policy":"instant","max_waiting":512,"max_ack_pending":1000,"num_replicas":0,
"pause_until":"2099-01-01T00:00:00Z",
"metadata":{"_nats.level":"5","_nats.req.level":"1","_nats.ver":"2.15.1"},
"priority_groups":["g"],"priority_policy":"pinned_client","priority_timeout":120000000000,
"a_new_knob":42},
"delivered":{"consumer_seq":10,"stream_seq":12,"last_active":"2026-11-22T01:20:00.5Z"},
"ack_floor":{"consumer_seq":8,"stream_seq":9},
"num_ack_pending":2,"num_redelivered":1,"num_waiting":3,"num_pending":40,
"cluster":{"leader":"n1"},"paused":true,"pause_remaining":2275598423715657793,
"ts":"2026-11-22T01:19:36.281673482Z",
"priority_groups":[{"group":"g","pinned_client_id":"abc","pinned_ts":"2026-11-22T01:19:37Z"},
{"group":"h","pinned_ts":"0001-01-01T00:00:00Z"}],"another_new_stat":{"a":1}}"""


def test_decode_consumer_info() -> None:
    info = decode_response(CONSUMER_INFO_REPLY, ConsumerInfo, "$JS.API.CONSUMER.INFO.S.C")
    assert (info.stream_name, info.name) == ("S", "C")
    cfg = info.config
    assert cfg.durable_name == "C"
    assert cfg.ack_policy is AckPolicy.EXPLICIT
    assert cfg.ack_wait == 1.0
    assert cfg.backoff == (1.0, 2.0)
    assert cfg.priority_policy is PriorityPolicy.PINNED_CLIENT
    assert cfg.priority_timeout == 120.0
    assert cfg.pause_until == dt.datetime(2099, 1, 1, tzinfo=UTC)
    assert cfg.inactive_threshold is msgspec.UNSET
    assert info.delivered == api.SequenceInfo(
        consumer_seq=10,
        stream_seq=12,
        last_active=dt.datetime(2026, 11, 22, 1, 20, 0, 500000, tzinfo=UTC),
    )
    assert info.ack_floor.last_active is None
    assert (info.num_ack_pending, info.num_redelivered, info.num_waiting, info.num_pending) == (
        2,
        1,
        3,
        40,
    )
    assert info.paused and info.pause_remaining == pytest.approx(2275598423.715657793)
    assert info.push_bound is False
    assert info.priority_groups[0].pinned_client_id == "abc"
    assert info.priority_groups[1].pinned_ts == ZERO_TIME
    assert required_api_level(cfg) == 1


def _consumer_info_json(config: object) -> bytes:
    return (
        b'{"stream_name":"S","name":"C","created":"2026-01-01T00:00:00Z","config":'
        + msgspec.json.encode(config)
        + b"}"
    )


def test_decode_consumer_reset_pause_and_unpin_replies() -> None:
    reset = decode_response(
        b'{"type":"io.nats.jetstream.api.v1.consumer_reset_response","stream_name":"S",'
        b'"name":"D","created":"2026-11-22T01:30:29.357903713Z","config":{"ack_policy":"all"},'
        b'"delivered":{"consumer_seq":0,"stream_seq":0},"ack_floor":{"consumer_seq":0,'
        b'"stream_seq":0},"num_pending":1,"reset_seq":7}',
        ConsumerResetResponse,
        "r",
    )
    assert reset.reset_seq == 7 and reset.config.ack_policy is AckPolicy.ALL

    paused = decode_response(
        b'{"type":"io.nats.jetstream.api.v1.consumer_pause_response","paused":true,'
        b'"pause_until":"2099-01-01T00:00:00Z","pause_remaining":1500000000}',
        ConsumerPauseResponse,
        "r",
    )
    assert paused.paused and paused.pause_remaining == 1.5
    resumed = decode_response(
        b'{"type":"io.nats.jetstream.api.v1.consumer_pause_response","paused":false,'
        b'"pause_until":"0001-01-01T00:00:00Z"}',
        ConsumerPauseResponse,
        "r",
    )
    assert not resumed.paused and resumed.pause_until == ZERO_TIME
    assert resumed.pause_remaining == 0.0

    unpin = b'{"type":"io.nats.jetstream.api.v1.consumer_unpin_response"}'
    assert decode_response(unpin, ConsumerUnpinResponse, "r") == ConsumerUnpinResponse()


ACCOUNT_INFO_REPLY = b"""{"type":"io.nats.jetstream.api.v1.account_info_response",
"memory":1024,"storage":2048,"reserved_memory":0,"reserved_storage":4096,"streams":2,
"consumers":3,"limits":{"max_memory":-1,"max_storage":-1,"max_streams":-1,"max_consumers":-1,
"max_ack_pending":-1,"memory_max_stream_bytes":-1,"storage_max_stream_bytes":-1,
"max_bytes_required":false},"domain":"hub","api":{"level":5,"total":17,"errors":2,
"inflight":1},"tiers":{"R1":{"memory":1024,"storage":2048,"reserved_memory":0,
"reserved_storage":4096,"streams":2,"consumers":3,"limits":{"max_memory":1000000,
"max_storage":-1,"max_streams":10,"max_consumers":100,"max_ack_pending":-1,
"memory_max_stream_bytes":-1,"storage_max_stream_bytes":-1,"max_bytes_required":true,
"future_limit":1}}},"ha_assets_future":3}"""


def test_decode_account_info() -> None:
    info = decode_response(ACCOUNT_INFO_REPLY, AccountInfo, "$JS.API.INFO")
    assert (info.memory, info.storage, info.reserved_storage) == (1024, 2048, 4096)
    assert (info.streams, info.consumers, info.domain) == (2, 3, "hub")
    assert info.limits.max_memory == -1 and info.limits.max_bytes_required is False
    assert info.api == api.ApiStats(level=5, total=17, errors=2, inflight=1)
    assert info.tiers["R1"].limits.max_streams == 10
    assert info.tiers["R1"].limits.max_bytes_required is True
    # a 2.15 server without tiers or domain
    plain = decode_response(
        b'{"type":"io.nats.jetstream.api.v1.account_info_response","memory":0,"storage":0,'
        b'"reserved_memory":0,"reserved_storage":0,"streams":0,"consumers":0,"limits":{},'
        b'"api":{"level":5,"total":0,"errors":0}}',
        AccountInfo,
        "$JS.API.INFO",
    )
    assert plain.tiers == {} and plain.domain == "" and plain.api.level == 5


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (b'{"stream":"S","seq":1}', PubAck(stream="S", seq=1)),
        (b'{"stream":"S","seq":2,"duplicate": true}', PubAck(stream="S", seq=2, duplicate=True)),
        (b'{"stream":"S","seq":3,"domain":"hub"}', PubAck(stream="S", seq=3, domain="hub")),
        (b'{"stream":"C","seq":4,"val":"12"}', PubAck(stream="C", seq=4, val="12")),
        (
            b'{"stream":"B","seq":9,"batch":"b1","count":3,"new":1}',
            PubAck(stream="B", seq=9, batch="b1", count=3),
        ),
    ],
)
def test_decode_pub_ack(reply: bytes, expected: PubAck) -> None:
    assert decode_response(reply, PubAck, "orders.1") == expected


def test_decode_list_replies() -> None:
    names = decode_response(
        b'{"type":"io.nats.jetstream.api.v1.stream_names_response","total":2,"offset":0,'
        b'"limit":1024,"streams":["A","B"]}',
        StreamNamesResponse,
        "$JS.API.STREAM.NAMES",
    )
    assert (names.total, names.limit, names.streams) == (2, 1024, ["A", "B"])

    # Go sends null for an empty page
    empty = decode_response(
        b'{"type":"io.nats.jetstream.api.v1.stream_names_response","total":0,"offset":0,'
        b'"limit":1024,"streams":null}',
        StreamNamesResponse,
        "r",
    )
    assert empty.streams == []
    assert decode_response(b'{"consumers":null}', ConsumerNamesResponse, "r").consumers == []
    assert decode_response(b'{"consumers":null}', ConsumerListResponse, "r").consumers == []
    assert decode_response(b"{}", StreamListResponse, "r").streams == []

    listing = decode_response(
        b'{"type":"io.nats.jetstream.api.v1.stream_list_response","total":3,"offset":0,'
        b'"limit":256,"streams":[' + _stream_info_json(b'{"name":"A"}') + b"],"
        b'"missing":["B","C"],"offline":{"C":"unsupported - required API level: 9"}}',
        StreamListResponse,
        "$JS.API.STREAM.LIST",
    )
    assert [s.config.name for s in listing.streams] == ["A"]
    assert listing.missing == ["B", "C"]
    assert listing.offline == {"C": "unsupported - required API level: 9"}

    consumers = decode_response(
        b'{"type":"io.nats.jetstream.api.v1.consumer_list_response","total":1,"offset":0,'
        b'"limit":256,"consumers":[' + CONSUMER_INFO_REPLY + b"]}",
        ConsumerListResponse,
        "r",
    )
    assert consumers.consumers[0].name == "C"


def test_decode_msg_get_purge_and_delete() -> None:
    got = decode_response(
        b'{"type":"io.nats.jetstream.api.v1.stream_msg_get_response","message":{"subject":"s.1",'
        b'"seq":1,"hdrs":"TkFUUy8xLjANCms6IHYNCg0K","data":"aGVsbG8=",'
        b'"time":"2026-11-22T01:19:36.27904629Z"}}',
        MsgGetResponse,
        "$JS.API.STREAM.MSG.GET.S",
    )
    assert got.message.subject == "s.1" and got.message.seq == 1
    assert got.message.hdrs == b"NATS/1.0\r\nk: v\r\n\r\n"
    assert got.message.data == b"hello"
    assert got.message.time.tzinfo is not None
    bare = decode_response(
        b'{"message":{"subject":"s.2","seq":2,"time":"2026-11-22T01:19:36Z"}}', MsgGetResponse, "r"
    )
    assert (bare.message.hdrs, bare.message.data) == (b"", b"")

    purged = decode_response(b'{"success":true,"purged":7}', StreamPurgeResponse, "r")
    assert purged.success and purged.purged == 7
    assert decode_response(b'{"success":true}', StreamDeleteResponse, "r").success


def test_replies_are_frozen() -> None:
    info = decode_response(CONSUMER_INFO_REPLY, ConsumerInfo, "r")
    with pytest.raises(AttributeError):
        info.num_pending = 0  # type: ignore[misc]
    with pytest.raises(AttributeError):
        info.delivered.stream_seq = 0  # type: ignore[misc]
    info.config.max_deliver = 3  # configs stay mutable, to edit and send back


# --- Errors ------------------------------------------------------------------------


def _error_reply(code: int, err_code: int, description: str, rest: bytes = b"") -> bytes:
    return (
        b'{"type":"io.nats.jetstream.api.v1.x","error":{"code":%d,"err_code":%d,"description":"%s"}'
        % (code, err_code, description.encode())
        + rest
        + b"}"
    )


@pytest.mark.parametrize(
    ("reply_type", "code", "err_code", "kind"),
    [
        (StreamInfoResponse, 404, 10059, errors.StreamNotFoundError),
        (StreamInfoResponse, 400, 10058, errors.StreamNameInUseError),
        (ConsumerInfo, 404, 10014, errors.ConsumerNotFoundError),
        (ConsumerInfo, 400, 10148, errors.ConsumerExistsError),
        (ConsumerInfo, 400, 10149, errors.ConsumerDoesNotExistError),
        (ConsumerInfo, 400, 10013, errors.ConsumerNameInUseError),
        (ConsumerInfo, 400, 10026, errors.MaximumConsumersLimitError),
        (ConsumerInfo, 412, 10185, errors.RequiredApiLevelError),
        (MsgGetResponse, 404, 10037, errors.MessageNotFoundError),
        (PubAck, 400, 10071, errors.WrongLastSequenceError),
        (PubAck, 400, 10070, errors.WrongLastMsgIdError),
        (PubAck, 400, 10060, errors.StreamNotMatchError),
        (PubAck, 400, 10109, errors.StreamSealedError),
        (PubAck, 400, 10054, errors.MessageSizeExceedsMaximumError),
        (StreamPurgeResponse, 400, 10003, errors.BadRequestError),
        (AccountInfo, 503, 10039, errors.JetStreamNotEnabledError),
        (StreamDeleteResponse, 500, 10047, errors.InsufficientResourcesError),
    ],
)
def test_error_replies_raise_the_registered_subclass(
    reply_type: type[api.ApiResponse], code: int, err_code: int, kind: type[Exception]
) -> None:
    with pytest.raises(kind) as caught:
        decode_response(_error_reply(code, err_code, "it failed"), reply_type, "$JS.API.X")
    exc = caught.value
    assert type(exc) is kind
    assert isinstance(exc, errors.JetStreamApiError)
    assert (exc.code, exc.err_code, exc.description, exc.request) == (
        code,
        err_code,
        "it failed",
        "$JS.API.X",
    )
    assert "it failed" in str(exc) and "$JS.API.X" in str(exc) and str(err_code) in str(exc)


def test_consumer_does_not_exist_is_a_consumer_not_found() -> None:
    with pytest.raises(errors.ConsumerNotFoundError):
        decode_response(_error_reply(400, 10149, "consumer does not exist"), ConsumerInfo, "r")


def test_pub_ack_error_with_stream_and_seq_present() -> None:
    # what 2.15 sends for a failed expected-last-sequence check
    reply = (
        b'{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 2"},'
        b'"stream":"S","seq":0}'
    )
    with pytest.raises(errors.WrongLastSequenceError, match="wrong last sequence: 2"):
        decode_response(reply, PubAck, "s.2")


def test_error_with_paging_fields_and_unknown_code() -> None:
    reply = _error_reply(404, 10059, "stream not found", b',"total":0,"offset":0,"limit":0')
    with pytest.raises(errors.StreamNotFoundError):
        decode_response(reply, StreamInfoResponse, "r")
    with pytest.raises(errors.JetStreamApiError) as caught:
        decode_response(_error_reply(418, 19999, "new failure"), StreamInfo, "r")
    assert type(caught.value) is errors.JetStreamApiError
    assert (caught.value.code, caught.value.err_code) == (418, 19999)


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"not json",
        b'{"stream":"S"',
        b"[1,2]",
        b'{"stream":"S","seq":"one"}',
        b'{"seq":1}',
        b'{"error":"boom"}',
    ],
)
def test_invalid_replies_raise_jetstream_error(payload: bytes) -> None:
    with pytest.raises(errors.JetStreamError) as caught:
        decode_response(payload, PubAck, "orders.new")
    exc = caught.value
    assert type(exc) is errors.JetStreamError
    assert isinstance(exc.__cause__, msgspec.DecodeError)
    assert "'orders.new'" in str(exc) and "PubAck" in str(exc)
    assert repr(payload) in str(exc)


def test_invalid_reply_preview_is_truncated() -> None:
    payload = b"x" * 1000
    with pytest.raises(errors.JetStreamError) as caught:
        decode_response(payload, StreamInfo, "r")
    assert "x" * 200 + "..." in str(caught.value)
    assert "x" * 201 not in str(caught.value)


def test_bad_duration_in_reply_is_an_invalid_reply() -> None:
    with pytest.raises(errors.JetStreamError, match="nanoseconds"):
        decode_response(_consumer_info_json({"ack_wait": "30s"}), ConsumerInfo, "r")


def test_decoders_are_cached() -> None:
    assert _api_base.decoder(StreamInfo) is _api_base.decoder(StreamInfo)
    decode_response(b'{"success":true}', StreamDeleteResponse, "r")
    assert StreamDeleteResponse in _api_base._DECODERS


@pytest.mark.parametrize(
    ("err_code", "kind"),
    [
        (10003, errors.BadRequestError),
        (10025, errors.InvalidJSONError),
        (10008, errors.JetStreamUnavailableError),
        (10023, errors.InsufficientResourcesError),
        (10028, errors.InsufficientResourcesError),
        (10002, errors.AccountResourcesExceededError),
        (10027, errors.MaximumStreamsLimitError),
        (10056, errors.StreamNameMismatchError),
        (10065, errors.StreamSubjectOverlapError),
        (10118, errors.StreamOfflineError),
        (10194, errors.StreamOfflineError),
        (10158, errors.DuplicateMessageConflictError),
        (10165, errors.InvalidMessageTTLError),
        (10166, errors.MessageTTLDisabledError),
        (10167, errors.TooManyRequestsError),
        (10105, errors.ConsumerExistingActiveError),
        (10119, errors.ConsumerOfflineError),
        (10195, errors.ConsumerOfflineError),
        (10204, errors.InvalidConsumerResetError),
        (10164, errors.WrongLastSequenceError),
    ],
)
def test_error_registry(err_code: int, kind: type[errors.JetStreamApiError]) -> None:
    exc = errors.JetStreamApiError.from_api(400, err_code, "d", request="r")
    assert type(exc) is kind and exc.err_code == err_code


# --- API levels (ADR-44) -----------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "level"),
    [
        (StreamConfig(name="S"), 0),
        (StreamConfig(name="S", compression=StoreCompression.S2, metadata={"a": "b"}), 0),
        (StreamConfig(name="S", allow_msg_ttl=False, subject_delete_marker_ttl=0), 0),
        (StreamConfig(name="S", persist_mode=PersistMode.DEFAULT), 0),
        (StreamConfig(name="S", allow_msg_ttl=True), 1),
        (StreamConfig(name="S", subject_delete_marker_ttl=60), 1),
        (StreamConfig(name="S", allow_msg_counter=True), 2),
        (StreamConfig(name="S", allow_atomic=True, allow_msg_ttl=True), 2),
        (StreamConfig(name="S", allow_msg_schedules=True), 2),
        (StreamConfig(name="S", persist_mode=PersistMode.ASYNC), 2),
        (StreamConfig(name="S", allow_batched=True), 4),
        (StreamConfig(name="S", sources=[StreamSource(name="A")]), 0),
        (
            StreamConfig(
                name="S", sources=[StreamSource(name="A", consumer=StreamConsumerSource())]
            ),
            4,
        ),
        (StreamConfig(name="S", mirror=StreamSource(name="A", consumer=StreamConsumerSource())), 4),
        (ConsumerConfig(), 0),
        (ConsumerConfig(priority_policy=PriorityPolicy.NONE), 0),
        (ConsumerConfig(pause_until=ZERO_TIME), 0),
        (ConsumerConfig(pause_until=dt.datetime(2099, 1, 1, tzinfo=UTC)), 1),
        (ConsumerConfig(priority_groups=["g"], priority_policy=PriorityPolicy.OVERFLOW), 1),
        (ConsumerConfig(priority_groups=["g"], priority_policy=PriorityPolicy.PINNED_CLIENT), 1),
        (ConsumerConfig(priority_timeout=120), 1),
        (ConsumerConfig(priority_groups=["g"], priority_policy=PriorityPolicy.PRIORITIZED), 2),
        (ConsumerConfig(ack_policy=AckPolicy.FLOW_CONTROL, deliver_subject="d"), 4),
    ],
)
def test_required_api_level(config: StreamConfig | ConsumerConfig, level: int) -> None:
    assert required_api_level(config) == level


# --- Exports -----------------------------------------------------------------------


def test_all_lists_every_public_struct_and_enum() -> None:
    public = {
        name
        for name, obj in vars(api).items()
        if not name.startswith("_")
        and isinstance(obj, type)
        and issubclass(obj, (msgspec.Struct, enum.Enum))
        and obj.__module__.startswith("jetstream.")
    }
    assert public <= set(api.__all__)
    for name in api.__all__:
        assert hasattr(api, name), name
