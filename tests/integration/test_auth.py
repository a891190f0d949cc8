"""Authentication against real servers that require it: user/password, token, nkey, creds.

Every refusal must surface as ``AuthorizationError`` at once (no retry loop, no
``NoServersError`` hiding it), and no secret may show in a repr, an exception text or a
log record.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
import traceback
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

import jetstream
from jetstream import AuthorizationError, NoServersError
from jetstream.core.auth import Credentials, load_creds_file, nkey_public_key
from jetstream.embedded import NatsServer
from tests.jwt_util import (
    OperatorSetup,
    account_jwt,
    decode_claims,
    new_account,
    new_user,
    operator_setup,
    user_jwt,
    write_creds,
)

# A refusal must be reported well within this many seconds (connect_timeout is 2 s).
FAST = 3.0


# --------------------------------------------------------------------------- helpers


def _secret(prefix: str) -> str:
    # Characters that need quoting in a URL, so the URL form exercises unquoting.
    return f"{prefix}-{secrets.token_hex(8)}/@:%"


def _needles(values: Iterable[str | bytes]) -> list[str]:
    """The secrets to look for: each whole, URL-quoted, and its random tail alone."""
    out: list[str] = []
    for v in values:
        s = v.decode("ascii") if isinstance(v, bytes) else v
        out += [s, quote(s, safe="")]
        if len(s) > 24:
            out.append(s[-16:])
    return out


def _exception_texts(exc: BaseException) -> list[str]:
    texts = ["".join(traceback.format_exception(exc))]
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        texts += [str(e), repr(e), *(repr(a) for a in e.args)]
        e = e.__cause__ or e.__context__
    return texts


def _log_texts(records: Iterable[logging.LogRecord]) -> list[str]:
    fmt = logging.Formatter()
    texts: list[str] = []
    for r in records:
        texts.append(r.getMessage())
        if r.exc_info:
            texts.append(fmt.formatException(r.exc_info))
    return texts


def assert_no_secret(texts: Iterable[str], values: Iterable[str | bytes]) -> None:
    needles = _needles(values)
    for text in texts:
        for needle in needles:
            assert needle not in text, f"a secret leaked into: {text[:300]!r}"


async def expect_refused(url: str | list[str], **kw: Any) -> AuthorizationError:
    """Connect, expecting the server to refuse; fast, typed, and reported once."""
    kw.setdefault("connect_timeout", 2.0)
    kw.setdefault("reconnect_time_wait", 0.1)
    t0 = time.monotonic()
    with pytest.raises(AuthorizationError) as info:
        await jetstream.connect(url, **kw)
    assert time.monotonic() - t0 < FAST
    assert not isinstance(info.value, NoServersError)
    return info.value


async def round_trip(nc: jetstream.Client, subject: str = "auth.check") -> None:
    sub = await nc.subscribe(subject)
    await nc.flush()
    await nc.publish(subject, b"hello")
    msg = await sub.next_msg(timeout=5)
    assert msg.data == b"hello"
    await sub.unsubscribe()


def url_with(server: NatsServer, userinfo: str) -> str:
    return f"nats://{userinfo}@127.0.0.1:{server.port}"


# --------------------------------------------------------------------------- servers


@dataclass(frozen=True)
class UserPass:
    user: str
    password: str


@pytest.fixture(scope="module")
def userpass() -> UserPass:
    return UserPass(user="alice", password=_secret("pw"))


@pytest.fixture(scope="module")
def userpass_server(userpass: UserPass) -> Iterator[NatsServer]:
    with NatsServer(jetstream=False, user=userpass.user, password=userpass.password) as s:
        yield s


@pytest.fixture(scope="module")
def token() -> str:
    return _secret("tok")


@pytest.fixture(scope="module")
def token_server(token: str) -> Iterator[NatsServer]:
    with NatsServer(jetstream=False, token=token) as s:
        yield s


def _user_seed() -> bytes:
    return new_user().seed


@pytest.fixture(scope="module")
def nkey_seed() -> bytes:
    return _user_seed()


@pytest.fixture(scope="module")
def nkey_server(nkey_seed: bytes) -> Iterator[NatsServer]:
    with NatsServer(jetstream=False, nkeys=[nkey_public_key(nkey_seed)]) as s:
        yield s


@pytest.fixture(scope="module")
def op() -> OperatorSetup:
    return operator_setup()


@pytest.fixture(scope="module")
def operator_server(op: OperatorSetup) -> Iterator[NatsServer]:
    with NatsServer(jetstream=False, auth_config=op.server_config()) as s:
        yield s


@pytest.fixture
def creds_file(op: OperatorSetup, tmp_path: Path) -> str:
    return write_creds(tmp_path / "user.creds", op.user_jwt, op.user.seed)


# --------------------------------------------------------------------------- user/password


@pytest.mark.asyncio
async def test_user_password_options(userpass_server: NatsServer, userpass: UserPass) -> None:
    async with jetstream.connect(
        userpass_server.url, user=userpass.user, password=userpass.password
    ) as nc:
        await round_trip(nc)


@pytest.mark.asyncio
async def test_user_password_in_url(userpass_server: NatsServer, userpass: UserPass) -> None:
    userinfo = f"{quote(userpass.user, safe='')}:{quote(userpass.password, safe='')}"
    url = url_with(userpass_server, userinfo)
    async with jetstream.connect(url) as nc:
        await round_trip(nc)
        assert nc.connected_url == userpass_server.url
        assert nc.servers == [userpass_server.url]
        assert_no_secret([repr(nc), str(nc.servers)], [userpass.password])


@pytest.mark.asyncio
async def test_no_credentials_refused(userpass_server: NatsServer) -> None:
    exc = await expect_refused(userpass_server.url)
    assert "authorization" in str(exc).lower()


@pytest.mark.asyncio
async def test_wrong_password_option_refused_fast(
    userpass_server: NatsServer, userpass: UserPass
) -> None:
    wrong = _secret("wrong")
    exc = await expect_refused(userpass_server.url, user=userpass.user, password=wrong)
    assert "Authorization Violation" in str(exc)
    assert_no_secret(_exception_texts(exc), [wrong, userpass.password])


@pytest.mark.asyncio
async def test_wrong_password_in_url_refused_fast(
    userpass_server: NatsServer, userpass: UserPass
) -> None:
    wrong = _secret("wrong")
    exc = await expect_refused(url_with(userpass_server, f"alice:{quote(wrong, safe='')}"))
    assert_no_secret(_exception_texts(exc), [wrong])


@pytest.mark.asyncio
async def test_refusal_is_not_retried_forever(
    userpass_server: NatsServer, userpass: UserPass
) -> None:
    # Even when asked to keep trying, a refusal of the credentials is final.
    await expect_refused(
        userpass_server.url,
        user=userpass.user,
        password="nope",
        retry_on_failed_connect=True,
        max_reconnect_attempts=-1,
    )


@pytest.mark.asyncio
async def test_refusal_reported_before_other_servers_hide_it(
    userpass_server: NatsServer, userpass: UserPass
) -> None:
    # A second, unreachable server must not turn the refusal into NoServersError.
    dead = NatsServer(jetstream=False)  # never started: nothing listens on its port
    try:
        await expect_refused(
            [userpass_server.url, dead.url],
            user=userpass.user,
            password="nope",
            dont_randomize=True,
        )
    finally:
        dead.close()


# --------------------------------------------------------------------------- token


@pytest.mark.asyncio
async def test_token_option(token_server: NatsServer, token: str) -> None:
    async with jetstream.connect(token_server.url, token=token) as nc:
        await round_trip(nc)


@pytest.mark.asyncio
async def test_token_in_url(token_server: NatsServer, token: str) -> None:
    async with jetstream.connect(url_with(token_server, quote(token, safe=""))) as nc:
        await round_trip(nc)
        assert_no_secret([repr(nc), str(nc.servers), str(nc.connected_url)], [token])


@pytest.mark.asyncio
async def test_wrong_token_refused(token_server: NatsServer, token: str) -> None:
    wrong = _secret("badtok")
    exc = await expect_refused(token_server.url, token=wrong)
    assert_no_secret(_exception_texts(exc), [wrong, token])
    exc = await expect_refused(url_with(token_server, quote(wrong, safe="")))
    assert_no_secret(_exception_texts(exc), [wrong, token])


# --------------------------------------------------------------------------- nkey


@pytest.mark.asyncio
async def test_nkey_seed_option(nkey_server: NatsServer, nkey_seed: bytes) -> None:
    async with jetstream.connect(nkey_server.url, nkeys_seed=nkey_seed.decode()) as nc:
        await round_trip(nc)
    async with jetstream.connect(nkey_server.url, nkeys_seed=nkey_seed) as nc:
        await round_trip(nc)


@pytest.mark.asyncio
async def test_nkey_seed_file(nkey_server: NatsServer, nkey_seed: bytes, tmp_path: Path) -> None:
    path = tmp_path / "user.nk"
    path.write_bytes(nkey_seed + b"\n")
    async with jetstream.connect(nkey_server.url, nkeys_seed_file=str(path)) as nc:
        await round_trip(nc)


@pytest.mark.asyncio
async def test_nkey_of_another_user_refused(nkey_server: NatsServer, nkey_seed: bytes) -> None:
    other = _user_seed()
    exc = await expect_refused(nkey_server.url, nkeys_seed=other)
    assert_no_secret(_exception_texts(exc), [other, nkey_seed])


@pytest.mark.asyncio
async def test_invalid_seed_refused_without_showing_it(nkey_server: NatsServer) -> None:
    bogus = "SU" + "A" * 20 + secrets.token_hex(8).upper()
    exc = await expect_refused(nkey_server.url, nkeys_seed=bogus)
    assert "seed" in str(exc)
    assert_no_secret(_exception_texts(exc), [bogus])


@pytest.mark.asyncio
async def test_missing_seed_file(nkey_server: NatsServer, tmp_path: Path) -> None:
    with pytest.raises(AuthorizationError):
        await jetstream.connect(nkey_server.url, nkeys_seed_file=str(tmp_path / "missing.nk"))


# --------------------------------------------------------------------------- creds (operator mode)


def test_jwt_chain_layout(op: OperatorSetup) -> None:
    """The helper's JWTs say who signed whom (a broken chain would only show as a refusal)."""
    assert decode_claims(op.operator_jwt)["iss"] == op.operator.public_key
    account = decode_claims(op.account_jwt)
    assert account["iss"] == op.operator.public_key
    assert account["sub"] == op.account.public_key
    assert account["nats"]["type"] == "account" and account["nats"]["version"] == 2
    user = decode_claims(op.user_jwt)
    assert user["iss"] == op.account.public_key and user["sub"] == op.user.public_key


