"""The benchmark families of issue 4 (MSciNLI, Yahoo, HellaSwag, CSQA, AQuA, ContractNLI, GSM8K):
end to end through lm-eval on tiny local data, groups and the tag, Hub defaults, malformed rows,
and pinned prompts (tests/snapshots; rewrite them with CALIDIST_UPDATE_SNAPSHOTS=1)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import load_task, write_mnli
from family_data import (
    aqua_rows,
    contractnli_release,
    csqa_rows,
    gsm8k_rows,
    hellaswag_rows,
    mscinli_rows,
    write_all,
    yahoo_rows,
)

# benchmark -> number of labels (options per document)
FAMILIES = {"mscinli": 4, "yahoo": 10, "hellaswag": 4, "csqa": 5, "aqua": 5, "contractnli": 3}
STYLES = ("", "_assertion", "_probe", "_corruption")
SNAPSHOTS = Path(__file__).parents[1] / "snapshots"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_all(tmp_path_factory.mktemp("families"))


def _all_data(root: Path) -> Path:
    write_all(root)
    write_mnli(root / "mnli")
    sample = Path(__file__).parents[2] / "calidist_tasks/sample_data/twitter_url_corpus/test.tsv"
    (root / "ppdb").mkdir()
    lines = sample.read_text(encoding="utf-8").splitlines()[:40]
    (root / "ppdb" / "test.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def test_groups_and_tag_have_no_duplicate_tasks(tmp_path: Path) -> None:
    """--tasks calidist_csqa_all, every group at once, and --tasks calidist build as
    simple_evaluate builds them (TaskManager.load raises on a task claimed twice)."""
    from lm_eval.tasks import TaskManager

    from calidist_tasks import task_folder

    metadata = {"data_dir": str(_all_data(tmp_path)), "calib_size": 3, "eval_size": 4}
    manager = TaskManager(include_path=task_folder(), include_defaults=False, metadata=metadata)
    csqa = manager.load(["calidist_csqa_all"])
    assert {f"calidist_csqa{s}" for s in STYLES} <= set(csqa["tasks"])
    assert set(csqa["group_map"]["calidist_csqa_all"]) == set(csqa["tasks"])
    groups = [f"calidist_{b}_all" for b in [*FAMILIES, "gsm8k", "mnli", "ppdb"]]
    assert set(manager.load(groups)["groups"]) >= set(groups)
    tagged = set(manager.load(["calidist"])["tasks"])
    expected = {f"calidist_{b}{s}" for b in FAMILIES for s in STYLES} | {"calidist_gsm8k"}
    assert expected <= tagged
    # stage 2 of GSM8K needs stage 1's samples, so a run of every task leaves it out
    assert "calidist_gsm8k_assertion" not in tagged
    with pytest.raises(ValueError, match="Duplicate task"):  # the error these names avoid
        manager.load(["calidist_csqa_all", "calidist_csqa"])


HUB = {  # benchmark -> (hub path, config name, evaluation split, calibration split, rows)
    "mscinli": ("sadat2307/MSciNLI", None, "test", "validation", mscinli_rows),
    "yahoo": ("community-datasets/yahoo_answers_topics", None, "test", "train", yahoo_rows),
    "hellaswag": ("Rowan/hellaswag", None, "validation", "train", hellaswag_rows),
    "csqa": ("tau/commonsense_qa", None, "validation", "train", csqa_rows),
    "aqua": ("deepmind/aqua_rat", "raw", "test", "validation", aqua_rows),
    "gsm8k": ("openai/gsm8k", "main", "test", "train", gsm8k_rows),
}


@pytest.mark.parametrize("benchmark", sorted(HUB))
def test_hub_defaults(benchmark: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without local files a family loads its Hub dataset; calibration from the disjoint split."""
    import datasets

    path, name, evaluation, calibration, rows = HUB[benchmark]
    calls = []

    def fake_load_dataset(hub_path: str, hub_name: str | None = None, **kwargs) -> dict:
        calls.append((hub_path, hub_name))
        splits = {evaluation: rows(6, "e"), calibration: rows(5, "c"), "extra": rows(2, "x")}
        return datasets.DatasetDict({k: datasets.Dataset.from_list(v) for k, v in splits.items()})

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    task = load_task(f"calidist_{benchmark}", {"calib_size": 3, "eval_size": 4})
    assert calls == [(path, name)]
    sources = [d["calidist_source"] for d in task.eval_docs]
    assert all(s.startswith(f"{path}/{calibration}[") for s in sources[:3])
    assert all(s.startswith(f"{path}/{evaluation}[") for s in sources[3:])
    assert len(sources) == 7


