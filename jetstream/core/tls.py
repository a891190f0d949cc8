"""TLS setup.

The client verifies the server's certificate and hostname by default (the
system's trust store, or ``ca_file``). Pass an ``ssl.SSLContext`` as ``tls=``
to ``connect`` for anything else.
"""

from __future__ import annotations

import os
import ssl

from ..errors import TlsError

__all__ = ["make_ssl_context"]


def make_ssl_context(
    *,
    ca_file: str | os.PathLike[str] | None = None,
    cert_file: str | os.PathLike[str] | None = None,
    key_file: str | os.PathLike[str] | None = None,
    verify: bool = True,
) -> ssl.SSLContext:
    """Build a client ``SSLContext`` (TLS 1.2 or newer).

    Args:
        ca_file: PEM file of the CA(s) to trust instead of the system store.
        cert_file: client certificate (PEM) for servers that verify clients.
        key_file: the client certificate's key (PEM); defaults to ``cert_file``
            (a PEM file holding both).
        verify: check the certificate and the hostname (the default). Turning it
            off is for tests against throwaway servers only.

    Raises:
        TlsError: a file cannot be read or does not hold what it should (the
            message names the file, never its content).
        ValueError: ``key_file`` without ``cert_file``.
    """
    if key_file is not None and cert_file is None:
        raise ValueError("key_file needs cert_file (the certificate the key belongs to)")
    cafile = os.fspath(ca_file) if ca_file is not None else None
    try:
        # With a CA file only that file is trusted; without, the system store.
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=cafile)
    except OSError as exc:
        raise TlsError(f"cannot load the CA file {cafile!r}: {_why(exc)}") from None
    if ctx.minimum_version < ssl.TLSVersion.TLSv1_2:
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if cert_file is not None:
        cert = os.fspath(cert_file)
        key = os.fspath(key_file) if key_file is not None else None
        for path, what in ((cert, "client certificate"), (key, "client key")):
            if path is not None and not os.path.isfile(path):
                raise TlsError(f"cannot load the {what} {path!r}: no such file")
        try:
            ctx.load_cert_chain(cert, key)
        except OSError as exc:
            which = f"certificate {cert!r}" + (f" with key {key!r}" if key else "")
            raise TlsError(f"cannot load the client {which}: {_why(exc)}") from None
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


def _why(exc: OSError) -> str:
    if isinstance(exc, ssl.SSLError):
        return str(exc.reason or exc.strerror or exc)
    return exc.strerror or str(exc)
