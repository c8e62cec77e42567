"""Slow half of ``tests/test_python_api.py`` (builds the tiny model or runs lm-eval).

What the module tests: the fast half's docstring."""

from __future__ import annotations

import copy
import csv
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

import calidist_tasks
from calidist_tasks.report import write_report, write_report_from_results
from calidist_tasks.scoring.records import line_record

pytestmark = pytest.mark.filterwarnings("ignore::calidist_metrics.CalibrationWarning")


TASKS = ["calidist_ppdb", "calidist_ppdb_assertion"]


SIZES = {"calib_size": 8, "eval_size": 10, "m": 1}


TABLES = ("leaderboard.csv", "leaderboard.md", "scores.csv", "intervals.csv", "cost.csv")


STAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d+)?")  # lm-eval's date_id


@pytest.fixture(scope="module")
def evaluated(tiny_model_dir: Path, ppdb_data_dir: Path) -> dict:
    return calidist_tasks.evaluate(
        "hf", TASKS, {"data_dir": str(ppdb_data_dir), **SIZES},
        model_args=f"pretrained={tiny_model_dir},dtype=float32",
        device="cpu", batch_size=8, bootstrap_iters=50,
    )


def test_evaluate_runs_our_tasks_with_the_metadata(evaluated: dict, tiny_model_dir: Path) -> None:
    for task in TASKS:
        numbers = evaluated["results"][task]
        assert numbers["n_calibration,none"] == 8 and numbers["n_evaluation,none"] == 10
        assert 0 <= numbers["ece_vanilla,none"] <= 1
        assert len(evaluated["samples"][task]) == 18  # log_samples is on by default
        # --model_args is merged into the metadata, as lm-eval's CLI does
        assert evaluated["configs"][task]["metadata"]["pretrained"] == str(tiny_model_dir)
    assert "ece_platt,none" in evaluated["results"]["calidist_ppdb"]
    assertion = evaluated["results"]["calidist_ppdb_assertion"]
    assert 0 <= assertion["ece,none"] <= 1  # CaliDist's calibrated ECE
    assert {"alpha,none", "beta,none", "flip_rate,none"} <= set(assertion)
    assert assertion["requests_per_doc,none"] == (1 + 2 * 1) * 2  # m = 1 reached the task


def test_report_from_results_equals_the_report_from_its_folder(evaluated: dict,
                                                               tmp_path: Path) -> None:
    before = json.dumps(evaluated, default=str, sort_keys=True)
    memory = write_report_from_results(evaluated, tmp_path / "memory", n_resamples=20,
                                       figures=False)
    assert json.dumps(evaluated, default=str, sort_keys=True) == before  # not modified

    # the same run saved as `lm_eval --output_path runs --log_samples` saves it
    from lm_eval.loggers import EvaluationTracker

    saved = copy.deepcopy(evaluated)
    samples = saved.pop("samples")
    tracker = EvaluationTracker(output_path=str(tmp_path / "runs"))
    tracker.save_results_aggregated(results=saved, samples=samples)
    for task in saved["configs"]:
        tracker.save_results_samples(task_name=task, samples=samples[task])
    folder = write_report([tmp_path / "runs"], tmp_path / "folder", n_resamples=20,
                          figures=False)

    # a dict whose samples a tracker has already rewritten in place (as saving them does)
    saved["samples"] = samples
    resaved = write_report_from_results(saved, tmp_path / "resaved", n_resamples=20,
                                        figures=False)

    assert memory.runs == folder.runs == resaved.runs == 2
    assert memory.problems == folder.problems == resaved.problems == []
    for name in TABLES:
        text = (folder.out / name).read_text()
        assert (memory.out / name).read_text() == text == (resaved.out / name).read_text(), name
    # report.md differs only in the results file's date
    texts = {STAMP.sub("DATE", (r.out / "report.md").read_text())
             for r in (memory, folder, resaved)}
    assert len(texts) == 1
    with open(memory.out / "leaderboard.csv", encoding="utf-8") as file:
        board = list(csv.DictReader(file))
    calidist = next(row for row in board if row["method"] == "CaliDist (As.)")
    assert float(calidist["ppdb_ece"]) == pytest.approx(
        100 * evaluated["results"]["calidist_ppdb_assertion"]["ece,none"], abs=1e-4)