def test_contractnli_has_no_hub_default() -> None:
    with pytest.raises(ValueError, match="contractnli has no Hugging Face Hub copy"):
        load_task("calidist_contractnli", {"calib_size": 3})


def test_contractnli_release_is_one_example_per_document_and_hypothesis(data_dir: Path) -> None:
    task = load_task("calidist_contractnli", {"data_dir": str(data_dir), "calib_size": 3,
                                              "eval_size": 9})
    evaluation = [d for d in task.eval_docs if d["calidist_split"] == "evaluation"]
    assert len(evaluation) == 9  # 3 test documents x 3 hypotheses
    assert {d["calidist_source"].split()[0] for d in evaluation} == {"test.json"}
    doc = next(d for d in evaluation if d["calidist_source"] == "test.json documents[1] nda-2")
    release = contractnli_release(3, "test")
    assert doc["contract"] == release["documents"][1]["text"]
    assert doc["hypothesis"] == release["labels"]["nda-2"]["hypothesis"]
    expected = release["documents"][1]["annotation_sets"][0]["annotations"]["nda-2"]["choice"]
    assert doc["label"] == ["Entailment", "Contradiction", "NotMentioned"].index(expected)


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _bad_mscinli(rows):
    rows[1]["label"] = "maybe"


def _bad_yahoo(rows):
    rows[1]["topic"] = 12


def _bad_hellaswag(rows):
    rows[1]["endings"] = rows[1]["endings"][:3]


def _bad_csqa(rows):
    rows[1]["answerKey"] = "F"


def _bad_aqua(rows):
    rows[1]["options"][2] = "C 14"


def _bad_gsm8k(rows):
    rows[1]["answer"] = "It is 5."


MALFORMED = {  # benchmark -> (row writer, how to break row 2, words the error must name)
    "mscinli": (mscinli_rows, _bad_mscinli, ["test.jsonl:2", "'label'", "maybe"]),
    "yahoo": (yahoo_rows, _bad_yahoo, ["test.jsonl:2", "'topic'", "12"]),
    "hellaswag": (hellaswag_rows, _bad_hellaswag, ["test.jsonl:2", "'endings'"]),
    "csqa": (csqa_rows, _bad_csqa, ["test.jsonl:2", "'answerKey'", "'F'"]),
    "aqua": (aqua_rows, _bad_aqua, ["test.jsonl:2", "'options'", "C 14"]),
    "gsm8k": (lambda n, tag: gsm8k_rows(n), _bad_gsm8k, ["test.jsonl:2", "'answer'", "####"]),
}


@pytest.mark.parametrize("benchmark", sorted(MALFORMED))
def test_malformed_row_names_file_row_and_field(benchmark: str, tmp_path: Path) -> None:
    rows_of, breaks, words = MALFORMED[benchmark]
    rows = rows_of(6, "t")
    breaks(rows)
    path = _write(tmp_path / "test.jsonl", rows)
    with pytest.raises(ValueError) as error:
        load_task(f"calidist_{benchmark}", {"data_files": {"evaluation": str(path)},
                                            "calib_size": 2})
    for word in words:
        assert word in str(error.value), (word, str(error.value))


@pytest.mark.parametrize("change, words", [
    (lambda r: r["documents"][1]["annotation_sets"][0]["annotations"]["nda-2"].update(
        choice="Maybe"), ["test.json documents[1] nda-2", "'choice'", "Maybe"]),
    (lambda r: r.pop("labels"), ["test.json", "'labels'"]),
    (lambda r: r["documents"][0].pop("annotation_sets"), ["test.json documents[0]",
                                                          "annotation_sets"]),
])
def test_malformed_contractnli_release(change, words: list[str], tmp_path: Path) -> None:
    release = contractnli_release(3, "test")
    change(release)
    path = tmp_path / "test.json"
    path.write_text(json.dumps(release), encoding="utf-8")
    with pytest.raises(ValueError) as error:
        load_task("calidist_contractnli", {"data_files": {"evaluation": str(path)},
                                           "calib_size": 2})
    for word in words:
        assert word in str(error.value), (word, str(error.value))


