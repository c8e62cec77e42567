"""Twitter URL Corpus (the paper's "PPDB"): its own TSV format, n==3 pairs dropped.

Each line: sentence1 TAB sentence2 TAB (n,6) TAB url, where n of 6 annotators judged the pair a
paraphrase: n >= 4 is a paraphrase (label 0), n <= 2 is not (label 1), n == 3 is discarded.

The corpus annotates some pairs more than once (one line per URL): copies that agree are one
document (``dataset`` keeps one); a pair whose copies disagree (61 pairs of the test
file, e.g. (4,6) and (1,6)) has no gold label, so all its lines are dropped, with one warning.
"""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from calidist_tasks.data.documents import read_rows, read_text, split_lines

log = logging.getLogger(__name__)
VOTES = re.compile(r"^\((\d),\s*(\d)\)$")
SHOWN_PAIRS = 5  # disagreeing pairs named in the warning


def read_file(path: Path) -> list[tuple[str, dict[str, Any]]]:
    if path.suffix.lower() != ".tsv":
        return read_rows(path)  # a Hub-schema export (jsonl, csv, ...)
    if not path.is_file():
        raise FileNotFoundError(f"data file not found: {path}")
    rows = []
    for number, line in enumerate(split_lines(read_text(path)), start=1):
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
    return _without_disagreeing_copies(path, rows)


def _without_disagreeing_copies(path: Path, rows: list[tuple[str, dict[str, Any]]]
                                ) -> list[tuple[str, dict[str, Any]]]:
    """The rows but those of a pair whose copies have different labels (no gold label)."""
    labels: dict[tuple[str, str], set[int]] = defaultdict(set)
    for _, row in rows:
        try:
            label = _label(row["votes"])
        except ValueError:  # process_row refuses it, naming the line
            continue
        if label is not None:
            labels[row["sentence1"], row["sentence2"]].add(label)
    disagreeing = {pair for pair, seen in labels.items() if len(seen) > 1}
    if not disagreeing:
        return rows
    dropped = [where for where, row in rows if (row["sentence1"], row["sentence2"]) in disagreeing]
    log.warning("ppdb %s: %d sentence pair(s) annotated more than once with different labels "
                "have no gold label; their %d line(s) are dropped: %s%s", path.name,
                len(disagreeing), len(dropped), ", ".join(dropped[:SHOWN_PAIRS * 2]),
                " ..." if len(dropped) > SHOWN_PAIRS * 2 else "")
    return [(where, row) for where, row in rows
            if (row["sentence1"], row["sentence2"]) not in disagreeing]


def _label(votes: Any) -> int | None:
    """0 (paraphrase) for (n,6) with n >= 4, 1 for n <= 2, None for n == 3 (discarded)."""
    match = VOTES.match(str(votes))
    if not match or int(match.group(2)) != 6 or int(match.group(1)) > 6:
        raise ValueError(f"field 'votes' must look like (n,6) with 0 <= n <= 6, got {votes!r}")
    n = int(match.group(1))
    return None if n == 3 else 0 if n >= 4 else 1


def process_row(row: dict[str, Any]) -> dict[str, Any] | None:
    if "label" in row:  # already in the task's schema
        return row
    label = _label(row.get("votes", ""))
    if label is None:
        return None
    return {"sentence1": row["sentence1"], "sentence2": row["sentence2"], "label": label}
