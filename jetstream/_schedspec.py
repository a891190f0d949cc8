"""The values of a ``Nats-Schedule`` header (ADR-51), checked and written as the server
reads them, with no I/O.

* ``@at <time>``: RFC 3339, read by Go's ``time.Parse(time.RFC3339, ...)``, which takes a
  fraction of a second and any offset. Written here in UTC with a ``Z``, the fraction only
  when there is one (``@at 2009-11-10T23:00:00Z``). A time in the past is sent at once.
* ``@every <duration>``: Go's ``time.ParseDuration``, at least 1 s. Written compactly
  (``1m30s``, ``5m``, ``1.5s``), as the ADR's examples are.
* a cron expression of six fields (seconds minutes hours day-of-month month
  day-of-week), or ``@yearly``, ``@annually``, ``@monthly``, ``@weekly``, ``@daily``,
  ``@midnight``, ``@hourly``. ``cron_problem`` follows the server's parser (robfig/cron's
  rules): ``*`` or ``?``, numbers, ranges ``a-b``, steps ``/n``, lists ``a,b``, the names
  ``jan``-``dec`` and ``sun``-``sat``; and, as the server does, refuses a pattern that
  matches no day within five years (``0 0 0 30 2 *``).
"""

from __future__ import annotations

import datetime as _dt
import re

__all__ = [
    "PREDEFINED",
    "cron_problem",
    "format_at",
    "go_duration",
    "parse_at",
    "parse_go_duration",
]

#: the predefined schedules and the cron expressions they stand for
PREDEFINED = {
    "@yearly": "0 0 0 1 1 *",
    "@annually": "0 0 0 1 1 *",
    "@monthly": "0 0 0 1 * *",
    "@weekly": "0 0 0 * * 0",
    "@daily": "0 0 0 * * *",
    "@midnight": "0 0 0 * * *",
    "@hourly": "0 0 * * * *",
}

_MONTH_NAMES = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_MONTHS = {m: i for i, m in enumerate(_MONTH_NAMES, 1)}
_DAYS = {d: i for i, d in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
#: (name, lowest, highest, names) of the six fields
_FIELDS = (
    ("seconds", 0, 59, None),
    ("minutes", 0, 59, None),
    ("hours", 0, 23, None),
    ("day of month", 1, 31, None),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 6, _DAYS),
)
_INT = re.compile(r"[+-]?[0-9]+")
#: how far ahead the server looks for a matching day before it calls a pattern invalid
_YEARS_AHEAD = 5


def _number(text: str, names: dict[str, int] | None) -> int:
    if names is not None and text.lower() in names:
        return names[text.lower()]
    if not _INT.fullmatch(text):
        raise ValueError(f"{text!r} is not a number" + (" or a name" if names else ""))
    value = int(text)
    if value < 0:
        raise ValueError(f"negative number {value}")
    return value


def _field_values(
    expr: str, lo: int, hi: int, names: dict[str, int] | None
) -> tuple[set[int], bool]:
    """The values one field matches, and whether it is a plain ``*`` (or ``?``), which
    changes how the two day fields combine."""
    values: set[int] = set()
    star = False
    for part in expr.split(","):
        if not part:
            raise ValueError(f"an empty item in {expr!r}")
        range_step = part.split("/")
        if len(range_step) > 2:
            raise ValueError(f"too many slashes in {part!r}")
        bounds = range_step[0].split("-")
        if bounds[0] in ("*", "?") and len(bounds) == 1:
            start, end, whole = lo, hi, True
        else:
            if len(bounds) > 2:
                raise ValueError(f"too many hyphens in {part!r}")
            start = _number(bounds[0], names)
            end = _number(bounds[1], names) if len(bounds) == 2 else start
            whole = False
        step = 1
        if len(range_step) == 2:
            step = _number(range_step[1], None)
            if len(bounds) == 1 and not whole:
                end = hi  # "N/step" means "N-max/step"
        if start < lo:
            raise ValueError(f"{start} is below {lo} in {part!r}")
        if end > hi:
            raise ValueError(f"{end} is above {hi} in {part!r}")
        if start > end:
            raise ValueError(f"the range {part!r} ends before it starts")
        if step == 0:
            raise ValueError(f"a step of 0 in {part!r}")
        star = star or (whole and step == 1)
        values.update(range(start, end + 1, step))
    return values, star


