"""Joining a document's answers (CaliDistTask.process_results): mu, delta, lambda_raw by hand.

The log-likelihoods are made up here, so every number is checked against arithmetic done in the
test, not against the library that computes it.
"""

from __future__ import annotations

import gc
import json
import math

import numpy as np
import pytest
from conftest import doc_requests, load_task
from hypothesis import given, settings
from hypothesis import strategies as st

from calidist_tasks.prompting import distractors
from calidist_tasks.scoring.joining import (
    Outcome,
    PromptPlan,
    join_document,
    outcome_from_loglikelihoods,
    outcomes_from_loglikelihoods,
)
from calidist_tasks.scoring.records import hints_of, record_marker
from calidist_tasks.tasks.base import refuse_failed_documents

SIZES = {"calib_size": 5, "eval_size": 7}


def mnli(mnli_data_dir, name: str = "calidist_mnli_assertion", **metadata):
    return load_task(name, {"data_dir": str(mnli_data_dir), **SIZES, **metadata})


def letter_lls(probs, shift: float = -3.0) -> list[float]:
    """Unnormalised letter log-likelihoods whose softmax is ``probs`` (a shift changes nothing)."""
    return [math.log(p) + shift for p in probs]


def answers(plans, by_plan) -> list[tuple[float, bool]]:
    """lm-eval's results: (loglikelihood, is_greedy) per prompt and letter, in request order."""
    return [(ll, False) for plan in plans for ll in by_plan(plan)]


# Original prompt: a (label 0) with p = 0.6. Hinted prompts per (hint label, template rank):
HINTED = {
    # Hints naming the predicted label a must be ignored: they would add flips of 0.9 to mu.
    (0, 0): [0.05, 0.05, 0.9],
    (0, 1): [0.05, 0.9, 0.05],
    (1, 0): [0.2, 0.7, 0.1],  # flips to b with 0.7
    (1, 1): [0.5, 0.4, 0.1],  # stays a with 0.5
    (2, 0): [0.1, 0.1, 0.8],  # flips to c with 0.8
    (2, 1): [0.45, 0.35, 0.2],  # stays a with 0.45
}
# Kept hints (labels b and c): k = 4, flips 0.7 and 0.8, mean hinted confidence 0.6125.
MU = (0.7 + 0.8) / 4
DELTA = abs(0.6 - (0.7 + 0.5 + 0.8 + 0.45) / 4)
LAMBDA_RAW = (1 - MU) / (DELTA + 1e-10)


def hand_made(task, doc):
    plans = task.prompt_plans(doc)
    rank: dict[int, int] = {}

    def by_plan(plan):
        if plan.hint_label is None:
            return letter_lls([0.6, 0.3, 0.1])
        r = rank.setdefault(plan.hint_label, 0)
        rank[plan.hint_label] += 1
        return letter_lls(HINTED[(plan.hint_label, r)], shift=-1.0 - r)

    return plans, answers(plans, by_plan)


def test_process_results_computes_mu_delta_lambda_by_hand(mnli_data_dir):
    task = mnli(mnli_data_dir)
    doc = task.eval_docs[SIZES["calib_size"]]  # the first evaluation document
    plans, results = hand_made(task, doc)
    record = task.process_results(doc, results)

    # One record per document, under calidist_record; acc the document's accuracy (an
    # evaluation document's 0 or 1, None on a calibration document); every other metric name
    # holds a marker naming the record.
    assert set(record) == set(task.aggregation())
    rec = record["calidist_record"]
    assert record["acc"] == (rec["correct"] if rec["split"] == "evaluation" else None)
    assert all(value == record_marker("calidist_record") for name, value in record.items()
               if name not in ("calidist_record", "acc"))

    assert rec["prediction"] == 0
    assert rec["confidence"] == pytest.approx(0.6)
    assert rec["label"] == doc["label"]
    assert rec["correct"] == int(doc["label"] == 0)
    assert rec["letter_logprobs"] == pytest.approx(letter_lls([0.6, 0.3, 0.1]))
    assert rec["mu"] == pytest.approx(MU)
    assert rec["delta"] == pytest.approx(DELTA)
    assert rec["lambda_raw"] == pytest.approx(LAMBDA_RAW)
    assert rec["flipped"] == 1
    assert rec["split"] == "evaluation"
    assert rec["index"] == SIZES["calib_size"]
    # Every hinted prompt is logged (the ignored ones too), with its template and answer.
    hints = hints_of(rec)
    assert [(h.label, h.template) for h in hints] == [(p.hint_label, p.template)
                                                      for p in plans[1:]]
    assert [h.prediction for h in hints] == [2, 1, 1, 0, 2, 0]
    assert [h.confidence for h in hints] == pytest.approx([0.9, 0.9, 0.7, 0.5, 0.8, 0.45])