@pytest.mark.parametrize("benchmark", ["csqa", "hellaswag"])
def test_data_files_named_after_a_validation_evaluation_split(benchmark: str,
                                                               data_dir: Path) -> None:
    """data_files {"validation": f} for a benchmark evaluated on validation: the calibration
    documents are the first shuffled ones of that file, not the same rows again."""
    path = data_dir / benchmark / "validation.jsonl"
    task = load_task(f"calidist_{benchmark}", {"data_files": {"validation": str(path)},
                                               "calib_size": 3, "eval_size": 4})
    sources = [d["calidist_source"] for d in task.eval_docs]
    assert len(set(sources)) == 7 and all(s.startswith("validation.jsonl:") for s in sources)


def test_csqa_reads_the_original_release(tmp_path: Path) -> None:
    """dev_rand_split.jsonl nests the stem and the choices under "question"."""
    rows = [{"id": f"q{i}", "answerKey": "BCDEA"[i % 5], "question": {
        "question_concept": "x", "stem": f"Where is thing {i}?",
        "choices": [{"label": letter, "text": f"place {letter}{i}"} for letter in "ABCDE"]}}
        for i in range(6)]
    path = _write(tmp_path / "dev_rand_split.jsonl", rows)
    task = load_task("calidist_csqa", {"data_files": {"evaluation": str(path)}, "calib_size": 2})
    doc = next(d for d in task.eval_docs if d["question"] == "Where is thing 3?")
    assert doc["choices"] == [f"place {letter}3" for letter in "ABCDE"] and doc["label"] == 4


def _prompts(task, doc: dict) -> list[str]:
    """The distinct prompts the task sends for ``doc`` (original first), as lm-eval builds them
    with the task's default number of exemplars (the paper's one per label)."""
    shots = task.config.num_fewshot or 0
    ctx = task.fewshot_context(doc, num_fewshot=shots, gen_prefix=task.doc_to_prefix(doc))
    requests = task.construct_requests(doc, ctx, metadata=(task.config.task, 0, 1))
    return list(dict.fromkeys(r.arguments[0] for r in requests))


def _snapshot(name: str, text: str) -> None:
    path = SNAPSHOTS / f"{name}.txt"
    if os.environ.get("CALIDIST_UPDATE_SNAPSHOTS") == "1":
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"no snapshot {path}; run with CALIDIST_UPDATE_SNAPSHOTS=1"
    assert text == path.read_text(encoding="utf-8"), f"prompts of {name} changed; see {path}"


@pytest.mark.parametrize("benchmark", [*sorted(FAMILIES), "mnli", "ppdb"])
def test_prompt_snapshots(benchmark: str, request: pytest.FixtureRequest) -> None:
    """The default (one exemplar per label, Appendix F) original prompt and the first hinted
    prompt of each style, pinned; docs/paper_fidelity.md maps each part to the paper."""
    fixture = {"mnli": "mnli_data_dir", "ppdb": "ppdb_data_dir"}.get(benchmark, "data_dir")
    data_dir = request.getfixturevalue(fixture)
    # enough calibration documents for an exemplar of (nearly) every label
    calib_size = 8 if benchmark in ("mnli", "ppdb") else 6
    metadata = {"data_dir": str(data_dir), "calib_size": calib_size, "eval_size": 4}
    parts = []
    for style in (*STYLES, "_verbalized", "_assertion_verbalized", "_consistency"):
        task = load_task(f"calidist_{benchmark}{style}", metadata)
        doc = task.eval_docs[calib_size]  # the first evaluation document
        prompts = _prompts(task, doc)
        hinted = style not in ("", "_verbalized", "_consistency")
        index, what = (1, "first hinted prompt") if hinted else (0, "original prompt")
        parts.append(f"===== calidist_{benchmark}{style}: {what} =====\n{prompts[index]}\n")
    _snapshot(benchmark, "".join(parts))


