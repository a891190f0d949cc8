"""``ws://`` and ``wss://`` URLs in the server pool, and ``ws_headers=``, without a server."""

from __future__ import annotations

import pytest

from jetstream.core._servers import ServerPool, parse_server
from jetstream.core._ws import require_websocket, ws_header_list


@pytest.mark.parametrize(
    ("url", "scheme", "port", "path", "tls"),
    [
        ("ws://h", "ws", 80, "", False),
        ("wss://h", "wss", 443, "", True),
        ("ws://h:8080/nats", "ws", 8080, "/nats", False),
        ("WSS://u:p@h:9443/a/b?x=1&y=2", "wss", 9443, "/a/b?x=1&y=2", True),
        ("ws://[::1]:1", "ws", 1, "", False),
    ],
)
def test_websocket_urls(url: str, scheme: str, port: int, path: str, tls: bool) -> None:
    server = parse_server(url)
    assert (server.scheme, server.port, server.path, server.tls) == (scheme, port, path, tls)
    assert server.websocket
    assert str(server).startswith(f"{scheme}://")
    assert "p@" not in str(server) and "path" not in repr(server)


def test_tcp_urls_are_not_websocket() -> None:
    for url in ("nats://h", "tls://h", "h:4222"):
        assert not parse_server(url).websocket


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("ws:/h", "'ws:' is not followed by '//' (write 'ws://h')"),
        ("wss//h", "the ':' after 'wss' is missing (write 'wss://h')"),
        ("ws://h:0", "the port '0' is not a number"),
        ("wss://", "it has no host"),
    ],
)
def test_bad_websocket_urls(url: str, why: str) -> None:
    with pytest.raises(ValueError, match=r"ws://host:port") as info:
        parse_server(url)
    assert why in str(info.value)


def test_discovered_servers_take_the_scheme_of_the_one_connected_to() -> None:
    """A server tells a WebSocket client its peers' WebSocket addresses (as host:port)."""
    pool = ServerPool(["ws://127.0.0.1:8080", "nats://127.0.0.1:4222"], randomize=False)
    ws_server = pool.servers[0]
    added = pool.add_discovered(["127.0.0.1:8081", "127.0.0.1:8080"], template=ws_server)
    assert [str(s) for s in added] == ["ws://127.0.0.1:8081"]
    tcp_added = pool.add_discovered(["127.0.0.1:4223"], template=pool.servers[1])
    assert [str(s) for s in tcp_added] == ["nats://127.0.0.1:4223"]
    assert pool.urls() == [
        "ws://127.0.0.1:8080",
        "nats://127.0.0.1:4222",
        "ws://127.0.0.1:8081",
        "nats://127.0.0.1:4223",
    ]


def test_ws_header_list() -> None:
    assert ws_header_list(None) == ()
    assert ws_header_list({"Authorization": "Bearer x", "X-A": ["1", "2"]}) == (
        ("Authorization", "Bearer x"),
        ("X-A", "1"),
        ("X-A", "2"),
    )
    with pytest.raises(ValueError, match="not a valid HTTP header name"):
        ws_header_list({"Bad Name": "x"})
    with pytest.raises(ValueError, match="set by the WebSocket upgrade itself"):
        ws_header_list({"sec-websocket-key": "x"})
    with pytest.raises(ValueError, match="one-line str"):
        ws_header_list({"X": "a\nb"})


def test_the_extra_is_asked_for_only_by_websocket_urls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(__import__("sys").modules, "wsproto", None)
    require_websocket(["nats://h", "tls://h", "h:1"])  # nothing to ask for
    with pytest.raises(ImportError, match=r"pip install wsproto; or the ws extra"):
        require_websocket(["nats://h", " WS://h"])
    # the pool asks too, when it is made and when its list is replaced (set_servers)
    pool = ServerPool(["nats://h"])
    with pytest.raises(ImportError, match=r"pip install wsproto"):
        pool.replace(["wss://h"])
    assert pool.urls() == ["nats://h:4222"]
    with pytest.raises(ImportError, match=r"pip install wsproto"):
        ServerPool(["nats://h", "ws://h:8080"])
