"""Slow half of ``tests/reliability/test_saved_fit_settings.py`` (runs a model or lm-eval).

What the module tests: the fast half's docstring."""

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
