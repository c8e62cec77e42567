"""runs.earlier_runs: an earlier run's samples file read by a later stage, with no model:
matched to this run's documents, refused (naming the file and the document) when another model
answered it or nothing names the model, a document is not this run's or is missing, a record
failed, or a prompt differs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from calidist_tasks.runs.earlier_runs import EarlierRun, same_document
from calidist_tasks.scoring.records import INDEX_FIELD, SOURCE_FIELD, SPLIT_FIELD

TASK, EARLIER = "calidist_x_assertion", "calidist_x"
STAMP = "2026-01-02T03-04-05.123456"
DOCS = [{"question": f"Q{i}?", "label": i % 2, INDEX_FIELD: i, SOURCE_FIELD: f"dev.jsonl:{i + 1}",
         SPLIT_FIELD: "evaluation"} for i in range(3)]


def sample(doc: dict, **record: object) -> dict:
    """One samples line as lm-eval logs a calidist record (under acc)."""
    return {"doc_id": doc[INDEX_FIELD], "doc": dict(doc), "prompt_hash": f"hash{doc[INDEX_FIELD]}",
            "acc": {"index": doc[INDEX_FIELD], "split": "evaluation", "requests": 2,
                    "prediction": doc["label"], **record}}


def write_run(folder: Path, lines: list[dict], model: str | None = "tiny") -> Path:
    """An lm-eval output folder: the task's samples file and, when ``model``, its results."""
    folder.mkdir(parents=True, exist_ok=True)
    file = folder / f"samples_{EARLIER}_{STAMP}.jsonl"
    file.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    if model:
        (folder / f"results_{STAMP}.json").write_text(
            json.dumps({"config": {"model_args": {"pretrained": model}}}), encoding="utf-8")
    return file


def read(path: Path, docs: list[dict] = DOCS, model: str | None = "tiny") -> EarlierRun:
    return EarlierRun.read(path, task=TASK, key="original_run", earlier_task=EARLIER,
                           how="--log_samples", docs=docs, model=model)


def test_lines_are_matched_to_documents_by_index_from_a_folder_or_file(tmp_path: Path) -> None:
    file = write_run(tmp_path / "run" / "tiny", [sample(DOCS[2]), sample(DOCS[0])])
    for path in (tmp_path / "run", file):
        run = read(path)
        assert run.file == file and sorted(run.logged) == [0, 2]
        assert run.get(DOCS[2]).line == 1 and run.get(DOCS[0]).line == 2
        assert run.record(run.get(DOCS[0]))["prediction"] == DOCS[0]["label"]
        assert run.missing(DOCS) == [DOCS[1]]


def test_a_missing_document_is_named_with_the_file(tmp_path: Path) -> None:
    file = write_run(tmp_path, [sample(DOCS[0])])
    with pytest.raises(ValueError, match=rf"{TASK}: document 1 \(dev.jsonl:2\) has no sample in "
                                         rf"original_run {file}; run {EARLIER} on every document"):
        read(tmp_path).get(DOCS[1])


def test_another_model_is_refused_naming_the_file(tmp_path: Path) -> None:
    file = write_run(tmp_path, [sample(DOCS[0])], model="big")
    with pytest.raises(ValueError, match=rf"original_run {file} was answered by model 'big' "
                                         rf"\(results_{STAMP}.json\), not this run's 'tiny'"):
        read(tmp_path)
    assert read(tmp_path, model=None).logged  # nothing to compare with an unknown model
    # no results file beside it: the records name the model, or the run is refused
    write_run(tmp_path / "alone", [sample(DOCS[0])], model=None)
    with pytest.raises(ValueError, match="neither its records nor a results file beside it name "
                                         "the model that answered"):
        read(tmp_path / "alone")
    write_run(tmp_path / "named", [sample(DOCS[0], model="tiny")], model=None)
    assert read(tmp_path / "named").logged
    write_run(tmp_path / "other", [sample(DOCS[0]), sample(DOCS[1], model="big")], model=None)
    with pytest.raises(ValueError, match="line 2: answered by model 'big', not this run's 'tiny'"):
        read(tmp_path / "other")


