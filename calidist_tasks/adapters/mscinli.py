"""MSciNLI: the Hub's jsonl rows carry the relation as a word; map it to the option order.

Rows (hub ``sadat2307/MSciNLI``, also its ``dev.jsonl`` / ``test.jsonl``): ``{"id", "sentence1",
"sentence2", "label": "entailment" | "reasoning" | "contrasting" | "neutral", ...}``. The options
of the paper's Appendix F are listed in the order a. entailment, b. reasoning, c. contrasting,
d. neutral, so that order is the integer label here.
"""

from __future__ import annotations

from typing import Any

LABELS = ("entailment", "reasoning", "contrasting", "neutral")


def process_row(row: dict[str, Any]) -> dict[str, Any]:
    label = row.get("label")
    if label is None or (isinstance(label, str) and not label.strip()):
        raise ValueError("missing label field 'label'")
    # Integers are refused: their order differs between copies of the data, a silent swap.
    if not isinstance(label, str) or label.strip().lower() not in LABELS:
        raise ValueError(f"field 'label' must be one of {', '.join(LABELS)}; got {label!r}")
    return {**row, "label": LABELS.index(label.strip().lower())}
