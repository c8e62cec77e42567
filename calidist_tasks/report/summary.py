"""A calibration table from lm-eval's results JSON: each task's methods (the registry's rows,
``calidist_tasks.registry``), calibrated beside vanilla."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from calidist_tasks.registry import ECE_BINNING, SUMMARY, methods_of, scores_shown, task_variant
from calidist_tasks.scoring.records import metric_name

SCORES = tuple(scores_shown(SUMMARY))


def _metric(values: Mapping[str, Any], name: str) -> float | None:
    value = values.get(f"{name},none")
    return float(value) if isinstance(value, (int, float)) else None


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:6.2f}"


def _of_reading(values: Mapping[str, Any], name: str, reading: str) -> float | None:
    """The task's ``name`` for the reading a row is fitted on ("parse_fail_rate_logprob" for a
    log-prob row of a reasoned task), else the task's own."""
    found = _metric(values, metric_name(name, reading))
    return found if found is not None else _metric(values, name)


def calibration_table(results: Mapping[str, Any]) -> str:
    """Markdown rows: task, method, the method's accuracy, ECE / adaptive ECE / Brier / AUROC
    and the share of unreadable replies (x100; "-" for tasks that score the option letters).

    A method that changes the predictions (vector scaling) shows its own accuracy."""
    lines = [
        "| task | confidence | acc | ECE | ECE (adaptive) | Brier | AUROC | unreadable |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    configs = results.get("configs", {})
    for task, values in sorted(results.get("results", {}).items()):
        variant = task_variant(task, configs.get(task))[1]
        for method in methods_of(variant) if variant else []:
            if _metric(values, method.metric("ece")) is None:
                continue
            acc = _metric(values, method.metric("acc"))
            if acc is None:
                acc = _of_reading(values, "acc", method.reading)
            cells = [_cell(acc), *(_cell(_metric(values, method.metric(s))) for s in SCORES),
                     _cell(_of_reading(values, "parse_fail_rate", method.reading))]
            lines.append(f"| {task} | {method.label} | " + " | ".join(cells) + " |")
    return "\n".join([*lines, "", ECE_BINNING + "."])


def latest_results(output_path: str | Path) -> dict[str, Any]:
    """The newest ``results_*.json`` under an lm-eval ``--output_path`` folder."""
    found = sorted(Path(output_path).rglob("results_*.json"), key=lambda p: p.stat().st_mtime)
    if not found:
        raise FileNotFoundError(f"no results_*.json under {output_path}")
    return json.loads(found[-1].read_text(encoding="utf-8"))
