"""The names an API error is about: read from the verb's subject, named in the message."""

from __future__ import annotations

import pytest

from jetstream import errors
from jetstream.api import StreamInfo, decode_response
from jetstream.js import api_names


@pytest.mark.parametrize(
    ("suffix", "names"),
    [
        ("STREAM.INFO.S", ("S", "")),
        ("STREAM.CREATE.S", ("S", "")),
        ("STREAM.MSG.GET.S", ("S", "")),
        ("STREAM.MSG.DELETE.S", ("S", "")),
        ("STREAM.LEADER.STEPDOWN.S", ("S", "")),
        ("STREAM.PEER.REMOVE.S", ("S", "")),
        ("STREAM.NAMES", ("", "")),
        ("STREAM.LIST", ("", "")),
        ("CONSUMER.INFO.S.C", ("S", "C")),
        ("CONSUMER.CREATE.S.C", ("S", "C")),
        ("CONSUMER.CREATE.S.C.orders.>", ("S", "C")),
        ("CONSUMER.DURABLE.CREATE.S.C", ("S", "C")),
        ("CONSUMER.LEADER.STEPDOWN.S.C", ("S", "C")),
        ("CONSUMER.MSG.NEXT.S.C", ("S", "C")),
        ("CONSUMER.NAMES.S", ("S", "")),
        ("DIRECT.GET.S", ("S", "")),
        ("DIRECT.GET.S.a.b", ("S", "")),
        ("INFO", ("", "")),
        ("ACCOUNT.PURGE.X", ("", "")),
    ],
)
def test_api_names(suffix: str, names: tuple[str, str]) -> None:
    assert api_names(suffix) == names


def _reply(code: int, err_code: int, description: str) -> bytes:
    return b'{"error":{"code":%d,"err_code":%d,"description":"%s"}}' % (
        code,
        err_code,
        description.encode(),
    )


def test_the_names_go_into_the_message_and_the_server_text_stays() -> None:
    with pytest.raises(errors.ConsumerNotFoundError) as caught:
        decode_response(
            _reply(404, 10014, "consumer not found"),
            StreamInfo,
            "$JS.hub.API.CONSUMER.INFO.S.C",
            stream="S",
            consumer="C",
        )
    exc = caught.value
    assert str(exc) == (
        "consumer 'C' of stream 'S' not found [code 404, err_code 10014] "
        "(request $JS.hub.API.CONSUMER.INFO.S.C)"
    )
    assert (exc.description, exc.stream, exc.consumer) == ("consumer not found", "S", "C")


@pytest.mark.parametrize(
    ("err_code", "description"),
    [(10059, "stream not found"), (10014, "consumer not found"), (10058, "in use")],
)
def test_without_names_the_message_is_the_servers(err_code: int, description: str) -> None:
    exc = errors.JetStreamApiError.from_api(400, err_code, description, request="r")
    assert str(exc) == f"{description} [code 400, err_code {err_code}] (request r)"
