"""The package version, in a module that imports nothing (the CONNECT handshake sends it)."""

__all__ = ["__version__"]

__version__ = "0.1.0.dev0"
