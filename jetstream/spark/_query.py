"""Which streaming query a foreachBatch batch belongs to, found through the API that a
classic session and a Spark Connect session share (no ``sparkContext``, no JVM).

A query's id is stored in its checkpoint, so it stays the same when the query restarts
from there: ids made from it and from the batch id repeat exactly when Spark writes a
batch again. Spark hands the foreachBatch function a DataFrame of a session cloned from
the one that started the query (under Spark Connect the function runs on the server, in a
process of its own per query, that also holds the starting session). The query is then
the one active query of the other live sessions of the same kind. None, or several at
once, and the batch cannot be told apart: the caller refuses rather than guess.
"""

from __future__ import annotations

import gc
from typing import Any

from ._common import is_connect

__all__ = ["BATCH_ID_PROPERTY", "QUERY_ID_PROPERTY", "active_query_ids", "task_micro_batch"]

#: the local properties Spark sets on the jobs (and the thread) of a query's micro-batch
QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"


def task_micro_batch(ctx: Any, writer: str, purpose: str) -> tuple[str, int]:
    """The query id and micro-batch id of the Spark task ``ctx`` (a ``TaskContext``, or
    None), or ``SparkConfigError`` naming the ``writer`` and what the ids were for."""
    from ._common import SparkConfigError

    query = ctx.getLocalProperty(QUERY_ID_PROPERTY) if ctx is not None else None
    batch = ctx.getLocalProperty(BATCH_ID_PROPERTY) if ctx is not None else None
    if not query or batch is None:
        raise SparkConfigError(
            f"the {writer} stream writer runs outside a streaming query's micro-batch: "
            f"no query id or batch id {purpose}"
        )
    return str(query), int(batch)


def _same(a: Any, b: Any, connect: bool) -> bool:
    if connect:
        return bool(getattr(a, "session_id", None) == getattr(b, "session_id", object()))
    return a is b


def active_query_ids(df: Any) -> list[str]:
    """The ids of the streaming queries active in the live sessions of this process other
    than ``df``'s own (which, inside foreachBatch, is the batch's cloned session)."""
    own = df.sparkSession
    kind = type(own)
    connect = is_connect(own)
    sessions: list[Any] = []
    active = kind.getActiveSession()
    if active is not None:
        sessions.append(active)
    # the starting session of a Connect query is held by the foreachBatch worker, not
    # made active: look for every live session of the kind
    sessions += [o for o in gc.get_objects() if type(o) is kind]
    ids: list[str] = []
    seen: list[Any] = []
    for session in sessions:
        if _same(session, own, connect) or any(_same(session, s, connect) for s in seen):
            continue
        seen.append(session)
        try:
            queries = session.streams.active
        except Exception:  # a stopped session, a closed channel: it runs nothing
            continue
        for q in queries:
            if q.id not in ids:
                ids.append(q.id)
    return ids
