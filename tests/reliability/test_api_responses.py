"""Model answers that are not numbers: NaN, infinite or null log-probabilities from an API (or any
backend) never reach a metric. The document's record says why (naming the task, the document, its
source line and the prompt); the run stops in the aggregation with that message after saving every
document's record, so no other answer is lost (issue #17.2), and `calidist report` recomputes from
the others. tests/test_joining.py has the basic NaN case of the joining."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from conftest import load_task, run_lm_eval
from hypothesis import given, settings
from hypothesis import strategies as st

import reliability.models  # noqa: F401  (registers calidist-fake)
from calidist_tasks import cli
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
    record = ppdb_task.process_results(doc, results)["acc"]
    where = f"calidist_ppdb_assertion document 3 ({doc['calidist_source']})"
    assert record["error"].startswith(f"{where} prompt {prompt}: the model returned ")
    assert (record["index"], record["split"], record["requests"]) == (3, "evaluation", 10)
    assert "confidence" not in record
    short = ppdb_task.process_results(doc, results[:-1])["acc"]
    assert short["error"] == f"{where}: expected 10 answers, got 9"


def _recovered_lines(error: AggregationError) -> list[dict]:
    samples = next(error.folder.glob("samples_calidist_ppdb_assertion_*.jsonl"))
    return [json.loads(line) for line in samples.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("bad_value", ["nan", "none", "inf"])
def test_a_backend_answering_nan_or_null_keeps_every_record(bad_value, ppdb_data_dir, tmp_path,
                                                            monkeypatch) -> None:
    """Through lm-eval: a backend whose answer to one hinted template is NaN / None / -inf. The
    run stops naming the documents; every document's record is saved (the bad ones with their
    error), and `calidist report` on the saved folder recomputes from the good ones."""
    monkeypatch.setenv("CALIDIST_RECOVERED_DIR", str(tmp_path))
    metadata = {"data_dir": str(ppdb_data_dir), "calib_size": 2, "eval_size": 2}
    args = f"bad_marker=I read online,bad_value={bad_value}"
    with pytest.raises(AggregationError) as failed:
        run_lm_eval(["calidist_ppdb_assertion"], Path("unused"), metadata, model="calidist-fake",
                    model_args=args, log_samples=False)
    assert re.search(r"documents have answers that cannot be used: calidist_ppdb_assertion "
                     r"document \d+ \(test\.tsv:\d+\) prompt [1-9]\d*: the model returned "
                     "non-finite", str(failed.value))
    lines = _recovered_lines(failed.value)
    assert [line["doc_id"] for line in lines] == [0, 1, 2, 3]
    failed_docs = [line["doc_id"] for line in lines if "error" in line["acc"]]
    good = [line for line in lines if "error" not in line["acc"]]
    assert failed_docs and f"{len(failed_docs)} of 4 documents" in str(failed.value)
    assert all(0 <= line["acc"]["confidence"] <= 1 and line["acc"]["hints"] for line in good)
    if bad_value != "nan":
        return
    report = tmp_path / "report"
    with pytest.raises(SystemExit) as done:
        cli.main(["report", str(failed.value.folder), "--out", str(report), "--no_figures",
                  "--bootstrap", "0"])
    assert done.value.code == 0
    text = (report / "report.md").read_text(encoding="utf-8")
    board = (report / "leaderboard.csv").read_text(encoding="utf-8")
    assert (",CaliDist (As.)," in board) == bool(good)  # no number from no usable document
    assert (f"{len(failed_docs)} of 4 documents have answers that cannot be used and are left "
            "out of every number: calidist\\_ppdb\\_assertion document ") in text


def test_any_error_joining_a_document_becomes_its_failed_record(ppdb_data_dir,
                                                               monkeypatch) -> None:
    """Generation tasks too: replies the task cannot read as parsed answers (a filter_list
    without calidist_verbalized), or any other error, name the document in its record instead
    of stopping the run before the other documents' records exist."""
    task = load_task("calidist_ppdb_assertion_verbalized",
                     {"data_dir": str(ppdb_data_dir), "calib_size": 2, "eval_size": 2})
    doc = task.eval_docs[1]
    n_prompts = len(task.prompt_plans(doc))
    record = task.process_results(doc, [["raw text"]] * n_prompts)["acc"]
    assert record["error"] == ("calidist_ppdb_assertion_verbalized document 1: expected parsed "
                               "answers; the task's filter_list must use the calidist_verbalized "
                               "filter")
    assert (record["index"], record["requests"]) == (1, n_prompts)

    def bug(doc):  # a bug of ours, met while joining
        raise KeyError("calidist_stage1")

    monkeypatch.setattr(task, "stage1_answer", bug)
    record = task.process_results(doc, [[{"answer": 0, "confidence": 0.5}]] * n_prompts)["acc"]
    assert record["error"] == (f"calidist_ppdb_assertion_verbalized document 1 "
                               f"({doc['calidist_source']}): KeyError: 'calidist_stage1'")