def test_requests_per_document_is_one_plus_c_times_m_prompts_of_c_letters(mnli_data_dir):
    c = 3
    cases = [("calidist_mnli", {}, 1), ("calidist_mnli_assertion", {}, 1 + c * 2),
             ("calidist_mnli_assertion", {"m": 3}, 1 + c * 3), ("calidist_mnli_probe", {}, 1 + c),
             ("calidist_mnli_corruption", {}, 1 + c)]
    for name, metadata, prompts in cases:
        task = mnli(mnli_data_dir, name, **metadata)
        doc = task.eval_docs[0]
        requests = doc_requests(task, doc)
        assert len(requests) == prompts * c, name
        assert len({r.arguments[0] for r in requests}) == prompts, name
        assert [r.arguments[1] for r in requests] == ["a", "b", "c"] * prompts
        assert [r.idx for r in requests] == list(range(prompts * c))
        record = task.process_results(doc, [(-1.0, False)] * (prompts * c))["calidist_record"]
        assert record["requests"] == prompts * c


def test_worst_case_delta_mode(mnli_data_dir):
    task = mnli(mnli_data_dir, delta_mode="worst_case")
    doc = task.eval_docs[0]
    rec = task.process_results(doc, hand_made(task, doc)[1])["calidist_record"]
    assert rec["delta"] == pytest.approx(0.6 - 0.45)  # largest drop among kept hints
    assert rec["mu"] == pytest.approx(MU)


def test_stable_document_has_finite_lambda_raw(mnli_data_dir):
    task = mnli(mnli_data_dir, "calidist_mnli_probe")
    doc = task.eval_docs[0]
    rec = task.process_results(doc, [(-2.0, False)] * 12)["calidist_record"]  # every prompt uniform
    assert rec["mu"] == 0 and rec["delta"] == 0 and rec["flipped"] == 0
    assert rec["lambda_raw"] == pytest.approx(1e10)


def test_non_finite_loglikelihood_names_task_document_and_source_row(mnli_data_dir):
    task = mnli(mnli_data_dir)
    doc = task.eval_docs[6]
    results = hand_made(task, doc)[1]
    results[7] = (math.nan, False)  # prompt 2 (the second hinted prompt), letter b
    # refused at the aggregation
    message = task.process_results(doc, results)["calidist_record"]["error"]
    assert "calidist_mnli_assertion" in message
    assert "document 6" in message
    assert doc["calidist_source"] in message
    assert doc["calidist_source"].startswith("validation_matched.jsonl:")
    assert "prompt 2" in message


def test_wrong_number_of_answers_is_refused(mnli_data_dir):
    task = mnli(mnli_data_dir, "calidist_mnli_probe")
    doc = task.eval_docs[0]
    record = task.process_results(doc, [(-1.0, False)] * 11)["calidist_record"]
    assert record["error"] == (f"calidist_mnli_probe document 0 ({doc['calidist_source']}): "
                               "expected 12 answers, got 11")
    good = task.process_results(task.eval_docs[1], [(-1.0, False)] * 12)["calidist_record"]
    with pytest.raises(ValueError, match=r"^1 of 2 documents have answers that cannot be used: "
                                         r"calidist_mnli_probe document 0 .*got 11$"):
        refuse_failed_documents([good, record])
    refuse_failed_documents([good])  # nothing to refuse


