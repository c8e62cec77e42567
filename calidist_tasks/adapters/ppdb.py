"""Twitter URL Corpus (the paper's "PPDB"): its own TSV format, n==3 pairs dropped.

Each line: sentence1 TAB sentence2 TAB (n,6) TAB url, where n of 6 annotators judged the pair a
paraphrase: n >= 4 is a paraphrase (label 0), n <= 2 is not (label 1), n == 3 is discarded.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from calidist_tasks.dataset import read_rows, read_text

VOTES = re.compile(r"^\((\d),\s*(\d)\)$")


def read_file(path: Path) -> list[tuple[str, dict[str, Any]]]:
    if path.suffix.lower() != ".tsv":
        return read_rows(path)  # a Hub-schema export (jsonl, csv, ...)
    if not path.is_file():
        raise FileNotFoundError(f"data file not found: {path}")
    rows = []
    for number, line in enumerate(read_text(path).split("\n"), start=1):
        line = line.removesuffix("\r")
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) < 3:
            raise ValueError(
                f"{path.name}:{number}: expected sentence1<TAB>sentence2<TAB>(n,6)[<TAB>url], "
                f"got {len(parts)} column(s)"
            )
        rows.append((f"{path.name}:{number}",
                     {"sentence1": parts[0].strip(), "sentence2": parts[1].strip(),
                      "votes": parts[2].strip()}))
    return rows


def process_row(row: dict[str, Any]) -> dict[str, Any] | None:
    if "label" in row:  # already in the task's schema
        return row
    match = VOTES.match(str(row.get("votes", "")))
    if not match or int(match.group(2)) != 6 or int(match.group(1)) > 6:
        raise ValueError(
            f"field 'votes' must look like (n,6) with 0 <= n <= 6, got {row.get('votes')!r}"
        )
    votes = int(match.group(1))
    if votes == 3:
        return None
    return {"sentence1": row["sentence1"], "sentence2": row["sentence2"],
            "label": 0 if votes >= 4 else 1}
