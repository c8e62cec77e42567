"""Slow half of ``tests/tasks/test_smoke_limit.py`` (builds the tiny model or runs lm-eval).

What the module tests: the fast half's docstring."""

from __future__ import annotations

import functools
import json
import logging
from pathlib import Path

import pytest

from calidist_tasks import cli
from calidist_tasks.scoring.records import line_record


def test_limit_through_calidist_eval(monkeypatch, tmp_path, tiny_model_dir, ppdb_data_dir, caplog):
    """`calidist eval --limit 6` with 20 calibration and 40 evaluation documents: it used to stop
    ("selects only calibration documents"); it now scores 2 + 4 documents and says so once."""
    import lm_eval.tasks

    monkeypatch.setattr(lm_eval.tasks, "TaskManager",
                        functools.partial(lm_eval.tasks.TaskManager, include_defaults=False))
    out = tmp_path / "out"
    metadata = {"data_dir": str(ppdb_data_dir), "calib_size": 20, "eval_size": 40, "m": 1}
    with caplog.at_level(logging.WARNING):
        cli.main(["eval", "--model", "hf", "--model_args",
                  f"pretrained={tiny_model_dir},dtype=float32", "--tasks",
                  "calidist_ppdb_assertion,calidist_ppdb_consistency", "--limit", "6",
                  "--metadata", json.dumps(metadata), "--device", "cpu", "--batch_size", "8",
                  "--num_fewshot", "0", "--gen_kwargs", "max_gen_toks=2",
                  "--output_path", str(out), "--log_samples"])
    results = json.loads(next(out.rglob("results_*.json")).read_text(encoding="utf-8"))
    scored = results["results"]["calidist_ppdb_assertion"]
    assert (scored["n_calibration,none"], scored["n_evaluation,none"]) == (2, 4)
    samples = [json.loads(line) for line in next(out.rglob(
        "samples_calidist_ppdb_assertion_*.jsonl")).read_text(encoding="utf-8").splitlines()]
    splits = [(s["doc_id"], line_record(s)["split"])
              for s in sorted(samples, key=lambda s: s["doc_id"])]
    # the first documents of each split: calibration 0-1, evaluation 20-23
    assert splits == [(0, "calibration"), (1, "calibration"), *((i, "evaluation")
                                                               for i in range(20, 24))]
    # the consistency baseline sends evaluation documents only: all 6 are evaluation documents
    sampled = results["results"]["calidist_ppdb_consistency"]
    assert (sampled["n_calibration,none"], sampled["n_evaluation,none"]) == (0, 6)
    said = [r.getMessage() for r in caplog.records if "--limit 6:" in r.getMessage()]
    assert said.count("calidist_ppdb_assertion: --limit 6: 2 calibration + 4 evaluation "
                      "documents of 20 + 40; metrics from so few documents are a smoke test, "
                      "not a measurement") == 1
    assert sum("calidist_ppdb_consistency: --limit 6: 6 evaluation documents of 40 (this task "
               "sends no calibration documents)" in m for m in said) == 1
    assert len(said) == 2


def test_limit_one_is_refused_before_any_model_time(tiny_model_dir, ppdb_data_dir):
    from conftest import run_lm_eval

    metadata = {"data_dir": str(ppdb_data_dir), "calib_size": 20, "eval_size": 40, "m": 1}
    with pytest.raises(ValueError, match=r"calidist_ppdb_assertion: --limit 1 cannot take"):
        run_lm_eval(["calidist_ppdb_assertion"], Path(tiny_model_dir), metadata, limit=1)
