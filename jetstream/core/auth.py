"""Credentials: user/password, token, nkey seed, user JWT and creds files.

Secrets are held in ``Credentials`` whose ``repr`` hides them, and never go
into log lines or exception texts. Signing the server's nonce with a seed needs
the ``nkeys`` package (the ``nkeys`` extra).

A user, password, token, user JWT or nkey public key may also be a callable
(plain or async) asked at every connect and reconnect, for secrets that rotate;
and a ``signer`` (called with the nonce, returning the signature) may stand in
for the seed, so that a key kept in a vault or an HSM never enters the process.
A callable that raises or returns something else than a non-empty string ends
the connect with an ``AuthorizationError`` that names the option, never the
value.
"""

from __future__ import annotations

import base64
import inspect
import os
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from .._version import install_hint
from ..errors import AuthorizationError

__all__ = [
    "Credentials",
    "Secret",
    "Signer",
    "load_creds_file",
    "nkey_public_key",
    "sign_nonce",
]

#: a secret given as it is, or as a callable (plain or async) asked at every connect
Secret: TypeAlias = str | Callable[[], str | Awaitable[str]]
#: signs the server's nonce: returns the raw signature (bytes) or it base64url-encoded
Signer: TypeAlias = Callable[[bytes], bytes | str | Awaitable[bytes | str]]


async def _ask(option: str, value: Secret) -> str:
    """The value of ``option``: itself, or what its callable returns now."""
    if isinstance(value, str):
        return value
    failed = ""
    try:
        got: Any = value()
        if inspect.isawaitable(got):
            got = await got
    except Exception as exc:
        failed = type(exc).__name__
    if failed:  # raised here, not in the handler: the callable's error (and text) stays out
        raise AuthorizationError(f"the {option} callable raised {failed}; not connecting")
    if not isinstance(got, str) or not got:
        raise AuthorizationError(
            f"the {option} callable returned {type(got).__name__}, not a non-empty str"
        )
    return got


async def _signature(signer: Signer, nonce: str) -> str:
    failed = ""
    try:
        got: Any = signer(nonce.encode())
        if inspect.isawaitable(got):
            got = await got
    except Exception as exc:
        failed = type(exc).__name__
    if failed:
        raise AuthorizationError(f"the signature_cb callable raised {failed}; not connecting")
    if isinstance(got, (bytes, bytearray)) and got:
        return base64.urlsafe_b64encode(bytes(got)).rstrip(b"=").decode("ascii")
    if isinstance(got, str) and got:
        return got
    raise AuthorizationError(
        f"the signature_cb callable returned {type(got).__name__}, not bytes or str"
    )


_BEGIN = re.compile(rb"^-{3,}\s*BEGIN [^-]*-{3,}$")
_END = re.compile(rb"^-{3,}\s*END [^-]*-{3,}$")


