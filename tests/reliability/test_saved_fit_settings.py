"""A saved calibrator is checked, not trusted (issue 28, item 4): alpha / beta no fit can produce
are refused, and the settings that shape lambda (lambda_scale, delta_mode, fit) are stored,
compared with the run's explicit ones (a mismatch refused) or applied with one warning when the
run did not set them. Each is refused when the task is built, before any model time."""

from __future__ import annotations

import json
import logging
import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import load_task

from calidist_metrics import CALIDIST_COLUMNS, CaliDistCalibrator, save_calibrator, stack_columns
from reliability.support import refused, write

TASK = "calidist_ppdb_assertion"


@pytest.fixture(scope="module")
def context(ppdb_data_dir: Path) -> dict:
    return load_task(TASK, {"data_dir": str(ppdb_data_dir), "calib_size": 5}).calibrator_context()


def fit(**kwargs) -> CaliDistCalibrator:
    rng = np.random.default_rng(1)
    with warnings.catch_warnings():  # made-up numbers: a grid edge
        warnings.simplefilter("ignore")
        X = stack_columns(CALIDIST_COLUMNS, lambda_raw=rng.uniform(1, 50, 30),
                          confidence=rng.uniform(0.5, 1, 30))
        return CaliDistCalibrator(**kwargs).fit(X, rng.integers(0, 2, 30))


def metadata(ppdb_data_dir: Path, path: Path, **extra) -> dict:
    return {"data_dir": str(ppdb_data_dir), "calib_size": 5, "calibrator": str(path), **extra}


def edited(tmp_path: Path, context: dict, calibrator: dict | None = None, **fields) -> Path:
    """A saved fit with ``fields`` of its calibrator changed (as by hand)."""
    data = {**(calibrator or fit().to_dict()), **fields}
    return write(tmp_path / "fit.json", json.dumps({"calibrator": data, "context": context},
                                                  allow_nan=True))


# ------------------------------------------------------------------ values no fit produces
OUT_OF_RANGE = {  # calibrator fields -> the field named
    "alpha 50 (zeroes every confidence)": ({"alpha": 50.0}, "'alpha': 50.0"),
    "alpha -6, below the grid": ({"alpha": -6.0}, "'alpha'"),
    "beta 40, above the grid": ({"beta": 40.0}, "'beta': 40.0"),
    "alpha outside the file's own grid": ({"alpha": 2.0, "alpha_grid": [-1.0, 0.0, 1.0]},
                                          "'alpha': 2.0"),
    "default_sigmoid with alpha 2": ({"method": "default_sigmoid", "alpha": 2.0, "beta": 1.0},
                                     "'default_sigmoid' fit"),
    "NaN in the grid": ({"alpha_grid": [0.0, float("nan")]}, "alpha_grid"),
    "grid_edge NaN": ({"grid_edge": float("nan")}, "'grid_edge'"),
}


@pytest.mark.parametrize("case", sorted(OUT_OF_RANGE))
def test_values_no_fit_can_produce_are_refused(case, tmp_path, ppdb_data_dir, context):
    fields, words = OUT_OF_RANGE[case]
    path = edited(tmp_path, context, **fields)
    refused(TASK, metadata(ppdb_data_dir, path), str(path), words)


def test_values_a_fit_produces_are_accepted(tmp_path, ppdb_data_dir, context):
    for fields in ({"alpha": 5.0, "beta": 0.1}, {"method": "refine", "alpha": 0.0, "beta": 1.0},
                   {"method": "default_sigmoid", "alpha": 0.0, "beta": 1.0},
                   {"method": "refine", "alpha": 1.234, "beta": 2.5}):
        path = edited(tmp_path, context, **fields)
        load_task(TASK, metadata(ppdb_data_dir, path))


def test_every_fit_method_round_trips(tmp_path, ppdb_data_dir, context):
    for method in ("grid", "refine", "default_sigmoid"):
        path = save_calibrator(fit(method=method), tmp_path / f"{method}.json", **context)
        task = load_task(TASK, metadata(ppdb_data_dir, path, fit=method))
        assert task.settings.fit == method


@pytest.mark.parametrize(("setting", "file_value", "run_value"), [
    ("lambda_scale", "log", "minmax"),
    ("delta_mode", "worst_case", "mean"),
    ("fit", "refine", "grid"),
])
def test_a_setting_the_run_sets_otherwise_is_refused(setting, file_value, run_value, tmp_path,
                                                     ppdb_data_dir, context):
    calibrator = fit(**{"lambda_scale": file_value} if setting == "lambda_scale" else
                     {"method": file_value} if setting == "fit" else {})
    saved = {**context, "delta_mode": file_value if setting == "delta_mode" else "mean"}
    path = save_calibrator(calibrator, tmp_path / "fit.json", **saved)
    refused(TASK, metadata(ppdb_data_dir, path, **{setting: run_value}), str(path),
            f"fitted with {setting} {file_value!r}, this run sets {setting} {run_value!r}")


def test_settings_the_run_did_not_set_are_the_files_with_one_warning(tmp_path, ppdb_data_dir,
                                                                    context, caplog):
    path = save_calibrator(fit(lambda_scale="log", method="refine"), tmp_path / "fit.json",
                           **{**context, "delta_mode": "worst_case"})
    with caplog.at_level(logging.WARNING, logger="calidist_tasks.scoring.aggregation"):
        task = load_task(TASK, metadata(ppdb_data_dir, path))
    settings = task.settings
    assert (settings.lambda_scale, settings.delta_mode, settings.fit) == (
        "log", "worst_case", "refine")
    said = [r.getMessage() for r in caplog.records if "the saved fit's" in r.getMessage()]
    assert said == [f"{path}: the saved fit's lambda_scale 'log', delta_mode 'worst_case', fit "
                    f"'refine' apply to {TASK} (the run did not set them)"]