def cron_problem(expr: str, *, today: _dt.date | None = None) -> str | None:
    """What the server would find wrong with the cron expression ``expr``, or None.

    ``today`` is where the search for a matching day starts (default: today, UTC).
    """
    pattern = PREDEFINED.get(expr, expr)
    if pattern.startswith("@"):
        known = ", ".join(PREDEFINED)
        return f"{expr!r} is not a predefined schedule ({known})"
    fields = pattern.split()
    if len(fields) != 6:
        return (
            f"{expr!r} has {len(fields)} field(s); a cron expression has 6: seconds "
            "minutes hours day-of-month month day-of-week"
        )
    matched: list[tuple[set[int], bool]] = []
    for text, (name, lo, hi, names) in zip(fields, _FIELDS, strict=True):
        try:
            matched.append(_field_values(text, lo, hi, names))
        except ValueError as exc:
            return f"{expr!r}: the {name} field {text!r}: {exc}"
    (days, days_star), (months, _), (weekdays, weekdays_star) = matched[3], matched[4], matched[5]
    start = today or _dt.datetime.now(_dt.UTC).date()
    day = start
    while day.year <= start.year + _YEARS_AHEAD:
        if day.month in months:
            in_month = day.day in days
            on_weekday = (day.isoweekday() % 7) in weekdays
            # as cron does: both day fields restricted means either one; else both
            if (
                (in_month and on_weekday)
                if (days_star or weekdays_star)
                else (in_month or on_weekday)
            ):
                return None
        day += _dt.timedelta(days=1)
    return f"{expr!r} matches no day within {_YEARS_AHEAD} years"


def format_at(when: _dt.datetime) -> str:
    """``when`` as the RFC 3339 time of an ``@at`` schedule: UTC, ``Z``, and the fraction
    of a second only when there is one (``2009-11-10T23:00:00Z``, ``...:00.25Z``).

    Raises:
        ValueError: ``when`` is naive (its zone is needed to know the instant).
    """
    if when.tzinfo is None or when.utcoffset() is None:
        raise ValueError(
            f"{when!r} is naive; give a timezone-aware datetime, e.g. "
            "datetime.now(timezone.utc) + timedelta(minutes=5)"
        )
    utc = when.astimezone(_dt.UTC)
    text = utc.strftime("%Y-%m-%dT%H:%M:%S")
    if utc.microsecond:
        text += f".{utc.microsecond:06d}".rstrip("0")
    return text + "Z"


def parse_at(text: str) -> _dt.datetime | None:
    """The time of an ``@at`` value (any RFC 3339 offset), or None when it is not one."""
    try:
        when = _dt.datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo is not None else None


_UNITS = (("h", 3600), ("m", 60))


def go_duration(seconds: float) -> str:
    """A positive duration in the compact form Go's ``time.ParseDuration`` reads:
    ``5m``, ``1m30s``, ``2h``, ``1.5s``, ``250ms``."""
    if seconds <= 0:
        raise ValueError(f"a duration must be positive, not {seconds!r}")
    ns = round(seconds * 1_000_000_000)
    if ns < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("us", 1_000), ("ns", 1)):
            if ns % size == 0:
                return f"{ns // size}{unit}"
    out = ""
    for unit, size in _UNITS:
        whole, ns = divmod(ns, size * 1_000_000_000)
        if whole:
            out += f"{whole}{unit}"
    if ns:
        secs, frac = divmod(ns, 1_000_000_000)
        out += f"{secs}.{frac:09d}".rstrip("0") + "s" if frac else f"{secs}s"
    return out


_GO_PART = re.compile(r"([0-9]*\.?[0-9]+)(ns|us|µs|ms|s|m|h)")
_GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_go_duration(text: str) -> float | None:
    """Seconds of a Go duration (``1m30s``, ``1.5s``), or None when it is not one."""
    pos, total = 0, 0.0
    if not text:
        return None
    while pos < len(text):
        m = _GO_PART.match(text, pos)
        if m is None:
            return None
        total += float(m.group(1)) * _GO_UNITS[m.group(2)]
        pos = m.end()
    return total