def test_load_creds_file(op: OperatorSetup, creds_file: str) -> None:
    jwt, seed = load_creds_file(creds_file)
    assert jwt == op.user_jwt
    assert seed == op.user.seed


def test_load_creds_file_tolerates_crlf_and_blank_lines(op: OperatorSetup, tmp_path: Path) -> None:
    path = tmp_path / "odd.creds"
    path.write_bytes(
        b"\xef\xbb\xbf-----BEGIN NATS USER JWT-----\r\n\r\n  "
        + op.user_jwt.encode()
        + b"  \r\n------END NATS USER JWT------\r\n\r\n-----BEGIN USER NKEY SEED-----\r\n"
        + op.user.seed
        + b"\r\n------END USER NKEY SEED------\r\n"
    )
    assert load_creds_file(path) == (op.user_jwt, op.user.seed)


@pytest.mark.asyncio
async def test_creds_file(operator_server: NatsServer, creds_file: str) -> None:
    async with jetstream.connect(operator_server.url, creds=creds_file) as nc:
        await round_trip(nc)
        await round_trip(nc, "auth.again")


@pytest.mark.asyncio
async def test_creds_of_second_user(
    operator_server: NatsServer, op: OperatorSetup, tmp_path: Path
) -> None:
    path = op.new_user_creds(tmp_path / "second.creds")
    async with jetstream.connect(operator_server.url, creds=path) as nc:
        await round_trip(nc)


