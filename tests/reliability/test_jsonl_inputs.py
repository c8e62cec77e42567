"""Bad JSON-lines (and Hub-schema .json) input: a clear error naming file, line and field, or a
documented fallback. The basic cases (missing label, label 3 of 3, unparsable line) are in
tests/test_dataset.py; these are the rest."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import load_task
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calidist_tasks.data.documents import read_rows
from calidist_tasks.settings import RunSettings
from reliability.support import MNLI_ROW, mnli_lines, refused, write


def row(**changes) -> str:
    return json.dumps({**MNLI_ROW, **changes})


def bad_second_row(line: str, n: int = 4) -> str:
    lines = mnli_lines(n)
    lines[1] = line
    return "\n".join(lines) + "\n"


# (file content, words the error must contain); the bad row is line 2 of data.jsonl
BAD_ROWS = {
    "truncated line": (bad_second_row(row()[:-9]), ["data.jsonl:2", "not valid JSON"]),
    "truncated last line, no newline": ("\n".join(mnli_lines(3) + [row()[:20]]),
                                        ["data.jsonl:4", "not valid JSON"]),
    "two objects on one line": (bad_second_row(row() + row()), ["data.jsonl:2", "Extra data"]),
    "array instead of object": (bad_second_row("[1, 2]"), ["data.jsonl:2", "got list"]),
    "string instead of object": (bad_second_row('"premise"'), ["data.jsonl:2", "got str"]),
    "null line": (bad_second_row("null"), ["data.jsonl:2", "got NoneType"]),
    "missing hypothesis": (bad_second_row(json.dumps({"premise": "p", "label": 0})),
                           ["data.jsonl:2", "'hypothesis'"]),
    "null premise": (bad_second_row(row(premise=None)), ["data.jsonl:2", "'premise'"]),
    "whitespace premise": (bad_second_row(row(premise=" \t ")), ["data.jsonl:2", "'premise'"]),
    "premise is a list": (bad_second_row(row(premise=["a", "b"])),
                          ["data.jsonl:2", "'premise' must be text", "list"]),
    "premise is an object": (bad_second_row(row(premise={"text": "a"})),
                             ["data.jsonl:2", "'premise' must be text", "dict"]),
    "premise is a boolean": (bad_second_row(row(premise=True)),
                             ["data.jsonl:2", "'premise' must be text", "bool"]),
    "premise is NaN": (bad_second_row(row(premise=float("nan"))),
                       ["data.jsonl:2", "'premise' must be text", "nan"]),
    "premise is Infinity": (bad_second_row(row(premise=float("inf"))),
                            ["data.jsonl:2", "'premise' must be text", "inf"]),
    "premise a number among strings": (bad_second_row(row(premise=5)),
                                       ["data.jsonl:2", "'premise' holds a", "number", "str"]),
    "label 1.5": (bad_second_row(row(label=1.5)), ["data.jsonl:2", "label 1.5", "0..2"]),
    "label 1.0 (float)": (bad_second_row(row(label=1.0)), ["data.jsonl:2", "label 1.0"]),
    "label '1.0'": (bad_second_row(row(label="1.0")), ["data.jsonl:2", "label '1.0'"]),
    "label '--1'": (bad_second_row(row(label="--1")), ["data.jsonl:2", "label '--1'"]),
    "label superscript two": (bad_second_row(row(label="\u00b2")), ["data.jsonl:2", "label"]),
    "label true": (bad_second_row(row(label=True)), ["data.jsonl:2", "label True"]),
    "label list": (bad_second_row(row(label=[1])), ["data.jsonl:2", "label [1]"]),
    "label object": (bad_second_row(row(label={"id": 1})), ["data.jsonl:2", "label {'id': 1}"]),
    "label 1e400 (inf)": (bad_second_row(row()[:-1].replace('"label": 1', '"label": 1e400') + "}"),
                          ["data.jsonl:2", "label inf"]),
    "label -1": (bad_second_row(row(label=-1)), ["data.jsonl:2", "label -1", "0..2"]),
    "label '3' (string)": (bad_second_row(row(label="3")), ["data.jsonl:2", "label '3'", "0..2"]),
    "extra field of two types": (bad_second_row(row(genre=["fiction"])).replace(
        '"idx": 3', '"idx": 3, "genre": "news"'), ["'genre' holds a", "data.jsonl:"]),
    "reserved field calidist_split": (bad_second_row(row(calidist_split="evaluation")),
                                      ["data.jsonl:2", "calidist_split", "reserved"]),
    "reserved field _calidist_hint": (bad_second_row(row(_calidist_hint="Hint: (a)")),
                                      ["data.jsonl:2", "_calidist_hint", "reserved"]),
}


@pytest.mark.parametrize("case", sorted(BAD_ROWS))
def test_bad_rows_name_file_line_and_field(case: str, tmp_path: Path) -> None:
    content, words = BAD_ROWS[case]
    path = write(tmp_path / "data.jsonl", content)
    refused("calidist_mnli", {"data_files": str(path), "calib_size": 1}, *words)


BAD_FILES = {
    "empty file": (b"", ["data.jsonl", "no rows"]),
    "blank lines only": (b"\n  \n\t\n", ["data.jsonl", "no rows"]),
    "latin-1 byte on line 3": (
        "\n".join(mnli_lines(2)).encode() + b'\n{"premise": "caf\xe9", "hypothesis": "h"}\n',
        ["data.jsonl", "not UTF-8", "line 3"]),
    "UTF-16 file": ("\n".join(mnli_lines(2)).encode("utf-16"), ["data.jsonl", "not UTF-8"]),
    "binary garbage": (bytes(range(256)), ["data.jsonl", "not UTF-8"]),
}


def test_bad_calibration_file_is_named_too(tmp_path: Path) -> None:
    good = write(tmp_path / "matched.jsonl", "\n".join(mnli_lines(4)))
    bad = write(tmp_path / "mismatched.jsonl", bad_second_row(row(label=7)))
    files = {"validation_matched": str(good), "validation_mismatched": str(bad)}
    refused("calidist_mnli", {"data_files": files, "calib_size": 1}, "mismatched.jsonl:2", "7")


BAD_JSON = {  # a .json file: one array (or {"data": [...]}) of row objects
    "truncated array": (json.dumps([json.loads(x) for x in mnli_lines(3)], indent=1)[:-30],
                        ["data.json:", "not valid JSON"]),
    "object without rows": ('{"premise": "p"}\n{"oops": ', ["data.json:2", "not valid JSON"]),
    "number": ("5", ["data.json", "expected a list of JSON objects"]),
    "array with a non-object": ('[{"premise": "p", "hypothesis": "h", "label": 0}, 3]',
                                ["data.json", "expected a list of JSON objects"]),
    "data is not a list": ('{"data": {"premise": "p"}}', ["data.json", "expected a list"]),
    "row with a bad label": (json.dumps([MNLI_ROW, {**MNLI_ROW, "label": 9}]),
                             ["data.json[1]", "label 9"]),
}


BAD_FILE_CASES = {**{f"jsonl: {k}": ("data.jsonl", *v) for k, v in BAD_FILES.items()},
                  **{f"json: {k}": ("data.json", *v) for k, v in BAD_JSON.items()}}


@pytest.mark.parametrize("case", sorted(BAD_FILE_CASES))
def test_bad_files_name_the_place(case: str, tmp_path: Path) -> None:
    name, content, words = BAD_FILE_CASES[case]
    path = write(tmp_path / name, content)
    refused("calidist_mnli", {"data_files": str(path), "calib_size": 1}, *words)


def test_truncated_json_array_names_the_line_where_it_breaks(tmp_path: Path) -> None:
    text = json.dumps([json.loads(x) for x in mnli_lines(3)], indent=1)
    path = write(tmp_path / "data.json", text[: text.rindex("}")])  # last row cut short
    message = refused("calidist_mnli", {"data_files": str(path), "calib_size": 1}, "data.json:")
    line = int(re.search(r"data\.json:(\d+)", message).group(1))
    assert line > 10  # the end of the file, not line 1


# ----------------------------------------------------------------- documented fallbacks


def test_tolerated_variants_read_the_same_documents(tmp_path: Path) -> None:
    """BOM, CRLF, blank lines, extra fields, digit-string labels and U+2028 inside a string are
    all valid JSON lines: they give the same documents as the plain file."""
    lines = mnli_lines(6)
    plain = write(tmp_path / "plain" / "data.jsonl", "\n".join(lines) + "\n")
    rows = [json.loads(x) for x in lines]
    rows[2]["label"] = str(rows[2]["label"])  # "2" as HellaSwag writes labels
    rows[3]["genre"] = "fiction"
    for r in rows:
        r.setdefault("genre", "news")
    rows[4]["premise"] += "\u2028"  # str.splitlines() would split the line here
    variant = "\r\n\r\n".join(json.dumps(r, ensure_ascii=False) for r in rows)
    odd = write(tmp_path / "odd" / "data.jsonl", b"\xef\xbb\xbf" + variant.encode("utf-8"))

    def docs(path: Path) -> list[dict]:
        task = load_task("calidist_mnli", {"data_files": str(path), "calib_size": 2})
        return [{k: d[k] for k in ("premise", "hypothesis", "label", "idx", "calidist_split")}
                for d in task.eval_docs]

    expected = docs(plain)
    for doc in expected:
        if doc["idx"] == 4:
            doc["premise"] += "\u2028"
    assert docs(odd) == expected
    task = load_task("calidist_mnli", {"data_files": str(odd), "calib_size": 2})
    assert sorted({d["genre"] for d in task.eval_docs}) == ["fiction", "news"]  # kept, unused
    assert all("genre" not in task.doc_to_text(d) for d in task.eval_docs)


# ----------------------------------------------------------------- longer than the context


def test_without_a_local_tokenizer_nothing_is_checked(tmp_path: Path) -> None:
    from calidist_tasks.tasks.context_length import context_window

    assert context_window({}) is None
    assert context_window({"pretrained": "HuggingFaceTB/SmolLM2-135M-Instruct"}) is None
    assert context_window({"pretrained": str(tmp_path)}) is None  # a folder without a tokenizer


# ----------------------------------------------------------------- fuzzing

GOOD_LINE = row()


def _mutations() -> st.SearchStrategy[str]:
    json_values = st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                   max_size=3),
        max_leaves=6,
    )
    fields = st.fixed_dictionaries({}, optional={
        "premise": json_values, "hypothesis": json_values, "label": json_values,
        "idx": json_values, "extra": json_values,
    })
    truncated = st.integers(0, len(GOOD_LINE)).map(lambda i: GOOD_LINE[:i])
    spliced = st.tuples(st.integers(0, len(GOOD_LINE)), st.text(max_size=4)).map(
        lambda t: GOOD_LINE[: t[0]] + t[1] + GOOD_LINE[t[0]:])
    return st.one_of(
        st.just(GOOD_LINE), truncated, spliced, st.text(max_size=30),
        fields.map(lambda d: json.dumps(d, allow_nan=True)),
        st.builds(lambda d: json.dumps({**json.loads(GOOD_LINE), **d}), fields),
    )


def _check_error(error: ValueError, name: str) -> None:
    message = str(error)
    assert name in message, message
    if "not UTF-8" not in message and "no rows" not in message:
        assert re.search(rf"{re.escape(name)}(:\d+|\[\d+\])", message), message


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(_mutations(), max_size=6), junk=st.binary(max_size=4))
def test_fuzzed_jsonl_gives_rows_or_a_located_value_error(tmp_path_factory, lines, junk) -> None:
    """Any bytes: read_rows returns rows or raises ValueError naming file and line; building the
    documents returns documents or raises ValueError. Never another exception type."""
    folder = tmp_path_factory.mktemp("fuzz")
    content = "\n".join(lines).encode("utf-8", "surrogatepass") + junk
    path = write(folder / "fuzz.jsonl", content)
    try:
        rows = read_rows(path)
    except ValueError as error:
        _check_error(error, "fuzz.jsonl")
        return
    assert all(isinstance(r, dict) and where.startswith("fuzz.jsonl:") for where, r in rows)
    task = _mnli_task(folder)
    task.settings = RunSettings(data_files=str(path), calib_size=1, eval_size=None)
    try:
        task.download()
    except ValueError as error:
        assert str(error), error
        return
    for doc in task.eval_docs:
        assert doc["label"] in (0, 1, 2)
        assert isinstance(doc["premise"], str | int | float)
        assert task.doc_to_text(doc)


_TASKS: dict = {}


def _mnli_task(folder: Path):
    """One built MNLI task, re-pointed at each fuzzed file (building one per example is slow)."""
    if "mnli" not in _TASKS:
        path = write(folder / "seed.jsonl", "\n".join(mnli_lines(4)))
        _TASKS["mnli"] = load_task("calidist_mnli", {"data_files": str(path), "calib_size": 1})
    return _TASKS["mnli"]
