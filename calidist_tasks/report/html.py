"""The leaderboard as one self-contained HTML page: sortable, with intervals and the figures.

Nothing is fetched when the page is viewed (inline CSS and script, figures as ``data:`` URIs), so
``leaderboard.html`` can be mailed or opened from a CI artifact. Each block (model and run
settings, ``report.identity``) is its own ``<tbody>``: clicking a column header sorts the rows
within every block by that column (again: the other way), so that rows are never compared across
blocks. ``leaderboard.html?sort=<column key>&dir=asc|desc`` opens it sorted (the column keys are
``leaderboard.csv``'s, e.g. ``ppdb_ece``).
"""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from calidist_tasks.report.tables import FROM_RESULTS, UNREADABLE, Table

Interval = tuple[float, float]

STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}
th,td{padding:.25em .5em;border-bottom:1px solid #ddd;vertical-align:top}
thead th{position:sticky;top:0;background:#f4f4f4;cursor:pointer;white-space:nowrap}
thead th.sorted-asc::after{content:" \\25B2"}thead th.sorted-desc::after{content:" \\25BC"}
#leaderboard td{white-space:nowrap}td.num{text-align:right}td.best{font-weight:bold}
tr.block th{text-align:left;background:#eef3fb;cursor:default}
small{color:#666;display:block}figure{display:inline-block;margin:.5em;max-width:46%}
figure img{max-width:100%}figcaption{font-size:12px;color:#444}
"""

# Sorts every block's rows by the clicked column; missing values ("–") always last.
SCRIPT = """
function sortBy(th, dir) {
  const table = th.closest('table'), col = th.cellIndex;
  dir = dir || (th.classList.contains('sorted-asc') ? 'desc'
                : th.classList.contains('sorted-desc') ? 'asc' : th.dataset.first);
  table.querySelectorAll('thead th').forEach(h => h.classList.remove('sorted-asc', 'sorted-desc'));
  th.classList.add('sorted-' + dir);
  const sign = dir === 'asc' ? 1 : -1;
  table.querySelectorAll('tbody').forEach(body => {
    const rows = Array.from(body.querySelectorAll('tr.row'));
    const key = r => r.cells[col].dataset.value;
    rows.sort((a, b) => {
      const x = key(a), y = key(b);
      if (x === undefined || y === undefined) return (x === undefined) - (y === undefined);
      const nx = Number(x), ny = Number(y);
      return sign * (isNaN(nx) || isNaN(ny) ? x.localeCompare(y) : nx - ny);
    });
    rows.forEach(r => body.appendChild(r));
  });
}
document.querySelectorAll('thead th').forEach(th => th.addEventListener('click', () => sortBy(th)));
const asked = new URLSearchParams(location.search);
if (asked.get('sort')) {
  const th = document.querySelector(`thead th[data-key="${CSS.escape(asked.get('sort'))}"]`);
  if (th) { if (asked.get('dir')) sortBy(th, asked.get('dir')); else th.click(); }
}
"""


def _method(label: str) -> str:
    """The method's name without the leaderboard's flags (as the intervals table names it)."""
    return label.removesuffix(f" {UNREADABLE}").removesuffix(f" {FROM_RESULTS}")


def interval_lookup(long: Table | None) -> dict[tuple[str, str, str, str], Interval]:
    """(block, benchmark, method, score) -> 95% interval x100, from ``tables.intervals``' long
    table (None: no bootstrap was run)."""
    if long is None:
        return {}
    at = {key: long.columns.index(key) for key in ("model", "benchmark", "method", "score",
                                                   "ci_low", "ci_high")}
    return {(row[at["model"]], row[at["benchmark"]], _method(row[at["method"]]),
             row[at["score"]]): (row[at["ci_low"]], row[at["ci_high"]]) for row in long.rows}


def _cell(board: Table, i: int, j: int, found: Mapping[tuple[str, str, str, str], Interval]
          ) -> str:
    value, key = board.rows[i][j], (board.keys or board.columns)[j]
    if not isinstance(value, float):
        text = html.escape(board.shown(value, str))
        data = "" if value is None else f' data-value="{text}"'
        return f"<td{data}>{text}</td>"
    classes = "num best" if (i, j) in board.marks else "num"
    benchmark, _, score = key.rpartition("_")  # "ppdb_ece"; no interval for the others
    interval = found.get((board.rows[i][0], benchmark, _method(board.rows[i][1]), score))
    shown = f"{value:.{board.digits}f}"
    if interval is not None:
        shown += f"<small>{interval[0]:.{board.digits}f}–{interval[1]:.{board.digits}f}</small>"
    return f'<td class="{classes}" data-value="{value!r}">{shown}</td>'


def _image(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def html_leaderboard(board: Table, legend: str, blocks: Table, long: Table | None,
                     figures: Sequence[Mapping[str, Any]], out: Path) -> str:
    """The page: the block legend (``identity.identity_table``), the leaderboard ``board``
    (``tables.leaderboard``: rows per block in order, ``board.keys`` as column keys) with each
    score's 95% interval from ``long`` under it, ``legend`` as its caption, and the figures
    (``Report.figures``, files relative to ``out``) embedded.

    Columns whose title ends in ↓ sort ascending first, the others descending."""
    keys = board.keys or board.columns
    head = "".join(
        f'<th data-key="{html.escape(key)}" data-first="{"asc" if title.endswith("↓") else "desc"}"'
        f' title="click to sort">{html.escape(title)}</th>'
        for key, title in zip(keys, board.columns, strict=True))
    found = interval_lookup(long)
    blocks_rows: dict[str, list[str]] = {}  # the board's rows are in blocks already
    for i, row in enumerate(board.rows):
        blocks_rows.setdefault(row[0], []).append(
            '<tr class="row">' + "".join(_cell(board, i, j, found) for j in range(len(row)))
            + "</tr>")
    bodies = [f'<tbody><tr class="block"><th colspan="{len(keys)}">{html.escape(name)}</th>'
              f"</tr>{''.join(rows)}</tbody>" for name, rows in blocks_rows.items()]
    legend_rows = "".join("<tr>" + "".join(f"<td>{html.escape(blocks.shown(v, str))}</td>"
                                           for v in row) + "</tr>" for row in blocks.rows)
    pictures = "".join(
        f'<figure><img alt="{html.escape(f["title"])}" src="{_image(out / f["file"])}">'
        f'<figcaption>{html.escape(f["title"])}</figcaption></figure>' for f in figures)
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        "<title>calidist leaderboard</title>", f"<style>{STYLE}</style></head><body>",
        "<h1>calidist leaderboard</h1>",
        "<h2>Blocks</h2><table><thead><tr>"
        + "".join(f"<th>{html.escape(c)}</th>" for c in blocks.columns)
        + f"</tr></thead><tbody>{legend_rows}</tbody></table>",
        "<h2>Leaderboard</h2>", f"<p>{html.escape(legend)} Under each score: its 95% "
        "bootstrap interval. Click a column header to sort the rows of every block.</p>",
        f'<table id="leaderboard"><thead><tr>{head}</tr></thead>{"".join(bodies)}</table>',
        *(["<h2>Figures</h2>", pictures] if figures else []),
        f"<script>{SCRIPT}</script>", "</body></html>", ""])