@pytest.mark.asyncio
async def test_creds_of_unknown_account_refused(
    operator_server: NatsServer, op: OperatorSetup, tmp_path: Path
) -> None:
    # Signed properly by the same operator, but the server has never heard of the account.
    stranger = new_account()
    assert account_jwt(op.operator, stranger)  # could exist, but is not preloaded
    user = new_user()
    jwt = user_jwt(stranger, user)
    path = write_creds(tmp_path / "stranger.creds", jwt, user.seed)
    exc = await expect_refused(operator_server.url, creds=path)
    assert_no_secret(_exception_texts(exc), [jwt, user.seed])


@pytest.mark.asyncio
async def test_creds_with_wrong_seed_refused(
    operator_server: NatsServer, op: OperatorSetup, tmp_path: Path
) -> None:
    # The JWT is valid, but the nonce is signed by a key that is not the JWT's subject.
    other = _user_seed()
    path = write_creds(tmp_path / "mixed.creds", op.user_jwt, other)
    exc = await expect_refused(operator_server.url, creds=path)
    assert_no_secret(_exception_texts(exc), [op.user_jwt, other])


@pytest.mark.asyncio
async def test_missing_creds_file(operator_server: NatsServer, tmp_path: Path) -> None:
    path = tmp_path / "nowhere.creds"
    with pytest.raises(AuthorizationError) as info:
        await jetstream.connect(operator_server.url, creds=str(path))
    assert str(path) in str(info.value)


