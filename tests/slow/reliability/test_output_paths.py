"""Slow half of ``tests/reliability/test_output_paths.py`` (builds the tiny model or runs lm-eval).

What the module tests: the fast half's docstring."""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path

import lm_eval.__main__
import lm_eval.tasks
import pytest
from lm_eval.utils import sanitize_model_name
from reliability.test_output_paths import METADATA, eval_argv, stopped

import calidist_tasks
from calidist_tasks.runs.recovery import AggregationError


@pytest.fixture
def our_tasks_only(monkeypatch, tmp_path):
    """lm-eval's CLI indexes only our task folder (its own costs ~10 s a run); failed runs are
    saved under tmp_path."""
    monkeypatch.setattr(lm_eval.tasks, "TaskManager",
                        functools.partial(lm_eval.tasks.TaskManager, include_defaults=False))
    monkeypatch.setenv("CALIDIST_RECOVERED_DIR", str(tmp_path / "recovered"))


# ------------------------------------------------------------------ after the run
def test_results_lm_eval_cannot_write_stop_the_run_and_are_saved_elsewhere(
        tiny_model_dir, ppdb_data_dir, tmp_path, our_tasks_only):
    """The folder passes the check, but lm-eval's own subfolder (named after the model) is a
    file: lm-eval logs "Could not save results" and used to exit 0 with nothing written."""
    out = tmp_path / "out"
    out.mkdir()
    (out / sanitize_model_name(str(tiny_model_dir))).write_text("in the way", encoding="utf-8")
    message = stopped(eval_argv(tiny_model_dir, ppdb_data_dir, "calidist_ppdb_assertion", out))
    assert message.startswith(f"calidist: lm-eval could not write the results to --output_path "
                              f"{out} ")
    folder = Path(message.split(" instead: ")[0].rsplit(" saved in ", 1)[1])
    assert folder.parent == tmp_path / "recovered"
    (results,) = folder.glob("results_*.json")
    saved = json.loads(results.read_text(encoding="utf-8"))
    assert math.isfinite(saved["results"]["calidist_ppdb_assertion"]["ece,none"])
    (samples,) = folder.glob("samples_calidist_ppdb_assertion_*.jsonl")
    assert len(samples.read_text(encoding="utf-8").splitlines()) == 4


# ------------------------------------------------------------------ one task fails, others kept
def _blocked_calibrator(tmp_path: Path) -> str:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file", encoding="utf-8")
    return str(blocker / "{task}.json")  # written at the aggregation: fails there


def test_calidist_eval_saves_every_other_task_when_one_aggregation_fails(
        tiny_model_dir, ppdb_data_dir, tmp_path, our_tasks_only):
    out = tmp_path / "out"
    message = stopped(eval_argv(tiny_model_dir, ppdb_data_dir,
                                "calidist_ppdb_assertion,calidist_ppdb", out,
                                save_calibrator=_blocked_calibrator(tmp_path)))
    assert message.startswith("calidist: calidist_ppdb_assertion: the aggregation failed after "
                              "the model answered every request (")
    (results,) = out.rglob("results_*.json")
    saved = json.loads(results.read_text(encoding="utf-8"))["results"]
    assert math.isfinite(saved["calidist_ppdb"]["ece_ts,none"])  # the other task's metrics
    assert math.isnan(saved["calidist_ppdb_assertion"]["ece,none"])
    for task in ("calidist_ppdb", "calidist_ppdb_assertion"):  # and both tasks' records
        (samples,) = out.rglob(f"samples_{task}_2*.jsonl")  # _<date>
        assert len(samples.read_text(encoding="utf-8").splitlines()) == 4


def test_the_python_api_saves_the_whole_run_when_one_aggregation_fails(
        tiny_model_dir, ppdb_data_dir, tmp_path, our_tasks_only):
    metadata = {**METADATA, "data_dir": str(ppdb_data_dir),
                "save_calibrator": _blocked_calibrator(tmp_path)}
    with pytest.raises(AggregationError) as failed:
        calidist_tasks.evaluate("hf", ["calidist_ppdb_assertion", "calidist_ppdb"], metadata,
                                model_args=f"pretrained={tiny_model_dir},dtype=float32",
                                device="cpu", batch_size=8, num_fewshot=0, bootstrap_iters=0)
    folder = failed.value.folder
    assert f"Every task's results and samples of this run are saved in {folder}" in str(
        failed.value)
    (results,) = folder.glob("results_*.json")
    saved = json.loads(results.read_text(encoding="utf-8"))["results"]
    assert math.isfinite(saved["calidist_ppdb"]["ece_ts,none"])
    assert {p.name.split("_2")[0] for p in folder.glob("samples_*.jsonl")} == {
        "samples_calidist_ppdb", "samples_calidist_ppdb_assertion"}
