"""Server URLs and the pool: schemes, IPv6, credentials kept out of sight, rotation."""

from __future__ import annotations

import re

import pytest

import jetstream
from jetstream.core._servers import EXPECTED_FORM, Server, ServerPool, parse_server


@pytest.mark.parametrize(
    ("url", "scheme", "host", "port"),
    [
        ("nats://127.0.0.1:4222", "nats", "127.0.0.1", 4222),
        ("tls://example.com:4443", "tls", "example.com", 4443),
        ("127.0.0.1:5000", "nats", "127.0.0.1", 5000),
        ("localhost", "nats", "localhost", 4222),
        ("nats://[::1]:4222", "nats", "::1", 4222),
        ("[::1]:7000", "nats", "::1", 7000),
        ("nats://[fe80::1]", "nats", "fe80::1", 4222),
        ("NATS://Host:1", "nats", "host", 1),
    ],
)
def test_parse(url: str, scheme: str, host: str, port: int) -> None:
    s = parse_server(url)
    assert (s.scheme, s.host, s.port) == (scheme, host, port)


def test_ipv6_str_has_brackets() -> None:
    assert str(parse_server("[::1]:4222")) == "nats://[::1]:4222"


def test_credentials_in_url_are_kept_apart_and_hidden() -> None:
    s = parse_server("nats://alice:s%40cret@h:4222")
    assert (s.user, s.password, s.token) == ("alice", "s@cret", None)
    assert "cret" not in str(s) and "cret" not in repr(s) and "alice" not in str(s)
    t = parse_server("nats://tok3n@h")
    assert t.token == "tok3n" and "tok3n" not in repr(t)


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        ("127.0.0.1 4222", "whitespace"),
        ("nats://host:port", "the port 'port' is not a number"),
        ("nats://:4222", "no host"),
        ("tls://", "no host"),
        ("", "empty"),
        ("nats://h:", "the port '' is not a number"),
        ("nats://h:0", "the port '0' is not a number from 1 to 65535"),
        ("nats://h:65536", "the port '65536' is not a number from 1 to 65535"),
        ("nats://h:\u0661", "not a number"),
        ("nats://a b:4222", "whitespace"),
        ("h\t4222", "whitespace"),
        ("nats://h:1:2", "':' in the host"),
        ("nats://[::1", "Invalid IPv6 URL"),
        ("ftp://h:1", "unsupported scheme 'ftp'"),
        ("http://x", "unsupported scheme 'http'"),
        # a scheme without its "//" (or ":"), not a bad port
        ("nats:/x", "'nats:' is not followed by '//' (write 'nats://x')"),
        ("tls:/h:4443", "'tls:' is not followed by '//' (write 'tls://h:4443')"),
        ("nats:h", "'nats:' is not followed by '//' (write 'nats://h')"),
        ("nats//x:1", "the ':' after 'nats' is missing (write 'nats://x:1')"),
    ],
)
def test_bad_urls_are_refused_with_the_url_and_the_expected_form(bad: str, why: str) -> None:
    with pytest.raises(
        ValueError, match=f"^bad server URL {re.escape(repr(bad.strip()))}: "
    ) as exc:
        parse_server(bad)
    text = str(exc.value)
    assert why in text
    assert text.endswith(EXPECTED_FORM) and "nats://host:port" in EXPECTED_FORM


@pytest.mark.parametrize(
    "bad", ["nats://alice:secret@h :1", "nats://secret@h:port", "tls://alice:secret@:1"]
)
def test_a_refused_url_is_quoted_without_its_userinfo(bad: str) -> None:
    with pytest.raises(ValueError, match=r"^bad server URL '[a-z]+://\*\*\*@") as exc:
        parse_server(bad)
    assert "secret" not in str(exc.value) and "alice" not in str(exc.value)
    assert "://***@" in str(exc.value)