def test_report_from_results_without_samples_names_the_dict(evaluated: dict,
                                                            tmp_path: Path) -> None:
    without = {k: v for k, v in evaluated.items() if k != "samples"}
    report = write_report_from_results([without], tmp_path / "out", n_resamples=0,
                                       figures=False)
    assert report.runs == 2
    assert len(report.problems) == 2
    for problem, task in zip(report.problems, TASKS, strict=True):
        assert problem.startswith(f"results[0]: {task} [")
        assert "has no samples file" in problem
    assert "calidist-results-" not in (report.out / "report.md").read_text()  # no temp path
    with pytest.raises(ValueError, match="not what lm_eval.simple_evaluate returns"):
        write_report_from_results(None, tmp_path / "bad")


def test_evaluate_takes_a_loaded_lm_object(tiny_model_dir: Path, ppdb_data_dir: Path) -> None:
    from lm_eval.models.huggingface import HFLM

    lm = HFLM(pretrained=str(tiny_model_dir), dtype="float32", device="cpu", batch_size=8)
    data = {"data_dir": str(ppdb_data_dir)}
    with pytest.raises(ValueError, match="did you mean 'calib_size'"):
        calidist_tasks.evaluate(lm, "calidist_ppdb", {**data, "calib_sise": 4})
    with pytest.raises(TypeError, match="builds its own TaskManager"):
        calidist_tasks.evaluate(lm, "calidist_ppdb", data, task_manager=object())
    results = calidist_tasks.evaluate(lm, "calidist_ppdb", {**data, "calib_size": 4,
                                                            "eval_size": 4},
                                      bootstrap_iters=0)
    assert results["results"]["calidist_ppdb"]["n_evaluation,none"] == 4
    # the object's own pretrained= plays the part of --model_args
    assert results["configs"]["calidist_ppdb"]["metadata"]["pretrained"] == str(tiny_model_dir)


def test_the_samples_hold_every_methods_confidence_as_a_refit_gives_it(evaluated: dict,
                                                                      tmp_path: Path) -> None:
    """Each evaluation record logs every reported confidence of its answer (calibration records
    None); ``calidist report``'s refit of the saved run (``cells.refit``, each method's own fit)
    gives the same numbers, document by document."""
    from calidist_tasks.registry import methods_of, task_variant
    from calidist_tasks.report.cells import refit
    from calidist_tasks.report.loading import load_runs
    from calidist_tasks.runs.files import save_like_lm_eval
    from calidist_tasks.scoring.fits import split_records
    from calidist_tasks.scoring.records import confidence_key

    for task in TASKS:
        for line in evaluated["samples"][task]:
            record = line_record(line)
            if record["split"] == "calibration":
                assert record["calibrated"] is None and record["calibrated_correct"] is None
    save_like_lm_eval(evaluated, tmp_path / "run")
    runs = load_runs([tmp_path / "run"]).runs
    assert sorted(run.task for run in runs) == sorted(TASKS)
    compared = set()
    for run in runs:
        _, variant = task_variant(run.task, run.config)
        methods = methods_of(variant)
        _, evaluation = split_records(run.records)
        for method in methods:
            fitted = refit(run, [method])[method.label]
            if fitted is None:
                continue
            key = confidence_key(method.suffix)
            np.testing.assert_allclose([r["calibrated"][key] for r in evaluation],
                                       fitted.confidence, rtol=1e-12, err_msg=method.label)
            assert [r["calibrated_correct"][key] for r in evaluation] == fitted.correct.tolist()
            compared.add((run.task, key))
    assert {("calidist_ppdb_assertion", "calidist"), ("calidist_ppdb_assertion", "vanilla"),
            ("calidist_ppdb", "ts"), ("calidist_ppdb", "platt"), ("calidist_ppdb", "isotonic"),
            ("calidist_ppdb", "vector")} <= compared


def test_lm_eval_reports_a_stderr_for_accuracy_and_every_score(evaluated: dict) -> None:
    from calidist_tasks.scoring.aggregation import interval_score

    for task in TASKS:
        numbers = evaluated["results"][task]
        names = [key.split(",")[0] for key in numbers if key.endswith(",none")
                 and not key.split(",")[0].endswith("_stderr")]
        for name in names:
            stderr = numbers[f"{name}_stderr,none"]
            if interval_score(name) is None:
                assert stderr == "N/A", (task, name)
            elif math.isfinite(numbers[f"{name},none"]):
                assert isinstance(stderr, float) and stderr >= 0, (task, name)
        for name in ("acc", "ece", "brier", "auroc", "ece_vanilla"):
            if name in names:
                assert numbers[f"{name}_stderr,none"] > 0, (task, name)
    acc = evaluated["results"]["calidist_ppdb"]["acc,none"]
    assert evaluated["results"]["calidist_ppdb"]["acc_stderr,none"] == pytest.approx(
        math.sqrt(acc * (1 - acc) / (SIZES["eval_size"] - 1)))
