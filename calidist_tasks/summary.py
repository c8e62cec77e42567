"""A calibration table from lm-eval's results JSON: calibrated beside vanilla, per task."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from calidist_tasks import records
from calidist_tasks.aggregation import ECE_BINNING
from calidist_tasks.records import metric_name

SCORES = ("ece", "ece_adaptive", "brier", "auroc")
# the rows after vanilla and CaliDist's: confidence (its metric suffix) -> label
BASELINES = {records.TEMPERATURE_SCALING: "temperature scaling", records.PLATT: "Platt",
             records.ISOTONIC: "isotonic", records.VECTOR_SCALING: "vector scaling",
             records.CONSISTENCY: "self-consistency", records.ENTROPY: "entropy consistency",
             records.FSD: "FSD consistency", records.SPUQ: "SPUQ"}

# a reasoned task's second reading of the same replies (calidist_tasks.reasoned): its rows
READINGS = (("vanilla", records.VANILLA), ("CaliDist (calibrated)", records.CALIDIST),
            ("Platt", records.PLATT), ("isotonic", records.ISOTONIC))


def _metric(values: Mapping[str, Any], name: str) -> float | None:
    value = values.get(f"{name},none")
    return float(value) if isinstance(value, (int, float)) else None


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:6.2f}"


def calibration_table(results: Mapping[str, Any]) -> str:
    """Markdown rows: task, method, ECE / adaptive ECE / Brier / AUROC (x100), accuracy."""
    lines = [
        "| task | confidence | acc | ECE | ECE (adaptive) | Brier | AUROC |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for task, values in sorted(results.get("results", {}).items()):
        acc = _metric(values, "acc")
        rows = [("vanilla", records.VANILLA), ("CaliDist (calibrated)", records.CALIDIST),
                *((label, key) for key, label in BASELINES.items()),
                *((f"{label} (verbalized reading)", f"{key}_{records.VERBALIZED}".lstrip("_"))
                  for label, key in READINGS)]
        for label, confidence in rows:
            if _metric(values, metric_name("ece", confidence)) is None:
                continue
            cells = [_cell(_metric(values, metric_name(s, confidence))) for s in SCORES]
            lines.append(f"| {task} | {label} | {_cell(acc)} | " + " | ".join(cells) + " |")
    return "\n".join([*lines, "", ECE_BINNING + "."])


def latest_results(output_path: str | Path) -> dict[str, Any]:
    """The newest ``results_*.json`` under an lm-eval ``--output_path`` folder."""
    found = sorted(Path(output_path).rglob("results_*.json"), key=lambda p: p.stat().st_mtime)
    if not found:
        raise FileNotFoundError(f"no results_*.json under {output_path}")
    return json.loads(found[-1].read_text(encoding="utf-8"))
