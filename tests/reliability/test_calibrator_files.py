"""Bad ``--metadata calibrator=FILE``: every kind is refused when the task is built, before any
model time, with an error naming the file. The basic case (a fit from another task without
allow_transfer) is in tests/test_aggregation.py."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
from conftest import load_task

from calidist_metrics import (
    CALIDIST_COLUMNS,
    CaliDistCalibrator,
    TemperatureScaling,
    save_calibrator,
    stack_columns,
)
from calidist_tasks.scoring.fits import applied_calibrator
from reliability.support import refused, write

TASK = "calidist_ppdb_assertion"


@pytest.fixture(scope="module")
def context(ppdb_data_dir: Path) -> dict:
    return load_task(TASK, {"data_dir": str(ppdb_data_dir), "calib_size": 5}).calibrator_context()


@pytest.fixture(scope="module")
def fitted() -> CaliDistCalibrator:
    rng = np.random.default_rng(0)
    with pytest.warns(Warning):  # the fit on made-up numbers lands on a grid edge
        X = stack_columns(CALIDIST_COLUMNS, lambda_raw=rng.uniform(1, 50, 40),
                          confidence=rng.uniform(0.5, 1, 40))
        return CaliDistCalibrator().fit(X, rng.integers(0, 2, 40))


def good_payload(fitted: CaliDistCalibrator, context: dict) -> dict:
    return {"calibrator": fitted.to_dict(), "context": dict(context)}


def metadata(ppdb_data_dir: Path, path: Path | str, **extra) -> dict:
    return {"data_dir": str(ppdb_data_dir), "calib_size": 5, "calibrator": str(path), **extra}


def test_a_good_file_is_accepted(tmp_path, ppdb_data_dir, fitted, context) -> None:
    path = save_calibrator(fitted, tmp_path / "fit.json", **context)
    task = load_task(TASK, metadata(ppdb_data_dir, path))
    applied = applied_calibrator(task.settings, task.calibrator_context())
    assert (applied.alpha_, applied.beta_) == (fitted.alpha_, fitted.beta_)
    assert (applied.lambda_min_, applied.lambda_max_) == (fitted.lambda_min_, fitted.lambda_max_)


BAD_TEXT = {
    "empty file": (b"", "malformed calibrator JSON"),
    "truncated JSON": (b'{"calibrator": {"kind": "calidist", "alpha": 1', "malformed"),
    "not UTF-8": (b'{"calibrator": "\xff"}', "malformed"),
    "a list": (b"[1, 2]", "missing field 'calibrator'"),
    "a number": (b"3", "missing field 'calibrator'"),
    "a pickle": (b"\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00}\x94.", "malformed"),
}


@pytest.mark.parametrize("case", sorted(BAD_TEXT))
def test_unreadable_files(case: str, tmp_path, ppdb_data_dir) -> None:
    content, words = BAD_TEXT[case]
    path = write(tmp_path / "fit.json", content)
    refused(TASK, metadata(ppdb_data_dir, path), str(path), words)


def _break(change):
    def apply(payload: dict) -> dict:
        change(payload)
        return payload
    return apply


BAD_FIELDS = {  # how to break a good payload, words the error must name
    "no calibrator object": (_break(lambda p: p.pop("calibrator")), ["'calibrator'"]),
    "calibrator is a string": (_break(lambda p: p.update(calibrator="calidist")), ["dict"]),
    "context is a list": (_break(lambda p: p.update(context=[1])), ["'context'"]),
    "unknown kind": (_break(lambda p: p["calibrator"].update(kind="magic")), ["magic"]),
    "alpha missing": (_break(lambda p: p["calibrator"].pop("alpha")), ["'alpha'"]),
    "alpha is text": (_break(lambda p: p["calibrator"].update(alpha="high")), ["'alpha'"]),
    "alpha is NaN": (_break(lambda p: p["calibrator"].update(alpha=float("nan"))), ["'alpha'"]),
    "beta is zero": (_break(lambda p: p["calibrator"].update(beta=0)), ["'beta'"]),
    "beta is negative": (_break(lambda p: p["calibrator"].update(beta=-1.0)), ["'beta'"]),
    "lambda_max below lambda_min": (
        _break(lambda p: p["calibrator"].update(lambda_min=5.0, lambda_max=1.0)),
        ["'lambda_max'"]),
    "unknown lambda_scale": (_break(lambda p: p["calibrator"].update(lambda_scale="cube")),
                             ["'lambda_scale'", "cube"]),
    "no context": (_break(lambda p: p.pop("context")), ["labels None"]),
    "another label space": (_break(lambda p: p["context"].update(labels=["yes", "no", "maybe"])),
                            ["fitted for labels ['yes', 'no', 'maybe']", TASK]),
    "per-document labels": (_break(lambda p: p["context"].update(labels="per-document choices")),
                            ["per-document choices"]),
}


@pytest.mark.parametrize("case", sorted(BAD_FIELDS))
def test_malformed_or_mismatched_fits(case, tmp_path, ppdb_data_dir, fitted, context) -> None:
    change, words = BAD_FIELDS[case]
    path = write(tmp_path / "fit.json",
                 json.dumps(change(good_payload(fitted, context)), allow_nan=True))
    refused(TASK, metadata(ppdb_data_dir, path), str(path), *words)


def test_another_label_space_is_refused_even_with_allow_transfer(tmp_path, ppdb_data_dir,
                                                                 fitted, context) -> None:
    mnli = {**context, "task": "calidist_mnli_assertion", "benchmark": "mnli",
            "labels": ["entails", "neutral", "contradicts"]}
    path = save_calibrator(fitted, tmp_path / "mnli.json", **mnli)
    refused(TASK, metadata(ppdb_data_dir, path, allow_transfer=True), "calidist_mnli_assertion",
            "fitted for labels")


def test_another_calibrator_kind_is_refused(tmp_path, ppdb_data_dir, context) -> None:
    scaling = TemperatureScaling().fit(np.array([[2.0, 0.0], [0.0, 1.0], [1.0, 0.5]]),
                                       np.array([0, 1, 1]))
    path = save_calibrator(scaling, tmp_path / "ts.json", **context)
    refused(TASK, metadata(ppdb_data_dir, path), "holds a TemperatureScaling", "not a CaliDist")


def test_another_model_is_applied_with_a_warning(tmp_path, ppdb_data_dir, fitted, context,
                                                 caplog) -> None:
    """Documented fallback: a fit from another model is applied (transfer across models is an
    experiment of the paper) and the run logs which model it was fitted for."""
    path = save_calibrator(fitted, tmp_path / "fit.json", **{**context, "model": "other/model"})
    with caplog.at_level(logging.WARNING, logger="calidist_tasks.scoring.aggregation"):
        load_task(TASK, metadata(ppdb_data_dir, path, pretrained="my/model"))
    assert "fitted for model 'other/model', applied to 'my/model'" in caplog.text


@pytest.mark.parametrize("name", ["missing.json", "{task}.json", "folder"])
def test_missing_paths_are_named(name: str, tmp_path, ppdb_data_dir) -> None:
    (tmp_path / "folder").mkdir()
    path = tmp_path / name
    expected = str(path).replace("{task}", TASK)
    with pytest.raises(OSError) as error:
        load_task(TASK, metadata(ppdb_data_dir, path))
    assert expected in str(error.value)
