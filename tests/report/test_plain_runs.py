"""``calidist report`` on a plain lm-eval ``--log_samples`` folder (``report.plain_runs``): every
multiple-choice task is calibrated from its logged log-likelihoods, any other task is named and
skipped."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from calidist_tasks.report import write_report
from calidist_tasks.report.loading import load_runs
from calidist_tasks.report.plain_runs import plain_record, settings_for, split_plain
from calidist_tasks.scoring.records import CALIBRATION, EVALUATION

STAMP = "2026-11-27T10-00-00.000000"
MODEL = "pretrained=/models/tiny,dtype=float32"


def sample_line(doc_id: int, lls: list[float], target, choices: list[str]) -> dict:
    """A samples line as lm-eval 0.4.13 writes one of a multiple_choice task (values as text)."""
    return {
        "doc_id": doc_id, "doc": {"question": f"q{doc_id}"}, "target": target,
        "arguments": {f"gen_args_{k}": {"arg_0": f"Question: q{doc_id}\nAnswer:",
                                        "arg_1": f" {c}"} for k, c in enumerate(choices)},
        "resps": [[[str(ll), "False"]] for ll in lls],
        "filtered_resps": [[str(ll), "False"] for ll in lls],
        "filter": "none", "metrics": ["acc"], "acc": 1.0,
    }


def write_plain_run(folder: Path, n: int = 60) -> Path:
    """A plain lm-eval output folder: a multiple-choice task (its targets given as indices for
    even documents, as choice texts for odd ones) and a generate_until task."""
    rng = random.Random(0)
    folder.mkdir(parents=True)
    lines = []
    for i in range(n):
        choices = [f"choice {i}-{k}" for k in range(4)]
        gold = rng.randrange(4)
        lls = [rng.gauss(-2.0, 1.0) + (1.5 if k == gold and rng.random() < 0.7 else 0)
               for k in range(4)]
        lines.append(sample_line(i, lls, gold if i % 2 == 0 else choices[gold], choices))
    (folder / f"samples_arc_easy_local_{STAMP}.jsonl").write_text(
        "".join(json.dumps(line) + "\n" for line in lines))
    (folder / f"samples_gsm8k_{STAMP}.jsonl").write_text(
        json.dumps({"doc_id": 0, "filtered_resps": ["42"], "target": "42"}) + "\n")
    results = {
        "results": {"arc_easy_local": {"alias": "arc_easy_local", "acc,none": 0.5,
                                       "acc_stderr,none": 0.05},
                    "gsm8k": {"alias": "gsm8k", "exact_match,flexible-extract": 0.1}},
        "configs": {"arc_easy_local": {"task": "arc_easy_local", "output_type": "multiple_choice",
                                       "doc_to_choice": "{{choices.text}}",
                                       "metadata": {"version": 1.0}},
                    "gsm8k": {"task": "gsm8k", "output_type": "generate_until"}},
        "n-samples": {"arc_easy_local": {"original": n, "effective": n},
                      "gsm8k": {"original": 1, "effective": 1}},
        "config": {"model": "hf", "model_args": MODEL},
    }
    (folder / f"results_{STAMP}.json").write_text(json.dumps(results))
    return folder


def test_a_samples_line_becomes_the_record_of_its_original_prompt():
    lls = [-1.0, -2.0, -0.5]
    record = plain_record(sample_line(3, lls, "c", ["a", "b", "c"]))
    total = sum(math.exp(v) for v in lls)
    assert record["label"] == 2 and record["prediction"] == 2 and record["correct"] == 1
    assert record["confidence"] == pytest.approx(math.exp(-0.5) / total)
    assert record["letter_logprobs"] == tuple(lls)
    assert plain_record(sample_line(3, lls, 0, ["a", "b", "c"]))["correct"] == 0
    with pytest.raises(ValueError, match="doc_id 3: target 'z' is not one of its 3 choices"):
        plain_record(sample_line(3, lls, "z", ["a", "b", "c"]))


def test_the_calibration_slice_is_seeded_and_holds_at_most_half():
    records = [plain_record(sample_line(i, [-1.0, -2.0], 0, ["a", "b"])) for i in range(30)]
    settings = settings_for(len(records))
    assert settings.calib_size == 15 and settings.eval_size is None
    split_plain(records, settings)
    first = [(r["split"], r["index"]) for r in records]
    assert [s for s, _ in first].count(CALIBRATION) == 15
    assert sorted(i for _, i in first) == list(range(30))
    again = [plain_record(sample_line(i, [-1.0, -2.0], 0, ["a", "b"])) for i in range(30)]
    split_plain(again, settings)
    assert [(r["split"], r["index"]) for r in again] == first
    assert all(r["split"] == CALIBRATION for r in records if r["index"] < 15)
    assert all(r["split"] == EVALUATION for r in records if r["index"] >= 15)


def test_load_runs_reads_a_plain_multiple_choice_task_and_names_the_others(tmp_path):
    loaded = load_runs([write_plain_run(tmp_path / "run")])
    (run,) = loaded.runs
    assert run.task == "arc_easy_local" and len(run.records) == 60
    assert any("gsm8k is not a multiple-choice task (output_type generate_until): skipped" in p
               for p in loaded.problems)
    assert {"ece_vanilla", "brier_vanilla", "auroc_vanilla", "ece_ts", "ece_platt",
            "ece_isotonic", "ece_vector"} <= set(run.metrics)
    assert run.identity["arc_easy_local:calibration"] == (
        "seeded held-out slice: 30 documents (split_seed 0)")
    assert run.metrics["acc"] == pytest.approx(
        sum(r["correct"] for r in run.records if r["split"] == EVALUATION) / 30)


def test_report_on_a_plain_run_prints_its_calibration_table(tmp_path):
    report = write_report([write_plain_run(tmp_path / "run")], tmp_path / "report",
                          n_resamples=20, figures=False)
    assert report.runs == 1
    text = (tmp_path / "report" / "report.md").read_text()
    for row in ("Vanilla", "Temperature scaling", "Platt", "Isotonic", "Vector scaling"):
        assert row in text, row
    assert "seeded held-out slice" in text
    scores = (tmp_path / "report" / "scores.csv").read_text()
    assert "smECE" in scores or "smece" in scores.lower()