def test_outcome_is_softmax_over_letters():
    outcome = outcome_from_loglikelihoods([-10.0, -9.0, -12.0], "here")
    expected = np.exp([-10.0, -9.0, -12.0]) / np.exp([-10.0, -9.0, -12.0]).sum()
    assert outcome.prediction == 1
    assert outcome.confidence == pytest.approx(expected[1])
    with pytest.raises(ValueError, match="here"):
        outcome_from_loglikelihoods([-1.0, -math.inf], "here")


def test_join_document_without_hints_is_the_original_only():
    outcome = outcome_from_loglikelihoods([-1.0, -2.0], "x")
    record = join_document([PromptPlan()], [outcome], label=1)
    assert record["prediction"] == 0 and record["correct"] == 0
    assert "mu" not in record and "hints" not in record
    with pytest.raises(ValueError, match="original"):
        join_document([PromptPlan(1)], [outcome], label=1)


def test_hint_letters_cover_every_label(mnli_data_dir):
    # The harness builds all prompts before any answer: one hint per label and template.
    task = mnli(mnli_data_dir, m=2)
    plans = task.prompt_plans(task.eval_docs[0])
    assert [p.hint_label for p in plans] == [None, 0, 0, 1, 1, 2, 2]
    for label in range(3):
        templates = [p.template for p in plans if p.hint_label == label]
        assert len(set(templates)) == 2
        assert all(0 <= t < len(distractors.ASSERTION_TEMPLATES) for t in templates)


def test_outcomes_of_a_document_equal_one_outcome_per_prompt():
    values = list(np.log(np.random.default_rng(3).dirichlet([1, 1, 1], size=4)).ravel())
    outcomes = outcomes_from_loglikelihoods(values, 3, "doc")
    assert outcomes == [outcome_from_loglikelihoods(values[i:i + 3], "doc")
                        for i in range(0, 12, 3)]
    assert all(math.isclose(sum(np.exp(o.letter_logprobs - np.max(o.letter_logprobs))) *
                            o.confidence, 1.0) for o in outcomes)


@pytest.mark.parametrize(("bad", "message"), [
    (math.nan, "prompt 2: the model returned non-finite"),
    (None, "prompt 2: the model returned non-finite"),
    ("oops", "prompt 2: the model returned log-probabilities that are not numbers"),
])
def test_outcomes_of_a_document_name_the_prompt_of_a_bad_value(bad, message):
    values = [-1.0, -2.0] * 4
    values[5] = bad
    with pytest.raises(ValueError, match=message):
        outcomes_from_loglikelihoods(values, 2, "task document 7")


def test_outcomes_of_a_document_refuse_a_ragged_list():
    with pytest.raises(ValueError, match="prompt 2: expected one log-probability per option"):
        outcomes_from_loglikelihoods([-1.0, -2.0, -1.0, -2.0, -1.0], 2, "doc")
    with pytest.raises(ValueError, match="expected 3 log-probabilities per prompt, got 5"):
        outcomes_from_loglikelihoods([-1.0, -2.0, -1.0, -2.0, -1.0], 3, "doc")


def reference_record(values: list[float], n_choices: int, plans: list[PromptPlan], label: int,
                     delta_mode: str) -> dict | None:
    """A document's record by the definitions (docs/method.md), in numpy and with none of
    ``joining``'s shortcuts: a softmax per prompt, the first argmax, only hints naming another
    label than the original prediction (None when no hint does)."""
    logits = np.asarray(values).reshape(-1, n_choices)
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    predictions = logits.argmax(axis=1)
    confidences = probs[np.arange(len(probs)), predictions]
    y, p = predictions[0], confidences[0]
    kept = [j for j in range(1, len(plans)) if plans[j].hint_label != y]
    if not kept:
        return None
    flips = [confidences[j] * (predictions[j] != y) for j in kept]
    others = confidences[kept]
    delta = abs(p - others.mean()) if delta_mode == "mean" else max(0.0, p - others.min())
    return {"prediction": int(y), "confidence": p, "correct": int(y == label),
            "hints": [(plan.hint_label, plan.template, int(q), c) for plan, q, c
                      in zip(plans[1:], predictions[1:], confidences[1:], strict=True)],
            "mu": np.mean(flips), "delta": delta, "flipped": int(any(predictions[kept] != y))}


