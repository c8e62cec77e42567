"""Duplicated data: rows repeated in a file, one split in two formats in one folder, a file listed
twice, two ``data_files`` keys for one split, a copy shown as its own few-shot exemplar.

"The same document" is the same values (surrounding spaces stripped) in every field the prompt
shows (the question template's fields and the options): a copy with the same label is dropped
with one warning naming every copy; a copy with another label is refused naming both rows."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from conftest import load_task

from calidist_tasks.scoring.records import (
    CALIBRATION,
    EVALUATION,
    SOURCE_FIELD,
    SPLIT_FIELD,
)
from reliability.support import mnli_lines, refused, write

MNLI = "calidist_mnli"


def _content(doc: dict) -> tuple[str, str]:
    return doc["premise"].strip(), doc["hypothesis"].strip()


def _twice(n: int = 6) -> list[str]:
    """n MNLI rows, then the same n rows again (lines n+1..2n copy lines 1..n)."""
    lines = mnli_lines(n)
    return lines + lines


def test_rows_repeated_in_a_file_are_read_once_with_one_warning(tmp_path: Path, caplog) -> None:
    path = write(tmp_path / "data.jsonl", "\n".join(_twice(6)) + "\n")
    with caplog.at_level(logging.WARNING, logger="calidist_tasks.data.documents"):
        task = load_task(MNLI, {"data_files": str(path), "calib_size": 2, "eval_size": "all"})
    docs = list(task.eval_docs)
    assert len(docs) == 6
    assert len({_content(d) for d in docs}) == 6
    assert sorted(int(d[SOURCE_FIELD].split(":")[1]) % 6 for d in docs) == list(range(6))
    warnings = [r.getMessage() for r in caplog.records if "duplicate" in r.getMessage()]
    assert len(warnings) == 1, warnings
    for i in range(1, 7):  # every copy, and the row it copies (whichever the shuffle put first)
        assert (f"data.jsonl:{i + 6} (same as data.jsonl:{i})" in warnings[0]
                or f"data.jsonl:{i} (same as data.jsonl:{i + 6})" in warnings[0])


def test_no_calibration_document_is_also_an_evaluation_document(tmp_path: Path) -> None:
    """Without a calibration split, the pool is shuffled and cut: a repeated row would land in
    both parts."""
    path = write(tmp_path / "data.jsonl", "\n".join(_twice(10)) + "\n")
    task = load_task(MNLI, {"data_files": str(path), "calib_size": 4, "eval_size": "all"})
    calibration = {_content(d) for d in task.eval_docs if d[SPLIT_FIELD] == CALIBRATION}
    evaluation = {_content(d) for d in task.eval_docs if d[SPLIT_FIELD] == EVALUATION}
    assert len(calibration) == 4 and len(evaluation) == 6
    assert not calibration & evaluation


def test_copies_differing_only_in_spaces_and_other_fields_are_one_document(tmp_path: Path) -> None:
    rows = [json.loads(line) for line in mnli_lines(4)]
    copy = {**rows[1], "premise": f"  {rows[1]['premise']} ", "idx": 99, "genre": "news"}
    path = write(tmp_path / "data.jsonl", "\n".join(json.dumps(r) for r in [*rows, copy]))
    task = load_task(MNLI, {"data_files": str(path), "calib_size": 1, "eval_size": "all"})
    sources = {d[SOURCE_FIELD] for d in task.eval_docs}
    assert len(task.eval_docs) == 4  # line 5 is line 2 again
    assert sources - {"data.jsonl:2", "data.jsonl:5"} == {"data.jsonl:1", "data.jsonl:3",
                                                          "data.jsonl:4"}


def test_a_copy_with_another_label_is_refused_naming_both_rows(tmp_path: Path) -> None:
    lines = mnli_lines(4)
    other = json.loads(lines[1])
    other["label"] = (other["label"] + 1) % 3
    path = write(tmp_path / "data.jsonl", "\n".join([*lines, json.dumps(other)]))
    refused(MNLI, {"data_files": str(path), "calib_size": 1}, "data.jsonl:2", "data.jsonl:5",
            "different labels")


def test_a_calibration_copy_of_an_evaluation_document_is_dropped(tmp_path: Path, caplog) -> None:
    lines = mnli_lines(8)
    matched = write(tmp_path / "matched.jsonl", "\n".join(lines[:5]))
    mismatched = write(tmp_path / "mismatched.jsonl", "\n".join([lines[2], *lines[5:]]))
    files = {"validation_matched": str(matched), "validation_mismatched": str(mismatched)}
    with caplog.at_level(logging.WARNING, logger="calidist_tasks.data.documents"):
        task = load_task(MNLI, {"data_files": files, "calib_size": 3, "eval_size": "all"})
    calibration = [d for d in task.eval_docs if d[SPLIT_FIELD] == CALIBRATION]
    evaluation = [d for d in task.eval_docs if d[SPLIT_FIELD] == EVALUATION]
    assert len(evaluation) == 5  # the evaluation split is kept whole
    assert sorted(d[SOURCE_FIELD] for d in calibration) == [
        "mismatched.jsonl:2", "mismatched.jsonl:3", "mismatched.jsonl:4"]
    assert "mismatched.jsonl:1 (same as matched.jsonl:3)" in caplog.text


def test_one_split_in_two_formats_in_one_folder_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "mnli"
    write(folder / "validation_matched.jsonl", "\n".join(mnli_lines(6)))
    rows = [json.loads(line) for line in mnli_lines(6)]
    table = ["premise\thypothesis\tlabel"] + [
        f"{r['premise']}\t{r['hypothesis']}\t{r['label']}" for r in rows]
    write(folder / "validation_matched.tsv", "\n".join(table))
    refused(MNLI, {"data_dir": str(tmp_path), "calib_size": 1},
            "validation_matched.jsonl", "validation_matched.tsv", "keep one")


def test_validation_and_dev_files_of_one_split_are_refused(tmp_path: Path) -> None:
    folder = tmp_path / "hellaswag"
    row = {"ctx": "A man is sitting on a roof. He", "endings": ["a", "b", "c", "d"], "label": "0"}
    write(folder / "validation.jsonl", json.dumps(row))
    write(folder / "dev.jsonl", json.dumps(row))
    refused("calidist_hellaswag", {"data_dir": str(tmp_path), "calib_size": 1},
            "dev.jsonl", "validation.jsonl", "keep one")


@pytest.mark.parametrize("files", [
    lambda p: [p, p],
    lambda p: [p, str(Path(p).parent / "." / Path(p).name)],
    lambda p: {"evaluation": p, "calibration": p},
], ids=["listed twice", "listed twice under another spelling", "evaluation and calibration"])
def test_a_data_file_listed_twice_is_refused(files, tmp_path: Path) -> None:
    path = str(write(tmp_path / "data.jsonl", "\n".join(mnli_lines(6))))
    refused(MNLI, {"data_files": files(path), "calib_size": 1}, "data.jsonl", "twice")


@pytest.mark.parametrize(("keys", "named"), [
    (("evaluation", "test"), ("'evaluation'", "'test'")),
    (("validation_matched", "test"), ("'validation_matched'", "'test'")),
    (("test", "validation", "dev"), ("'validation'", "'dev'")),
    (("test", "calibration", "validation_mismatched"),
     ("'calibration'", "'validation_mismatched'")),
], ids=["evaluation+test", "validation_matched+test", "validation+dev",
        "calibration+validation_mismatched"])
def test_two_data_files_keys_for_one_split_are_refused(keys, named, tmp_path: Path) -> None:
    files = {}
    for i, key in enumerate(keys):
        rows = [json.loads(line) for line in mnli_lines(4)]
        text = "\n".join(json.dumps({**r, "premise": f"{r['premise']} {key}"}) for r in rows)
        files[key] = str(write(tmp_path / f"file{i}.jsonl", text))
    refused(MNLI, {"data_files": files, "calib_size": 1}, *named)


def test_csqa_validation_and_test_keys_are_refused(tmp_path: Path) -> None:
    """CommonsenseQA evaluates 'validation': a 'test' key beside it was ignored silently."""
    row = {"id": "q", "question": "Where?", "choices": {"label": list("ABCDE"),
                                                        "text": list("vwxyz")}, "answerKey": "A"}
    path = str(write(tmp_path / "data.jsonl", json.dumps(row)))
    other = str(write(tmp_path / "other.jsonl", json.dumps({**row, "question": "When?"})))
    refused("calidist_csqa", {"data_files": {"validation": path, "test": other}, "calib_size": 1},
            "'validation'", "'test'")


# ------------------------------------------------------------------ few-shot exemplars
def test_no_prompt_shows_its_own_document_as_an_exemplar(tmp_path: Path) -> None:
    """End to end: a file with every row twice, one exemplar per label; each prompt of each
    document (original and hinted) holds the document's premise once: in the question only."""
    path = write(tmp_path / "data.jsonl", "\n".join(_twice(9)) + "\n")
    task = load_task("calidist_mnli_assertion", {"data_files": str(path), "calib_size": 6,
                                                 "eval_size": "all", "m": 1})
    task.set_config("num_fewshot", 1)
    for doc in task.eval_docs:
        variants = [doc] + [task.distracted_doc(doc, p) for p in task.prompt_plans(doc)[1:]]
        for variant in variants:
            prompt = task.fewshot_context(variant, num_fewshot=1,
                                          gen_prefix=task.doc_to_prefix(doc))
            assert prompt.count(doc["premise"]) == 1, (doc[SOURCE_FIELD], prompt)


