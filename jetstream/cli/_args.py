"""What the parser of the command line is made of, and nothing more: the environment's
defaults, the types of the arguments and the parser classes. Parsing (and ``--help``, and
a usage error) imports this module, the parser's and argparse only; a command imports the
client when it runs."""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable, Sequence
from typing import Any

__all__ = [
    "DEFAULT_PORT",
    "DEFAULT_URL",
    "ENV",
    "Tree",
    "VerbParser",
    "duration",
    "header",
    "integer",
    "parse_duration",
    "parse_header",
    "parse_size",
    "positive",
    "seconds",
    "secrets_of",
    "size",
    "typed",
]

#: option destination -> environment variable read for its default (as the nats CLI does)
ENV = {
    "server": "NATS_URL",
    "creds": "NATS_CREDS",
    "user": "NATS_USER",
    "password": "NATS_PASSWORD",
    "token": "NATS_TOKEN",
    "nkey": "NATS_NKEY",
    "tls_ca": "NATS_CA",
    "tls_cert": "NATS_CERT",
    "tls_key": "NATS_KEY",
}
#: the port ``jetstream server`` listens on and the other commands connect to when no
#: server is given: nats-server's 4222, unless ``JETSTREAM_DEFAULT_PORT`` says otherwise
#: (the tests set it, so that they never depend on 4222 being free)
DEFAULT_PORT = int(os.environ.get("JETSTREAM_DEFAULT_PORT") or 4222)
DEFAULT_URL = f"nats://127.0.0.1:{DEFAULT_PORT}"


def secrets_of(args: argparse.Namespace) -> list[str]:
    """The secret values of this run, blanked out of every error message."""
    out = [getattr(args, "password", None), getattr(args, "token", None)]
    url = getattr(args, "server", None) or ""
    for part in url.split(","):
        userinfo, at, _ = part.partition("://")[2].partition("@")
        if at:
            out.extend(p for p in userinfo.split(":") if len(p) > 2)
    return [s for s in out if s]


_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*(ns|us|µs|ms|s|m|h|d|w|y)?", re.IGNORECASE)
_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
    "w": 7 * 86400.0,
    "y": 365 * 86400.0,
}


def parse_duration(text: str) -> float:
    """``"90"``, ``"1.5s"``, ``"500ms"``, ``"1h30m"``, ``"2d"`` -> seconds (argparse ``type``).

    A bare number is seconds.
    """
    s = text.strip().replace(" ", "")
    if not s:
        raise ValueError("empty duration")
    total = 0.0
    pos = 0
    while pos < len(s):
        m = _DURATION.match(s, pos)
        if m is None or m.end() == pos:
            raise ValueError(f"not a duration: {text!r} (try 30s, 5m, 1h, 2d)")
        unit = (m.group(2) or "s").lower()
        total += float(m.group(1)) * _UNIT_SECONDS[unit]
        pos = m.end()
    return total


_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?)\s*([kmgt]?)(i?)(b?)\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """``"512"``, ``"1KB"``, ``"1KiB"``, ``"10MB"``, ``"2g"`` -> bytes (argparse ``type``).

    K/M/G/T are powers of 1024 with or without ``i`` (as in the nats CLI); ``-1`` is
    allowed and means "no limit" for the limits that take it.
    """
    if text.strip() == "-1":
        return -1
    m = _SIZE.match(text)
    if m is None:
        raise ValueError(f"not a size: {text!r} (try 512, 64KB, 10MiB)")
    power = "kmgt".find(m.group(2).lower()) + 1 if m.group(2) else 0
    return int(float(m.group(1)) * 1024**power)


def parse_header(text: str) -> tuple[str, str]:
    """``"key:value"`` (or ``"key=value"``) -> ``("key", "value")`` (argparse ``type``)."""
    for sep in (":", "="):
        key, found, value = text.partition(sep)
        if found and key.strip():
            return key.strip(), value.strip()
    raise ValueError(f"a header is KEY:VALUE, not {text!r}")


# -- the types of the arguments ----------------------------------------------------------


def typed(fn: Callable[[str], Any], name: str) -> Callable[[str], Any]:
    """An argparse ``type`` whose errors read ``invalid <name> value`` plus the reason."""

    def convert(text: str) -> Any:
        try:
            return fn(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = name
    return convert


duration = typed(parse_duration, "duration")
size = typed(parse_size, "size")
header = typed(parse_header, "header")


def positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def seconds(text: str) -> float:
    value = float(duration(text))
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, not {text!r}")
    return value


def integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None


# -- the parser classes -------------------------------------------------------------------


class VerbParser(argparse.ArgumentParser):
    """The parser of one verb: its options go anywhere among its arguments, as the nats
    CLI takes them (``pub demo.y --count 3 'msg {{Count}}'``), and an error shows this
    verb's usage, not the top level's.

    (argparse's subcommand parsers take the positionals they can at the first one they
    meet, so an option between two left the second unrecognized; and what a subcommand
    did not recognize was reported by the top-level parser, with the top-level usage.)
    """

    #: False for a group of verbs (``stream``): its own arguments end at the verb
    intermixed = True
    _parsing = False

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        # (not for the passes parse_known_intermixed_args makes itself)
        if self._parsing or not self.intermixed:
            return super().parse_known_args(args, namespace)
        self._parsing = True
        try:
            parsed, extras = self.parse_known_intermixed_args(args, namespace)
        finally:
            self._parsing = False
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


class Tree:
    """Adds verbs that share the common options and name their handler.

    A handler is named ``"<module>:<function>"`` of this package, imported when the
    command runs (``jetstream.cli._handler``): parsing imports no command's module.
    """

    def __init__(self, common: argparse.ArgumentParser) -> None:
        self.common = common

    def verb(
        self,
        group: Any,
        name: str,
        help: str,
        func: str,
        *,
        aliases: tuple[str, ...] = (),
    ) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = group.add_parser(
            name, help=help, description=help, parents=[self.common], aliases=list(aliases)
        )
        p.set_defaults(func=func)
        return p

    def group(self, commands: Any, name: str, help: str) -> Any:
        # The common options are taken before the verb too (``stream --json ls``).
        p = commands.add_parser(name, help=help, description=help, parents=[self.common])
        p.intermixed = False
        return p.add_subparsers(dest="verb", required=True, metavar="VERB", parser_class=VerbParser)
