"""TLS setup.

The client verifies the server's certificate and hostname by default (the
system's trust store, or ``ca_file``). Pass an ``ssl.SSLContext`` as ``tls=``
to ``connect`` for anything else.
"""

from __future__ import annotations

import os
import ssl

__all__ = ["make_ssl_context"]


def make_ssl_context(
    *,
    ca_file: str | os.PathLike[str] | None = None,
    cert_file: str | os.PathLike[str] | None = None,
    key_file: str | os.PathLike[str] | None = None,
    verify: bool = True,
) -> ssl.SSLContext:
    """Build a client ``SSLContext``.

    Args:
        ca_file: PEM file of the CA(s) to trust instead of the system store.
        cert_file: client certificate (PEM) for servers that verify clients.
        key_file: the client certificate's key (PEM); defaults to ``cert_file``.
        verify: check the certificate and the hostname (the default). Turning it
            off is for tests against throwaway servers only.
    """
    ctx = ssl.create_default_context(
        ssl.Purpose.SERVER_AUTH, cafile=os.fspath(ca_file) if ca_file else None
    )
    if cert_file is not None:
        ctx.load_cert_chain(os.fspath(cert_file), os.fspath(key_file) if key_file else None)
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx
