"""A calibration table from lm-eval's results JSON: each task's methods (the registry's rows,
``calidist_tasks.registry``), calibrated beside vanilla."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from calidist_tasks.registry import ECE_BINNING, SUMMARY, methods_of, scores_shown, task_variant

SCORES = tuple(scores_shown(SUMMARY))

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
    configs = results.get("configs", {})
    for task, values in sorted(results.get("results", {}).items()):
        acc = _metric(values, "acc")
        variant = task_variant(task, configs.get(task))[1]
        for method in methods_of(variant) if variant else []:
            if _metric(values, method.metric("ece")) is None:
                continue
            cells = [_cell(_metric(values, method.metric(s))) for s in SCORES]
            lines.append(f"| {task} | {method.label} | {_cell(acc)} | " + " | ".join(cells)
                         + " |")
    return "\n".join([*lines, "", ECE_BINNING + "."])


def latest_results(output_path: str | Path) -> dict[str, Any]:
    """The newest ``results_*.json`` under an lm-eval ``--output_path`` folder."""
    found = sorted(Path(output_path).rglob("results_*.json"), key=lambda p: p.stat().st_mtime)
    if not found:
        raise FileNotFoundError(f"no results_*.json under {output_path}")
    return json.loads(found[-1].read_text(encoding="utf-8"))
