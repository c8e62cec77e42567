"""Slow half of ``tests/scoring/test_warnings_once.py`` (builds the tiny model or runs lm-eval).

What the module tests: the fast half's docstring."""

from __future__ import annotations

import json
import logging
import warnings
from collections import Counter
from pathlib import Path

from conftest import run_lm_eval

from calidist_metrics import CalibrationWarning

TASK = "calidist_mnli_assertion"


def _mnli_without_neutral(root: Path) -> Path:
    """MNLI files whose calibration split (validation_mismatched) holds no neutral pair: the
    few-shot pool is short of option (c)."""
    folder = root / "mnli"
    folder.mkdir(parents=True)
    for split, labels in (("validation_matched", [0, 1, 2, 0, 1, 2]),
                          ("validation_mismatched", [0, 2, 0, 2, 0, 2])):
        rows = [{"premise": f"The cat in {split} story {i} sat near the old river.",
                 "hypothesis": f"An animal was near water in story {i}.", "label": label,
                 "idx": i} for i, label in enumerate(labels)]
        (folder / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows),
                                               encoding="utf-8")
    return root


def test_each_cause_is_one_line_per_task(tiny_model_dir, tmp_path, caplog, capfd):
    metadata = {"data_dir": str(_mnli_without_neutral(tmp_path)), "calib_size": 4,
                "eval_size": 4, "m": 1}
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING):
        warnings.simplefilter("always")
        run_lm_eval([TASK], tiny_model_dir, metadata, num_fewshot=2)
    ours = [r.getMessage() for r in caplog.records if r.name.startswith("calidist_tasks")]
    # 8 documents x 4 prompts asked for a second exemplar of each label (the YAML ships one):
    # one line per label, not 32
    assert ours.count(f"{TASK}: few-shot: the YAML ships 1 exemplar(s) of label 2, 2 requested "
                      "per label; prompts show what there is") == 1
    assert ours.count(f"{TASK}: CaliDistCalibrator: only 4 calibration documents (< 5); the "
                      "fitted alpha, beta and bounds are unreliable") == 1
    assert any(m.startswith(f"{TASK}: CaliDistCalibrator: the fit landed on a grid edge")
               for m in ours)
    assert all(n == 1 for n in Counter(ours).values()), Counter(ours)
    assert all("\n" not in m for m in ours)
    # logged, not warned: no Python warning, so no echoed source line on stderr
    assert not [w for w in caught if issubclass(w.category, CalibrationWarning)]
    assert "warnings.warn(" not in capfd.readouterr().err
