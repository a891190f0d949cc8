"""The optional peers of the benchmarks: natsio 1.x and the official next-generation client.

Both need Python 3.13 or later; ``make bench`` installs them with ours and nats-py in
``.venv-bench`` when a Python 3.13 is on the machine. A peer that is not installed is
not in the tables, and the benchmark says so on stderr (its ``--json`` output on stdout
stays JSON lines only).
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

#: module of each optional peer, in the order of the tables' columns
PEERS = ("benchmarks.peer_natsio", "benchmarks.peer_natscore")


def load(enabled: bool = True) -> list[ModuleType]:
    """The peer modules whose client is installed (none when ``enabled`` is false)."""
    if not enabled:
        return []
    out = []
    for name in PEERS:
        try:
            out.append(importlib.import_module(name))
        except ImportError as exc:
            print(
                f"{name.rsplit('_', 1)[-1]}: not installed here ({exc}); not in the table"
                " (`make bench` runs it in .venv-bench on Python 3.13)",
                file=sys.stderr,
            )
    return out
