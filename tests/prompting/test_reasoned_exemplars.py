"""Appendix F's exemplars in every family's verbalized prompts: one per label, each reasoning in
steps with a confidence on each before its "Overall Confidence", hinted exemplars carrying a hint
that names a wrong label, and no exemplar among the calibration or evaluation documents."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import load_task, write_mnli
from family_data import write_all

from calidist_tasks.prompting import fewshot
from calidist_tasks.prompting.distractors import LETTERS
from calidist_tasks.prompting.styles import content_key
from calidist_tasks.scoring.joining import PromptPlan
from calidist_tasks.tasks.base import MULTITURN, ONE_TURN, PLAIN
from yaml_tasks._generate_configs import families

STYLES = ("", "assertion_", "probe_", "corruption_")
STEP = re.compile(r"^.+ Confidence: (\d+)%$")
FINAL = re.compile(r"^Based on the information available in (.+) and the explanation above, the "
                   r"correct answer is \(([a-z])\) (.+)\. Overall Confidence: (\d+)%$")
HINT = re.compile(r"^Hint: .*\(([a-z])\)")


PPDB_SAMPLE = Path(__file__).parents[2] / "calidist_tasks/sample_data/twitter_url_corpus/test.tsv"


def _write_data(root: Path) -> Path:
    """Every family's tiny data set (``family_data``), MNLI, and PPDB's bundled sample."""
    write_all(root)
    write_mnli(root / "mnli")
    (root / "ppdb").mkdir()
    lines = PPDB_SAMPLE.read_text(encoding="utf-8").splitlines()[:60]
    (root / "ppdb" / "test.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write_data(tmp_path_factory.mktemp("reasoned_exemplars"))


def _exemplars(prompt: str) -> list[str]:
    *exemplars, _query = prompt.split(fewshot.SEPARATOR)
    return exemplars


def _corrupted_label(task, question: str, doc: dict) -> int | None:
    """The label an exemplar's ``question`` was corrupted towards (a corruption task), or None."""
    if task.style.name != "corruption":
        return None
    for label in range(len(task.doc_to_choice(doc))):
        corrupted = task.distracted_doc(doc, PromptPlan(label))
        if task.doc_to_text(corrupted) == question + "\n":
            return label
    return None


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("family", families())
def test_every_verbalized_prompt_shows_reasoned_exemplars(family: str, style: str,
                                                          data_dir: Path) -> None:
    task = load_task(f"calidist_{family}_{style}verbalized",
                     {"data_dir": str(data_dir), "calib_size": 4, "eval_size": 6})
    label_field = task.config.doc_to_target
    shipped = task.fewshot_pool()
    used = {content_key(d) for d in task.eval_docs}
    assert not used & {content_key(d) for d in shipped}, "an exemplar is a data document"
    doc = task.eval_docs[len(task.eval_docs) - 1]
    n_labels = len(task.doc_to_choice(doc))
    plans = task.prompt_plans(doc)
    shown = [doc] + [task.distracted_doc(doc, plan) for plan in plans[1:]]
    assert len(shown) == (1 if not style else 1 + n_labels * task.m)
    for i, variant in enumerate(shown):
        prompt = task.fewshot_context(variant, num_fewshot=1,
                                      gen_prefix=task.doc_to_prefix(variant))
        assert prompt.endswith(f"\n{fewshot.ASSISTANT}\n")  # plain layout: the reply follows
        exemplars = _exemplars(prompt)
        assert len(exemplars) == n_labels  # one per label, in label order
        for label, (exemplar, source) in enumerate(zip(exemplars, shipped, strict=True)):
            assert source[label_field] == label
            question, reply = exemplar.split(f"\n{fewshot.ASSISTANT}\n")
            *steps, final = reply.split("\n")
            assert len(steps) >= 2 and all(STEP.match(s) for s in steps), reply
            basis, letter, option, overall = FINAL.match(final).groups()
            assert basis == task.answer_basis
            assert letter == LETTERS[label]
            assert option == task.doc_to_choice(source)[label].strip().rstrip(". ")
            assert int(overall) in fewshot.EXEMPLAR_CONFIDENCES
            hints = [HINT.match(line) for line in question.split("\n")]
            named = [int(LETTERS.index(m.group(1))) for m in hints if m]
            if i == 0:  # the original prompt: exemplars as they are
                assert not named and question + "\n" == task.doc_to_text(source)
            elif style == "corruption_":  # corrupted towards a wrong label, no hint line
                assert not named
                wrong = _corrupted_label(task, question, source)
                assert wrong is not None and wrong != label, question
            else:
                assert len(named) == 1 and named[0] != label, question


