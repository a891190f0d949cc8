"""Credentials: user/password, token, nkey seed and JWT creds files.

Secrets are held in ``Credentials`` whose ``repr`` hides them, and never go
into log lines or exception texts. Signing the server's nonce needs the
``nkeys`` extra (``pip install jetstream-asyncio[nkeys]``).
"""

from __future__ import annotations

import base64
import os
import re
from dataclasses import dataclass, field
from typing import Any

from .errors import AuthorizationError

__all__ = ["Credentials", "load_creds_file", "sign_nonce", "nkey_public_key"]

_BEGIN = re.compile(rb"^-{3,}\s*BEGIN [^-]*-{3,}$")
_END = re.compile(rb"^-{3,}\s*END [^-]*-{3,}$")


@dataclass(frozen=True, repr=False)
class Credentials:
    """What the client may send to authenticate. Only the non-secret parts show in repr."""

    user: str | None = None
    password: str | None = field(default=None)
    token: str | None = None
    nkey_seed: bytes | None = None
    jwt: str | None = None

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
        return f"Credentials({', '.join(parts)})"

    def connect_fields(self, nonce: str) -> dict[str, Any]:
        """The CONNECT fields that carry these credentials (signing the nonce if needed)."""
        out: dict[str, Any] = {}
        if self.user is not None:
            out["user"] = self.user
            out["pass"] = self.password or ""
        if self.token is not None:
            out["auth_token"] = self.token
        if self.nkey_seed is not None:
            if self.jwt is not None:
                out["jwt"] = self.jwt
            else:
                out["nkey"] = nkey_public_key(self.nkey_seed)
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
            "nkey and creds authentication need the nkeys extra: "
            "pip install 'jetstream-asyncio[nkeys]'"
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