@pytest.mark.parametrize(
    "content",
    [
        pytest.param("", id="empty"),
        pytest.param("just some text\n", id="text"),
        pytest.param("{jwt}\n{seed}\n", id="bare-lines"),
        pytest.param(
            "-----BEGIN NATS USER JWT-----\n{jwt}\n------END NATS USER JWT------\n", id="jwt-only"
        ),
        pytest.param(
            "-----BEGIN USER NKEY SEED-----\n{seed}\n------END USER NKEY SEED------\n",
            id="seed-only",
        ),
    ],
)
@pytest.mark.asyncio
async def test_creds_file_without_blocks(
    operator_server: NatsServer, op: OperatorSetup, tmp_path: Path, content: str
) -> None:
    path = tmp_path / "broken.creds"
    path.write_text(content.format(jwt=op.user_jwt, seed=op.user.seed.decode()))
    with pytest.raises(AuthorizationError) as info:
        await jetstream.connect(operator_server.url, creds=str(path))
    assert str(path) in str(info.value)
    assert_no_secret(_exception_texts(info.value), [op.user_jwt, op.user.seed])


# --------------------------------------------------------------------------- secrets stay secret


@dataclass
class Case:
    """One way of authenticating: server options, good and bad connect options, secrets."""

    server: dict[str, Any]
    good: dict[str, Any]
    bad: dict[str, Any]
    secrets: list[str | bytes]


def _case(kind: str, tmp_path: Path) -> Case:
    if kind == "userpass":
        pw, wrong = _secret("pw"), _secret("wrong")
        return Case(
            {"user": "bob", "password": pw},
            {"user": "bob", "password": pw},
            {"user": "bob", "password": wrong},
            [pw, wrong],
        )
    if kind == "token":
        tok, wrong = _secret("tok"), _secret("wrong")
        return Case({"token": tok}, {"token": tok}, {"token": wrong}, [tok, wrong])
    if kind == "nkey":
        seed, other = _user_seed(), _user_seed()
        return Case(
            {"nkeys": [nkey_public_key(seed)]},
            {"nkeys_seed": seed.decode()},
            {"nkeys_seed": other.decode()},
            [seed, other],
        )
    if kind == "userpass-callables":
        pw, wrong = _secret("pw"), _secret("wrong")
        return Case(
            {"user": "bob", "password": pw},
            {"user": lambda: "bob", "password": lambda: pw},
            {"user": lambda: "bob", "password": lambda: wrong},
            [pw, wrong],
        )
    if kind == "token-async":
        tok, wrong = _secret("tok"), _secret("wrong")

        def async_of(value: str) -> Any:
            async def provide() -> str:
                await asyncio.sleep(0)
                return value

            return provide

        return Case(
            {"token": tok}, {"token": async_of(tok)}, {"token": async_of(wrong)}, [tok, wrong]
        )
    if kind == "nkey-signer":  # the seed stays with the signer (a vault, an HSM)
        seed, other = _user_seed(), _user_seed()
        return Case(
            {"nkeys": [nkey_public_key(seed)]},
            {"nkey": nkey_public_key(seed), "signature_cb": _signer(seed)},
            {"nkey": nkey_public_key(seed), "signature_cb": _signer(other)},
            [seed, other],
        )
    if kind in ("jwt-signer", "jwt-seed-strings"):
        op = operator_setup()
        stranger, user = new_account(), new_user()
        bad_jwt = user_jwt(stranger, user)
        secrets_ = [op.user_jwt, op.user.seed, bad_jwt, user.seed, op.account.seed]
        if kind == "jwt-signer":
            return Case(
                {"auth_config": op.server_config()},
                {"jwt": lambda: op.user_jwt, "signature_cb": _signer(op.user.seed)},
                {"jwt": lambda: bad_jwt, "signature_cb": _signer(user.seed)},
                secrets_,
            )
        return Case(
            {"auth_config": op.server_config()},
            {"jwt": op.user_jwt, "nkeys_seed": op.user.seed.decode()},
            {"jwt": bad_jwt, "nkeys_seed": user.seed.decode()},
            secrets_,
        )
    assert kind == "creds"
    op = operator_setup()
    good = write_creds(tmp_path / "good.creds", op.user_jwt, op.user.seed)
    stranger, user = new_account(), new_user()
    bad_jwt = user_jwt(stranger, user)
    bad = write_creds(tmp_path / "bad.creds", bad_jwt, user.seed)
    return Case(
        {"auth_config": op.server_config()},
        {"creds": good},
        {"creds": bad},
        [op.user_jwt, op.user.seed, bad_jwt, user.seed, op.account.seed, op.operator.seed],
    )


