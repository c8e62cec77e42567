"""Slow half of ``tests/reliability/test_saved_fit_settings.py`` (runs a model or lm-eval).

A saved calibrator is checked, not trusted (issue 28, item 4): alpha / beta no fit can produce
are refused, and the settings that shape lambda (lambda_scale, delta_mode, fit) are stored,
compared with the run's explicit ones (a mismatch refused) or applied with one warning when the
run did not set them. Each is refused when the task is built, before any model time.
"""

from __future__ import annotations

import json

from conftest import run_lm_eval
from reliability.test_saved_fit_settings import TASK


# ------------------------------------------------------------------ the settings that shape lambda
def test_a_run_saves_the_delta_mode_its_lambda_came_from(tiny_model_dir, ppdb_data_dir,
                                                        tmp_path):
    path = tmp_path / "fit.json"
    run_lm_eval([TASK], tiny_model_dir, {"data_dir": str(ppdb_data_dir), "calib_size": 3,
                                         "eval_size": 2, "m": 1, "delta_mode": "worst_case",
                                         "save_calibrator": str(path)}, num_fewshot=0)
    saved = json.loads(path.read_text(encoding="utf-8"))
    assert saved["context"]["delta_mode"] == "worst_case"
    assert saved["calibrator"]["lambda_scale"] == "minmax"
