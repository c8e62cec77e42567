"""Slow half of ``tests/report/test_html.py``: the figures embedded in the page (drawn by
``conftest.drawn``) and the sorting in a real headless browser."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from test_html import (
    BROWSER,
    NO_BROWSER,
    Rows,
    column,
    page,  # noqa: F401 (a fixture)
    parsed,
    self_contained,
)


def test_page_embeds_every_figure_as_data(drawn) -> None:
    out = drawn[2]
    illustrated = (out / "leaderboard.html").read_text(encoding="utf-8")
    assert self_contained(illustrated)
    images = re.findall(r'<img [^>]*src="([^"]+)"', illustrated)
    figures = [f for f in json.loads((out / "figures.json").read_text()) if f["file"]]
    assert len(images) == len(figures) > 0
    assert all(src.startswith("data:image/png;base64,") for src in images)


def sorted_by_browser(page: Path, query: str, tmp_path: Path) -> Rows:
    """The DOM after Chromium opened the page with ``query`` (the page clicks that header)."""
    result = subprocess.run(
        [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
         (page / "leaderboard.html").as_uri() + query],
        capture_output=True, text=True, timeout=120, check=True)
    return parsed(result.stdout)


@pytest.mark.skipif(BROWSER is None, reason=NO_BROWSER)
@pytest.mark.parametrize(("query", "key", "descending"), [
    ("?sort=toy_ece", "toy_ece", False),  # ↓: the first click sorts ascending
    ("?sort=toy_auroc", "toy_auroc", True),  # ↑: descending
    ("?sort=toy_brier&dir=desc", "toy_brier", True),
    ("?sort=method", "method", True),  # text sorts too
])
def test_browser_sorts_each_block_by_the_clicked_column(page: Path, tmp_path: Path, query: str,
                                                         key: str, descending: bool) -> None:
    original = parsed((page / "leaderboard.html").read_text(encoding="utf-8"))
    rows = sorted_by_browser(page, query, tmp_path)
    assert len(rows.blocks) == len(original.blocks)
    numeric = key != "method"
    changed = False
    for block, before in zip(column(rows, key), column(original, key), strict=True):
        assert sorted(block, key=str) == sorted(before, key=str)  # rows kept in their block
        values = [float(v) for v in block] if numeric else block
        assert values == sorted(values, reverse=descending), (query, values)
        changed |= block != before
    assert changed  # the fixture's order is not already the sorted one