def _signer(seed: bytes) -> Any:
    """A nonce signer holding the seed itself, as a vault or an HSM would (async)."""
    import nkeys

    async def sign(nonce: bytes) -> bytes:
        kp = nkeys.from_seed(bytearray(seed))
        return bytes(kp.sign(nonce))

    return sign


KINDS = [
    "userpass",
    "token",
    "nkey",
    "creds",
    "userpass-callables",
    "token-async",
    "nkey-signer",
    "jwt-signer",
    "jwt-seed-strings",
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.asyncio
async def test_secrets_never_shown(
    kind: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="jetstream")
    case = _case(kind, tmp_path)
    texts: list[str] = []
    with NatsServer(jetstream=False, **case.server) as server:
        exc = await expect_refused(server.url, **case.bad)
        texts += _exception_texts(exc)
        errors: list[BaseException] = []
        nc = await jetstream.connect(server.url, error_cb=errors.append, **case.good)
        try:
            await round_trip(nc)
            texts += [repr(nc), str(nc), repr(nc._opts), repr(nc._opts.credentials)]
            texts += [str(nc.servers), str(nc.connected_url), repr(nc.server_info)]
        finally:
            await nc.close()
        for e in errors:
            texts += _exception_texts(e)
    texts += _log_texts(caplog.records)
    assert_no_secret(texts, case.secrets)


@pytest.mark.asyncio
async def test_refused_on_reconnect_logs_no_secret(caplog: pytest.LogCaptureFixture) -> None:
    """The server comes back with another password: the client gives up, saying why, and
    neither the old nor the new password shows in the log (it logs because no error_cb)."""
    caplog.set_level(logging.DEBUG, logger="jetstream")
    old, new = _secret("old"), _secret("new")
    with NatsServer(jetstream=False, user="carol", password=old) as server:
        nc = await jetstream.connect(
            server.url, user="carol", password=old, reconnect_time_wait=0.1
        )
        try:
            await round_trip(nc)
            server.password = new
            await asyncio.to_thread(server.restart)
            async with asyncio.timeout(10):
                await nc.wait_closed()
            assert isinstance(nc.last_error, AuthorizationError)
            texts = _exception_texts(nc.last_error)
        finally:
            await nc.close()
    records = [r for r in caplog.records if r.name.startswith("jetstream")]
    assert any("Authorization" in r.getMessage() for r in records)
    assert_no_secret(texts + _log_texts(caplog.records), [old, new])


def test_credentials_repr_hides_secrets() -> None:
    seed = _user_seed()
    creds = Credentials(
        user="dave", password="hunter2-pw", token="tok-123456", nkey_seed=seed, jwt="eyJabc.def"
    )
    text = repr(creds) + str(creds)
    assert "dave" in text
    for secret in ("hunter2-pw", "tok-123456", seed.decode(), "eyJabc.def"):
        assert secret not in text
    assert "<hidden>" in text


# --------------------------------------------------------------------------- reconnect


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.asyncio
async def test_reconnect_after_restart_with_same_credentials(kind: str, tmp_path: Path) -> None:
    case = _case(kind, tmp_path)
    with NatsServer(jetstream=False, **case.server) as server:
        reconnected = asyncio.Event()
        errors: list[BaseException] = []
        async with jetstream.connect(
            server.url,
            reconnect_time_wait=0.1,
            reconnected_cb=reconnected.set,
            error_cb=errors.append,
            **case.good,
        ) as nc:
            sub = await nc.subscribe("restart.check")
            await nc.flush()
            await asyncio.to_thread(server.restart)
            async with asyncio.timeout(10):
                await reconnected.wait()
            await nc.flush()
            await nc.publish("restart.check", b"after")  # the subscription was re-made
            assert (await sub.next_msg(timeout=5)).data == b"after"
            await round_trip(nc)
            assert nc.stats.reconnects == 1
        assert not [e for e in errors if isinstance(e, AuthorizationError)]


# --------------------------------------------------------------------------- callables


@pytest.mark.asyncio
async def test_a_token_callable_is_asked_at_every_reconnect() -> None:
    """A rotating secret: the server comes back with a new token, and the callable,
    asked again for the reconnect, gives it."""
    old, new = _secret("old"), _secret("new")
    current = {"token": old}
    asked = 0

    def token() -> str:
        nonlocal asked
        asked += 1
        return current["token"]

    with NatsServer(jetstream=False, token=old) as server:
        reconnected = asyncio.Event()
        async with jetstream.connect(
            server.url, token=token, reconnect_time_wait=0.1, reconnected_cb=reconnected.set
        ) as nc:
            await round_trip(nc)
            assert asked == 1
            server.token = new
            current["token"] = new
            await asyncio.to_thread(server.restart)
            async with asyncio.timeout(10):
                await reconnected.wait()
            await round_trip(nc)
            assert asked >= 2


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        pytest.param(
            "token", lambda: 1 / 0, "the token callable raised ZeroDivisionError", id="raises"
        ),
        pytest.param("token", lambda: None, "the token callable returned NoneType", id="none"),
        pytest.param(
            "password", lambda: b"bytes", "the password callable returned bytes", id="bytes"
        ),
        pytest.param("jwt", lambda: "", "the jwt callable returned str", id="empty"),
    ],
)
@pytest.mark.asyncio
async def test_a_bad_callable_ends_the_connect_naming_the_option(
    token_server: NatsServer, option: str, value: Any, says: str
) -> None:
    kw: dict[str, Any] = {option: value}
    if option == "password":
        kw["user"] = "bob"
    if option == "jwt":
        kw["signature_cb"] = _signer(_user_seed())
    t0 = time.monotonic()
    with pytest.raises(AuthorizationError) as info:
        await jetstream.connect(token_server.url, **kw)
    assert says in str(info.value)
    assert time.monotonic() - t0 < FAST  # not retried
    assert info.value.__cause__ is None and info.value.__context__ is None  # left out


@pytest.mark.asyncio
async def test_a_signer_that_raises_ends_the_connect(
    nkey_server: NatsServer, nkey_seed: bytes
) -> None:
    def broken(nonce: bytes) -> bytes:
        raise RuntimeError(nkey_seed.decode())  # its text must not show

    with pytest.raises(AuthorizationError) as info:
        await jetstream.connect(
            nkey_server.url, nkey=nkey_public_key(nkey_seed), signature_cb=broken
        )
    assert "signature_cb callable raised RuntimeError" in str(info.value)
    assert_no_secret(_exception_texts(info.value), [nkey_seed])


def test_signer_options_that_do_not_go_together() -> None:
    with pytest.raises(ValueError, match="signature_cb needs jwt"):
        jetstream.connect("nats://127.0.0.1:1", signature_cb=lambda n: b"x")
    with pytest.raises(ValueError, match="needs signature_cb"):
        jetstream.connect("nats://127.0.0.1:1", nkey="UABC")
    with pytest.raises(ValueError, match="jwt needs nkeys_seed or signature_cb"):
        jetstream.connect("nats://127.0.0.1:1", jwt="eyJ")
