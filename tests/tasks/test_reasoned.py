"""Reasoned (_cot) tasks, the paper's protocol: one reasoned reply per prompt, three readings.

The tiny random model writes no readable answer, so the end-to-end test replaces the logged
replies of a real verbalized run with written ones (the prompts stay the model's) before the
reasoned task scores them; the letter log-probabilities are then checked against a direct
scoring of prompt + reply prefix with the same model."""

from __future__ import annotations

import json
import math

import pytest

from calidist_tasks.prompting import verbalized
from calidist_tasks.tasks.reasoned import read_reply, reasoned_metric_names

OPTIONS = ["Sentence2 is a paraphrase of Sentence1.", "Sentence2 is not a paraphrase of Sentence1."]


def locate_answer(reply, options, hint=None):
    """(answer, where its letter stands) as the one reader reads it; None without a letter."""
    reading = verbalized.read_reply(reply, options, hint)
    return None if reading.at is None else (reading.answer, reading.at)


@pytest.mark.parametrize(("reply", "answer", "before"), [
    # the paper's example reply: the final statement, after steps with their own letters
    ("Option (a) looks right. Confidence: 55%\nBut the correct answer is (b) Sentence2 is not "
     "a paraphrase. Overall Confidence: 60%", 1, "correct answer is ("),
    ("Step 1. Confidence: 40%\nThe answer is (A) Sentence2 is a paraphrase.", 0, "answer is ("),
    ("Answer: B", 1, "Answer: "),
    ("(b)", 1, "("),
])
def test_the_answer_is_located_where_the_reply_wrote_its_letter(reply, answer, before):
    found = locate_answer(reply, OPTIONS)
    assert found is not None
    assert found[0] == answer
    assert reply[:found[1]].endswith(before)


@pytest.mark.parametrize("reply", [
    "",
    "I cannot tell.",
    "Sentence2 is not a paraphrase of Sentence1.",  # an option's text: no letter to score
    "The answer is (c).",  # not an option
    "(a) or (b)",
])
def test_an_answer_without_a_letter_to_score_is_not_located(reply):
    assert locate_answer(reply, OPTIONS) is None


def test_an_echoed_hint_after_the_answer_is_not_the_answer():
    hint = "Hint: I think the answer should be (a) Sentence2 is a paraphrase of Sentence1."
    reply = "The answer is (b). Overall Confidence: 70%. I think the answer should be (a)"
    answer, cut = locate_answer(reply, OPTIONS, hint=hint)
    assert (answer, reply[:cut]) == (1, "The answer is (")


def test_a_reply_reads_as_its_answer_confidence_and_letter_case():
    shown = {"_calidist_choices": OPTIONS}
    reading = read_reply("Steps. Confidence: 30%\nSo the answer is (B). Overall Confidence: 85%",
                         shown)
    assert (reading.answer, reading.stated, reading.letters(2)) == (1, 0.85, ["A", "B"])
    assert read_reply("no idea", shown).answer is None


def test_both_readings_are_reported_under_distinct_names():
    hinted = reasoned_metric_names(distracted=True)
    assert {"ece", "ece_vanilla", "flip_rate", "alpha", "parse_fail_rate", "ece_verbalized",
            "ece_vanilla_verbalized", "alpha_verbalized",
            "parse_fail_rate_verbalized"} <= set(hinted)
    assert "acc_verbalized" not in hinted and "flip_rate_verbalized" not in hinted
    original = reasoned_metric_names(distracted=False)
    assert {"ece_ts", "ece_vector", "temperature", "ece_platt_verbalized",
            "ece_isotonic_verbalized", "ece_vanilla_verbalized"} <= set(original)
    assert "ece_ts_verbalized" not in original and len(original) == len(set(original))


def test_both_readings_log_every_confidence_under_its_metric_name():
    """Each evaluation record logs the confidences of both readings, the stated one under the
    ``_verbalized`` names (``lift_reading``); every reported score is the score of the logged
    confidences."""
    import numpy as np

    from calidist_tasks.registry import SCORES
    from calidist_tasks.scoring.aggregation import interval_score
    from calidist_tasks.scoring.records import confidence_key
    from calidist_tasks.settings import RunSettings
    from calidist_tasks.tasks.reasoned import summarize_reasoned

    rng = np.random.default_rng(2)

    def reading(i: int) -> dict:
        mu, delta = float(rng.uniform(0, 0.6)), float(rng.uniform(0.01, 0.4))
        correct = int(rng.random() < 0.8 - mu)
        return {"index": i, "split": "calibration" if i < 30 else "evaluation", "label": 0,
                "prediction": 1 - correct, "confidence": float(rng.uniform(0.5, 1.0)),
                "correct": correct, "mu": mu, "delta": delta, "lambda_raw": (1 - mu) / delta,
                "flipped": int(mu > 0), "requests": 3, "generations": 1, "parse_failures": 0}

    records = [{**reading(i), "verbalized": reading(i)} for i in range(50)]
    context = {"task": "calidist_x_assertion_cot", "labels": ["a", "b"], "model": None}
    out = summarize_reasoned(records, RunSettings(), context, distracted=True)
    evaluation = records[30:]
    checked = set()
    for name, value in out.items():
        score, suffix = interval_score(name) or (None, "")
        if score in SCORES and math.isfinite(value):
            key = confidence_key(suffix)
            logged = [r["calibrated"][key] for r in evaluation]
            right = [r["calibrated_correct"][key] for r in evaluation]
            assert SCORES[score](logged, right) == pytest.approx(value, abs=1e-12), name
            checked.add(key)
    assert checked == {"calidist", "vanilla", "verbalized", "vanilla_verbalized"}
    assert all("calibrated" not in r["verbalized"] for r in records)
    assert all(r["calibrated"] is None for r in records[:30])


# ---------------------------------------------------------------------- end to end (tiny model)
METADATA = {"calib_size": 4, "eval_size": 4, "m": 1}


def test_a_reasoned_task_alone_says_how_to_get_its_replies(ppdb_data_dir):
    from conftest import load_task

    task = load_task("calidist_ppdb_probe_cot", {**METADATA, "data_dir": str(ppdb_data_dir)})
    with pytest.raises(ValueError, match="calidist_ppdb_probe_verbalized.*--metadata"):
        task.build_all_requests(limit=None, rank=0, world_size=1)


# ---------------------------------------------------------------------- two-stage reply runs
COT = "calidist_ppdb_assertion_cot"
REPLY_TASK = "calidist_ppdb_assertion_verbalized"


@pytest.mark.parametrize("two_stage", ["flag", "argument", None])
def test_reply_stages_run_the_replies_in_two_stages_with_two_stage(two_stage):
    """``calidist eval --two-stage`` (the flag taken off, ``two_stage=True``) and a benchmark's
    command line (the flag kept): the reply run is two-stage, not pinned to one stage."""
    from calidist_tasks.runs.reply_runs import ONE_STAGE, reply_stages

    argv = ["--model", "hf", "--tasks", COT, "--output_path", "out",
            *(["--two-stage"] if two_stage == "flag" else [])]
    replies, scoring = reply_stages(argv, "out/replies", two_stage == "argument")
    assert replies[replies.index("--tasks") + 1] == REPLY_TASK
    assert scoring[scoring.index("--tasks") + 1] == COT
    assert ("--two-stage" in replies) == ("--two-stage" in scoring) == (two_stage == "flag")
    assert (json.dumps(ONE_STAGE) in replies) == (two_stage is None)