# ------------------------------------------------------------------ the PPDB corpus
PAIRS = ["The stock fell today.\tA stock dropped today.\t({n},6)\thttp://t.co/{i}",
         "The team won.\tThe team lost.\t({n},6)\thttp://t.co/{i}",
         "It rained all day.\tRain fell all day.\t({n},6)\thttp://t.co/{i}",
         "Prices rose again.\tCosts went up again.\t({n},6)\thttp://t.co/{i}"]


def test_ppdb_pairs_annotated_twice(tmp_path: Path, caplog) -> None:
    """The corpus annotates some pairs once per URL: agreeing copies are one document; a pair
    whose copies disagree ((5,6) and (1,6)) has no gold label and is dropped, with a warning."""
    lines = [PAIRS[0].format(n=5, i=1), PAIRS[1].format(n=0, i=2), PAIRS[2].format(n=6, i=3),
             PAIRS[3].format(n=2, i=4), PAIRS[0].format(n=1, i=5), PAIRS[1].format(n=1, i=6)]
    write(tmp_path / "ppdb" / "test.tsv", "\n".join(lines) + "\n")
    with caplog.at_level(logging.WARNING):
        task = load_task("calidist_ppdb", {"data_dir": str(tmp_path), "calib_size": 1})
    sources = {d[SOURCE_FIELD] for d in task.eval_docs}
    assert len(task.eval_docs) == 3  # line 6 is line 2 again; lines 1 and 5 disagree
    assert sources - {"test.tsv:2", "test.tsv:6"} == {"test.tsv:3", "test.tsv:4"}
    assert "test.tsv:1, test.tsv:5" in caplog.text  # the disagreeing pair's lines
    assert ("test.tsv:6 (same as test.tsv:2)" in caplog.text
            or "test.tsv:2 (same as test.tsv:6)" in caplog.text)


def test_a_gsm8k_question_twice_with_two_answers_is_refused(tmp_path: Path) -> None:
    """GSM8K's documents are all in one class (the gold is a number in 'target'): copies are
    compared on that number."""
    rows = [{"question": f"Tom has {i} apples and buys 2. How many now?",
             "answer": f"{i} + 2 = {i + 2}\n#### {i + 2}"} for i in range(4)]
    rows.append({**rows[1], "answer": "3 + 2 = 6\n#### 6"})
    path = write(tmp_path / "test.jsonl", "\n".join(json.dumps(r) for r in rows))
    refused("calidist_gsm8k", {"data_files": str(path), "calib_size": 1}, "test.jsonl:2",
            "test.jsonl:5", "different labels ('3' and '6')")