def test_gsm8k_prompt_snapshot(data_dir: Path, tmp_path: Path) -> None:
    """The three GSM8K stages' prompts for one document (docs/gsm8k.md), with scripted chains:
    stage 1's generation prompt, stage 2's first hinted generation prompt, and stage 3's scoring
    contexts (continued by each candidate number) of the original and the first hinted chain."""
    metadata = {"data_dir": str(data_dir), "calib_size": 3, "eval_size": 4}
    stage1 = load_task("calidist_gsm8k", metadata)
    doc = stage1.eval_docs[3]
    samples = [{"doc": dict(d),
                "acc": {"prediction": d["target"], "chain": f" So {d['target']}.\nThe answer is "
                                                            f"{d['target']}."}}
               for d in stage1.eval_docs]
    path = _write(tmp_path / "stage1.jsonl", samples)
    stage2 = load_task("calidist_gsm8k_assertion_chains",
                       {**metadata, "original_samples": str(path)})
    samples = []
    for d in stage2.eval_docs:
        hinted = stage2.candidates(d)[1]
        chains = [f" The hint says {hinted}.\nThe answer is {hinted}."] * len(_prompts(stage2, d))
        record = stage2.process_results(d, chains)["calidist_record"]
        samples.append({"doc": dict(d), "acc": record})
    path = _write(tmp_path / "stage2.jsonl", samples)
    stage3 = load_task("calidist_gsm8k_assertion", {**metadata, "original_samples": str(path)})
    chains, scored = _prompts(stage2, stage2.eval_docs[3]), _prompts(stage3, stage3.eval_docs[3])
    _snapshot("gsm8k", f"===== calidist_gsm8k: generation prompt =====\n{_prompts(stage1, doc)[0]}"
                       f"\n===== calidist_gsm8k_assertion_chains: first hinted generation prompt "
                       f"=====\n{chains[0]}"
                       f"\n===== calidist_gsm8k_assertion: scoring context of the original chain "
                       f"=====\n{scored[0]}"
                       f"\n===== calidist_gsm8k_assertion: scoring context of the first hinted "
                       f"chain =====\n{scored[1]}\n")


@pytest.mark.parametrize("benchmark, changed", [
    ("mscinli", "sentence2"), ("contractnli", "hypothesis"), ("yahoo", "context"),
])
def test_corruption_changes_the_input_field(benchmark: str, changed: str, data_dir: Path) -> None:
    """NLI: the hypothesis; Yahoo: the question's context; the options stay as they are."""
    task = load_task(f"calidist_{benchmark}_corruption",
                     {"data_dir": str(data_dir), "calib_size": 3, "eval_size": 4})
    doc = task.eval_docs[3]
    for plan in task.prompt_plans(doc)[1:]:
        corrupted = task.distracted_doc(doc, plan)
        assert corrupted[changed].startswith(doc[changed]) and corrupted[changed] != doc[changed]
        assert task.doc_to_choice(corrupted) == task.doc_to_choice(doc)
        assert {k for k in doc if corrupted[k] != doc[k]} == {changed}


@pytest.mark.parametrize("benchmark, suffix", [
    ("hellaswag", "This event should happen next."), ("csqa", "This should be the most likely "
                                                              "answer."),
    ("aqua", "This should be the most likely answer."),
])
def test_corruption_marks_the_hinted_option(benchmark: str, suffix: str, data_dir: Path) -> None:
    task = load_task(f"calidist_{benchmark}_corruption",
                     {"data_dir": str(data_dir), "calib_size": 3, "eval_size": 4})
    doc = task.eval_docs[3]
    options = list(task.doc_to_choice(doc))
    for plan in task.prompt_plans(doc)[1:]:
        text = task.doc_to_text(task.distracted_doc(doc, plan))
        for i, option in enumerate(options):
            line = f"{'abcde'[i]}. {option}"
            assert (f"{line} {suffix}\n" in text) == (i == plan.hint_label), (i, plan)
        assert "Hint:" not in text


def test_bundled_aqua_sample_runs_as_data_dir(tmp_path: Path) -> None:
    """The bundled AQuA slice (original release format, dev = calibration) loads as a data_dir."""
    sample = Path(__file__).parents[2] / "calidist_tasks/sample_data/aqua"
    shutil.copytree(sample, tmp_path / "aqua")
    task = load_task("calidist_aqua_assertion",
                     {"data_dir": str(tmp_path), "calib_size": 5, "eval_size": 10})
    sources = [d["calidist_source"] for d in task.eval_docs]
    assert all(s.startswith("dev.jsonl:") for s in sources[:5])
    assert all(s.startswith("test.jsonl:") for s in sources[5:])
    assert all(len(d["options"]) == 5 for d in task.eval_docs)
