"""Documents and the calibration split (docs/method.md), local data formats, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import doc_requests, load_task, write_mnli

SAMPLE = Path(__file__).parents[2] / "calidist_tasks/sample_data/twitter_url_corpus/test.tsv"


def mnli_files(mnli_data_dir) -> dict[str, str]:
    folder = mnli_data_dir / "mnli"
    return {"validation_matched": str(folder / "validation_matched.jsonl"),
            "validation_mismatched": str(folder / "validation_mismatched.jsonl")}


def docs_of(name, metadata):
    return list(load_task(name, metadata).eval_docs)


def splits(docs):
    return [d["calidist_split"] for d in docs]


def test_mnli_separate_calibration_split_from_data_files(mnli_data_dir):
    metadata = {"data_files": mnli_files(mnli_data_dir), "calib_size": 8, "eval_size": 12}
    docs = docs_of("calidist_mnli", metadata)
    assert splits(docs) == ["calibration"] * 8 + ["evaluation"] * 12
    assert [d["calidist_index"] for d in docs] == list(range(20))
    assert all(d["calidist_source"].startswith("validation_mismatched.jsonl:") for d in docs[:8])
    assert all(d["calidist_source"].startswith("validation_matched.jsonl:") for d in docs[8:])
    assert all("validation_mismatched" in d["premise"] for d in docs[:8])
    assert len({d["calidist_source"] for d in docs}) == 20
    # The row behind each document is the one its source names (1-based line).
    line = int(docs[10]["calidist_source"].split(":")[1])
    rows = (mnli_data_dir / "mnli/validation_matched.jsonl").read_text().splitlines()
    row = json.loads(rows[line - 1])
    assert {k: docs[10][k] for k in row} == row
    # data_dir finds the same two files by split name.
    assert docs_of("calidist_mnli", {"data_dir": str(mnli_data_dir), "calib_size": 8,
                                     "eval_size": 12}) == docs


def test_eval_size_all_and_default_take_every_remaining_document(mnli_data_dir):
    base = {"data_dir": str(mnli_data_dir), "calib_size": 8}
    assert splits(docs_of("calidist_mnli", {**base, "eval_size": "all"})).count("evaluation") == 40
    assert splits(docs_of("calidist_mnli", base)).count("evaluation") == 40  # default 1000
    assert splits(docs_of("calidist_mnli", {**base, "eval_size": 5})) == (
        ["calibration"] * 8 + ["evaluation"] * 5)


def test_an_eval_size_beyond_the_split_warns_once(mnli_data_dir, caplog):
    import logging

    from calidist_tasks.data import documents as dataset

    dataset._SHORT_WARNED.clear()
    base = {"data_dir": str(mnli_data_dir), "calib_size": 8}
    with caplog.at_level(logging.WARNING, logger="calidist_tasks.data.documents"):
        for name in ("calidist_mnli", "calidist_mnli_assertion", "calidist_mnli"):
            docs_of(name, {**base, "eval_size": 1000})
        docs_of("calidist_mnli", {**base, "eval_size": "all"})
        docs_of("calidist_mnli", {**base, "eval_size": 40})  # exactly what is left
    warned = [r.getMessage() for r in caplog.records if r.name == "calidist_tasks.data.documents"]
    assert len(warned) == 1 and "eval_size=1000 but only 40" in warned[0]


def test_ppdb_pool_mode_splits_one_file_disjointly(ppdb_data_dir):
    docs = docs_of("calidist_ppdb", {"data_dir": str(ppdb_data_dir), "calib_size": 10,
                                     "eval_size": "all"})
    assert splits(docs) == ["calibration"] * 10 + ["evaluation"] * 50
    sources = [d["calidist_source"] for d in docs]
    assert sorted(sources) == sorted(f"test.tsv:{i}" for i in range(1, 61))  # disjoint, complete
    lines = SAMPLE.read_text(encoding="utf-8").splitlines()
    for doc in docs:
        votes = int(lines[int(doc["calidist_source"].split(":")[1]) - 1].split("\t")[2][1])
        assert doc["label"] == (0 if votes >= 4 else 1)


def test_ppdb_drops_three_vote_pairs_and_reads_its_alias_folder(tmp_path):
    (tmp_path / "twitter_url_corpus").mkdir()
    lines = ["s1 a\ts2 a\t(3,6)\tu", "s1 b\ts2 b\t(6,6)\tu", "s1 c\ts2 c\t(0,6)\tu",
             "s1 d\ts2 d\t(3,6)", "s1 e\ts2 e\t(2,6)"]
    (tmp_path / "twitter_url_corpus/test.tsv").write_text("\n".join(lines) + "\n")
    docs = docs_of("calidist_ppdb", {"data_dir": str(tmp_path), "calib_size": 1})
    assert sorted(d["calidist_source"] for d in docs) == ["test.tsv:2", "test.tsv:3", "test.tsv:5"]
    assert {d["sentence1"]: d["label"] for d in docs} == {"s1 b": 0, "s1 c": 1, "s1 e": 1}


def test_split_seed_changes_the_split_and_seed_does_not(ppdb_data_dir, mnli_data_dir):
    base = {"data_dir": str(ppdb_data_dir), "calib_size": 10, "eval_size": 20}
    docs = docs_of("calidist_ppdb_assertion", base)
    assert docs_of("calidist_ppdb_assertion", {**base, "seed": 7}) == docs
    reshuffled = docs_of("calidist_ppdb_assertion", {**base, "split_seed": 1})
    calibration = {d["calidist_source"] for d in docs[:10]}
    assert {d["calidist_source"] for d in reshuffled[:10]} != calibration
    assert docs_of("calidist_ppdb_assertion", {**base, "split_seed": 1}) == reshuffled
    # With a separate calibration split, split_seed picks other calibration rows from it.
    mnli = {"data_dir": str(mnli_data_dir), "calib_size": 8, "eval_size": 12}
    a = docs_of("calidist_mnli", mnli)
    b = docs_of("calidist_mnli", {**mnli, "split_seed": 3})
    assert {d["calidist_source"] for d in a[:8]} != {d["calidist_source"] for d in b[:8]}
    assert all(d["calidist_source"].startswith("validation_mismatched") for d in b[:8])


def test_tasks_with_the_same_documents_share_one_table(ppdb_data_dir):
    """Making a document table hashes its whole content, so the tasks of a run that hold the same
    documents (a benchmark's styles) share one; other documents get their own."""
    base = {"data_dir": str(ppdb_data_dir), "calib_size": 10, "eval_size": 20}
    table = load_task("calidist_ppdb", base).eval_docs
    assert load_task("calidist_ppdb_assertion", base).eval_docs is table
    other = load_task("calidist_ppdb_assertion", {**base, "split_seed": 1}).eval_docs
    assert other is not table and list(other) != list(table)


def requests(task):
    return [[r.arguments for r in doc_requests(task, doc)] for doc in task.eval_docs]


def test_seed_changes_assertion_templates_and_nothing_else(ppdb_data_dir):
    base = {"data_dir": str(ppdb_data_dir), "calib_size": 4, "eval_size": 8}
    a = load_task("calidist_ppdb_assertion", base)
    again = load_task("calidist_ppdb_assertion", base)
    b = load_task("calidist_ppdb_assertion", {**base, "seed": 1})
    assert requests(a) == requests(again)  # deterministic per document
    ra, rb = requests(a), requests(b)
    assert [r[:2] for r in ra] == [r[:2] for r in rb]  # the original prompt is the same
    templates_a = [[p.template for p in a.prompt_plans(d)] for d in a.eval_docs]
    templates_b = [[p.template for p in b.prompt_plans(d)] for d in b.eval_docs]
    assert templates_a != templates_b
    for doc_a, doc_b in zip(ra, rb, strict=True):
        for (prompt_a, _), (prompt_b, _) in zip(doc_a, doc_b, strict=True):
            # Only the "Hint: ..." line may differ.
            lines_a, lines_b = prompt_a.splitlines(), prompt_b.splitlines()
            assert len(lines_a) == len(lines_b)
            diff = [x for x, y in zip(lines_a, lines_b, strict=True) if x != y]
            assert all(x.startswith("Hint: ") for x in diff)
    for style in ("probe", "corruption"):  # fixed templates: the seed changes nothing
        name = f"calidist_ppdb_{style}"
        assert requests(load_task(name, base)) == requests(load_task(name, {**base, "seed": 1}))


def test_limit_takes_both_splits(ppdb_data_dir):
    """--limit is a smoke test: both splits in the run's proportion (10 of 10 + 5: 7 + 3)."""
    task = load_task("calidist_ppdb_probe", {"data_dir": str(ppdb_data_dir), "calib_size": 10,
                                             "eval_size": 5})
    task.build_all_requests(limit=10, rank=0, world_size=1)
    per_doc = 6  # (1 + c) prompts of c letters, c = 2
    assert len(task.instances) == 10 * per_doc
    assert [i.doc["calidist_split"] for i in task.instances[::per_doc]] == (
        ["calibration"] * 7 + ["evaluation"] * 3)


# ---------------------------------------------------------------- bad input


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    (path.write_bytes if isinstance(text, bytes) else path.write_text)(text)
    return path


GOOD = '{"premise": "p", "hypothesis": "h", "label": 1, "idx": 0}\n'


@pytest.mark.parametrize(
    ("second_line", "message"),
    [
        ('{"premise": "p", "hypothesis": "h", "idx": 1}', r"bad\.jsonl:2: missing label field"),
        ('{"premise": "p", "hypothesis": "h", "label": 3}',
         r"bad\.jsonl:2: label 3 in field 'label' is outside the label space 0\.\.2"),
        ('{"premise": "p", "hypothesis": "h", "label": "x"}', r"bad\.jsonl:2: label 'x'"),
        ('{"premise": "", "hypothesis": "h", "label": 0}',
         r"bad\.jsonl:2: missing or empty field 'premise'"),
        ('{"premise": "p", "hypothesis": "h", "label": 0', r"bad\.jsonl:2: not valid JSON"),
    ],
)
def test_bad_mnli_rows_name_file_line_and_field(tmp_path, second_line, message):
    path = write(tmp_path / "bad.jsonl", GOOD + second_line + "\n")
    with pytest.raises(ValueError, match=message):
        load_task("calidist_mnli", {"data_files": str(path), "calib_size": 1})


def test_missing_data_files_name_the_path(tmp_path, mnli_data_dir):
    files = {**mnli_files(mnli_data_dir), "validation_mismatched": str(tmp_path / "nope.jsonl")}
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        load_task("calidist_mnli", {"data_files": files, "calib_size": 1})
    with pytest.raises(FileNotFoundError, match=r"has no sub-folder for ppdb"):
        load_task("calidist_ppdb", {"data_dir": str(tmp_path), "calib_size": 1})
    with pytest.raises(ValueError, match=r"data_files keys \['test_matched'\]"):
        load_task("calidist_mnli", {"data_files": {"test_matched": "x"}, "calib_size": 1})


def test_calib_size_larger_than_the_documents(mnli_data_dir, ppdb_data_dir):
    with pytest.raises(ValueError, match=r"calib_size=21 but the calibration split has only 20"):
        load_task("calidist_mnli_probe", {"data_dir": str(mnli_data_dir), "calib_size": 21})
    with pytest.raises(ValueError, match=r"no evaluation documents left after 60"):
        load_task("calidist_ppdb", {"data_dir": str(ppdb_data_dir), "calib_size": 60})
    with pytest.raises(ValueError, match=r"calib_size=61 but the evaluation pool has only 60"):
        load_task("calidist_ppdb", {"data_dir": str(ppdb_data_dir), "calib_size": 61})


@pytest.mark.parametrize(
    ("name", "metadata", "message"),
    [
        ("calidist_ppdb", {"calib_sise": 5}, r"'calib_sise'; did you mean 'calib_size'"),
        ("calidist_ppdb", {"eval_size": "some"}, r"eval_size must be a positive integer"),
        ("calidist_ppdb", {"calib_size": 0}, r"calib_size must be a positive integer"),
        ("calidist_ppdb", {"lambda_scale": "minmx"}, r"lambda_scale must be one of"),
        ("calidist_ppdb_probe", {"m": 2}, r"calidist_ppdb_probe: .*m must be 1 \(got m=2\)"),
        ("calidist_ppdb_corruption", {"m": 3}, r"calidist_ppdb_corruption: .*m must be 1"),
    ],
)
def test_bad_metadata_is_refused(ppdb_data_dir, name, metadata, message):
    with pytest.raises(ValueError, match=message):
        load_task(name, {"data_dir": str(ppdb_data_dir), **metadata})


def test_assertion_accepts_m_up_to_the_template_count(ppdb_data_dir):
    metadata = {"data_dir": str(ppdb_data_dir), "calib_size": 10}
    task = load_task("calidist_ppdb_assertion", {**metadata, "m": 12})
    assert len(task.prompt_plans(task.eval_docs[0])) == 1 + 2 * 12
    with pytest.raises(ValueError, match="m must be between 1 and 12"):
        load_task("calidist_ppdb_assertion", {**metadata, "m": 13})


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("s1\ts2\t(x,6)\tu", r"test\.tsv:2: field 'votes' must look like \(n,6\)"),
        ("s1\ts2\t(7,6)\tu", r"test\.tsv:2: field 'votes'"),
        ("s1\t(2,6)", r"test\.tsv:2: expected sentence1<TAB>sentence2<TAB>\(n,6\).*2 column"),
    ],
)
def test_bad_ppdb_lines_name_file_and_line(tmp_path, line, message):
    write(tmp_path / "ppdb/test.tsv", "a\tb\t(4,6)\tu\n" + line + "\n")
    with pytest.raises(ValueError, match=message):
        load_task("calidist_ppdb", {"data_dir": str(tmp_path), "calib_size": 1})


