"""Few-shot prompts (paper, Appendix F): the golden MSciNLI exemplar, one exemplar per label,
misleading hints inside the exemplars of hinted prompts, and a run through lm-eval."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import load_task
from family_data import write_all

from calidist_tasks.prompting import distractors, fewshot
from calidist_tasks.prompting.verbalized import parse_response
from calidist_tasks.scoring.joining import PromptPlan

# The paper's Appendix F exemplar, verbatim (its lstlistings; only the indentation is removed).
# The question line goes on with the verbalized instruction, which the logit form leaves out.
PAPER_STEM = [
    "Consider the following two sentences:",
    "Sentence1: We used a configuration similar to the one prescribed in [14] for an Ethernet "
    "switch.",
    "Sentence2: when using RSTP switches, our configuration has two differences from that in "
    "[14].",
    "Based on only the information available in these two sentences, which of the following "
    "options is true? Think step by step, mention your confidence level in each step (0-100)%, "
    "and mention your overall confidence level in your answer (0-100)%.",
]
PAPER_OPTIONS = [
    "a. Sentence1 generalizes, specifies or has an equivalent meaning with Sentence2.",
    "b. Sentence1 presents the reason, cause, or condition for the result or conclusion made "
    "Sentence2.",
    "c. Sentence2 mentions a comparison, criticism, juxtaposition, or a limitation of something "
    "said in Sentence1. ",  # the trailing space is the paper's
    "d. Sentence1 and Sentence2 are independent.",
]
PAPER_NOTE = ("Note that the hint is only for your reference. Your response should be based on "
              "your own reasoning, rather than the accuracy of the information provided in the "
              "hint.")
PAPER_ASSERTION_HINT = ("Hint: An expert says the answer is (b) Sentence1 presents the reason, "
                        "cause, or condition for the result or conclusion made Sentence2.")
PAPER_PROBE_HINT = ("Hint: Do you think the answer could be (b) Sentence1 presents the reason, "
                    "cause, or condition for the result or conclusion made Sentence2? Elaborate.")
PAPER_CORRUPTED_SENTENCE2 = (
    "Sentence2: when using RSTP switches, our configuration has two differences from that in "
    "[14]. This sentence mentions a comparison, criticism, juxtaposition, or a limitation of "
    "something said in Sentence1. "
)
PAPER_ANSWER = ("Based on the information available in the two sentences and the explanation "
                "above, the correct answer is (c) Sentence2 mentions a comparison, criticism, "
                "juxtaposition, or a limitation of something said in Sentence1. Overall "
                "Confidence: 60%")
# Appendix F's three reasoning steps, without their confidences (55%, 68%, 45%)
PAPER_STEPS = [
    "Sentence1 mentions that the configuration for ethernet switch is similar to the one "
    "mentioned in [14].",
    "However, Sentence2 contrasts this fact by stating that there are two differences in the "
    "configuration of the switches when compared to [14].",
    "Since Sentence2 presents a contrasting view of something mentioned in Sentence1, the "
    "relation between Sentence1 and Sentence2 should be contrasting.",
]
PAPER_DOC = {  # the exemplar; its answer is (c), contrasting
    "sentence1": PAPER_STEM[1].removeprefix("Sentence1: "),
    "sentence2": PAPER_STEM[2].removeprefix("Sentence2: "),
    "label": 2,
}
# Appendix E lists the template as "An expert says that the answer is"; the Appendix F example
# writes "An expert says the answer is". The package uses the Appendix E list.
EXPERT = distractors.ASSERTION_TEMPLATES.index("An expert says that the answer is")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_all(tmp_path_factory.mktemp("fewshot"))


def _task(style: str, data_dir: Path, **metadata):
    name = f"calidist_mscinli_{style}" if style else "calidist_mscinli"
    return load_task(name, {"data_dir": str(data_dir), "calib_size": 6, "eval_size": 4,
                            **metadata})


@pytest.mark.parametrize("style, plan, hint", [
    ("assertion", PromptPlan(1, EXPERT), PAPER_ASSERTION_HINT.replace("says the", "says that the")),
    ("probe", PromptPlan(1), PAPER_PROBE_HINT),
    ("corruption", PromptPlan(2), None),
])
def test_paper_exemplar_line_by_line(style: str, plan: PromptPlan, hint: str | None,
                                     data_dir: Path) -> None:
    """The rendered exemplar against Appendix F, line by line. Compared: the first line, the
    Sentence1/Sentence2 lines (for corruption, the paper's corrupted Sentence2), the question line
    (the paper's line is ours followed by " Think step by step, ..."), the four option lines
    (equal up to the paper's trailing spaces), and the Hint and Note lines (assertion: up to the
    paper's "says the" for Appendix E's "says that the"; corruption has none, the hint in the
    paper's corruption listing being a copy of the assertion listing's). Not compared: the
    paper's "Assistant:" and reasoning lines, which the logit form replaces with "The answer is
    (c)", the letter of the paper's answer."""
    task = _task(style, data_dir)
    lines = task.solved_exemplar(PAPER_DOC, plan).split("\n")
    stem = PAPER_STEM[:2] + [PAPER_CORRUPTED_SENTENCE2.rstrip() if style == "corruption"
                             else PAPER_STEM[2]]
    assert lines[:3] == stem
    assert PAPER_STEM[3].startswith(lines[3] + " Think step by step")
    assert lines[4:8] == [o.rstrip() for o in PAPER_OPTIONS]
    if hint is None:
        assert lines[8:] == ["The answer is (c)"]
    else:
        assert lines[8:] == [hint, PAPER_NOTE, "The answer is (c)"]
    assert "the correct answer is (c)" in PAPER_ANSWER


@pytest.mark.parametrize("style, plan, hint", [
    ("assertion", PromptPlan(1, EXPERT), PAPER_ASSERTION_HINT.replace("says the", "says that the")),
    ("probe", PromptPlan(1), PAPER_PROBE_HINT),
    ("corruption", PromptPlan(2), None),
])
def test_paper_verbalized_exemplar_line_by_line(style: str, plan: PromptPlan, hint: str | None,
                                                data_dir: Path) -> None:
    """The verbalized variant's exemplar against Appendix F, every line: the shipped MSciNLI
    exemplar of label (c) is the paper's, so the question, options, hint and note, "Assistant:",
    the three reasoning steps and the final statement are the paper's, but for the step and
    overall confidences, which are the exemplar's own draws (the paper's are random too)."""
    task = _task(f"{style}_verbalized", data_dir)
    (exemplar,) = [d for d in task.fewshot_pool() if d["label"] == 2]
    assert {k: exemplar[k] for k in PAPER_DOC} == PAPER_DOC
    lines = task.solved_exemplar(exemplar, plan).split("\n")
    stem = PAPER_STEM[:3] if style != "corruption" else [*PAPER_STEM[:2],
                                                         PAPER_CORRUPTED_SENTENCE2.rstrip()]
    assert lines[:4] == [*stem, PAPER_STEM[3]]
    assert lines[4:8] == [o.rstrip() for o in PAPER_OPTIONS]
    rest = lines[8:]
    if hint is not None:
        assert rest[:2] == [hint, PAPER_NOTE]
        rest = rest[2:]
    seed = task.settings.seed
    steps = [f"{step} Confidence: {fewshot.exemplar_confidence(exemplar, seed, i)}%"
             for i, step in enumerate(PAPER_STEPS)]
    overall = fewshot.exemplar_confidence(exemplar, seed)
    assert rest == ["Assistant:", *steps, PAPER_ANSWER.replace("60%", f"{overall}%")]
    assert parse_response("\n".join(rest[1:]), [o[3:] for o in PAPER_OPTIONS]) == {
        "answer": 2, "confidence": overall / 100}


def _requested(format_line: str) -> re.Pattern[str]:
    """The reply a prompt's format line asks for ("... form "The answer is (letter). Confidence:
    N%", ...") as a pattern: letter, option text and N are groups."""
    (template,) = re.findall(r'"([^"]+)"', format_line)
    pattern = re.escape(template)
    for field, group in (("(letter)", r"\(([a-z])\)"), ("option text", "(.+)"), ("N%", r"(\d+)%")):
        pattern = pattern.replace(re.escape(field), group)
    return re.compile(pattern)


# the forms with a format line (the paper's reasoned form has none: tests/prompting/
# test_reasoned_exemplars.py checks its exemplars)
@pytest.mark.parametrize("name, metadata, fields", [
    ("calidist_mscinli_verbalized", {"verbalized_prompt": "short"}, 2),  # letter, N
    ("calidist_mscinli_probe_verbalized", {"verbalized_prompt": "short"}, 2),
    ("calidist_mscinli_spuq", {"verbalized_prompt": "short"}, 1),
])
def test_exemplars_answer_in_the_format_the_query_asks_for(name: str, metadata: dict,
                                                           fields: int, data_dir: Path) -> None:
    task = load_task(name, {"data_dir": str(data_dir), "calib_size": 6, "eval_size": 4,
                            **metadata})
    doc = task.eval_docs[7]
    variants = [doc] + [task.distracted_doc(doc, plan) for plan in task.prompt_plans(doc)[1:]]
    for variant in variants:
        prompt = task.fewshot_context(variant, num_fewshot=1, gen_prefix=task.doc_to_prefix(doc))
        *exemplars, query = prompt.split(fewshot.SEPARATOR)
        *_, format_line, cue = query.rstrip("\n").split("\n")
        assert cue == fewshot.ASSISTANT
        requested = _requested(format_line)
        assert requested.groups == fields
        assert len(exemplars) == 4
        for label, exemplar in enumerate(exemplars):
            *_, format_line, cue, last = exemplar.split("\n")
            assert cue == fewshot.ASSISTANT
            assert _requested(format_line).pattern == requested.pattern  # the same request
            reply = requested.fullmatch(last)
            assert reply, (exemplar, requested.pattern)
            assert reply.group(1) == "abcd"[label]
            if fields > 1:
                assert int(reply.group(fields)) in fewshot.EXEMPLAR_CONFIDENCES


def test_logit_exemplars_answer_after_the_answer_prefix(data_dir: Path) -> None:
    task = _task("assertion", data_dir)
    doc = task.eval_docs[7]
    prompt = task.fewshot_context(doc, num_fewshot=1, gen_prefix=task.doc_to_prefix(doc))
    assert prompt.endswith("\nThe answer is (")
    assert [b.split("\n")[-1] for b in prompt.split(fewshot.SEPARATOR)[:-1]] == [
        f"The answer is ({x})" for x in "abcd"]


def test_paper_question_renders_like_the_exemplar(data_dir: Path) -> None:
    """The same document asked (not solved) ends with the open answer prefix instead."""
    task = _task("assertion", data_dir)
    doc = {**PAPER_DOC, "calidist_index": -1}
    prompt = task.fewshot_context(task.distracted_doc(doc, PromptPlan(1, EXPERT)), num_fewshot=0,
                                  gen_prefix=task.doc_to_prefix(doc))
    solved = task.solved_exemplar(PAPER_DOC, PromptPlan(1, EXPERT))
    assert prompt == solved.removesuffix("c)")


def _hint_labels(block: str) -> list[int]:
    return [distractors.LETTERS.index(line.split("(")[1][0])
            for line in block.split("\n") if line.startswith("Hint:")]


@pytest.mark.parametrize("style", ["assertion", "probe"])
def test_one_exemplar_per_label_with_misleading_hints(style: str, data_dir: Path) -> None:
    task = _task(style, data_dir)
    task.set_config("num_fewshot", 1)
    doc = task.eval_docs[7]
    ctx = task.fewshot_context(doc, num_fewshot=1, gen_prefix=task.doc_to_prefix(doc))
    requests = task.construct_requests(doc, ctx, metadata=(task.config.task, 7, 1))
    prompts = list(dict.fromkeys(r.arguments[0] for r in requests))
    original, hinted = prompts[0], prompts[1:]
    # the original prompt: 4 solved exemplars, labels a..d in order, no hints
    blocks = original.split(fewshot.SEPARATOR)
    assert len(blocks) == 5
    assert [b.split("\n")[-1] for b in blocks[:4]] == [f"The answer is ({x})" for x in "abcd"]
    assert "Hint:" not in original
    # exemplars are the YAML's exemplar documents (one per label), never data documents
    shipped = task.fewshot_pool()
    assert [d["label"] for d in shipped] == [0, 1, 2, 3]
    for block, exemplar in zip(blocks, shipped, strict=False):
        assert f"Sentence1: {exemplar['sentence1']}\n" in block
        assert all(exemplar["sentence1"] != d["sentence1"] for d in task.eval_docs)
    # each hinted prompt: every exemplar carries a hint naming a label other than its answer
    for prompt in hinted:
        exemplars = prompt.split(fewshot.SEPARATOR)[:4]
        for label, block in enumerate(exemplars):
            assert block.endswith(f"The answer is ({'abcd'[label]})")
            (named,) = _hint_labels(block)
            assert named != label
        assert len(_hint_labels(prompt.split(fewshot.SEPARATOR)[4])) == 1
    # the original prompt is the plain task's (same ŷ and p with the same shots)
    plain = _task("", data_dir)
    assert plain.fewshot_context(doc, num_fewshot=1, gen_prefix=plain.doc_to_prefix(doc)) == ctx


def test_corruption_exemplars_are_corrupted(data_dir: Path) -> None:
    task = _task("corruption", data_dir)
    doc = task.eval_docs[7]
    variant = task.distracted_doc(doc, task.prompt_plans(doc)[1])
    prompt = task.fewshot_context(variant, num_fewshot=1, gen_prefix=task.doc_to_prefix(doc))
    statements = task.corruption["statements"]
    for label, block in enumerate(prompt.split(fewshot.SEPARATOR)[:4]):
        sentence2 = next(line for line in block.split("\n") if line.startswith("Sentence2:"))
        named = [i for i, s in enumerate(statements) if sentence2.endswith(s)]
        assert len(named) == 1 and named[0] != label


def test_two_shots_per_label_and_missing_labels_warn(data_dir: Path,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    task = _task("", data_dir)
    doc = task.eval_docs[7]
    with caplog.at_level("WARNING", logger="calidist_tasks.prompting.fewshot"):
        prompt = task.fewshot_context(doc, num_fewshot=2, gen_prefix=task.doc_to_prefix(doc))
    answers = [b.split("\n")[-1] for b in prompt.split(fewshot.SEPARATOR)[:-1]]
    # the YAML ships one exemplar per label: each label shown once, every label warned of
    assert answers == [f"The answer is ({x})" for x in "abcd"]
    assert all(f"label {label}" in caplog.text for label in range(4))
