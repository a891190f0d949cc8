"""Throwaway TLS material for tests: a CA, a server certificate and a client certificate.

The server certificate is valid for ``localhost`` and ``127.0.0.1``, so a client can verify it
when it connects to an embedded server by either name. Keys are EC P-256 (fast to make).
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CertPaths", "make_certs"]


@dataclass(frozen=True)
class CertPaths:
    """PEM files written by ``make_certs``."""

    ca_cert: str
    ca_key: str
    server_cert: str
    server_key: str
    client_cert: str
    client_key: str


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> str:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)
    return str(path)


def _write_cert(cert: x509.Certificate, path: Path) -> str:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return str(path)


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "jetstream tests"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _leaf(
    common_name: str,
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    usage: x509.ObjectIdentifier,
    san: list[x509.GeneralName],
    now: datetime.datetime,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=True,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    if san:
        builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


def make_certs(directory: str | Path) -> CertPaths:
    """Write a CA, a server certificate (localhost, 127.0.0.1) and a client certificate.

    Returns the paths of the six PEM files, all inside ``directory`` (created if missing).
    """
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(_name("jetstream test CA"))
        .issuer_name(_name("jetstream test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    server_cert, server_key = _leaf(
        "localhost",
        ca_cert,
        ca_key,
        ExtendedKeyUsageOID.SERVER_AUTH,
        [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))],
        now,
    )
    client_cert, client_key = _leaf(
        "jetstream test client", ca_cert, ca_key, ExtendedKeyUsageOID.CLIENT_AUTH, [], now
    )
    return CertPaths(
        ca_cert=_write_cert(ca_cert, out / "ca.pem"),
        ca_key=_write_key(ca_key, out / "ca-key.pem"),
        server_cert=_write_cert(server_cert, out / "server.pem"),
        server_key=_write_key(server_key, out / "server-key.pem"),
        client_cert=_write_cert(client_cert, out / "client.pem"),
        client_key=_write_key(client_key, out / "client-key.pem"),
    )
