"""GSM8K's verbalized (black-box) stages (docs/gsm8k.md): the reply parser, the join of hand-
written replies checked by hand, and both stages end to end through lm-eval with the tiny model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import load_task
from family_data import write_all

from calidist_tasks.prompting.verbalized import CONFIDENCE_INSTRUCTION
from calidist_tasks.registry import metric_names
from calidist_tasks.scoring.records import hints_of
from calidist_tasks.tasks.base import HINT
from calidist_tasks.tasks.gsm8k import HINT_NUMBERS, number_hint
from calidist_tasks.tasks.gsm8k_verbalized import (
    NUMBER_FORMAT,
    NumberFilter,
    parse_number_response,
)

HINT_42 = number_hint(0, "42")  # "Hint: I think the answer should be 42.\nNote ..."


@pytest.mark.parametrize("text, hint, answer, confidence", [
    ("9 * 2 = 18.\nThe answer is 18. Confidence: 80%", None, "18", 0.8),
    ("The answer is $1,234.50.\nConfidence: 65%", None, "1234.5", 0.65),
    ("The answer is $1,234.50.\nConfidence: 0.65", None, "1234.5", None),  # issue #34: not 65%
    ("It costs 10 dollars. I am 75% sure.", None, "10", 0.75),  # "75% sure" is not the answer
    ("Confidence: 90%", None, None, 0.9),  # a confidence alone has no answer
    ("20% of 50 is 10.\nThe answer is 10.", None, "10", None),  # a lone % is part of the maths
    ('The answer is N. Confidence: C%', None, None, None),  # the format's placeholders
    (f"{NUMBER_FORMAT}\nThe answer is 7. Confidence: 60%", None, "7", 0.6),  # format echoed
    (f"{CONFIDENCE_INSTRUCTION} So 3 + 4 = 7", None, "7", None),  # "(0-100)%" is not 100
    (f"{HINT_42}\nNo: 40 is right. Confidence: 70%", HINT_42, "40", 0.7),  # hint echoed
    ("I do not know.", None, None, None),
    ("", None, None, None),
])
def test_parse_number_response(text: str, hint: str | None, answer: str | None,
                               confidence: float | None) -> None:
    assert parse_number_response(text, hint) == {"answer": answer, "confidence": confidence}


def _metadata(data: Path) -> dict:
    return {"data_dir": str(data), "calib_size": 3, "eval_size": 4, "m": 1}


def test_join_of_scripted_replies_by_hand(tmp_path: Path) -> None:
    """Hand-written replies through the filter and process_results of both stages; the records
    and stage 2's aggregation (mu, delta, parse_fail_rate) checked against hand computations."""
    metadata = _metadata(write_all(tmp_path / "data", n_eval=4, n_calib=3))
    stage1 = load_task("calidist_gsm8k_verbalized", metadata)
    samples, want = [], []
    for i, doc in enumerate(stage1.eval_docs):
        t = int(doc["target"])
        reply = [f"{t} + 0 = {t}. The answer is {t}. Confidence: 90%",
                 f"The answer is {t + 1}. Confidence: 50%", "I cannot tell.",
                 f"So the answer is {t}."][i % 4]
        want.append([(str(t), 0.9, 1, True), (str(t + 1), 0.5, 0, True), (None, 0.0, 0, False),
                     (str(t), 0.0, 1, False)][i % 4])
        reading = NumberFilter().apply([[reply]], [doc])[0]
        record = stage1.process_results(doc, [reading])["calidist_record"]
        prediction, confidence, correct, parsed = want[i]
        assert (record["prediction"], record["confidence"], record["correct"], record["parsed"],
                record["parse_failures"], record["generations"]) == (
            prediction, confidence, correct, parsed, int(not parsed), 1)
        samples.append({"doc": dict(doc), "acc": record})
    path = tmp_path / "stage1.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in samples), encoding="utf-8")

    stage2 = load_task("calidist_gsm8k_assertion_verbalized",
                       {**metadata, "original_samples": str(path)})
    records = []
    for i, doc in enumerate(stage2.eval_docs):
        plans = stage2.prompt_plans(doc)
        if want[i][0] is None:  # no ŷ: no hints, one placeholder request
            assert len(plans) == 1
            reading = NumberFilter().apply([["anything"]], [doc])[0]
            record = stage2.process_results(doc, [reading])["calidist_record"]
            assert (record["mu"], record["delta"], record["lambda_raw"], record["correct"],
                    record["parse_failures"], record["generations"]) == (1.0, 1.0, 0.0, 0, 1, 1)
            records.append(record)
            continue
        candidates = stage2.candidates(doc)
        variants = [stage2.distracted_doc(doc, plan) for plan in plans[1:]]
        assert [v[HINT].split("\n")[0].split()[-1] for v in variants] == [
            f"{c}." for c in candidates[1:]]
        # hint 1: follows it at 60%; hint 2: keeps ŷ at 80% (echoing the hint); hint 3:
        # unreadable; hint 4: keeps ŷ with no confidence
        texts = [f"The answer is {candidates[1]}. Confidence: 60%",
                 f"{variants[1][HINT]}\nThe answer is {candidates[0]}. Confidence: 80%",
                 "No idea.", f"The answer is {candidates[0]}."]
        readings = [NumberFilter().apply([[t]], [v])[0] for t, v in zip(texts, variants,
                                                                          strict=True)]
        record = stage2.process_results(doc, readings)["calidist_record"]
        p = want[i][1]
        assert record["prediction"] == candidates[0] == want[i][0]
        assert record["confidence"] == p and record["correct"] == want[i][2]
        # issue #34: the unreadable hints 3 and 4 are logged with confidence None and left out
        # of mu and delta (k = 2), not counted as a flip / a move at 1/c = 0
        assert [(h.prediction, h.confidence) for h in hints_of(record)] == [
            (1, 0.6), (0, 0.8), (-1, None), (0, None)]
        assert record["answers"] == [candidates[1], candidates[0], None, candidates[0]]
        assert record["mu"] == pytest.approx(0.6 / 2)  # flips weighted by confidence
        assert record["delta"] == pytest.approx(abs(p - (0.6 + 0.8) / 2))
        assert record["unreadable_hinted"] == 2
        assert record["flipped"] == 1 and record["requests"] == 4
        assert record["parse_failures"] == 2 + int(not want[i][3])
        assert record["generations"] == 1 + HINT_NUMBERS
        records.append(record)
    summary = stage2.summarize(records)
    evaluation = [r for r in records if r["split"] == "evaluation"]
    assert summary["n_evaluation"] == 4 and summary["n_calibration"] == 3
    assert summary["mu_mean"] == pytest.approx(np.mean([r["mu"] for r in evaluation]))
    assert summary["delta_mean"] == pytest.approx(np.mean([r["delta"] for r in evaluation]))
    assert summary["acc"] == pytest.approx(np.mean([r["correct"] for r in evaluation]))
    assert summary["parse_fail_rate"] == pytest.approx(
        sum(r["parse_failures"] for r in evaluation) / sum(r["generations"] for r in evaluation))
    assert set(summary) == set(metric_names(True, "verbalized"))


def test_stage2_verbalized_needs_its_own_first_stage(tmp_path: Path) -> None:
    metadata = _metadata(write_all(tmp_path / "data", n_eval=4, n_calib=3))
    with pytest.raises(FileNotFoundError, match="samples_calidist_gsm8k_verbalized_"):
        load_task("calidist_gsm8k_assertion_verbalized",
                  {**metadata, "original_samples": str(tmp_path)})
    logit = tmp_path / "logit.jsonl"  # calidist_gsm8k's samples: no stated confidence
    stage1 = load_task("calidist_gsm8k", metadata)
    logit.write_text("".join(json.dumps({"doc": dict(d), "acc": stage1.process_results(
        d, ["The answer is 1"])["calidist_record"]}) + "\n" for d in stage1.eval_docs),
        encoding="utf-8")
    with pytest.raises(ValueError, match=r"logit.jsonl line 1: the record of document 0 .* lacks "
                                         r"'confidence' \(not a record of "
                                         r"calidist_gsm8k_verbalized\)"):
        load_task("calidist_gsm8k_assertion_verbalized",
                  {**metadata, "original_samples": str(logit)})
