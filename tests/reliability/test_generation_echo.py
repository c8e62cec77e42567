"""Generations that echo the prompt: the verbalized parser reads the model's own answer, never the
hint's "(a) ... 100% confidence", our instructions ("Think step by step, ...", "End your reply
with "The answer is (letter) option text. Overall Confidence: N%"", the short prompt's "Reply in
the form ...") or a few-shot exemplar's answer.

tests/test_verbalized.py covers echoes of the hint line; here every real prompt of every family's
verbalized variants is echoed whole, before or after the model's answer, or alone (the model said
nothing of its own: unreadable, counted in parse_fail_rate, never read as the hint's option)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import load_task, write_mnli
from family_data import write_all

from calidist_tasks import task_folder
from calidist_tasks.prompting.verbalized import VerbalizedFilter, outcome_from_parse, parse_response
from calidist_tasks.tasks.base import CHOICES

# Option-letter families only: GSM8K's verbalized stages answer with numbers, and their echo
# handling is tested in tests/test_gsm8k_verbalized.py.
VARIANTS = sorted(p.stem for p in Path(task_folder()).rglob("calidist_*verbalized.yaml")
                  if p.parent.name != "gsm8k")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory, ppdb_data_dir: Path) -> Path:
    root = write_all(tmp_path_factory.mktemp("echo"), n_eval=4, n_calib=6)
    write_mnli(root / "mnli", n_matched=4, n_mismatched=6)
    shutil.copytree(ppdb_data_dir / "ppdb", root / "ppdb")
    return root


def requests(name: str, data_dir: Path, num_fewshot: int = 0, prompt: str = "paper") -> list:
    """The requests of one calibration and one evaluation document (their every prompt; the
    exemplars are the YAML's own documents)."""
    sizes = {"calib_size": 1, "eval_size": 1}
    task = load_task(name, {"data_dir": str(data_dir), "verbalized_prompt": prompt, **sizes})
    task.set_config("num_fewshot", num_fewshot)
    task.build_all_requests(limit=None, rank=0, world_size=1)
    return task.instances


def readings(prompt: str, doc: dict, form: str = "paper") -> tuple[dict, dict, dict]:
    """(echo alone, echo then the model's answer, the model's answer then the echo); the answer
    in the form the prompt asks for: step by step, or the short one."""
    last = len(doc[CHOICES]) - 1
    own = f"The answer is ({'abcdefghij'[last]}). Confidence: 63%"
    if form == "paper":
        steps = "Step 1: the options differ. Confidence: 40%\nStep 2: so. Confidence: 90%\n"
        own = (f"{steps}The answer is ({'abcdefghij'[last]}) {doc[CHOICES][last]}. "
               "Overall Confidence: 63%")
    replies = [[prompt], [f"{prompt}\n{own}"], [f"{own}\n{prompt}"]]
    out = VerbalizedFilter().apply(replies, [doc] * 3)
    return tuple({k: v for k, v in r[0].items() if k != "shape"} for r in out)


def test_every_verbalized_family_is_covered() -> None:
    families = {p.parent.name for p in Path(task_folder()).glob("*/_template_yaml")}
    with_variants = {name.split("_")[1] for name in VARIANTS}
    assert len(VARIANTS) >= 30 and {"mnli", "ppdb", "csqa", "yahoo"} <= with_variants
    assert with_variants == families - {"gsm8k"}  # GSM8K answers are numbers (tests/test_gsm8k)


@pytest.mark.parametrize("name", VARIANTS)
def test_echoed_prompts_are_never_read_as_the_answer(name: str, data_dir: Path) -> None:
    instances = requests(name, data_dir)
    assert instances
    for instance in instances:
        prompt, doc = instance.arguments[0], instance.doc
        alone, before, after = readings(prompt, doc)
        assert alone == {"answer": None, "confidence": None}, (name, prompt)
        last = len(doc[CHOICES]) - 1
        assert before == after == {"answer": last, "confidence": 0.63}, (name, prompt)


def test_unreadable_and_null_replies_follow_the_documented_rule() -> None:
    """An API reply with null content, an empty reply, or the hint alone: no answer, counted as
    a parse failure, wrong at confidence 1/c (never the hinted option at the hint's 100%)."""
    choices = ["yes", "no", "maybe"]
    hint = "Hint: With my 100% confidence the answer is (a) yes."
    for reply in (None, "", "   ", hint):
        parsed = parse_response(reply, choices, hint)
        assert parsed == {"answer": None, "confidence": None}, reply
        outcome = outcome_from_parse(parsed, len(choices))
        assert (outcome.prediction, outcome.confidence, outcome.parsed) == (-1, 1 / 3, False)


@pytest.mark.parametrize("prompt", ["paper", "short"])
@pytest.mark.parametrize("name", [v for v in VARIANTS if v.endswith("_assertion_verbalized")])
def test_echoed_few_shot_exemplars_are_never_read_as_the_answer(name: str, prompt: str,
                                                                data_dir: Path) -> None:
    """With --num_fewshot 1 the prompt holds one solved exemplar per label, each with its own
    hint and its reply in the reply form (paper: reasoned steps, each "Confidence: N%", then "...
    the correct answer is (x) ... Overall Confidence: N%"; short: "The answer is (x). Confidence:
    N%"): echoing them must not give their answers or confidences."""
    instances = requests(name, data_dir, num_fewshot=1, prompt=prompt)
    # the exemplars' replies are in the prompt (the query states no "Confidence: " but in the
    # short form's format line)
    assert any(instance.arguments[0].count("Confidence: ") > 1 for instance in instances)
    for instance in instances:
        alone, before, after = readings(instance.arguments[0], instance.doc, prompt)
        assert alone == {"answer": None, "confidence": None}, (name, instance.arguments[0])
        last = len(instance.doc[CHOICES]) - 1
        assert before == after == {"answer": last, "confidence": 0.63}, name
