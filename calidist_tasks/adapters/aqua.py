"""AQuA-RAT: options "A)…" -> option texts, "correct": "A".."E" -> index.

Rows (original release and hub ``deepmind/aqua_rat``, config ``raw``): ``{"question", "options":
["A)…", …, "E)…"], "rationale", "correct"}``.
"""

from __future__ import annotations

import re
from typing import Any

OPTION = re.compile(r"^\s*([A-Z])\s*\)\s*(.*)$", re.DOTALL)


def process_row(row: dict[str, Any]) -> dict[str, Any]:
    options = row.get("options")
    if not isinstance(options, list) or len(options) < 2:
        raise ValueError(f"field 'options' must be a list like ['A)…', 'B)…'], got {options!r}")
    letters, texts = [], []
    for option in options:
        match = OPTION.match(str(option))
        if not match:
            raise ValueError(f"field 'options': {option!r} does not start with a letter and ')'")
        letters.append(match.group(1))
        texts.append(match.group(2).strip())
    correct = row.get("correct")
    if not isinstance(correct, str) or correct.strip() not in letters:
        raise ValueError(f"field 'correct' must be one of {letters}, got {correct!r}")
    return {"question": row.get("question"), "options": texts,
            "label": letters.index(correct.strip())}
