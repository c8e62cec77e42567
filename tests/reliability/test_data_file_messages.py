"""Data files that raised a library's traceback or were misread without a word: integers beyond
64 bits, broken Parquet, CR line ends, a lone CR, CSV headers with spaces, zero-width "text",
byte-order marks inside a file. Each is now read as meant or refused naming the file and row."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow
import pyarrow.parquet
import pytest
from conftest import load_task

from calidist_tasks.scoring.records import SOURCE_FIELD
from reliability.support import mnli_lines, refused, write

MNLI = "calidist_mnli"
FIELDS = ("premise", "hypothesis", "label")


def _rows(n: int) -> list[dict]:
    return [json.loads(line) for line in mnli_lines(n)]


def _documents(task) -> list[tuple]:
    """The documents' content and source line, in document order."""
    return [(*(d[f] for f in FIELDS), d[SOURCE_FIELD]) for d in task.eval_docs]


def _load(path: Path, calib_size: int = 1):
    return load_task(MNLI, {"data_files": str(path), "calib_size": calib_size,
                            "eval_size": "all"})


@pytest.mark.parametrize(("field", "value"), [("idx", 2**63), ("idx", -(2**63) - 1),
                                              ("ids", [1, 2**64])],
                         ids=["2^63", "-2^63-1", "in a list"])
def test_an_integer_beyond_64_bits_is_refused_naming_row_and_field(field: str, value,
                                                                   tmp_path: Path) -> None:
    rows = _rows(4)
    rows[2][field] = value
    path = write(tmp_path / "data.jsonl", "\n".join(json.dumps(r) for r in rows))
    refused(MNLI, {"data_files": str(path), "calib_size": 1}, "data.jsonl:3", f"'{field}'",
            "64-bit")


