"""The nemesis run's report: a short text of a checker ``Result``.

Operations by kind and outcome, the readers' deliveries, the faults injected, the
figures against their bounds, and the anomalies, each with the history lines that show
it (the first few of each kind; the rest counted), then the seed to replay the run.
"""

from __future__ import annotations

from tests.nemesis.checker import SHOW, Result

__all__ = ["markdown_table", "report"]

OPS = ("publish", "publish_async", "create", "update", "get", "delete", "request")
READERS = ("pull", "push", "ordered", "ordered-push")


def _ops_rows(r: Result) -> list[tuple[str, int, int, int]]:
    return [(f, r.ops[(f, "ok")], r.ops[(f, "fail")], r.ops[(f, "info")]) for f in OPS]


def report(r: Result, history: str = "") -> str:
    """The report of ``r`` (``history``: the file it was read from, for the text)."""
    out: list[str] = []
    verdict = "OK: no anomaly" if r.ok else f"FAILED: {len(r.anomalies)} anomal(ies)"
    gets = ", direct gets" if r.direct_gets else ""
    out.append(f"nemesis run, seed {r.seed}, {r.seconds:g} s{gets}: {verdict}")
    if history:
        out.append(f"history: {history}")
    out.append("")
    out.append(f"{'operation':15s} {'ok':>8s} {'fail':>8s} {'unknown':>8s}")
    for f, ok, fail, info in _ops_rows(r):
        out.append(f"{f:15s} {ok:8d} {fail:8d} {info:8d}")
    out.append("")
    fig = r.figures
    if "stored" in fig:
        lost = fig.get("lost") or {}
        out.append(
            f"stream: {fig['stored']} stored, {fig['acked']} acknowledged, lost "
            f"{sum(lost.values())} {lost or ''}, unknown outcome {fig['unknown']} "
            f"({fig['unknown stored']} stored)"
        )
    out += [
        f"reader {p:13s} {fig[f'{p} deliveries']:7d} deliveries, {fig[f'{p} redelivered']} again"
        for p in READERS
        if f"{p} deliveries" in fig
    ]
    if "kv" in fig:
        for key, s in fig["kv"].items():
            out.append(
                f"key {key}: {s['ops']} operations in {s['pieces']} pieces, unknown "
                f"outcomes resolved by the watch {s['resolved']}, left unknown {s['unknown']}"
            )
        out.append(f"watch: {fig.get('watch entries', 0)} entries")
    faults = ", ".join(
        f"{k} {v[0]}" + (f" ({v[1]} failed)" if v[1] else "") for k, v in r.faults.items()
    )
    out.append(f"faults: {faults or 'none'}")
    b = r.bounds
    if "overrun" in fig:
        out.append(
            f"client: deadline overrun {fig['overrun']:.3f} s (bound {b.overrun:g}), loop "
            f"lag {fig['loop lag'] * 1000:.0f} ms, loop block {fig['loop block'] * 1000:.0f} ms"
            f" (bound {b.block * 1000:g})"
            + (
                f", RSS {fig['rss'][0]:.1f} -> {fig['rss'][1]:.1f} MB (bound +{b.rss_mb:g})"
                if "rss" in fig
                else ""
            )
        )
    if r.anomalies:
        out.append("")
        out.append("anomalies: " + ", ".join(f"{k} {n}" for k, n in r.kinds().items()))
        shown: dict[str, int] = {}
        for a in r.anomalies:
            shown[a.kind] = shown.get(a.kind, 0) + 1
            if shown[a.kind] > SHOW:
                continue
            out.append(f"- [{a.kind}] {a.what}")
            out += [f"    {line}" for line in a.lines[:30]]
    out.append("")
    if r.direct_gets:
        replay = (
            f"python -m tests.nemesis --minutes {r.seconds / 60:g} --seed {r.seed} --direct-gets"
        )
    else:
        replay = f"make nemesis MINUTES={r.seconds / 60:g} SEED={r.seed}"
    out.append(f"replay: {replay}")
    return "\n".join(out)


def markdown_table(r: Result) -> str:
    """The operations table of ``r`` in Markdown, for docs/reliability.md."""
    rows = ["| operation | ok | failed | unknown |", "|---|---:|---:|---:|"]
    rows += [f"| `{f}` | {ok:,} | {fail:,} | {info:,} |" for f, ok, fail, info in _ops_rows(r)]
    return "\n".join(rows)