def test_step_confidences_come_from_the_exemplar_step_and_seed(data_dir: Path) -> None:
    task = load_task("calidist_mscinli_verbalized",
                     {"data_dir": str(data_dir), "calib_size": 4, "eval_size": 6})
    pool = task.fewshot_pool()
    drawn = {(i, seed, step): fewshot.exemplar_confidence(d, seed, step)
             for i, d in enumerate(pool) for seed in range(10) for step in (None, 0, 1, 2)}
    assert set(drawn.values()) <= set(fewshot.EXEMPLAR_CONFIDENCES)
    assert len(set(drawn.values())) > 20  # they vary with exemplar, seed and step
    assert drawn == {(i, seed, step): fewshot.exemplar_confidence(dict(d), seed, step)
                     for i, d in enumerate(pool) for seed in range(10) for step in (None, 0, 1, 2)}
    moved = {**pool[0], "calidist_index": 99}  # bookkeeping fields change nothing
    assert fewshot.exemplar_confidence(moved, 0, 1) == drawn[0, 0, 1]


def test_a_data_row_equal_to_an_exemplar_is_dropped(tmp_path: Path,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    """A PPDB row that is one of the YAML's exemplars is neither evaluated nor calibrated on."""
    plain = load_task("calidist_ppdb", {"data_dir": str(_write_data(tmp_path)), "calib_size": 4,
                                        "eval_size": 6})
    exemplar = plain.fewshot_pool()[1]
    assert exemplar["label"] == 1
    tsv = tmp_path / "ppdb" / "test.tsv"
    line = f"{exemplar['sentence1']}\t{exemplar['sentence2']}\t(0,6)\thttps://t.co/x\n"  # 0 of 6
    tsv.write_text(line + tsv.read_text(encoding="utf-8"), encoding="utf-8")
    with caplog.at_level("INFO"):
        task = load_task("calidist_ppdb", {"data_dir": str(tmp_path), "calib_size": 4,
                                           "eval_size": 100})
    assert exemplar["sentence2"] not in {d["sentence2"] for d in task.eval_docs}
    assert "1 row(s) dropped for being a few-shot exemplar" in caplog.text


def _chat(messages: list[dict], add_generation_prompt: bool = True) -> str:
    """A stand-in chat template: the messages as JSON, to read the turns back."""
    return json.dumps(messages)


@pytest.mark.parametrize("multiturn", [True, False])
def test_chat_template_exemplars_are_turns_or_one_user_turn(multiturn: bool,
                                                            data_dir: Path) -> None:
    task = load_task("calidist_ppdb_assertion_verbalized",
                     {"data_dir": str(data_dir), "calib_size": 4, "eval_size": 6})
    doc = task.eval_docs[5]
    hinted = task.distracted_doc(doc, task.prompt_plans(doc)[1])
    context = {"apply_chat_template": True, "chat_template": _chat,
               "fewshot_as_multiturn": multiturn, "system_instruction": "Be brief."}
    messages = json.loads(task.fewshot_context(hinted, num_fewshot=1, gen_prefix=None, **context))
    assert messages[0] == {"role": "system", "content": "Be brief."}
    plain = task.fewshot_context(hinted, num_fewshot=1, gen_prefix=None)
    *exemplars, query = plain.split(fewshot.SEPARATOR)
    if multiturn:  # user/assistant per exemplar, no "Assistant:" line, then the question
        assert [m["role"] for m in messages[1:]] == ["user", "assistant"] * 2 + ["user"]
        for i, exemplar in enumerate(exemplars):
            question, reply = exemplar.split(f"\n{fewshot.ASSISTANT}\n")
            assert messages[1 + 2 * i]["content"] == question + "\n"  # as the query's turn
            assert messages[2 + 2 * i]["content"] == reply
            assert "Hint:" in question
        assert fewshot.ASSISTANT not in messages[-1]["content"]
    else:  # one user turn: the plain exemplars, then the question (its reply is the model's turn)
        assert [m["role"] for m in messages[1:]] == ["user"]
        assert messages[1]["content"] == plain.removesuffix(f"{fewshot.ASSISTANT}\n")
    assert messages[-1]["content"].endswith(query.removesuffix(f"{fewshot.ASSISTANT}\n"))
    assert task.exemplar_layout(context) == (MULTITURN if multiturn else ONE_TURN)
    assert task.exemplar_layout({}) == PLAIN


GOOD = {"question": "Q?", "choices": ["x", "y"], "label": 1, "explanation": ["One.", "Two."]}


@pytest.mark.parametrize("samples, message", [
    (None, "t: --num_fewshot needs exemplar documents: add fewshot_config: samples:"),
    ([GOOD, {k: v for k, v in GOOD.items() if k != "question"}],
     "t: fewshot_config.samples[1] lacks field(s) ['question']"),
    ([{**GOOD, "label": 2}], "t: fewshot_config.samples[0]: label 2 is not an option index 0..1"),
    ([{**GOOD, "explanation": ["Only one step."]}],
     "t: fewshot_config.samples[0]: 'explanation' must be a list of 2-4 steps"),
    ([{**GOOD, "explanation": ["a", "b", "c", "d", "e"]}], "must be a list of 2-4 steps"),
])
def test_bad_exemplars_are_refused_naming_the_sample(samples, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        fewshot.check_exemplars(samples, "t", ["question", "choices"], "label", None, "choices")
    assert fewshot.check_exemplars([GOOD], "t", ["question", "choices"], "label", None,
                                   "choices") == [GOOD]
