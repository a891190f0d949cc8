"""The documentation site builds with ``mkdocs build --strict``.

Strict mode turns every warning into a failure: a nav entry or link to a page that
does not exist, a snippet (``--8<--``) naming a missing file, a docstring that
mkdocstrings cannot parse, an ``:::`` directive naming an object that is not there.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _nav_pages(nav: object) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [page for item in nav for page in _nav_pages(item)]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in _nav_pages(value)]
    raise AssertionError(f"unexpected nav entry {nav!r}")


def test_mkdocs_build_strict(tmp_path: Path) -> None:
    site = tmp_path / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,  # snippet paths are relative to the repository root
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}"
    # The pages were made, the API reference holds the generated docs, and an
    # included example script made it into its page.
    assert (site / "index.html").is_file()
    reference = (site / "reference" / "consumer" / "index.html").read_text()
    assert "ack_next" in reference and "fetch_no_wait" in reference
    kv_page = (site / "kv" / "index.html").read_text()
    assert "KeyValueOp" in kv_page and "--8&lt;--" not in kv_page and "--8<--" not in kv_page


def test_nav_names_existing_pages_only() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    pages = _nav_pages(config["nav"])
    missing = [p for p in pages if not (ROOT / "docs" / p).is_file()]
    assert not missing, f"nav names pages that do not exist: {missing}"
    orphans = sorted(
        str(p.relative_to(ROOT / "docs"))
        for p in (ROOT / "docs").rglob("*.md")
        if str(p.relative_to(ROOT / "docs")) not in pages
    )
    assert not orphans, f"pages left out of the nav: {orphans}"