def test_non_utf8_files_are_refused_with_their_path(tmp_path):
    write(tmp_path / "ppdb/test.tsv", "a\tb\t(4,6)\tu\ncaf\xe9\td\t(1,6)\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"ppdb/test\.tsv: not UTF-8"):
        load_task("calidist_ppdb", {"data_dir": str(tmp_path), "calib_size": 1})
    mnli = write_mnli(tmp_path / "m" / "mnli", 3, 3)
    write(mnli / "validation_matched.jsonl", GOOD.replace('"p"', '"caf\xe9"').encode("latin-1"))
    with pytest.raises(ValueError, match=r"validation_matched\.jsonl: not UTF-8"):
        load_task("calidist_mnli", {"data_dir": str(tmp_path / "m"), "calib_size": 1})


@pytest.mark.parametrize(("glue", "option"), [(0, 0), (1, 2), (2, 1), ("1", 2), ("2", 1)])
def test_mnli_labels_follow_the_papers_option_order(tmp_path, glue, option):
    """GLUE labels 0 entailment, 1 neutral, 2 contradiction; the paper's options are
    a. entailment, b. contradiction, c. neutral."""
    row = {"premise": "q", "hypothesis": "h", "label": glue, "idx": 0}
    path = write(tmp_path / "one.jsonl", GOOD + json.dumps(row) + "\n")
    task = load_task("calidist_mnli", {"data_files": str(path), "calib_size": 1})
    doc = next(d for d in task.eval_docs if d["premise"] == "q")
    assert doc["label"] == option
    words = {0: "entails", 1: "contradicts", 2: "neutral"}
    assert words[option] in task.doc_to_choice(doc)[option]


def test_a_relative_data_dir_that_is_no_folder_is_named_with_its_resolved_path(
        tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError) as error:
        docs_of("calidist_mnli", {"data_dir": "../shared/data", "calib_size": 2, "eval_size": 2})
    resolved = (tmp_path / "../shared/data").resolve()
    assert (f"data_dir is not a folder: ../shared/data (relative to {tmp_path}: {resolved}); "
            "give an absolute path") in str(error.value)
