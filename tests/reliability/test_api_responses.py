"""Model answers that are not numbers: NaN, infinite or null log-probabilities from an API (or any
backend) never reach a metric. The document's record says why (naming the task, the document, its
source line and the prompt); the run stops in the aggregation with that message after saving every
document's record, so no other answer is lost (issue #17.2), and `calidist report` recomputes from
the others. tests/test_joining.py has the basic NaN case of the joining."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from conftest import load_task
from hypothesis import given, settings
from hypothesis import strategies as st

from calidist_tasks.runs.recovery import AggregationError
from calidist_tasks.scoring.joining import outcome_from_loglikelihoods

NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("values", [
    [NAN, -1.0], [-1.0, NAN], [-INF, -1.0], [INF, -1.0], [None, -0.5], [None, None],
    ["high", -1.0], [[-1.0], -2.0], [{"logprob": -1.0}, -2.0], [], [-1.0],
], ids=repr)
def test_bad_loglikelihoods_are_refused_naming_the_place(values) -> None:
    with pytest.raises(ValueError, match=r"^doc 7 prompt 2: "):
        outcome_from_loglikelihoods(values, "doc 7 prompt 2")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.floats(), st.none(), st.integers(-10**6, 0)), max_size=6))
def test_any_answer_gives_a_valid_outcome_or_a_value_error(values) -> None:
    try:
        outcome = outcome_from_loglikelihoods(values, "where")
    except ValueError as error:
        assert str(error).startswith("where: ")
        return
    assert 0 <= outcome.prediction < len(values)
    assert 1 / len(values) - 1e-12 <= outcome.confidence <= 1.0
    assert all(math.isfinite(v) for v in outcome.letter_logprobs)


@pytest.fixture(scope="module")
def ppdb_task(ppdb_data_dir: Path):
    return load_task("calidist_ppdb_assertion", {"data_dir": str(ppdb_data_dir),
                                                 "calib_size": 2, "eval_size": 2})


@pytest.mark.parametrize(("prompt", "letter", "value"), [
    (0, 0, NAN), (3, 1, None), (4, 0, -INF),
])
def test_process_results_names_document_source_and_prompt(ppdb_task, prompt, letter, value):
    doc = ppdb_task.eval_docs[3]
    n_prompts = len(ppdb_task.prompt_plans(doc))
    results = [(-1.0 - 0.1 * i, False) for i in range(n_prompts * 2)]
    results[prompt * 2 + letter] = (value, False)
    record = ppdb_task.process_results(doc, results)["calidist_record"]
    where = f"calidist_ppdb_assertion document 3 ({doc['calidist_source']})"
    assert record["error"].startswith(f"{where} prompt {prompt}: the model returned ")
    assert (record["index"], record["split"], record["requests"]) == (3, "evaluation", 10)
    assert "confidence" not in record
    short = ppdb_task.process_results(doc, results[:-1])["calidist_record"]
    assert short["error"] == f"{where}: expected 10 answers, got 9"


def _recovered_lines(error: AggregationError) -> list[dict]:
    samples = next(error.folder.glob("samples_calidist_ppdb_assertion_*.jsonl"))
    return [json.loads(line) for line in samples.read_text(encoding="utf-8").splitlines()]


def test_any_error_joining_a_document_becomes_its_failed_record(ppdb_data_dir,
                                                               monkeypatch) -> None:
    """Generation tasks too: replies the task cannot read as parsed answers (a filter_list
    without calidist_verbalized), or any other error, name the document in its record instead
    of stopping the run before the other documents' records exist."""
    task = load_task("calidist_ppdb_assertion_verbalized",
                     {"data_dir": str(ppdb_data_dir), "calib_size": 2, "eval_size": 2})
    doc = task.eval_docs[1]
    n_prompts = len(task.prompt_plans(doc))
    record = task.process_results(doc, [["raw text"]] * n_prompts)["calidist_record"]
    assert record["error"] == ("calidist_ppdb_assertion_verbalized document 1: expected parsed "
                               "answers; the task's filter_list must use the calidist_verbalized "
                               "filter")
    assert (record["index"], record["requests"]) == (1, n_prompts)

    def bug(doc):  # a bug of ours, met while joining
        raise KeyError("calidist_stage1")

    monkeypatch.setattr(task, "stage1_answer", bug)
    record = task.process_results(doc, [[{"answer": 0, "confidence": 0.5}]] * n_prompts)[
        "calidist_record"]
    assert record["error"] == (f"calidist_ppdb_assertion_verbalized document 1 "
                               f"({doc['calidist_source']}): KeyError: 'calidist_stage1'")
