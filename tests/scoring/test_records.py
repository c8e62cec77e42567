"""The record schema (scoring.records): its JSON, the rule for our document fields, and
that the names it owns are spelled nowhere else in calidist_tasks/ and benchmarks/."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from calidist_tasks.prompting import parts as prompts
from calidist_tasks.scoring import records
from calidist_tasks.scoring.aggregation import SCORES
from calidist_tasks.scoring.records import (
    Hint,
    answer_record,
    bookkeeping,
    hints_of,
    is_own_field,
    is_record,
    metric_name,
    unreadable_record,
    with_hints,
)

ROOT = Path(__file__).parents[2]


def test_a_record_round_trips_through_json_with_its_hints_named():
    doc = {"premise": "p", records.INDEX_FIELD: 7, records.SPLIT_FIELD: records.EVALUATION}
    hints = [Hint(1, 0, 1, 0.75), Hint(2, None, 0, 0.5)]
    record = answer_record(0, 0, 0.6, True, True, (-0.5, -1.0, -2.0))
    record = with_hints(record, hints, 0.25, 0.1, float("inf"), True, True)
    record.update(bookkeeping(doc, 9))
    text = json.dumps(record)
    assert '"hints": [[1, 0, 1, 0.75], [2, null, 0, 0.5]]' in text  # the samples file's lists
    back = json.loads(text)
    assert hints_of(back) == hints_of(record) == hints
    assert hints_of(back)[0].confidence == 0.75 and hints_of({"index": 0}) == []
    assert back["lambda_raw"] == records.STABLE_LAMBDA_RAW  # JSON holds no infinity
    assert (back["correct"], back["flipped"], back["index"], back["split"]) == (1, 1, 7,
                                                                              "evaluation")
    assert is_record(back) and not is_record({"index": 1}) and not is_record([1])


def test_the_unreadable_record_is_wrong_and_maximally_unreliable():
    place = bookkeeping({records.INDEX_FIELD: 3, records.SPLIT_FIELD: "calibration"}, 1)
    record = json.loads(json.dumps(unreadable_record("18", place)))  # as the samples file holds it
    assert record == {"label": "18", "prediction": None, "confidence": 0.0, "correct": 0,
                      "parsed": False, "hints": [], "mu": 1.0, "delta": 1.0,
                      "lambda_raw": 0.0, "flipped": 0, "generations": 1, "parse_failures": 1,
                      "index": 3, "split": "calibration", "requests": 1}


def test_a_failed_record_is_a_record_that_says_why_and_holds_no_answer():
    doc = {records.INDEX_FIELD: 5, records.SPLIT_FIELD: records.CALIBRATION}
    record = json.loads(json.dumps(records.failed_record(doc, 10, "task document 5: NaN")))
    assert record == {"index": 5, "split": "calibration", "requests": 10,
                      "error": "task document 5: NaN"}
    assert is_record(record) and records.is_failed(record)
    assert not records.is_failed(unreadable_record("1", bookkeeping(doc, 1)))
    assert records.failed_documents([record, bookkeeping(doc, 1)]) == [record]


@pytest.mark.parametrize("name, ours", [
    (records.SPLIT_FIELD, True), (records.INDEX_FIELD, True), (records.SOURCE_FIELD, True),
    (prompts.HINT, True), (prompts.CHOICES, True), (prompts.FEWSHOT, True),
    (prompts.DUMMY, True), ("calidist", False), ("my_calidist_x", False), ("premise", False),
    (3, False),
])
def test_is_own_field(name, ours):
    assert is_own_field(name) is ours


def test_metric_names():
    assert metric_name("ece") == "ece" and metric_name("ece", records.CALIDIST) == "ece"
    assert metric_name("brier", records.VANILLA) == "brier_vanilla"
    assert metric_name("acc", records.VECTOR_SCALING) == "acc_vector"


def _strings(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every string constant of a module but its docstrings."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docstrings]


def test_the_names_records_owns_are_spelled_only_there():
    fields = (records.SPLIT_FIELD, records.INDEX_FIELD, records.SOURCE_FIELD)
    confidences = (records.VANILLA, *records.LOGIT_BASELINES, *records.CONSISTENCY_KINDS,
                   records.SPUQ)
    # "_consistency" and "_spuq" also end task names (calidist_ppdb_consistency): not checked
    suffixes = {"_" + c for c in (records.VANILLA, *records.LOGIT_BASELINES, records.ENTROPY,
                                  records.FSD)}
    names = {metric_name(s, c) for s in (*SCORES, "acc") for c in confidences}
    found = []
    for path in sorted([*(ROOT / "calidist_tasks").rglob("*.py"),
                        *(ROOT / "benchmarks").rglob("*.py")]):
        if path == ROOT / "calidist_tasks" / "scoring" / "records.py":
            continue
        for line, text in _strings(path):
            if (any(f in text for f in fields) or text in suffixes or text in names
                    or text in records.OWN_PREFIXES[1:]):
                found.append(f"{path.relative_to(ROOT)}:{line}: {text!r}")
    assert not found, ("defined in calidist_tasks/scoring/records.py; import it:\n"
                       + "\n".join(found))
