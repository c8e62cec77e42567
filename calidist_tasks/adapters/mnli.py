"""MNLI (GLUE): reorder the labels to the paper's option order.

GLUE's ``nyu-mll/glue`` mnli rows (and local files in that schema) label a pair 0 entailment,
1 neutral, 2 contradiction. The paper lists MNLI's options as Entailment, Contradiction, Neutral
(section "Experiment Setup"; Appendix E's example names contradiction as option (b)), so the
options are a. entailment, b. contradiction, c. neutral and the integer label follows them.
"""

from __future__ import annotations

from typing import Any

# GLUE label -> option index (a. entailment, b. contradiction, c. neutral)
GLUE_TO_OPTION = {0: 0, 1: 2, 2: 1}


def process_row(row: dict[str, Any]) -> dict[str, Any]:
    """Map GLUE's label to the option index; any other value is left for the shared label checks
    (missing, not an integer, outside 0..2), which name the file, row and field."""
    label = row.get("label")
    if isinstance(label, str) and label.strip() in ("0", "1", "2"):  # a CSV's "1"
        label = int(label)
    if isinstance(label, int) and not isinstance(label, bool) and label in GLUE_TO_OPTION:
        return {**row, "label": GLUE_TO_OPTION[label]}
    return row
