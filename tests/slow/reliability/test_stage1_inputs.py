"""A stage-1 folder is checked, not trusted (issue 28, item 4): stage 2 refuses, when its task is
built (before any model time) and naming the file and the document, an answer that contradicts
its own letter log-probabilities, a prediction outside the label space, a document logged
twice, a confidence that is not a probability, and stage 1 answered by another model."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import load_task, run_lm_eval
from reliability.support import refused

from calidist_tasks.report import save_like_lm_eval
from calidist_tasks.scoring.records import is_record, line_record

TASK = "calidist_ppdb_assertion"


@pytest.fixture(scope="module")
def stage1(tiny_model_dir, ppdb_data_dir, tmp_path_factory) -> tuple[Path, dict]:
    """A real stage-1 run of 4 documents, saved as lm-eval's CLI saves it; stage 2's metadata."""
    metadata = {"data_dir": str(ppdb_data_dir), "calib_size": 2, "eval_size": 2, "m": 1}
    results = run_lm_eval([TASK], tiny_model_dir, {**metadata, "stage": "original"},
                          num_fewshot=0)
    folder = tmp_path_factory.mktemp("stage1")
    save_like_lm_eval(results, folder)
    return folder, {**metadata, "stage": "hints", "pretrained": str(tiny_model_dir)}


def edited(stage1: tuple[Path, dict], tmp_path: Path, change) -> tuple[Path, Path]:
    """A copy of stage 1 whose samples lines are ``change(lines)``: (folder, samples file)."""
    folder = tmp_path / "stage1"
    shutil.copytree(stage1[0], folder)
    (samples,) = folder.rglob(f"samples_{TASK}_*.jsonl")
    lines = [json.loads(line) for line in samples.read_text(encoding="utf-8").splitlines()]
    samples.write_text("".join(json.dumps(line) + "\n" for line in change(lines)),
                       encoding="utf-8")
    return folder, samples


def record_changed(**fields):
    """A change of the first document's record (under every metric name)."""
    def change(lines: list[dict]) -> list[dict]:
        for key, value in lines[0].items():
            if is_record(value):
                lines[0][key] = {**value, **fields}
        return lines
    return change


def first_record(stage1) -> dict:
    (samples,) = stage1[0].rglob(f"samples_{TASK}_*.jsonl")
    line = json.loads(samples.read_text(encoding="utf-8").splitlines()[0])
    return line_record(line)


def test_a_good_stage1_folder_is_accepted(stage1):
    task = load_task(TASK, {**stage1[1], "original_run": str(stage1[0])})
    assert len(task.run_stage.stage1.answers) == 4


def test_a_prediction_that_contradicts_its_letter_logprobs_is_refused(stage1, tmp_path):
    record = first_record(stage1)
    folder, samples = edited(stage1, tmp_path,
                             record_changed(prediction=1 - record["prediction"]))
    refused(TASK, {**stage1[1], "original_run": str(folder)}, str(samples), "document 0 (",
            "contradicts its own letter log-probabilities")


def test_a_prediction_outside_the_label_space_is_refused(stage1, tmp_path):
    folder, samples = edited(stage1, tmp_path, record_changed(prediction=7))
    refused(TASK, {**stage1[1], "original_run": str(folder)}, str(samples), "document 0 (",
            "stage-1 prediction 7 is outside the label space 0..1")


@pytest.mark.parametrize("confidence", [1.5, float("nan"), -0.1])
def test_a_confidence_that_is_not_a_probability_is_refused(stage1, tmp_path, confidence):
    folder, samples = edited(stage1, tmp_path, record_changed(confidence=confidence))
    refused(TASK, {**stage1[1], "original_run": str(folder)}, str(samples), "document 0 (",
            f"stage-1 confidence {confidence!r} is not a probability")


def test_a_document_logged_twice_is_refused(stage1, tmp_path):
    folder, samples = edited(stage1, tmp_path, lambda lines: [*lines, lines[1]])
    refused(TASK, {**stage1[1], "original_run": str(folder)}, str(samples), "line 5",
            "document 1 (", "is logged twice (first at line 2)")


def test_stage1_of_another_model_is_refused(stage1):
    refused(TASK, {**stage1[1], "original_run": str(stage1[0]), "pretrained": "other/model"},
            str(stage1[0]), "was answered by model", "not this run's 'other/model'")
