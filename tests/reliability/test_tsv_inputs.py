"""Bad TSV / CSV input: the Twitter URL Corpus's own TSV (PPDB adapter) and Hub-schema tables.
Basic PPDB cases (votes (x,6) and (7,6), two columns, a Latin-1 byte) are in
tests/test_dataset.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import load_task
from hypothesis import given, settings
from hypothesis import strategies as st

from calidist_tasks.adapters import ppdb
from calidist_tasks.data.documents import read_rows
from calidist_tasks.settings import RunSettings
from reliability.support import refused, write

PAIRS = [f"The {w} fell today.\tA {w} dropped today.\t({n},6)\thttp://t.co/{i}"
         for i, (w, n) in enumerate(zip(["stock", "price", "team", "storm"], [5, 1, 6, 0],
                                        strict=True))]


def ppdb_file(tmp_path: Path, second: str | None = None, text: str | bytes | None = None) -> dict:
    lines = list(PAIRS)
    if second is not None:
        lines[1] = second
    write(tmp_path / "ppdb" / "test.tsv", "\n".join(lines) + "\n" if text is None else text)
    return {"data_dir": str(tmp_path), "calib_size": 1}


BAD_PPDB = {
    "one column": ("just one sentence", ["test.tsv:2", "1 column"]),
    "empty sentence1": ("\tA b.\t(4,6)\tu", ["test.tsv:2", "'sentence1'"]),
    "empty sentence2": ("A b.\t \t(4,6)\tu", ["test.tsv:2", "'sentence2'"]),
    "votes out of 5": ("A.\tB.\t(3,5)\tu", ["test.tsv:2", "'votes'", "(3,5)"]),
    "votes missing": ("A.\tB.\t\tu", ["test.tsv:2", "'votes'"]),
    "votes as a word": ("A.\tB.\tyes\tu", ["test.tsv:2", "'votes'", "yes"]),
    "a tab inside a sentence shifts the columns": ("A\tpart.\tB.\t(4,6)\tu",
                                                   ["test.tsv:2", "'votes'", "B."]),
}


@pytest.mark.parametrize("case", sorted(BAD_PPDB))
def test_bad_ppdb_lines(case: str, tmp_path: Path) -> None:
    line, words = BAD_PPDB[case]
    refused("calidist_ppdb", ppdb_file(tmp_path, second=line), *words)


@pytest.mark.parametrize(("text", "words"), [
    (b"", ["test.tsv", "no rows"]),
    (b"\n\r\n  \n", ["test.tsv", "no rows"]),
    ("\n".join(PAIRS).encode("utf-16"), ["test.tsv", "not UTF-8", "line 1"]),
    ("\n".join(PAIRS[:2]).encode() + b"\nA\xff.\tB.\t(4,6)\tu\n", ["test.tsv", "line 3"]),
], ids=["empty", "blank lines", "utf-16", "bad byte on line 3"])
def test_bad_ppdb_files(text: bytes, words: list[str], tmp_path: Path) -> None:
    refused("calidist_ppdb", ppdb_file(tmp_path, text=text), *words)


def test_ppdb_with_only_three_vote_pairs_says_no_documents_are_left(tmp_path: Path) -> None:
    """n == 3 pairs are dropped by the corpus's rule; a file of only those has nothing left."""
    text = "\n".join(f"A {i}.\tB {i}.\t(3,6)\tu" for i in range(4)) + "\n"
    refused("calidist_ppdb", ppdb_file(tmp_path, text=text), "evaluation pool has only 0")


def test_ppdb_tolerated_variants(tmp_path: Path) -> None:
    """BOM, CRLF, spaces in '( 4, 6 )'-like votes after a tab, and columns after the URL are
    accepted and give the same documents as the plain file."""
    plain = load_task("calidist_ppdb", ppdb_file(tmp_path / "a"))
    odd_lines = [line + "\textra column" for line in PAIRS]
    odd_text = b"\xef\xbb\xbf" + "\r\n".join(odd_lines).encode() + b"\r\n"
    odd = load_task("calidist_ppdb", ppdb_file(tmp_path / "b", text=odd_text))
    fields = ("sentence1", "sentence2", "label", "calidist_split")
    assert [{k: d[k] for k in fields} for d in odd.eval_docs] == \
        [{k: d[k] for k in fields} for d in plain.eval_docs]
    assert not odd.eval_docs[0]["sentence1"].startswith("\ufeff")


# --------------------------------------------------------------- Hub-schema TSV / CSV tables

HEADER = "premise\thypothesis\tlabel"
GOOD = ["A cat sat.\tA cat.\t0", "A dog ran.\tA cat.\t2", "It rained.\tIt was wet.\t0"]


