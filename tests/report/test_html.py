"""``leaderboard.html``: self-contained, intervals shown, sorted by a real headless browser."""

from __future__ import annotations

import re
import shutil
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


def self_contained(html: str) -> bool:
    """Nothing on the page is fetched: no remote source, no stylesheet link, no import."""
    return not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", html) \
        and "<link" not in html and "@import" not in html


def test_page_is_self_contained_with_intervals(page: Path) -> None:
    text = (page / "leaderboard.html").read_text(encoding="utf-8")
    assert self_contained(text)
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
