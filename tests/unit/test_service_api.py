"""The services API's checks and JSON, without a server (ADR-32)."""

from __future__ import annotations

import msgspec
import pytest

from jetstream.errors import BadSubjectError, ServiceConfigError
from jetstream.service import (
    EndpointStats,
    InfoResponse,
    StatsResponse,
    control_subject,
    validate_name,
    validate_version,
)
from jetstream.service.api import join_prefix

GOOD_VERSIONS = ["0.0.0", "1.2.3", "10.20.30", "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-0.3.7",
                 "1.0.0-x.7.z.92", "1.0.0+20130313144700", "1.0.0-beta+exp.sha.5114f85",
                 "1.0.0+21AF26D3---117B344092BD"]  # fmt: skip
BAD_VERSIONS = ["", "1", "1.2", "1.2.3.4", "01.1.1", "1.01.1", "v1.2.3", "1.2.3-", "1.2.3+",
                "1.2.3-01", "1.2.3-a..b", " 1.2.3", "1.2.3\n", "1.2.-3"]  # fmt: skip


@pytest.mark.parametrize("version", GOOD_VERSIONS)
def test_semantic_versions_pass(version: str) -> None:
    validate_version(version)


@pytest.mark.parametrize("version", BAD_VERSIONS)
def test_other_versions_fail(version: str) -> None:
    with pytest.raises(ServiceConfigError, match="semantic version"):
        validate_version(version)


@pytest.mark.parametrize("name", ["a", "Z9", "my-service_2", "-", "_"])
def test_names_of_letters_digits_dash_underscore_pass(name: str) -> None:
    validate_name(name)


@pytest.mark.parametrize("name", ["", "a.b", "a b", "a*", "a>", "é", "a\n", "$SRV"])
def test_other_names_fail(name: str) -> None:
    with pytest.raises(ServiceConfigError) as info:
        validate_name(name)
    assert isinstance(info.value, ValueError) and repr(name) in str(info.value)


def test_control_subjects() -> None:
    assert control_subject("PING") == "$SRV.PING"
    assert control_subject("info", "calc") == "$SRV.INFO.calc"
    assert control_subject("STATS", "calc", "ID1") == "$SRV.STATS.calc.ID1"
    with pytest.raises(ValueError, match="a service id needs the service name too"):
        control_subject("PING", None, "ID1")


def test_group_prefixes() -> None:
    assert join_prefix("", "a") == "a"
    assert join_prefix("a", "b.c") == "a.b.c"
    assert join_prefix("a", "") == "a"
    assert join_prefix("a", "*") == "a.*"
    for bad in (">", "a.>", "a..b", "a b"):
        with pytest.raises(BadSubjectError):
            join_prefix("x", bad)


def test_answers_decode_older_and_other_clients_json() -> None:
    """nats.go before the v1 JSON sent no type, metadata or endpoints; nats.go sends
    ``null`` for an endpoint without metadata. Both decode."""
    old = msgspec.json.decode(
        b'{"name":"x","id":"I","version":"1.0.0","description":"d","subject":"s"}',
        type=InfoResponse,
    )
    assert (old.name, old.type, old.endpoints, old.metadata) == ("x", "", [], None)
    info = msgspec.json.decode(
        b'{"type":"io.nats.micro.v1.info_response","name":"x","id":"I","version":"1.0.0",'
        b'"metadata":{},"description":"","endpoints":[{"name":"e","subject":"e",'
        b'"queue_group":"q","metadata":null}]}',
        type=InfoResponse,
    )
    assert info.endpoints[0].metadata is None and info.metadata == {}
    stats = msgspec.json.decode(
        b'{"name":"x","id":"I","version":"1.0.0","started":"2024-05-06T07:08:09.123456789Z",'
        b'"endpoints":[{"name":"e","num_requests":3,"processing_time":30}]}',
        type=StatsResponse,
    )
    assert stats.started is not None and stats.started.microsecond == 123457
    assert stats.endpoints[0].num_requests == 3


def test_stats_data_is_left_out_unless_given() -> None:
    assert b'"data"' not in msgspec.json.encode(EndpointStats(name="e"))
    assert b'"data":{"a":1}' in msgspec.json.encode(EndpointStats(name="e", data={"a": 1}))