def table(tmp_path: Path, lines: list[str], name: str = "data.tsv", header: str = HEADER) -> dict:
    path = write(tmp_path / name, "\n".join([header, *lines]) + "\n")
    return {"data_files": str(path), "calib_size": 1}


BAD_TABLES = {
    "short row": ([GOOD[0], "A dog ran.\tA cat.", GOOD[2]], ["data.tsv:3", "2 field(s)", "has 3"]),
    "long row": ([GOOD[0], "A\tB\t1\tstray", GOOD[2]], ["data.tsv:3", "4 field(s)"]),
    "unbalanced quote swallows lines": ([GOOD[0], '"A dog ran.\tA cat.\t2', GOOD[2]],
                                        ["data.tsv:3"]),
    "label out of the label space": ([GOOD[0], "A.\tB.\t5", GOOD[2]], ["data.tsv:3", "'5'"]),
    "label not a number": ([GOOD[0], "A.\tB.\tentailment", GOOD[2]],
                           ["data.tsv:3", "'entailment'"]),
    "empty label": ([GOOD[0], "A.\tB.\t", GOOD[2]], ["data.tsv:3", "label"]),
    "empty premise": ([GOOD[0], "\tB.\t1", GOOD[2]], ["data.tsv:3", "'premise'"]),
    "header only": ([], ["data.tsv", "no rows"]),
}


@pytest.mark.parametrize("case", sorted(BAD_TABLES))
def test_bad_tsv_rows(case: str, tmp_path: Path) -> None:
    lines, words = BAD_TABLES[case]
    refused("calidist_mnli", table(tmp_path, lines), *words)


def test_duplicate_and_missing_columns(tmp_path: Path) -> None:
    refused("calidist_mnli", table(tmp_path, GOOD, header="premise\tpremise\tlabel"),
            "data.tsv:1", "duplicate column")
    refused("calidist_mnli", table(tmp_path, [g.rsplit("\t", 1)[0] for g in GOOD],
                                   header="premise\thypothesis"), "data.tsv:2", "label")


def test_line_numbers_count_blank_lines_and_quoted_newlines(tmp_path: Path) -> None:
    lines = [GOOD[0], "", '"A dog\nran."\tA cat.\t2', "", "A.\tB.\t9"]
    refused("calidist_mnli", table(tmp_path, lines), "data.tsv:7", "label '9'")


def test_csv_with_quotes_and_bom_reads_like_the_tsv(tmp_path: Path) -> None:
    tsv = load_task("calidist_mnli", table(tmp_path, GOOD))
    rows = ['"A cat sat.","A cat.",0', '"A dog ran.","A cat.",2', '"It rained.","It was wet.",0']
    text = "premise,hypothesis,label\r\n" + "\r\n".join(rows)
    csv_path = write(tmp_path / "data.csv", b"\xef\xbb\xbf" + text.encode())
    csv = load_task("calidist_mnli", {"data_files": str(csv_path), "calib_size": 1})
    fields = ("premise", "hypothesis", "label", "calidist_split")
    assert [{k: d[k] for k in fields} for d in csv.eval_docs] == \
        [{k: d[k] for k in fields} for d in tsv.eval_docs]


# --------------------------------------------------------------- fuzzing

CELL = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=12)


@settings(max_examples=150, deadline=None)
@given(lines=st.lists(st.lists(CELL, max_size=5).map("\t".join), max_size=6))
def test_fuzzed_tables_give_rows_or_a_located_value_error(tmp_path_factory, lines) -> None:
    """Random cells, tabs, quotes and line breaks: both TSV readers return rows or raise
    ValueError naming the file and line; building PPDB documents from the file returns
    documents or raises ValueError. Never another exception type."""
    folder = tmp_path_factory.mktemp("fuzz")
    path = write(folder / "fuzz.tsv", "\n".join(lines))
    for reader in (ppdb.read_file, read_rows):
        try:
            rows = reader(path)
        except ValueError as error:
            assert re.search(r"fuzz\.tsv:\d+", str(error)), str(error)
            continue
        for where, row in rows:
            assert re.fullmatch(r"fuzz\.tsv:\d+", where)
            assert all(isinstance(v, str) for v in row.values())
    task = _ppdb_task(folder)
    task.settings = RunSettings(data_files=str(path), calib_size=1, eval_size=None)
    try:
        task.download()
    except ValueError:
        return
    assert all(d["label"] in (0, 1) and d["sentence1"].strip() for d in task.eval_docs)


_TASKS: dict = {}


def _ppdb_task(folder: Path):
    if not _TASKS:
        _TASKS["ppdb"] = load_task("calidist_ppdb", ppdb_file(folder / "seed"))
    return _TASKS["ppdb"]
