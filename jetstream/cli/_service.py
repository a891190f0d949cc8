"""``service ls|info|stats``: the services (ADR-32) that answer on ``$SRV``, any client's.

Discovery gathers the answers that come within ``--wait`` seconds (one answer when an
instance id is given).
"""

from __future__ import annotations

from typing import Any

import msgspec

from .. import service as services
from ._session import Session
from ._util import CliError

__all__ = ["cmd_service_info", "cmd_service_ls", "cmd_service_stats"]


def _doc(value: msgspec.Struct) -> Any:
    return msgspec.to_builtins(value)


def _ms(ns: int) -> str:
    return f"{ns / 1e6:.3f} ms"


async def cmd_service_ls(s: Session) -> int:
    a, out = s.args, s.out
    found = await services.info(s.nc, a.name, timeout=a.wait)
    found.sort(key=lambda i: (i.name, i.version, i.id))
    if out.json:
        out.json_doc([_doc(i) for i in found])
        return 0
    rows = [(i.name, i.version, i.id, len(i.endpoints), i.description) for i in found]
    title = f"Services ({len(rows)})" if a.name is None else f"Services {a.name} ({len(rows)})"
    out.table(title, ["Name", "Version", "Id", "Endpoints", "Description"], rows, right=(3,))
    return 0


def _nothing(s: Session) -> CliError:
    who = s.args.name + (f" {s.args.id}" if s.args.id else "")
    return CliError(f"no service {who} answered within {s.args.wait:g}s")


async def cmd_service_info(s: Session) -> int:
    a, out = s.args, s.out
    found = await services.info(s.nc, a.name, a.id, timeout=a.wait)
    if not found:
        raise _nothing(s)
    if out.json:
        out.json_doc([_doc(i) for i in found])
        return 0
    for i in sorted(found, key=lambda i: i.id):
        meta = ", ".join(f"{k}={v}" for k, v in (i.metadata or {}).items())
        out.view(
            f"Service {i.name} {i.version} ({i.id})",
            [("Service", [("Description", i.description), ("Metadata", meta)])],
        )
        out.line()
        rows = [(e.name, e.subject, e.queue_group) for e in i.endpoints]
        out.table(None, ["Endpoint", "Subject", "Queue group"], rows)
    return 0


async def cmd_service_stats(s: Session) -> int:
    a, out = s.args, s.out
    found = await services.stats(s.nc, a.name, a.id, timeout=a.wait)
    if not found:
        raise _nothing(s)
    if out.json:
        out.json_doc([_doc(st) for st in found])
        return 0
    rows = [
        (
            st.id,
            e.name,
            e.num_requests,
            e.num_errors,
            _ms(e.average_processing_time),
            e.last_error,
        )
        for st in sorted(found, key=lambda st: st.id)
        for e in st.endpoints
    ]
    out.table(
        f"Stats of {a.name} ({len(found)} instances)",
        ["Id", "Endpoint", "Requests", "Errors", "Average", "Last error"],
        rows,
        right=(2, 3, 4),
    )
    return 0