LOGLIKELIHOOD = st.one_of(st.floats(-60.0, 0.0), st.sampled_from([0.0, -1.0, -745.0, -1e5]))


@settings(max_examples=75, deadline=None)
@given(st.integers(2, 5), st.integers(1, 6), st.data())
def test_join_equals_the_definitions_on_random_documents(n_choices, n_hints, data):
    # The per-document fast path (one softmax loop, plain-Python mu and delta, plain tuples) must
    # give the record the definitions give; ties and saturated softmaxes included.
    values = data.draw(st.lists(LOGLIKELIHOOD, min_size=(n_hints + 1) * n_choices,
                                max_size=(n_hints + 1) * n_choices))
    plans = [PromptPlan()] + [PromptPlan(data.draw(st.integers(0, n_choices - 1)), t)
                              for t in range(n_hints)]
    label = data.draw(st.integers(0, n_choices - 1))
    delta_mode = data.draw(st.sampled_from(["mean", "worst_case"]))
    outcomes = outcomes_from_loglikelihoods(values, n_choices, "doc")
    expected = reference_record(values, n_choices, plans, label, delta_mode)
    if expected is None:
        with pytest.raises(ValueError, match="k == 0"):
            join_document(plans, outcomes, label, delta_mode)
        return
    record = join_document(plans, outcomes, label, delta_mode)
    for key in ("prediction", "correct", "flipped"):
        assert record[key] == expected[key], key
    assert json.loads(json.dumps(record["letter_logprobs"])) == values[:n_choices]  # as logged
    assert [hint[:3] for hint in record["hints"]] == [hint[:3] for hint in expected["hints"]]
    assert [hint[3] for hint in record["hints"]] == pytest.approx(
        [hint[3] for hint in expected["hints"]], rel=1e-12)
    for key in ("confidence", "mu", "delta"):
        assert record[key] == pytest.approx(expected[key], rel=1e-12, abs=1e-15), key
    assert record["lambda_raw"] == pytest.approx(
        min((1 - expected["mu"]) / (expected["delta"] + 1e-10), 1e10), rel=1e-5)
    assert all(type(record[key]) is float for key in ("confidence", "mu", "delta", "lambda_raw"))


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 4), st.integers(1, 5), st.data())
def test_a_bad_value_anywhere_names_its_prompt(n_choices, n_prompts, data):
    values: list = [-1.0] * (n_choices * n_prompts)
    at = data.draw(st.integers(0, len(values) - 1))
    values[at] = data.draw(st.sampled_from([math.nan, math.inf, -math.inf, None, "oops"]))
    with pytest.raises(ValueError, match=rf"^document 7 prompt {at // n_choices}: the model "):
        outcomes_from_loglikelihoods(values, n_choices, "document 7")


def test_a_record_leaves_the_garbage_collector_once_collected():
    # A run holds every record until the aggregation: a record of numbers and tuples stops being
    # scanned by the collector's passes (its tuples after one full collection, then the record
    # holding only untracked values after the next); one holding a list would be scanned forever.
    outcomes = outcomes_from_loglikelihoods([-0.1, -2.0, -0.3, -1.0, -1.5, -0.2], 2, "doc")
    record = join_document([PromptPlan(), PromptPlan(1, 0), PromptPlan(0, 1)], outcomes, 0)
    gc.collect()
    gc.collect()
    assert not gc.is_tracked(record)


