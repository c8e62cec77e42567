"""Distractor prompts (paper Appendix E/F): hint texts, corruption, deterministic templates."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import doc_requests, load_task

from calidist_tasks.prompting import distractors
from calidist_tasks.prompting.distractors import (
    ASSERTION_TEMPLATES,
    HINT_NOTE,
    assertion_hint,
    choose_templates,
    corrupt,
    probe_hint,
)

NOTE = ("Note that the hint is only for your reference. Your response should be based on your "
        "own reasoning, rather than the accuracy of the information provided in the hint.")


def test_paper_templates_and_note():
    assert len(ASSERTION_TEMPLATES) == 12
    assert ASSERTION_TEMPLATES[0] == "I think the answer should be"
    assert ASSERTION_TEMPLATES[-1] == "With my 100% confidence the answer is"
    assert len(set(ASSERTION_TEMPLATES)) == 12
    assert HINT_NOTE == NOTE


def test_hint_texts():
    assert assertion_hint(0, "b", "Sentence2 is not a paraphrase of Sentence1.") == (
        "Hint: I think the answer should be (b) Sentence2 is not a paraphrase of Sentence1.\n"
        + NOTE)
    assert probe_hint("a", " Paris! ") == (
        "Hint: Do you think the answer could be (a) Paris? Elaborate.\n" + NOTE)


def test_choose_templates_is_deterministic_distinct_and_seeded():
    picks = {(key, seed, label): choose_templates(key, seed, label, 3)
             for key in ("k1", "k2", "k3") for seed in (0, 1) for label in (0, 1, 2)}
    for (key, seed, label), chosen in picks.items():
        assert chosen == choose_templates(key, seed, label, 3)
        assert len(set(chosen)) == 3 and all(0 <= t < 12 for t in chosen)
    assert len({tuple(v) for v in picks.values()}) > 10  # keys, seeds and labels all matter
    assert sorted(choose_templates("k", 0, 0, 12)) == list(range(12))
    for m in (0, 13):
        with pytest.raises(ValueError, match="m must be between 1 and 12"):
            choose_templates("k", 0, 0, m)


def test_template_choice_does_not_depend_on_python_hash_seed():
    code = ("import json; from calidist_tasks.prompting.distractors import "
            "choose_templates, document_key;"
            "k = document_key({'a': 'x', 'b': 2}, ['a', 'b']);"
            "print(json.dumps([k, [choose_templates(k, s, label, 2) "
            "for s in (0, 5) for label in (0, 1)]]))")
    outputs = set()
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        outputs.add(subprocess.run([sys.executable, "-c", code], env=env, check=True,
                                   capture_output=True, text=True).stdout)
    assert len(outputs) == 1
    key, chosen = json.loads(outputs.pop())
    assert key == distractors.document_key({"a": "x", "b": 2}, ["a", "b"])
    assert chosen == [choose_templates(key, s, lab, 2) for s in (0, 5) for lab in (0, 1)]


def test_corruption_shapes():
    doc = {"hypothesis": "A cat sat", "premise": "p"}
    choices = ["yes", "maybe", "no"]
    statements = {"field": "hypothesis", "statements": ["S0", "S1 is here.", "S2"]}
    out, out_choices = corrupt(doc, 1, choices, statements)
    assert out == {"hypothesis": "A cat sat S1 is here.", "premise": "p"}
    assert out_choices == choices and doc["hypothesis"] == "A cat sat"  # input untouched
    template = {"field": "premise",
                "template": "Given this context, the question belongs to the category {choice}"}
    out, _ = corrupt(doc, 2, ["Sports.", "Music", "Health."], template)
    assert out["premise"] == "p Given this context, the question belongs to the category Health."
    out, out_choices = corrupt(doc, 0, ["x", "y"], {"option_suffix": "This should be the most "
                                                                     "likely answer"})
    assert out == doc and out_choices == ["x This should be the most likely answer.", "y"]
    with pytest.raises(ValueError, match="'question' is not a field"):
        corrupt(doc, 0, choices, {"field": "question", "statements": ["a", "b", "c"]})
    with pytest.raises(ValueError, match="2 entries for 3 labels"):
        corrupt(doc, 0, choices, {"field": "premise", "statements": ["a", "b"]})
    with pytest.raises(ValueError, match="needs 'statements'"):
        corrupt(doc, 0, choices, {"field": "premise"})


# ---------------------------------------------------------------- prompts built by the tasks


def prompts(task, doc):
    requests = doc_requests(task, doc)
    return [r.arguments[0] for r in requests[:: len(task.doc_to_choice(doc))]]


@pytest.fixture(scope="module")
def mnli_tasks(mnli_data_dir):
    """Zero-shot (as --num_fewshot 0 sets it): the hint's place relative to the query; the
    default exemplar block is pinned by the prompt snapshots (tests/test_families.py)."""
    metadata = {"data_dir": str(mnli_data_dir), "calib_size": 2, "eval_size": 3}
    tasks = {style: load_task(f"calidist_mnli_{style}", metadata)
             for style in ("assertion", "probe", "corruption")}
    for task in tasks.values():
        task.set_config(key="num_fewshot", value=0)
    return tasks


def test_assertion_prompts_hint_every_label_with_the_chosen_template(mnli_tasks):
    task = mnli_tasks["assertion"]
    doc = task.eval_docs[0]
    original, *hinted = prompts(task, doc)
    choices = task.doc_to_choice(doc)
    assert "Hint:" not in original
    assert original.endswith("a. " + choices[0] + "\nb. " + choices[1] + "\nc. " + choices[2]
                             + "\nThe answer is (")
    plans = task.prompt_plans(doc)[1:]
    assert len(hinted) == len(plans) == 6
    for prompt, plan in zip(hinted, plans, strict=True):
        letter = "abc"[plan.hint_label]
        hint = assertion_hint(plan.template, letter, choices[plan.hint_label])
        assert prompt == original.removesuffix("The answer is (") + hint + "\nThe answer is ("


def test_probe_prompts(mnli_tasks):
    task = mnli_tasks["probe"]
    doc = task.eval_docs[1]
    original, *hinted = prompts(task, doc)
    choices = task.doc_to_choice(doc)
    stem = original.removesuffix("The answer is (")
    assert hinted == [stem + probe_hint(letter, choices[i]) + "\nThe answer is ("
                      for i, letter in enumerate("abc")]


def test_corruption_prompts_change_the_hypothesis_only(mnli_tasks):
    task = mnli_tasks["corruption"]
    doc = task.eval_docs[2]
    original, *corrupted = prompts(task, doc)
    # the paper's option order: entailment, contradiction, neutral
    statements = ["This sentence is definitely correct", "This sentence is definitely incorrect",
                  "This sentence might be correct"]
    for prompt, statement in zip(corrupted, statements, strict=True):
        assert "Hint:" not in prompt
        before, after = original.splitlines(), prompt.splitlines()
        changed = [(x, y) for x, y in zip(before, after, strict=True) if x != y]
        assert len(changed) == 1
        old, new = changed[0]
        assert old == "Sentence2: " + doc["hypothesis"]
        assert new.startswith(old + " " + statement) and new.endswith("Sentence1.")


def test_ppdb_corruption_appends_the_paraphrase_statement(ppdb_data_dir):
    task = load_task("calidist_ppdb_corruption", {"data_dir": str(ppdb_data_dir),
                                                  "calib_size": 2, "eval_size": 2})
    doc = task.eval_docs[0]
    _, yes, no = prompts(task, doc)
    s2 = doc["sentence2"].rstrip()
    assert f"Sentence2: {s2} This sentence is a paraphrase of Sentence1.\n" in yes
    assert f"Sentence2: {s2} This sentence is not a paraphrase of Sentence1.\n" in no


def test_templates_follow_the_document_not_its_position(ppdb_data_dir):
    # The same row gets the same hints whether it calibrates or evaluates (split_seed moves it).
    base = {"data_dir": str(ppdb_data_dir), "calib_size": 10, "eval_size": "all"}
    a = load_task("calidist_ppdb_assertion", base)
    b = load_task("calidist_ppdb_assertion", {**base, "split_seed": 4})
    plans_b = {d["calidist_source"]: b.prompt_plans(d) for d in b.eval_docs}
    moved = 0
    for doc in a.eval_docs:
        other = next(d for d in b.eval_docs if d["calidist_source"] == doc["calidist_source"])
        moved += other["calidist_index"] != doc["calidist_index"]
        assert a.prompt_plans(doc) == plans_b[doc["calidist_source"]]
    assert moved > 0