def _parquet(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pyarrow.parquet.write_table(pyarrow.Table.from_pylist(rows), path)
    return path


def test_a_parquet_file_is_read(tmp_path: Path) -> None:
    jsonl = _load(write(tmp_path / "data.jsonl", "\n".join(mnli_lines(6))))
    parquet = _load(_parquet(tmp_path / "data.parquet", _rows(6)))
    assert [d[:3] for d in _documents(parquet)] == [d[:3] for d in _documents(jsonl)]


@pytest.mark.parametrize("damage", [lambda b: b[: len(b) // 2], lambda b: b[:-40],
                                    lambda b: b"PAR1" + b"\0" * 40,
                                    lambda b: "\n".join(mnli_lines(3)).encode()],
                         ids=["cut in half", "footer cut", "magic bytes only", "JSON lines"])
def test_a_broken_or_fake_parquet_file_is_refused_naming_it(damage, tmp_path: Path) -> None:
    good = _parquet(tmp_path / "good.parquet", _rows(6)).read_bytes()
    path = write(tmp_path / "data.parquet", damage(good))
    refused(MNLI, {"data_files": str(path), "calib_size": 1}, "data.parquet",
            "not a readable Parquet file")


def _table(rows: list[dict], delimiter: str = "\t") -> list[str]:
    return [delimiter.join(FIELDS)] + [delimiter.join(str(r[f]) for f in FIELDS) for r in rows]


@pytest.mark.parametrize("break_", ["\r", "\r\n"], ids=["CR only", "CRLF"])
def test_a_tsv_with_other_line_ends_reads_every_row(break_: str, tmp_path: Path) -> None:
    rows = _rows(30)
    plain = _load(write(tmp_path / "a" / "data.tsv", "\n".join(_table(rows)) + "\n"))
    other = _load(write(tmp_path / "b" / "data.tsv", break_.join(_table(rows)) + break_))
    assert len(other.eval_docs) == 30
    assert _documents(other) == _documents(plain)


PPDB = [f"The {w} fell today {i}.\tA {w} dropped today {i}.\t({n},6)\thttp://t.co/{i}"
        for i, (w, n) in enumerate(zip(["stock", "price", "team", "storm", "coin", "bond"] * 5,
                                       [5, 1, 6, 0, 4, 2] * 5, strict=True))]


def _ppdb(tmp_path: Path, text: str):
    write(tmp_path / "ppdb" / "test.tsv", text)
    return load_task("calidist_ppdb", {"data_dir": str(tmp_path), "calib_size": 2,
                                       "eval_size": "all"})


def _ppdb_documents(task) -> list[tuple]:
    return [(d["sentence1"], d["sentence2"], d["label"], d[SOURCE_FIELD]) for d in task.eval_docs]


def test_a_ppdb_corpus_file_with_cr_line_ends_reads_every_pair(tmp_path: Path) -> None:
    """The corpus reader split at LF only: a 30-line CR-only file was one line ("the evaluation
    pool has only 1 documents")."""
    plain = _ppdb(tmp_path / "a", "\n".join(PPDB) + "\n")
    cr = _ppdb(tmp_path / "b", "\r".join(PPDB) + "\r")
    assert len(cr.eval_docs) == 30
    assert _ppdb_documents(cr) == _ppdb_documents(plain)


@pytest.mark.parametrize("with_url", [True, False], ids=["with URL", "without URL"])
def test_a_lone_cr_at_a_line_end_does_not_swallow_the_next_row(with_url: bool,
                                                                tmp_path: Path) -> None:
    """'pair 3<CR>pair 4<LF>': the corpus reader took pair 4 for columns after pair 3's URL (and
    ignored it), or into pair 3's votes."""
    lines = PPDB[:6] if with_url else [line.rsplit("\t", 1)[0] for line in PPDB[:6]]
    plain = _ppdb(tmp_path / "a", "\n".join(lines) + "\n")
    text = "\n".join(lines[:3]) + "\r" + "\n".join(lines[3:]) + "\n"
    lone = _ppdb(tmp_path / "b", text)
    assert _ppdb_documents(lone) == _ppdb_documents(plain)


def test_a_lone_cr_in_json_lines_ends_a_line(tmp_path: Path) -> None:
    lines = mnli_lines(6)
    plain = _load(write(tmp_path / "a" / "data.jsonl", "\n".join(lines) + "\n"))
    lone = _load(write(tmp_path / "b" / "data.jsonl",
                       "\n".join(lines[:3]) + "\r" + "\n".join(lines[3:]) + "\n"))
    assert _documents(lone) == _documents(plain)


@pytest.mark.parametrize("header", ["premise, hypothesis, label", " premise ,hypothesis,label "])
def test_csv_headers_with_spaces_name_their_columns(header: str, tmp_path: Path) -> None:
    rows = _rows(6)
    plain = _load(write(tmp_path / "a" / "data.csv", "\n".join(_table(rows, ",")) + "\n"))
    spaced = ", ".join if header.startswith("premise,") else ",".join
    lines = [header] + [spaced(f'"{r[f]}"' for f in FIELDS) for r in rows]
    odd = _load(write(tmp_path / "b" / "data.csv", "\n".join(lines) + "\n"))
    assert _documents(odd) == _documents(plain)


def test_a_ppdb_csv_with_a_spaced_header_is_not_blamed_on_votes(tmp_path: Path) -> None:
    """PPDB in the Hub schema (sentence1, sentence2, label): ' label' was not found, so the row
    was read as the corpus format and refused for its 'votes'."""
    lines = ["sentence1, sentence2, label", "A b c., A b d., 0", "E f g., H i j., 1",
             "K l m., N o p., 0"]
    path = write(tmp_path / "test.csv", "\n".join(lines) + "\n")
    task = load_task("calidist_ppdb", {"data_files": str(path), "calib_size": 1})
    assert sorted((d["sentence1"], d["label"]) for d in task.eval_docs) == [
        ("A b c.", 0), ("E f g.", 1), ("K l m.", 0)]


@pytest.mark.parametrize("invisible", ["\u200b", "\u200b\u200d \u2060", "\u00ad", "\ufeff"],
                         ids=["zero-width space", "joiners and spaces", "soft hyphen", "BOM"])
def test_a_field_of_only_invisible_characters_is_empty(invisible: str, tmp_path: Path) -> None:
    rows = _rows(4)
    rows[1]["premise"] = invisible
    path = write(tmp_path / "data.jsonl", "\n".join(json.dumps(r) for r in rows))
    refused(MNLI, {"data_files": str(path), "calib_size": 1}, "data.jsonl:2",
            "missing or empty field 'premise'")


def test_an_option_of_only_invisible_characters_is_empty(tmp_path: Path) -> None:
    row = {"ctx": "A man is sitting on a roof. He", "endings": ["a", "b", "c", "d"], "label": "0"}
    bad = {**row, "ctx": "A woman is sitting on a roof. She", "endings": ["a", "\u200b", "c", "d"]}
    path = write(tmp_path / "data.jsonl", f"{json.dumps(row)}\n{json.dumps(bad)}\n")
    refused("calidist_hellaswag", {"data_files": str(path), "calib_size": 1}, "data.jsonl:2",
            "'endings'")


@pytest.mark.parametrize("suffix", [".tsv", ".jsonl"])
def test_a_byte_order_mark_inside_a_file_is_dropped(suffix: str, tmp_path: Path) -> None:
    """Files joined with cat carry a BOM at each join: it was kept in the text (TSV), or refused
    as invalid JSON."""
    rows = _rows(6)
    lines = _table(rows) if suffix == ".tsv" else mnli_lines(6)
    plain = _load(write(tmp_path / "a" / f"data{suffix}", "\n".join(lines) + "\n"))
    joined = "\ufeff" + "\n".join(lines[:3]) + "\n\ufeff" + "\n".join(lines[3:]) + "\n"
    odd = _load(write(tmp_path / "b" / f"data{suffix}", joined))
    assert _documents(odd) == _documents(plain)
    assert not any("\ufeff" in str(d) for d in odd.eval_docs)


def test_a_yahoo_question_with_only_invisible_context_has_no_context(tmp_path: Path) -> None:
    """Yahoo's body and best answer are often empty: empty means "(no context)", also when they
    hold only zero-width characters (which the prompt would show as an empty context)."""
    rows = [{"topic": i, "question_title": f"Why is the sky {i} blue?",
             "question_content": "\u200b" if i == 1 else f"Asked {i}.",
             "best_answer": "\u2060 " if i == 1 else ""} for i in range(3)]
    path = write(tmp_path / "data.jsonl", "\n".join(json.dumps(r) for r in rows))
    task = load_task("calidist_yahoo", {"data_files": str(path), "calib_size": 1,
                                        "eval_size": "all"})
    contexts = {d[SOURCE_FIELD]: d["context"] for d in task.eval_docs}
    assert contexts == {"data.jsonl:1": "Asked 0.", "data.jsonl:2": "(no context)",
                        "data.jsonl:3": "Asked 2."}
