"""Slow half of ``tests/data/test_families.py`` (builds the tiny model or runs lm-eval).

What the module tests: the fast half's docstring."""

from __future__ import annotations

import math
from pathlib import Path

from conftest import run_lm_eval
from test_families import (
    FAMILIES,
    STYLES,
    data_dir,  # noqa: F401 (a fixture)
)

from calidist_tasks.registry import metric_names
from calidist_tasks.scoring.records import hints_of, line_record

SCORES = ("acc", "ece", "ece_adaptive", "brier", "auroc", "mce", "smece", "aurc")


def test_every_family_end_to_end(tiny_model_dir: Path, data_dir: Path) -> None:
    """All 24 classification tasks in one in-process lm-eval run; every metric of the README's
    table, in range. No exemplars: with them every prompt fills the tiny model's 1,024 positions
    (their rendering is tested in the fast tier)."""
    tasks = [f"calidist_{b}{s}" for b in FAMILIES for s in STYLES]
    metadata = {"data_dir": str(data_dir), "calib_size": 3, "eval_size": 4, "m": 1}
    out = run_lm_eval(tasks, tiny_model_dir, metadata, batch_size=64, num_fewshot=0)
    for task in tasks:
        benchmark, distracted = task.split("_")[1], task.count("_") == 2
        c = FAMILIES[benchmark]
        results = {k.split(",")[0]: v for k, v in out["results"][task].items() if "," in k}
        names = metric_names(distracted=distracted)
        assert set(names) <= set(results), (task, set(names) - set(results))
        for name in names:
            assert isinstance(results[name], float) and math.isfinite(results[name]), (task, name)
            if name.split("_")[0] in SCORES:
                assert 0.0 <= results[name] <= 1.0, (task, name, results[name])
        assert results["n_calibration"] == 3 and results["n_evaluation"] == 4
        # each prompt is scored over the c letters; distracted: 1 + c prompts (m=1, every label)
        assert results["requests_per_doc"] == (1 + c if distracted else 1) * c
        samples = out["samples"][task]
        assert len(samples) == 7
        record = line_record(samples[-1])
        assert record["split"] == "evaluation" and len(record["letter_logprobs"]) == c
        if distracted:
            assert {"mu", "delta", "lambda_raw", "hints", "flipped"} <= set(record)
            assert sorted(hint.label for hint in hints_of(record)) == list(range(c))
            assert 0.0 <= record["mu"] <= 1.0 and 0.0 <= record["delta"] <= 1.0