def test_another_document_of_the_same_index_is_refused(tmp_path: Path) -> None:
    changed = {**DOCS[1], "question": "Another?"}
    file = write_run(tmp_path, [sample(DOCS[0]), sample(changed)])
    with pytest.raises(ValueError, match=rf"{file} line 2: document 1 \(dev.jsonl:2\) is not this "
                                         r"run's document 1 \(dev.jsonl:2\); run both on the same "
                                         "data"):
        read(tmp_path)
    write_run(tmp_path, [sample({**DOCS[0], INDEX_FIELD: 9})])
    with pytest.raises(ValueError, match=r"line 1: document 9 .* \(no such document\)"):
        read(tmp_path)


def test_fields_only_one_side_has_do_not_make_another_document(tmp_path: Path) -> None:
    added = {**DOCS[0], "original_answer": "4"}  # what an earlier GSM8K stage adds
    assert same_document(DOCS[0], added) and same_document(added, DOCS[0])
    assert not same_document(DOCS[0], {**added, "label": 1})
    assert read(write_run(tmp_path, [sample(added)])).get(DOCS[0]).sample["doc"] == added


def test_duplicates_empty_files_and_lines_that_are_not_samples_are_refused(
        tmp_path: Path) -> None:
    file = write_run(tmp_path, [sample(DOCS[0]), sample(DOCS[0])])
    with pytest.raises(ValueError, match=rf"{file} line 2: document 0 .* is logged twice \(first "
                                         "at line 1\\)"):
        read(tmp_path)
    write_run(tmp_path, [{"doc": {"question": "Q0?"}, "acc": {"prediction": 1}}])  # no index
    with pytest.raises(ValueError, match=rf"{file} line 1: not a sample of {EARLIER} run with "
                                         "--log_samples"):
        read(tmp_path)
    write_run(tmp_path, [])
    with pytest.raises(ValueError, match=rf"original_run {file} holds no samples"):
        read(tmp_path)


def test_a_failed_record_and_a_missing_field_are_named(tmp_path: Path) -> None:
    failed = sample(DOCS[1])
    failed["acc"] = {**{k: failed["acc"][k] for k in ("index", "split", "requests")},
                     "error": "boom"}
    file = write_run(tmp_path, [sample(DOCS[0]), failed])
    run = read(tmp_path)
    with pytest.raises(ValueError, match=rf"{file} line 2: document 1 \(dev.jsonl:2\) has no "
                                         rf"usable answer in {EARLIER}'s run \(boom\)"):
        run.record(run.get(DOCS[1]))
    assert run.fields(run.get(DOCS[0]), ["prediction"]) == {"prediction": 0}
    with pytest.raises(ValueError, match=rf"{file} line 1: the record of document 0 \(dev.jsonl:1\)"
                                         rf" lacks 'chain' \(not a record of {EARLIER}\)"):
        run.fields(run.get(DOCS[0]), ["prediction", "chain"])


def test_a_prompt_the_earlier_run_did_not_send_is_refused(tmp_path: Path) -> None:
    file = write_run(tmp_path, [sample(DOCS[0])])
    run = read(tmp_path)
    run.check_prompt(DOCS[0], "hash0", "hash0")
    run.check_prompt(DOCS[0], "hash1", None)  # not logged: nothing to compare
    run.check_prompt(DOCS[0], [{"role": "user"}], "hash0")  # a chat prompt is not compared
    with pytest.raises(ValueError, match=rf"document 0 \(dev.jsonl:1\): prompt 2 is not the "
                                         rf"prompt {EARLIER} answered in original_run {file}"):
        run.check_prompt(DOCS[0], "hash1", "hash0", "prompt 2")
