"""Wrapped lm-eval tasks (``calidist wrap``, docs/wrap.md) on lm-eval's own registered configs.

Each test wraps lm-eval 0.4.13's ``arc_easy``, ``mmlu_anatomy``, ``truthfulqa_mc1`` and
``hellaswag`` with their data pointed at small local files in the Hub's schema (written here), and
checks every request: the original prompt is the task's own, each hinted prompt carries its hint
before the answer cue, every prompt scores the task's own choices, and the target is the gold
choice.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from calidist_tasks.prompting.distractors import ASSERTION_TEMPLATES, HINT_NOTE, hint_naming
from calidist_tasks.scoring.records import CALIBRATION, EVALUATION, SOURCE_FIELD, SPLIT_FIELD
from calidist_tasks.tasks.wrapped import hinted_text, wrap
from tests.conftest import doc_requests

WRAPPED = ("arc_easy", "mmlu_anatomy", "truthfulqa_mc1", "hellaswag")
LETTERS = "ABCD"
TRUTHFUL_QA_SHOTS = "Q: Where were the 1992 Olympics held?\nA: The 1992 Olympics were held in " \
    "Barcelona, Spain."


def arc_rows(split: str, n: int) -> list[dict]:
    return [{"id": f"{split}-{i}", "question": f"Which {split} number comes after {i}?",
             "choices": {"text": [f"{i + k} items" for k in range(4)], "label": list(LETTERS)},
             "answerKey": LETTERS[(i + 1) % 4]} for i in range(n)]


def mmlu_rows(split: str, n: int) -> list[dict]:
    return [{"question": f"Which {split} bone is number {i}?", "subject": "anatomy",
             "choices": [f"bone {i}-{k}" for k in range(4)], "answer": (i + 2) % 4}
            for i in range(n)]


def truthfulqa_rows(n: int) -> list[dict]:
    rows = []
    for i in range(n):
        choices = [f"Answer {i}-{k}." for k in range(3 + i % 2)]  # 3 or 4 choices
        rows.append({"question": f"What is true about thing {i}?",
                     "mc1_targets": {"choices": choices, "labels": [1] + [0] * (len(choices) - 1)},
                     "mc2_targets": {"choices": choices, "labels": [1] + [0] * (len(choices) - 1)}})
    return rows


def hellaswag_rows(n: int) -> list[dict]:
    return [{"ind": i, "activity_label": "Cooking", "ctx_a": f"A cook stirs pot {i}.",
             "ctx_b": "then", "ctx": f"A cook stirs pot {i}. then",
             "endings": [f"adds salt {i}-{k}." for k in range(4)], "source_id": f"s{i}",
             "split": "val", "split_type": "indomain", "label": str(i % 4)} for i in range(n)]


def write_jsonl(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


# The folders of lm-eval 0.4.13's own tasks that these tests wrap or look up (arc_easy and the
# ai2_arc tag, mmlu_anatomy and the mmlu group, truthfulqa_mc1, hellaswag, gsm8k).
LM_EVAL_FOLDERS = ("arc", "mmlu/default", "truthfulqa", "hellaswag", "gsm8k")


@pytest.fixture(autouse=True, scope="module")
def lm_eval_index():
    """lm-eval's task index over the folders of the tasks these tests name, indexed once: the
    same entries as the whole tree's for those names, which ``calidist wrap`` and the wrapped
    tasks look up (``lm_eval_compat._index_for``, ``_task_index``), without scanning or indexing
    the ~14,700 entries of the whole tree. tests/slow/tasks/test_wrapped.py runs the real
    ``calidist wrap`` and ``lm_eval`` on the whole tree."""
    import functools

    import lm_eval.tasks
    from lm_eval.tasks import TaskManager

    from calidist_tasks.backends import lm_eval_compat

    tasks = Path(lm_eval.tasks.__file__).parent
    ours = [str(tasks / folder) for folder in LM_EVAL_FOLDERS]

    @functools.cache
    def index(include_path: tuple[str, ...]) -> dict:
        return TaskManager(include_path=[*ours, *include_path], include_defaults=False).task_index

    with pytest.MonkeyPatch.context() as patch:  # the whole index and the one found by scan
        patch.setattr(lm_eval_compat, "_task_index", index)
        patch.setattr(lm_eval_compat, "_index_for", lambda name, include_path: index(include_path))
        yield


@pytest.fixture(scope="module")
def data_files(tmp_path_factory) -> dict[str, dict[str, str]]:
    """Per wrapped task, ``--metadata data_files`` in its own split names."""
    root = tmp_path_factory.mktemp("wrapped_data")
    return {
        "arc_easy": {"test": write_jsonl(root / "arc_test.jsonl", arc_rows("test", 10)),
                     "validation": write_jsonl(root / "arc_val.jsonl", arc_rows("val", 6))},
        "mmlu_anatomy": {"test": write_jsonl(root / "mmlu_test.jsonl", mmlu_rows("test", 12)),
                         "dev": write_jsonl(root / "mmlu_dev.jsonl", mmlu_rows("dev", 5))},
        "truthfulqa_mc1": {"validation": write_jsonl(root / "tqa.jsonl", truthfulqa_rows(12))},
        "hellaswag": {"validation": write_jsonl(root / "hs.jsonl", hellaswag_rows(12))},
    }


@pytest.fixture(scope="module")
def wrapped_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("wrapped")
    wrap(list(WRAPPED), folder)
    return folder


def load(folder: Path, name: str, metadata: dict):
    """A wrapped task as lm-eval builds it from the folder (``--include_path``)."""
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_path=str(folder), include_defaults=False, metadata=metadata)
    return manager.load([name])["tasks"][name]


def metadata_for(wrapped: str, data_files: dict, **more) -> dict:
    return {"data_files": data_files[wrapped], "calib_size": 4, "eval_size": "all", **more}


def expected_prompt(wrapped: str, doc: dict) -> str:
    """The wrapped task's own prompt, written out from lm-eval 0.4.13's config."""
    if wrapped == "arc_easy":
        return f"Question: {doc['question']}\nAnswer:"
    if wrapped == "mmlu_anatomy":
        options = "".join(f"\n{LETTERS[k]}. {c}" for k, c in enumerate(doc["choices"]))
        return ("The following are multiple choice questions (with answers) about anatomy.\n\n"
                f"{doc['question']}{options}\nAnswer:")
    if wrapped == "truthfulqa_mc1":
        return f"{TRUTHFUL_QA_SHOTS}\n\nQ: {doc['question']}\nA:"
    return f"Cooking: {doc['ctx_a']} Then"  # HellaSwag's query: completed by an ending


def expected_choices(wrapped: str, doc: dict) -> list[str]:
    return {"arc_easy": lambda: doc["choices"]["text"], "mmlu_anatomy": lambda: list(LETTERS),
            "truthfulqa_mc1": lambda: doc["mc1_targets"]["choices"],
            "hellaswag": lambda: doc["endings"]}[wrapped]()


def expected_label(wrapped: str, doc: dict) -> int:
    return {"arc_easy": lambda: LETTERS.index(doc["answerKey"]),
            "mmlu_anatomy": lambda: doc["answer"],
            "truthfulqa_mc1": lambda: doc["mc1_targets"]["labels"].index(1),
            "hellaswag": lambda: int(doc["label"])}[wrapped]()


def expected_hinted(wrapped: str, original: str, hint: str) -> str:
    """The hint before the answer cue ("Answer:", "A:"); before the whole HellaSwag prompt."""
    if wrapped == "hellaswag":
        return f"{hint}\n\n{original}"
    cue = "A:" if wrapped == "truthfulqa_mc1" else "Answer:"
    assert original.endswith("\n" + cue)
    return f"{original[:-len(cue)]}{hint}\n{cue}"


def test_wrap_writes_every_variant_and_the_length_normalised_ones(wrapped_dir):
    names = sorted(p.stem for p in wrapped_dir.glob("*.yaml"))
    for wrapped in WRAPPED:
        assert {f"calidist_{wrapped}", f"calidist_{wrapped}_assertion",
                f"calidist_{wrapped}_probe"} <= set(names)
    # acc_norm where the task reports it (ARC, HellaSwag), not for MMLU or TruthfulQA MC1
    assert "calidist_arc_easy_norm_assertion" in names
    assert "calidist_hellaswag_norm" in names
    assert not [n for n in names if n.startswith(("calidist_mmlu_anatomy_norm",
                                                  "calidist_truthfulqa_mc1_norm"))]
    text = (wrapped_dir / "calidist_arc_easy_assertion.yaml").read_text()
    assert "wraps: \"arc_easy\"" in text and "distractor: assertion" in text


def test_wrap_refuses_a_task_that_is_not_multiple_choice(tmp_path):
    with pytest.raises(ValueError, match="gsm8k is a generate_until task"):
        wrap(["gsm8k"], tmp_path)
    with pytest.raises(ValueError, match="not a registered lm-eval task"):
        wrap(["no_such_task_anywhere"], tmp_path)


@pytest.mark.parametrize("wrapped", WRAPPED)
def test_every_request_of_a_wrapped_assertion_task(wrapped, wrapped_dir, data_files):
    m = 2
    task = load(wrapped_dir, f"calidist_{wrapped}_assertion",
                metadata_for(wrapped, data_files, m=m))
    docs = list(task.eval_docs)
    # ARC: 4 of its validation documents calibrate, its 10 test documents are evaluated; the
    # others: their 12 evaluated documents, 4 of them calibrating (MMLU's dev split: few-shot)
    assert len(docs) == (14 if wrapped == "arc_easy" else 12)
    for doc in docs:
        choices = expected_choices(wrapped, doc)
        c = len(choices)
        requests = doc_requests(task, doc)
        assert len(requests) == (1 + c * m) * c
        prompts = [r.arguments[0] for r in requests[::c]]
        for i, prompt in enumerate(prompts):  # every prompt scores the task's own choices
            assert [r.arguments for r in requests[i * c:(i + 1) * c]] == [
                (prompt, f" {choice}") for choice in choices]
        original = prompts[0]
        if wrapped == "truthfulqa_mc1":  # its six fixed exemplars, then the question
            assert original.endswith(expected_prompt(wrapped, doc))
        else:
            assert original == expected_prompt(wrapped, doc)
        plans = task.prompt_plans(doc)[1:]
        assert sorted(p.hint_label for p in plans) == sorted(list(range(c)) * m)
        for plan, prompt in zip(plans, prompts[1:], strict=True):
            hint = (f"Hint: {ASSERTION_TEMPLATES[plan.template]} "
                    f"{choices[plan.hint_label].rstrip('.')}.\n{HINT_NOTE}")
            assert prompt == expected_hinted(wrapped, original, hint)
        assert task.gold_label(doc) == expected_label(wrapped, doc)


@pytest.mark.parametrize("wrapped", ["arc_easy", "hellaswag"])
def test_probe_hints_and_the_calibration_documents(wrapped, wrapped_dir, data_files):
    task = load(wrapped_dir, f"calidist_{wrapped}_probe", metadata_for(wrapped, data_files))
    doc = task.eval_docs[0]
    choices = expected_choices(wrapped, doc)
    prompts = [r.arguments[0] for r in doc_requests(task, doc)[::len(choices)]]
    assert prompts[1:] == [expected_hinted(wrapped, expected_prompt(wrapped, doc),
                                           hint_naming(choice)) for choice in choices]
    assert "Do you think the answer could be" in prompts[1]
    splits = [d[SPLIT_FIELD] for d in task.eval_docs]
    assert splits[:4] == [CALIBRATION] * 4 and set(splits[4:]) == {EVALUATION}
    sources = [d[SOURCE_FIELD].rpartition("/")[2].partition("[")[0] for d in task.eval_docs]
    if wrapped == "arc_easy":  # evaluates test, calibrates on validation
        assert sources[:4] == ["validation"] * 4 and set(sources[4:]) == {"test"}
    else:  # evaluates validation: a seeded held-out slice of it calibrates
        assert set(sources) == {"validation"}


def test_few_shot_exemplars_are_the_tasks_own_and_unhinted(wrapped_dir, data_files):
    task = load(wrapped_dir, "calidist_mmlu_anatomy_assertion",
                metadata_for("mmlu_anatomy", data_files, m=1))
    task.set_config(key="num_fewshot", value=2)  # what lm_eval --num_fewshot 2 does
    doc = task.eval_docs[0]
    requests = doc_requests(task, doc, num_fewshot=2)
    original, hinted = requests[0].arguments[0], requests[4].arguments[0]
    exemplars = [f"Which dev bone is number {i}?" for i in range(2)]  # MMLU's first_n sampler
    assert all(e in original and e in hinted for e in exemplars)
    assert hinted.count("Hint:") == 1 and hinted.rindex("Hint:") > hinted.index(doc["question"])


def test_process_results_joins_the_choices_answers(wrapped_dir, data_files):
    task = load(wrapped_dir, "calidist_arc_easy_assertion",
                metadata_for("arc_easy", data_files, m=1))
    doc = task.eval_docs[0]
    gold = task.gold_label(doc)
    plans = task.prompt_plans(doc)
    results = []
    for plan in plans:  # the original answers gold; each hint pulls the answer to its label
        pick = gold if plan.hint_label is None else plan.hint_label
        results += [(-0.1 if k == pick else -3.0, False) for k in range(4)]
    record = task.process_results(doc, results)["calidist_record"]
    assert record["label"] == gold and record["prediction"] == gold and record["correct"] == 1
    assert record["mu"] > 0 and record["flipped"] == 1
    assert [hint[0] for hint in record["hints"]] == [p.hint_label for p in plans[1:]]


def test_length_normalised_confidence_divides_by_the_choice_length(wrapped_dir, data_files):
    task = load(wrapped_dir, "calidist_arc_easy_norm", metadata_for("arc_easy", data_files))
    doc = task.eval_docs[0]
    lengths = [len(c) for c in task.doc_to_choice(doc)]
    values = task.option_loglikelihoods(doc, [(-2.0, False)] * 4)
    assert values == [-2.0 / n for n in lengths]
    plain = load(wrapped_dir, "calidist_arc_easy", metadata_for("arc_easy", data_files))
    assert plain.option_loglikelihoods(doc, [(-2.0, False)] * 4) == [-2.0] * 4


def test_hinted_text_rule_and_its_override():
    hint = "Hint: X.\nNote."
    assert hinted_text("Q: a?\nAnswer:", hint) == "Q: a?\nHint: X.\nNote.\nAnswer:"
    assert hinted_text("A cook stirs the", hint) == "Hint: X.\nNote.\n\nA cook stirs the"
    # a long last line is a sentence, not a cue
    long_line = "Q: a?\nThe following sentence is completed by the choice below it:"
    assert hinted_text(long_line, hint).startswith(hint)
    assert hinted_text("Q: a? Reply:", hint, cue="Reply:") == "Q: a? \nHint: X.\nNote.\nReply:"
    assert hinted_text("Q: a?\nAnswer:", hint, cue="").startswith(hint)
    with pytest.raises(ValueError, match="answer_cue 'Final:' is not in the prompt"):
        hinted_text("Q: a?\nAnswer:", hint, cue="Final:")


def test_corruption_is_not_derived(tmp_path, data_files):
    (tmp_path / "bad.yaml").write_text(
        "task: calidist_arc_easy_corruption\n"
        "class: !function calidist_tasks.tasks.wrapped.WrappedTask\n"
        "wraps: arc_easy\ndistractor: corruption\n")
    with pytest.raises(ValueError, match="sample corruption is task-specific"):
        load(tmp_path, "calidist_arc_easy_corruption", metadata_for("arc_easy", data_files))


def test_two_stage_runs_split_a_wrapped_hinted_task(wrapped_dir):
    from calidist_tasks.runs.two_stage import plan_two_stage

    plan = plan_two_stage(["--include_path", str(wrapped_dir), "--tasks",
                           "calidist_arc_easy_assertion,calidist_arc_easy",
                           "--output_path", "out"])
    assert plan.hinted == ["calidist_arc_easy_assertion"]
    assert plan.stage1[plan.stage1.index("--tasks") + 1] == "calidist_arc_easy_assertion"


def test_a_group_or_tag_wraps_each_of_its_tasks(tmp_path):
    from calidist_tasks.backends.lm_eval_compat import member_names

    assert member_names("ai2_arc") == ["arc_challenge", "arc_easy"]  # a tag
    subjects = member_names("mmlu")  # a group of groups of tags
    assert len(subjects) == 57 and "mmlu_anatomy" in subjects
    written = {p.stem for p in wrap(["ai2_arc"], tmp_path, acc_norm=False)}
    assert written == {f"calidist_{t}{s}" for t in ("arc_challenge", "arc_easy")
                       for s in ("", "_assertion", "_probe")}