def test_a_scheme_without_slashes_is_told_apart_from_a_host() -> None:
    """``nats:4222`` is the host "nats" at port 4222 and ``nats:pw@h`` the user "nats";
    a scheme missing its slashes quotes no userinfo either."""
    assert str(parse_server("nats:4222")) == "nats://nats:4222"
    assert parse_server("nats:secret@h").password == "secret"
    for bad in ("nats:/alice:secret@h", "nats//alice:secret@h"):
        with pytest.raises(ValueError, match=r"^bad server URL '\*\*\*@h': ") as exc:
            parse_server(bad)
        assert "secret" not in str(exc.value) and "(write 'nats://***@h')" in str(exc.value)


def test_jetstream_connect_refuses_a_malformed_url_at_once() -> None:
    # Raised by the call itself, with no event loop running: nothing was looked up
    # or connected to (the host below would not resolve).
    with pytest.raises(ValueError, match=r"^bad server URL 'nats://no-such-host.invalid:port'"):
        jetstream.connect("nats://no-such-host.invalid:port")
    with pytest.raises(ValueError, match=r"^bad server URL '127.0.0.1 4222': it holds whitespace"):
        jetstream.connect("127.0.0.1 4222")
    # one bad URL of a list is enough
    with pytest.raises(ValueError, match=r"^bad server URL 'nats://:4222': it has no host"):
        jetstream.connect(["nats://127.0.0.1:4222", "nats://:4222"])
    with pytest.raises(ValueError, match=r"^no server given; expected nats://host:port"):
        jetstream.connect(" , ")


def test_pool_order_dedup_and_rotation() -> None:
    pool = ServerPool(["a:1", "b:2", "a:1", "c:3"], randomize=False)
    assert pool.urls() == ["nats://a:1", "nats://b:2", "nats://c:3"]
    assert [pool.next(-1).host for _ in range(4)] == ["a", "b", "c", "a"]  # type: ignore[union-attr]


def test_pool_skips_servers_out_of_attempts() -> None:
    pool = ServerPool(["a:1", "b:2"], randomize=False)
    pool.servers[0].attempts = 3
    assert pool.next(3).host == "b"  # type: ignore[union-attr]
    pool.servers[0].attempts = 3
    pool.servers[1].attempts = 3
    assert pool.next(3) is None
    assert pool.next(-1) is not None  # forever


def test_pool_shuffles_unless_told_not_to() -> None:
    urls = [f"h{i}:1" for i in range(30)]
    orders = {tuple(ServerPool(urls).urls()) for _ in range(5)}
    assert len(orders) > 1
    assert ServerPool(urls, randomize=False).urls() == [f"nats://h{i}:1" for i in range(30)]


def test_discovered_servers_join_once_with_the_scheme_of_the_current() -> None:
    pool = ServerPool(["tls://a:1"], randomize=False)
    added = pool.add_discovered(["a:1", "b:2", "b:2", "c:3"], template=pool.servers[0])
    assert sorted(s.host for s in added) == ["b", "c"]
    assert all(s.discovered and s.scheme == "tls" for s in added)
    assert len(pool.servers) == 3


def test_pick_waits_between_attempts_on_the_same_server() -> None:
    pool = ServerPool(["a:1"], randomize=False)
    pool.servers[0].last_attempt = 100.0
    server, delay = pool.pick(max_attempts=-1, wait=2.0, jitter=lambda s: 0.0, now=100.5)
    assert server is pool.servers[0] and delay == pytest.approx(1.5)
    server, delay = pool.pick(max_attempts=-1, wait=2.0, jitter=lambda s: 0.0, now=103.0)
    assert delay == 0.0


def test_pick_honours_the_user_hook() -> None:
    pool = ServerPool(["a:1", "b:2"], randomize=False)
    server, delay = pool.pick(
        max_attempts=-1,
        wait=2.0,
        jitter=lambda s: 0.0,
        now=0.0,
        chooser=lambda urls, info: ("nats://b:2", 0.25),
    )
    assert isinstance(server, Server) and server.host == "b" and delay == 0.25
