"""Hypothesis profiles: ``ci``, what ``make test`` runs (a tenth of each property's
examples, at least 25), and ``thorough``, what ``make test-thorough`` runs (each
property's full count: 100, or what the property asks for). ``HYPOTHESIS_PROFILE``
picks one; ``ci`` by default. A property asks for its thorough count through
``examples(n)``. ``fuzz`` is the profile of ``make fuzz`` (tests/fuzz.py): the counts of
``ci`` (HypoFuzz runs until stopped), the example database the directory that
``FUZZ_DATABASE`` names."""

from __future__ import annotations

import os

from hypothesis import settings
from hypothesis.database import DirectoryBasedExampleDatabase

__all__ = ["PROFILE", "examples"]

PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
if PROFILE not in ("ci", "thorough", "fuzz"):
    raise ValueError(f"HYPOTHESIS_PROFILE={PROFILE!r}: say ci, thorough or fuzz")

# a loaded machine may hold an example up: no deadline in either
settings.register_profile("ci", max_examples=25, deadline=None)
settings.register_profile("thorough", max_examples=100, deadline=None)
if PROFILE == "fuzz":
    settings.register_profile(
        "fuzz", deadline=None, database=DirectoryBasedExampleDatabase(os.environ["FUZZ_DATABASE"])
    )
settings.load_profile(PROFILE)


def examples(n: int) -> int:
    """The examples of a property whose thorough count is ``n``: all of them under
    ``thorough``, a tenth (at least 25) under ``ci``."""
    return n if PROFILE == "thorough" else max(n // 10, 25)