@dataclass(frozen=True, repr=False)
class Credentials:
    """What the client may send to authenticate. Only the non-secret parts show in repr."""

    user: Secret | None = None
    password: Secret | None = field(default=None)
    token: Secret | None = None
    nkey_seed: bytes | None = None
    jwt: Secret | None = None
    #: the public nkey (``U...``) that ``signer`` signs for, when there is no JWT
    nkey: Secret | None = None
    signer: Signer | None = None

    def __repr__(self) -> str:
        parts = []
        if self.user is not None:
            parts.append(f"user={self.user!r}")
        if self.password is not None:
            parts.append("password=<hidden>")
        if self.token is not None:
            parts.append("token=<hidden>")
        if self.nkey_seed is not None:
            parts.append("nkey_seed=<hidden>")
        if self.jwt is not None:
            parts.append("jwt=<hidden>")
        if self.nkey is not None:
            parts.append("nkey=<given>")
        if self.signer is not None:
            parts.append("signer=<given>")
        return f"Credentials({', '.join(parts)})"

    async def connect_fields(self, nonce: str) -> dict[str, Any]:
        """The CONNECT fields that carry these credentials: callables asked now, the
        nonce signed if needed.

        Raises:
            AuthorizationError: a callable raised or returned something unusable (the
                message names the option, never a value).
        """
        out: dict[str, Any] = {}
        if self.user is not None:
            out["user"] = await _ask("user", self.user)
            out["pass"] = "" if self.password is None else await _ask("password", self.password)
        if self.token is not None:
            out["auth_token"] = await _ask("token", self.token)
        if self.signer is not None or self.nkey_seed is not None:
            if self.jwt is not None:
                out["jwt"] = await _ask("jwt", self.jwt)
            elif self.nkey is not None:
                out["nkey"] = await _ask("nkey", self.nkey)
            elif self.nkey_seed is not None:
                out["nkey"] = nkey_public_key(self.nkey_seed)
            if self.signer is not None:
                out["sig"] = await _signature(self.signer, nonce)
            else:
                assert self.nkey_seed is not None
                out["sig"] = sign_nonce(self.nkey_seed, nonce)
        return out


def load_creds_file(path: str | os.PathLike[str]) -> tuple[str, bytes]:
    """Read a ``.creds`` file: returns ``(jwt, seed)``.

    The file holds two armored blocks, the user JWT then the user nkey seed, each
    between a ``-----BEGIN ...-----`` and an ``------END ...------`` line (as ``nsc``
    writes them). Blank lines, surrounding spaces, CRLF line ends and a UTF-8 BOM are
    tolerated; text outside the blocks is ignored.

    Raises:
        AuthorizationError: the file cannot be read or lacks one of the blocks (the
            message names the file, never its content).
    """
    name = os.fspath(path)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise AuthorizationError(f"cannot read creds file {name!r}: {exc.strerror}") from None
    jwt: bytes | None = None
    seed: bytes | None = None
    for body in _armored_bodies(raw.removeprefix(b"\xef\xbb\xbf")):
        if jwt is None and body.startswith(b"ey"):
            jwt = body
        elif seed is None and body.startswith(b"SU"):
            seed = body
    if jwt is None or seed is None:
        missing = " and ".join(
            what for what, got in (("a user JWT", jwt), ("a user nkey seed", seed)) if got is None
        )
        raise AuthorizationError(f"creds file {name!r} does not hold {missing} block")
    try:
        text = jwt.decode("ascii")
    except UnicodeDecodeError:
        raise AuthorizationError(f"creds file {name!r}: the user JWT is not ASCII") from None
    return text, seed


def _armored_bodies(raw: bytes) -> list[bytes]:
    """The content of each ``BEGIN``/``END`` block, its lines stripped and joined."""
    bodies: list[bytes] = []
    current: list[bytes] | None = None
    for line in raw.splitlines():
        line = line.strip()
        if _BEGIN.match(line):
            current = []
        elif current is not None and _END.match(line):
            bodies.append(b"".join(current))
            current = None
        elif current is not None and line:
            current.append(line)
    return bodies


def _keypair(seed: bytes) -> Any:
    try:
        import nkeys
    except ImportError:  # pragma: no cover - depends on the environment
        raise AuthorizationError(
            f"nkey and creds authentication need nkeys: {install_hint('nkeys')}"
        ) from None
    try:
        return nkeys.from_seed(bytearray(seed.strip()))
    except Exception:
        raise AuthorizationError("the nkey seed is not a valid seed") from None


def sign_nonce(seed: bytes, nonce: str) -> str:
    """Sign the server's nonce with an nkey seed; base64url without padding."""
    sig = _keypair(seed).sign(nonce.encode())
    return base64.urlsafe_b64encode(sig).rstrip(b"=").decode("ascii")


def nkey_public_key(seed: bytes) -> str:
    """The public key of an nkey seed."""
    return bytes(_keypair(seed).public_key).decode("ascii")