# ------------------------------------------------------------------ unreadable replies (issue #34)
def test_an_unreadable_hinted_reply_is_left_out_of_mu_and_delta():
    plans = [PromptPlan(), PromptPlan(1, 0), PromptPlan(1, 1), PromptPlan(2, 0), PromptPlan(0, 0)]
    outcomes = [Outcome(0, 0.8), Outcome(1, 0.6), Outcome(-1, 1 / 3, parsed=False),
                Outcome(0, 0.7), Outcome(0, 0.9)]
    record = join_document(plans, outcomes, 0)
    # k = 2 readable hints naming another label (the hint naming 'a' does not count)
    assert record["mu"] == pytest.approx(0.6 / 2)
    assert record["delta"] == pytest.approx(abs(0.8 - (0.6 + 0.7) / 2))
    assert record["unreadable_hinted"] == 1 and record["unreadable_original"] == 0
    assert record["hints"][1] == (1, 1, -1, None)  # logged as unreadable, not as a 1/c answer
    assert record["parsed"] is False and record["correct"] == 1


def test_a_document_with_no_readable_hint_is_least_reliable():
    plans = [PromptPlan(), PromptPlan(1, 0), PromptPlan(1, 1)]
    unreadable = Outcome(-1, 0.5, parsed=False)
    record = join_document(plans, [Outcome(0, 0.8), unreadable, unreadable], 0)
    assert (record["mu"], record["delta"], record["lambda_raw"]) == (1.0, 1.0, 0.0)
    assert record["flipped"] == 0 and record["unreadable_hinted"] == 2


def test_two_unreadable_readings_never_agree():
    """An unreadable original (-1) and unreadable hints (-1): before, -1 == -1 counted as a kept
    answer (mu = 0, the most reliable); now no readable hint: least reliable, and the original
    is wrong at 1/c whatever."""
    plans = [PromptPlan(), PromptPlan(0, 0), PromptPlan(1, 0)]
    unreadable = Outcome(-1, 0.5, parsed=False)
    record = join_document(plans, [unreadable] * 3, 0)
    assert (record["mu"], record["lambda_raw"]) == (1.0, 0.0)
    assert (record["unreadable_original"], record["correct"], record["confidence"]) == (1, 0, 0.5)


def test_an_unreadable_original_is_scored_at_1_over_c_by_every_method_and_fits_nothing():
    from calidist_tasks.scoring.aggregation import summarize_calidist
    from calidist_tasks.scoring.fits import split_records
    from calidist_tasks.settings import RunSettings

    rng = np.random.default_rng(0)
    plans = [PromptPlan(), PromptPlan(1, 0), PromptPlan(1, 1)]
    records = []
    for index in range(40):
        split = "calibration" if index < 20 else "evaluation"
        if index % 10 == 3:  # unreadable original (an answer read from the rule: 1/c)
            outcomes = [Outcome(-1, 0.5, parsed=False)] + [Outcome(1, 0.9)] * 2
        else:
            p, q = rng.uniform(0.5, 1.0, 2)
            outcomes = [Outcome(0, p), Outcome(int(q > 0.75), q), Outcome(0, q)]
        record = join_document(plans, outcomes, int(rng.integers(0, 2)))
        record.update(index=index, split=split, requests=3)
        records.append(record)
    calibration, evaluation = split_records(records)
    assert len(calibration) == 18 and not any(r["unreadable_original"] for r in calibration)
    assert sum(r["unreadable_original"] for r in evaluation) == 2
    context = {"task": "calidist_x_assertion", "benchmark": "x", "labels": ["a", "b"],
               "style": "assertion", "model": None}
    summary = summarize_calidist(records, RunSettings(), context)
    assert summary["n_calibration"] == 18
    # the same scores as if CaliDist had given those two documents 1/c itself: brier of the
    # unreadable documents is (0.5 - 0)^2 each, whatever the calibrator maps 0.5 to
    readable = [r for r in evaluation if not r["unreadable_original"]]
    fitted = summarize_calidist([*calibration, *readable], RunSettings(), context)
    brier = (fitted["brier"] * len(readable) + 2 * 0.25) / len(evaluation)
    assert summary["brier"] == pytest.approx(brier)
    assert summary["brier_vanilla"] == pytest.approx(
        (fitted["brier_vanilla"] * len(readable) + 2 * 0.25) / len(evaluation))
