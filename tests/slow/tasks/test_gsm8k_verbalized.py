"""Slow half of ``tests/tasks/test_gsm8k_verbalized.py`` (builds the tiny model or runs lm-eval).

What the module tests: the fast half's docstring."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_report_rebuilds_results, run_lm_eval
from family_data import write_all
from test_gsm8k import _save_samples
from test_gsm8k_verbalized import _metadata

from calidist_tasks.prompting.verbalized import CONFIDENCE_INSTRUCTION
from calidist_tasks.registry import metric_names
from calidist_tasks.runs.files import save_like_lm_eval
from calidist_tasks.scoring.aggregation import SCORES, UNREADABLE_LIMIT
from calidist_tasks.scoring.records import hints_of, line_record
from calidist_tasks.tasks.gsm8k import HINT_NUMBERS
from calidist_tasks.tasks.gsm8k_verbalized import (
    NUMBER_FORMAT,
    parse_number_response,
)


def test_two_verbalized_stages_end_to_end(tiny_model_dir: Path, tmp_path: Path) -> None:
    metadata = _metadata(write_all(tmp_path / "data", n_eval=4, n_calib=3))
    first = run_lm_eval(["calidist_gsm8k_verbalized"], tiny_model_dir, metadata,
                        gen_kwargs="max_gen_toks=8")
    save_like_lm_eval(first, tmp_path / "lm1")
    assert assert_report_rebuilds_results(tmp_path / "lm1") == ["calidist_gsm8k_verbalized"]
    samples = first["samples"]["calidist_gsm8k_verbalized"]
    results = {k.split(",")[0]: v for k, v in first["results"]["calidist_gsm8k_verbalized"].items()
               if "," in k}
    assert set(results) >= set(metric_names(False, "verbalized"))
    readings = [parse_number_response(s["resps"][0][0]) for s in samples]
    assert [s["filtered_resps"][0][0] for s in samples] == readings
    evaluation = [r for r, s in zip(readings, samples, strict=True)
                  if s["doc"]["calidist_split"] == "evaluation"]
    assert results["parse_fail_rate"] == pytest.approx(
        sum(None in r.values() for r in evaluation) / 4)
    assert results["requests_per_doc"] == 1 and results["n_calibration"] == 3
    prompt = samples[0]["arguments"][0][0]
    assert CONFIDENCE_INSTRUCTION in prompt and prompt.endswith(NUMBER_FORMAT + "\n")

    # the tiny model states nothing readable: give documents answers (right, wrong, none, and
    # right without a confidence) and save them as the CLI would
    for i, sample in enumerate(samples):
        target = int(sample["doc"]["target"])
        line_record(sample).update([{"prediction": str(target), "confidence": 0.9, "parsed": True},
                              {"prediction": str(target + 2), "confidence": 0.6, "parsed": True},
                              {"prediction": None, "confidence": 0.0, "parsed": False},
                              {"prediction": str(target), "confidence": 0.0, "parsed": False},
                              ][i % 4])
    _save_samples(tmp_path / "stage1", "calidist_gsm8k_verbalized", samples)
    second = run_lm_eval(["calidist_gsm8k_assertion_verbalized"], tiny_model_dir,
                         {**metadata, "original_samples": str(tmp_path / "stage1")},
                         gen_kwargs="max_gen_toks=8")
    task = "calidist_gsm8k_assertion_verbalized"
    save_like_lm_eval(second, tmp_path / "lm2")
    assert assert_report_rebuilds_results(tmp_path / "lm2") == [task]
    results = {k.split(",")[0]: v for k, v in second["results"][task].items() if "," in k}
    assert set(results) >= set(metric_names(True, "verbalized"))
    # the random tiny model's replies are mostly unreadable: every score is then NaN (the
    # scores would describe the fallback), every other number stays finite
    unreadable = results["parse_fail_rate"] > UNREADABLE_LIMIT
    for name in metric_names(True, "verbalized"):
        is_score = name.startswith(tuple(SCORES))
        assert math.isnan(results[name]) if unreadable and is_score else math.isfinite(
            results[name]), name
    records = []
    for sample in second["samples"][task]:
        record, doc = line_record(sample), sample["doc"]
        records.append(record)
        if record["prediction"] is None:
            assert record["requests"] == 1 and record["lambda_raw"] == 0.0
            assert sample["arguments"][0][1]["max_gen_toks"] == 1
            continue
        prompts = [args[0] for args in sample["arguments"]]
        assert len(set(prompts)) == record["requests"] == HINT_NUMBERS  # m = 1
        assert all(p.endswith(NUMBER_FORMAT + "\n") and "\nHint: " in p for p in prompts)
        assert record["correct"] == int(record["prediction"] == doc["target"])
        # every hinted reply is unreadable: a change at confidence 0 (μ 0, δ = p, flipped)
        # every hinted reply unreadable: none counts, and the stated rule gives mu = delta = 1
        assert [(h.prediction, h.confidence) for h in hints_of(record)] == [
            (-1, None)] * HINT_NUMBERS
        assert record["mu"] == 1.0 and record["delta"] == 1.0
    evaluation = [r for r in records if r["split"] == "evaluation"]
    assert results["acc"] == pytest.approx(np.mean([r["correct"] for r in evaluation]))
    assert results["mu_mean"] == pytest.approx(np.mean([r["mu"] for r in evaluation]))
    assert results["delta_mean"] == pytest.approx(np.mean([r["delta"] for r in evaluation]))
    assert results["parse_fail_rate"] == pytest.approx(
        sum(r["parse_failures"] for r in evaluation) / sum(r["generations"] for r in evaluation))
    assert 0.0 < results["parse_fail_rate"] < 1.0


def _chat_reply(body: dict) -> str:
    """A scripted chat model: the right sum at 80% on the original prompt, kept at 70% under a
    hint (the prompt's own format and hint are in the message)."""
    content = body["messages"][-1]["content"]
    a, b = re.search(r"Tom has (\d+) \w+ and buys (\d+) more", content).groups()
    confidence = 70 if "\nHint: " in content else 80
    return f"{a} + {b} = {int(a) + int(b)}.\nThe answer is {int(a) + int(b)}. " \
           f"Confidence: {confidence}%"


def test_both_stages_through_a_chat_api(tiny_model_dir: Path, tmp_path: Path) -> None:
    """local-chat-completions --apply_chat_template (tests/openai_server.py, scripted replies)."""
    from openai_server import ModelServer

    metadata = _metadata(write_all(tmp_path / "data", n_eval=4, n_calib=3))
    server = ModelServer(tiny_model_dir, idle_timeout=300, chat_reply=_chat_reply)
    server.start()
    try:
        chat = dict(model="local-chat-completions", batch_size=1, apply_chat_template=True,
                    model_args=f"model=tiny,base_url={server.base_url}/chat/completions")
        first = run_lm_eval(["calidist_gsm8k_verbalized"], tiny_model_dir, metadata, **chat)
        _save_samples(tmp_path / "stage1", "calidist_gsm8k_verbalized",
                      first["samples"]["calidist_gsm8k_verbalized"])
        second = run_lm_eval(["calidist_gsm8k_assertion_verbalized"], tiny_model_dir,
                             {**metadata, "original_samples": str(tmp_path / "stage1")}, **chat)
    finally:
        server.stop()
    results = first["results"]["calidist_gsm8k_verbalized"]
    assert (results["acc,none"], results["parse_fail_rate,none"]) == (1.0, 0.0)
    assert results["ece_vanilla,none"] == pytest.approx(0.2)  # 80% stated, all right
    results = second["results"]["calidist_gsm8k_assertion_verbalized"]
    assert (results["acc,none"], results["parse_fail_rate,none"]) == (1.0, 0.0)
    assert (results["mu_mean,none"], results["flip_rate,none"]) == (0.0, 0.0)
    assert results["delta_mean,none"] == pytest.approx(0.1)  # |0.8 - 0.7|
    assert results["requests_per_doc,none"] == HINT_NUMBERS  # m = 1
