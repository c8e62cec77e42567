"""``leaderboard.html``: self-contained, intervals shown, sorted by a real headless browser."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from test_report import read_csv, report, write_runs

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
BROWSER = next((found for name in BROWSERS if (found := shutil.which(name))), None)
NO_BROWSER = ("no headless browser installed (Debian: apt-get install -y chromium) to sort "
              "the page in")


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report of two models' runs, without figures: its tables are what the browser sorts;
    the figures on a page are checked on the report ``conftest.drawn`` draws."""
    root = write_runs(tmp_path_factory.mktemp("html") / "runs")
    out = tmp_path_factory.mktemp("out")
    report(root, out)
    return out


class Rows(HTMLParser):
    """Per ``<tbody>`` of the leaderboard: its rows' cells as (text, data-value)."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks: list[list[list[tuple[str, str | None]]]] = []
        self.keys: list[str] = []
        self._in, self._cell = False, None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        attrs = dict(attrs)
        if tag == "table":
            self._in = attrs.get("id") == "leaderboard"
        elif not self._in:
            return
        elif tag == "th" and "data-key" in attrs:
            self.keys.append(attrs["data-key"])
        elif tag == "tbody":
            self.blocks.append([])
        elif tag == "tr" and attrs.get("class") == "row":
            self.blocks[-1].append([])
        elif tag == "td":
            self._cell = ["", attrs.get("data-value")]

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell[0] += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._cell is not None:
            self.blocks[-1][-1].append(tuple(self._cell))
            self._cell = None
        elif tag == "table":
            self._in = False


def parsed(text: str) -> Rows:
    rows = Rows()
    rows.feed(text)
    return rows


def column(rows: Rows, key: str) -> list[list[str | None]]:
    at = rows.keys.index(key)
    return [[row[at][1] for row in block] for block in rows.blocks]


def test_page_is_self_contained_with_intervals_and_figures(page: Path, drawn) -> None:
    text = (page / "leaderboard.html").read_text(encoding="utf-8")
    with_figures = drawn[2]
    illustrated = (with_figures / "leaderboard.html").read_text(encoding="utf-8")
    for html in (text, illustrated):
        assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", html)  # nothing fetched
        assert "<link" not in html and "@import" not in html
    images = re.findall(r'<img [^>]*src="([^"]+)"', illustrated)
    figures = [f for f in json.loads((with_figures / "figures.json").read_text()) if f["file"]]
    assert len(images) == len(figures) > 0
    assert all(src.startswith("data:image/png;base64,") for src in images)
    rows = parsed(text)
    csv_rows = read_csv(page / "leaderboard.csv")
    assert rows.keys == list(csv_rows[0])[:-1]  # the CSV's columns, less its "best"
    assert [len(block) for block in rows.blocks] == [6, 6]  # a tbody per block: model-a, -b
    intervals = {(r["model"], r["benchmark"], r["method"], r["score"]): r
                 for r in read_csv(page / "intervals.csv")}
    at = rows.keys.index("toy_ece")
    first = rows.blocks[0][0]
    interval = intervals[(first[0][0], "toy", first[1][0], "ece")]
    assert first[at][0].endswith(f"{float(interval['ci_low']):.2f}–"
                                 f"{float(interval['ci_high']):.2f}")


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
