"""Throwaway NATS decentralized-auth material for tests: nkeys, JWTs and creds files.

An operator signs account JWTs, an account signs user JWTs; a server run with
``operator: <jwt>``, ``resolver: MEMORY`` and the account JWTs preloaded trusts any
user whose JWT chains up to that operator. ``operator_setup()`` makes the whole tree
(an application account, a system account, one user) and the server configuration text.

JWTs follow the NATS v2 layout: header ``{"typ":"JWT","alg":"ed25519-nkey"}``, claims
with ``jti``/``iat``/``iss``/``sub``/``name`` and a ``nats`` object carrying ``type`` and
``version: 2``; the signature is ed25519 over ``header.claims`` by the issuer's nkey, all
three parts base64url without padding.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nkeys

__all__ = [
    "Entity",
    "OperatorSetup",
    "account_jwt",
    "creds_text",
    "new_account",
    "new_operator",
    "new_user",
    "operator_jwt",
    "operator_setup",
    "user_jwt",
    "write_creds",
]

_HEADER = {"typ": "JWT", "alg": "ed25519-nkey"}


@dataclass(frozen=True)
class Entity:
    """An nkey pair: the seed (secret, ``S...``) and the public key (``O...``, ``A...``,
    ``U...``)."""

    seed: bytes
    public_key: str

    def sign(self, data: bytes) -> bytes:
        """The raw ed25519 signature of ``data``."""
        return bytes(nkeys.from_seed(bytearray(self.seed)).sign(data))


def _new(prefix: int) -> Entity:
    seed = bytes(nkeys.encode_seed(os.urandom(32), prefix))
    public = bytes(nkeys.from_seed(bytearray(seed)).public_key).decode("ascii")
    return Entity(seed, public)


def new_operator() -> Entity:
    """A fresh operator nkey pair."""
    return _new(nkeys.PREFIX_BYTE_OPERATOR)


def new_account() -> Entity:
    """A fresh account nkey pair."""
    return _new(nkeys.PREFIX_BYTE_ACCOUNT)


def new_user() -> Entity:
    """A fresh user nkey pair."""
    return _new(nkeys.PREFIX_BYTE_USER)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()


def encode_jwt(issuer: Entity, subject: str, name: str, nats: dict[str, Any]) -> str:
    """Sign a NATS v2 JWT for ``subject`` with ``issuer``'s seed."""
    claims: dict[str, Any] = {
        "jti": "",
        "iat": int(time.time()),
        "iss": issuer.public_key,
        "name": name,
        "sub": subject,
        "nats": nats,
    }
    # The JWT id is the hash of the claims without it (as the NATS tooling computes it).
    digest = hashlib.new("sha512_256", _dumps(claims)).digest()
    claims["jti"] = base64.b32encode(digest).rstrip(b"=").decode("ascii")
    signing_input = f"{_b64(_dumps(_HEADER))}.{_b64(_dumps(claims))}"
    return f"{signing_input}.{_b64(issuer.sign(signing_input.encode('ascii')))}"


def decode_claims(token: str) -> dict[str, Any]:
    """The claims of a JWT (no signature check): for assertions in tests."""
    part = token.split(".")[1]
    data = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
    claims: dict[str, Any] = json.loads(data)
    return claims


def operator_jwt(operator: Entity, name: str = "test-operator", *, system_account: str = "") -> str:
    """A self-signed operator JWT."""
    nats: dict[str, Any] = {"type": "operator", "version": 2}
    if system_account:
        nats["system_account"] = system_account
    return encode_jwt(operator, operator.public_key, name, nats)


def account_jwt(
    operator: Entity, account: Entity, name: str = "test-account", *, jetstream: bool = False
) -> str:
    """An account JWT signed by ``operator``, without limits (JetStream optional)."""
    limits: dict[str, Any] = {
        "subs": -1,
        "data": -1,
        "payload": -1,
        "imports": -1,
        "exports": -1,
        "wildcards": True,
        "conn": -1,
        "leaf": -1,
    }
    if jetstream:
        limits.update({"mem_storage": -1, "disk_storage": -1, "streams": -1, "consumer": -1})
    nats = {
        "limits": limits,
        "default_permissions": {"pub": {}, "sub": {}},
        "type": "account",
        "version": 2,
    }
    return encode_jwt(operator, account.public_key, name, nats)


def user_jwt(account: Entity, user: Entity, name: str = "test-user") -> str:
    """A user JWT signed by ``account`` (its own key, no signing key), without limits."""
    nats = {
        "pub": {},
        "sub": {},
        "subs": -1,
        "data": -1,
        "payload": -1,
        "type": "user",
        "version": 2,
    }
    return encode_jwt(account, user.public_key, name, nats)


def creds_text(jwt: str, seed: bytes) -> str:
    """The content of a ``.creds`` file, in the layout ``nsc`` writes."""
    return (
        "-----BEGIN NATS USER JWT-----\n"
        f"{jwt}\n"
        "------END NATS USER JWT------\n"
        "\n"
        "************************* IMPORTANT *************************\n"
        "NKEY Seed printed below can be used to sign and prove identity.\n"
        "NKEYs are sensitive and should be treated as secrets.\n"
        "\n"
        "-----BEGIN USER NKEY SEED-----\n"
        f"{seed.decode('ascii')}\n"
        "------END USER NKEY SEED------\n"
        "\n"
        "*************************************************************\n"
    )


def write_creds(path: str | os.PathLike[str], jwt: str, seed: bytes) -> str:
    """Write a ``.creds`` file (mode 0600); returns its path."""
    p = Path(path)
    p.write_text(creds_text(jwt, seed), encoding="ascii")
    p.chmod(0o600)
    return str(p)


@dataclass
class OperatorSetup:
    """An operator, an application account with one user, and a system account."""

    operator: Entity
    operator_jwt: str
    account: Entity
    account_jwt: str
    system: Entity
    system_jwt: str
    user: Entity
    user_jwt: str
    extra_accounts: dict[str, str] = field(default_factory=dict)

    def server_config(self) -> str:
        """The ``auth_config`` text for ``NatsServer``: operator mode, memory resolver."""
        preload = {
            self.account.public_key: self.account_jwt,
            self.system.public_key: self.system_jwt,
            **self.extra_accounts,
        }
        lines = [
            f"operator: {json.dumps(self.operator_jwt)}",
            f"system_account: {json.dumps(self.system.public_key)}",
            "resolver: MEMORY",
            "resolver_preload: {",
            *(f"  {key}: {json.dumps(jwt)}" for key, jwt in preload.items()),
            "}",
        ]
        return "\n".join(lines)

    def new_user_creds(self, path: str | os.PathLike[str], name: str = "another-user") -> str:
        """Write a creds file for a fresh user of the application account."""
        user = new_user()
        return write_creds(path, user_jwt(self.account, user, name), user.seed)


def operator_setup(*, jetstream: bool = False) -> OperatorSetup:
    """Make a fresh operator, application account (+ user) and system account."""
    operator = new_operator()
    system = new_account()
    account = new_account()
    user = new_user()
    return OperatorSetup(
        operator=operator,
        operator_jwt=operator_jwt(operator, system_account=system.public_key),
        account=account,
        account_jwt=account_jwt(operator, account, "APP", jetstream=jetstream),
        system=system,
        system_jwt=account_jwt(operator, system, "SYS"),
        user=user,
        user_jwt=user_jwt(account, user, "app-user"),
    )
