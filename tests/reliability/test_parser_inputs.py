"""Replies the parsers used to misread, or crashed on after the model had answered.

- Verbalized (docs/backends.md): "1000%", "10000%", "1,000%" are no confidence on the 0-100%
  scale (they read as 100%, 100% and 1%); "The answer is (a) or (b)" names no one option (read as
  (a)); "I am not 90% sure" states no confidence (read as 90%). Each is now unreadable by the
  documented rule.
- GSM8K numbers (docs/gsm8k.md): "−18" (U+2212) and "-$5" are negative (read as 18 and 5, so
  "−18" scored correct against a gold 18); "1/2" and "1,2345" are not one readable number (read as
  1 and 1234); a number of more than ``MAX_DIGITS`` digits is unreadable: one of more than 4,300
  digits crashed stage 1 after every request was answered (Python's int string limit) and a
  stage-1 answer of 4e19 or more crashed stage 2 in ``near_numbers`` (``OverflowError``), naming
  no document. Now each is one unreadable document, counted in ``parse_fail_rate``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import doc_requests, load_task
from family_data import gsm8k_rows, write_all

from calidist_tasks.prompting.verbalized import VerbalizedFilter
from calidist_tasks.tasks.gsm8k import MAX_DIGITS, parse_number
from calidist_tasks.tasks.gsm8k_verbalized import NumberFilter
from reliability.support import refused, write

PPDB = ["Sentence2 is a paraphrase of Sentence1.", "Sentence2 is not a paraphrase of Sentence1."]
HUGE = "9" * 5000  # past Python's 4,300-digit int string limit
BIG = "4" + "0" * 19  # 4e19: stage 2's hint range overflowed a C integer


def _verbalized(reply: str) -> dict:
    """The reading of the filter the verbalized tasks' YAML names (less the reply's shape)."""
    parsed = VerbalizedFilter().apply([[reply]], [{"_calidist_choices": PPDB}])[0][0]
    return {k: v for k, v in parsed.items() if k != "shape"}


@pytest.mark.parametrize(("reply", "answer", "confidence"), [
    ("The answer is (a). Confidence: 1000%", 0, None),
    ("The answer is (a). Confidence: 10000%", 0, None),
    ("The answer is (a). Confidence: 1,000%", 0, None),
    ("The answer is (a). 1000% sure.", 0, None),
    ("The answer is (a). Confidence: 8/10", 0, None),  # a fraction is not on the 0-100% scale
    ("The answer is (a) or (b). Confidence: 80%", None, 0.8),
    ("The answer is (a) and (b). Confidence: 80%", None, 0.8),
    ("The answer is (a). I am not 90% sure.", 0, None),
    ("The answer is (a). I am not confident at 90%.", 0, None),
    # what must still be read
    # a lone percentage is no stated confidence (issue #34: "Overall Confidence: N%" or a
    # confidence tied to a word)
    ("The answer is (a). I'm not 100% sure, but I'd say 80%.", 0, None),
    ("The answer is (a), not (b). Confidence: 100%", 0, 1.0),
    ("The answer is (b). Confidence: 85.5%", 1, 0.855),
])
def test_verbalized_replies_read_what_was_said(reply, answer, confidence) -> None:
    assert _verbalized(reply) == {"answer": answer, "confidence": confidence}


@pytest.mark.parametrize(("reply", "number"), [
    ("The answer is \u221218.", "-18"),  # Unicode minus
    ("It drops to \u22123 degrees, then 2 more", "2"),
    ("The answer is -$5.", "-5"),
    ("The answer is $-5.", "-5"),
    ("The answer is 1/2.", None),  # a fraction: not one number
    ("So she pays 1/2", None),
    ("The answer is 1,2345.", None),  # malformed thousands group
    ("The answer is 3,4.", None),
    ("The answer is 1,234,567.", "1234567"),
    ("pages 5\u22126 of 10", "10"),  # a dash between numbers is no minus sign
    (f"The answer is {'9' * MAX_DIGITS}.", "9" * MAX_DIGITS),
    (f"The answer is {'9' * (MAX_DIGITS + 1)}.", None),
    (f"The answer is {HUGE}.", None),
    (f"The answer is 1.{'5' * MAX_DIGITS}", None),
])
def test_gsm8k_numbers_read_what_was_said(reply, number) -> None:
    assert parse_number(reply) == number
    reading = NumberFilter().apply([[reply + " Confidence: 70%"]], [{}])[0][0]
    assert reading == {"answer": number, "confidence": 0.7}


def test_unicode_minus_is_not_scored_correct_against_the_positive_gold(tmp_path: Path) -> None:
    stage1 = load_task("calidist_gsm8k", _metadata(tmp_path))
    doc = stage1.eval_docs[0]
    record = stage1.process_results(doc, [f"The answer is \u2212{doc['target']}."])[
        "calidist_record"]
    assert (record["prediction"], record["correct"]) == (f"-{doc['target']}", 0)


def _metadata(tmp_path: Path) -> dict:
    return {"data_dir": str(write_all(tmp_path / "data", n_eval=4, n_calib=3)),
            "calib_size": 3, "eval_size": 4, "m": 1}


@pytest.mark.parametrize("number", [HUGE, BIG])
def test_a_huge_number_is_one_unreadable_document_in_stage_1(tmp_path: Path, number) -> None:
    """Stage 1 (logit path: the task reads the reply; verbalized: the filter does)."""
    metadata = _metadata(tmp_path)
    stage1 = load_task("calidist_gsm8k", metadata)
    doc = stage1.eval_docs[0]
    record = stage1.process_results(doc, [f"So: 2 + 2 = 4.\nThe answer is {number}."])[
        "calidist_record"]
    assert (record["prediction"], record["parsed"], record["parse_failures"]) == (None, False, 1)
    verbalized = load_task("calidist_gsm8k_verbalized", metadata)
    doc = verbalized.eval_docs[0]
    reading = NumberFilter().apply([[f"The answer is {number}. Confidence: 90%"]], [doc])[0]
    record = verbalized.process_results(doc, [reading])["calidist_record"]
    assert (record["prediction"], record["parsed"], record["parse_failures"]) == (None, False, 1)


@pytest.mark.parametrize(("task", "first", "record"), [
    ("calidist_gsm8k_assertion_chains", "calidist_gsm8k",
     {"prediction": BIG, "chain": f"The answer is {BIG}."}),
    ("calidist_gsm8k_assertion_verbalized", "calidist_gsm8k_verbalized",
     {"prediction": BIG, "confidence": 0.9, "parsed": True}),
])
def test_a_huge_stage_1_answer_is_one_unreadable_document_in_stage_2(tmp_path: Path, task, first,
                                                                     record) -> None:
    """A stage-1 record as earlier versions logged it (they read 4e19 as a number): stage 2
    builds its requests and records with that document unreadable, the others hinted."""
    metadata = _metadata(tmp_path)
    stage1 = load_task(first, metadata)
    samples = []
    for i, doc in enumerate(stage1.eval_docs):
        acc = record if i == 3 else {"prediction": doc["target"], "confidence": 0.9,
                                     "parsed": True, "chain": f"The answer is {doc['target']}."}
        samples.append(json.dumps({"doc": dict(doc), "acc": acc}))
    path = tmp_path / "stage1.jsonl"
    path.write_text("\n".join(samples) + "\n", encoding="utf-8")
    stage2 = load_task(task, {**metadata, "original_samples": str(path)})
    unreadable, other = stage2.eval_docs[3], stage2.eval_docs[4]
    assert [r.arguments[1]["max_gen_toks"] for r in doc_requests(stage2, unreadable)] == [1]
    assert len(doc_requests(stage2, other)) == 4  # m = 1: one prompt per hinted number
    reply = "x" if task.endswith("chains") else [{"answer": None, "confidence": None}]
    result = stage2.process_results(unreadable, [reply])["calidist_record"]
    assert (result["correct"], result["confidence"], result["parse_failures"]) == (0, 0.0, 1)


def test_a_logged_answer_that_is_no_number_is_refused_naming_the_document(tmp_path: Path) -> None:
    metadata = _metadata(tmp_path)
    stage1 = load_task("calidist_gsm8k_verbalized", metadata)
    samples = [json.dumps({"doc": dict(doc), "acc": {"prediction": "abc" if i == 3 else "1",
                                                     "confidence": 0.9, "parsed": True}})
               for i, doc in enumerate(stage1.eval_docs)]
    path = tmp_path / "stage1.jsonl"
    path.write_text("\n".join(samples) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"calidist_gsm8k_assertion_verbalized: original_samples "
                                         r".*stage1\.jsonl line 4: document 3 \(test\.jsonl:\d+\): "
                                         r"the logged answer 'abc' is not a number"):
        load_task("calidist_gsm8k_assertion_verbalized",
                  {**metadata, "original_samples": str(path)})


def test_a_gold_answer_past_the_digit_limit_is_refused_naming_the_row(tmp_path: Path) -> None:
    rows = gsm8k_rows(8)
    rows[2]["answer"] = f"Add them up.\n#### {HUGE}"
    write(tmp_path / "gsm8k" / "test.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    refused("calidist_gsm8k", {"data_dir": str(tmp_path), "calib_size": 3, "eval_size": 4},
            "test.jsonl:3", f"no number of at most {MAX_DIGITS} digits after '####'")
