"""Slow half of ``tests/tasks/test_gsm8k_consistency.py`` (builds the tiny model or runs lm-eval).

What the module tests: the fast half's docstring."""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path

import pytest
from conftest import run_lm_eval
from test_gsm8k_consistency import (
    TASK,
    metadata,  # noqa: F401 (a fixture)
)

from calidist_tasks.registry import metric_names
from calidist_tasks.report import write_report_from_results
from calidist_tasks.scoring.aggregation import UNREADABLE_LIMIT
from calidist_tasks.scoring.records import CONSISTENCY_KINDS, line_record
from calidist_tasks.tasks.gsm8k_verbalized import number_vote, parse_number_response


def test_consistency_runs_with_hf(tiny_model_dir: Path, metadata):
    """15 sampled generations per evaluation document through lm-eval's repeats."""
    out = run_lm_eval([TASK], tiny_model_dir, {**metadata, "eval_size": 3},
                      gen_kwargs="max_gen_toks=8")
    results = {k.split(",")[0]: v for k, v in out["results"][TASK].items() if "," in k}
    assert set(results) >= set(metric_names(False, "consistency"))
    assert (results["requests_per_doc"], results["n_evaluation"], results["n_calibration"],
            results["sampling_temperature"]) == (15.0, 3.0, 0.0, 1.0)
    samples = out["samples"][TASK]
    assert len(samples) == 3 and all(len(s["resps"][0]) == 15 for s in samples)
    assert len({text for s in samples for text in s["resps"][0]}) > 15  # sampled, not greedy
    readings = [[parse_number_response(r) for r in s["resps"][0]] for s in samples]
    assert [s["filtered_resps"][0] for s in samples] == readings
    for sample, reading in zip(samples, readings, strict=True):
        votes = number_vote([r["answer"] for r in reading])
        assert line_record(sample)["confidences"] == {k: votes[k] for k in CONSISTENCY_KINDS}
    unreadable = sum(r["answer"] is None for reading in readings for r in reading) / 45
    assert results["parse_fail_rate"] == pytest.approx(unreadable)
    for kind in CONSISTENCY_KINDS:  # NaN exactly when most samples were unreadable
        assert math.isnan(results[f"ece_{kind}"]) == (unreadable > UNREADABLE_LIMIT)


def _chat_reply(body: dict) -> str:
    """A scripted chat model: the right sum, but one seed in three adds one too many."""
    content = body["messages"][-1]["content"]
    a, b = re.search(r"Tom has (\d+) \w+ and buys (\d+) more", content).groups()
    total = int(a) + int(b) + (body["seed"] % 3 == 2)
    return f"{a} + {b} = {total}.\nThe answer is {total:,}. Confidence: 90%"


def test_consistency_through_a_chat_api_and_its_report(tiny_model_dir: Path, metadata,
                                                       tmp_path: Path):
    """local-chat-completions: 15 seeded requests per document at temperature 1.5; 10 of the 15
    seeds (0..14, seed % 3 != 2) give the right sum. `calidist report` shows the registry's rows
    (Consistency, Entropy, FSD) for GSM8K with the run's scores."""
    from openai_server import ModelServer

    server = ModelServer(tiny_model_dir, idle_timeout=300, chat_reply=_chat_reply)
    server.start()
    try:
        # base_url in the metadata, as `calidist eval` puts it there: the task then samples as
        # on an API
        out = run_lm_eval([TASK], tiny_model_dir, {**metadata, "base_url": server.base_url},
                          model="local-chat-completions",
                          batch_size=1, apply_chat_template=True,
                          model_args=f"model=tiny,base_url={server.base_url}/chat/completions")
    finally:
        server.stop()
    results = out["results"][TASK]
    assert (results["acc,none"], results["parse_fail_rate,none"]) == (1.0, 0.0)
    assert results["sampling_temperature,none"] == 1.5
    assert results["requests_per_doc,none"] == 15
    # every document: consistency 10/15, FSD (10 - 5)/15, all right
    assert results["ece_consistency,none"] == pytest.approx(1 - 10 / 15)
    assert results["ece_fsd,none"] == pytest.approx(1 - 5 / 15)
    report = write_report_from_results(out, tmp_path / "report", n_resamples=0, figures=False)
    assert report.problems == []
    with open(report.out / "leaderboard.csv", encoding="utf-8") as file:
        board = {row["method"]: row for row in csv.DictReader(file)}
    assert set(board) == {"Consistency", "Entropy", "FSD"}
    for method, kind in (("Consistency", "consistency"), ("Entropy", "entropy"), ("FSD", "fsd")):
        assert float(board[method]["gsm8k_ece"]) == pytest.approx(
            100 * results[f"ece_{kind},none"], abs=1e-4)
