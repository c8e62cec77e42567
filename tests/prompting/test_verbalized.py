"""The verbalized path: the (answer, confidence) parser, its filter, its rule for unreadable
replies, and the verbalized tasks' prompts, requests, records and metrics (no model needed)."""

from __future__ import annotations

import math
import re

import pytest
from conftest import load_task
from hypothesis import given, settings
from hypothesis import strategies as st

from calidist_tasks.prompting.distractors import ASSERTION_TEMPLATES, assertion_hint, probe_hint
from calidist_tasks.prompting.verbalized import (
    CONFIDENCE_FORMAT,
    CONFIDENCE_INSTRUCTION,
    STEP_INSTRUCTION,
    VerbalizedFilter,
    outcome_from_parse,
    parse_answer,
    parse_confidence,
    parse_response,
    read_reply,
    strip_echoes,
)
from calidist_tasks.scoring.records import record_marker
from calidist_tasks.tasks.base import CHOICES, HINT
from calidist_tasks.tasks.generation import SHORT_MAX_GEN_TOKS

PPDB = ["Sentence2 is a paraphrase of Sentence1.", "Sentence2 is not a paraphrase of Sentence1."]
FIVE = ["the river", "the garden", "the engine", "the market", "the planet"]


@pytest.mark.parametrize(("text", "answer", "confidence"), [
    ("The answer is (b). Confidence: 80%", 1, 0.8),
    ("b) because the second sentence adds a claim. Confidence: 80 %", 1, 0.8),
    ("Answer: B\nConfidence: 80%", 1, 0.8),
    # only a percentage from 0 to 100% tied to "confidence" is a stated confidence (issue #34):
    # a lone percentage, a fraction, a bare number or words are unreadable, the answer stands
    ("b) because the second sentence adds a claim. 80 %", 1, None),
    ("Answer: B\nConfidence: 0.8", 1, None),
    ("I pick option a, confidence eighty percent", 0, None),
    ("Sentence2 is not a paraphrase of Sentence1. I am 90% sure.", 1, 0.9),  # its closing line
    ("(A) Sentence2 is a paraphrase of Sentence1. Confidence level: 65", 0, None),
    ("The correct option is a.\nMy confidence is 1.0", 0, None),
    ("a. Sentence2 is a paraphrase\nOverall Confidence: 60%", 0, 0.6),
    # per-step confidences of the paper's multistep prompts: the overall one counts
    ("Step one. Confidence: 55%\nThe correct answer is (c). Overall Confidence: 60%", None, 0.6),
    # what SmolLM2-135M writes: the format line copied, placeholder and all
    ("The answer is (b). Confidence: N%", 1, None),
    ("The sentence(s) differ. (a), 70% confident", 0, 0.7),  # "(s)" inside a word: no marker
])
def test_formats_real_models_write(text, answer, confidence):
    parsed = parse_response(text, PPDB)
    assert parsed["answer"] == answer
    assert parsed["confidence"] == (None if confidence is None else pytest.approx(confidence))


# ------------------------------------------------------------------ step-by-step replies
MSCINLI = [
    "Sentence1 generalizes, specifies or has an equivalent meaning with Sentence2.",
    "Sentence1 presents the reason, cause, or condition for the result or conclusion made "
    "Sentence2.",
    "Sentence2 mentions a comparison, criticism, juxtaposition, or a limitation of something said "
    "in Sentence1.",
    "Sentence1 and Sentence2 are independent.",
]
# The paper's example reply (Appendix F, after "Assistant:"), verbatim.
PAPER_REPLY = """\
Sentence1 mentions that the configuration for ethernet switch is similar to the one mentioned in [14]. Confidence: 55%
However, Sentence2 contrasts this fact by stating that there are two differences in the configuration of the switches when compared to [14]. Confidence: 68%
Since Sentence2 presents a contrasting view of something mentioned in Sentence1, the relation between Sentence1 and Sentence2 should be contrasting. Confidence: 45%
Based on the information available in the two sentences and the explanation above, the correct answer is (c) Sentence2 mentions a comparison, criticism, juxtaposition, or a limitation of something said in Sentence1. Overall Confidence: 60%"""  # noqa: E501
STEPS = "Step 1: Sentence2 names two differences. Confidence: 55%\nStep 2: so it contrasts. Confidence: 68%\n"  # noqa: E501


def test_the_papers_example_reply_reads_as_its_overall_confidence():
    assert parse_response(PAPER_REPLY, MSCINLI) == {"answer": 2, "confidence": 0.6}
    assert read_reply(PAPER_REPLY, MSCINLI).steps == 3
    # "Assistant:" and the reply, as a completion model may continue the paper's exemplar
    assert parse_response(f"Assistant:\n{PAPER_REPLY}", MSCINLI) == {"answer": 2,
                                                                     "confidence": 0.6}


@pytest.mark.parametrize(("text", "answer", "confidence"), [
    # the overall or final confidence
    (STEPS + "The answer is (c). Overall Confidence: 60%", 2, 0.6),
    (STEPS + "The answer is (c).\nFinal confidence: 70%", 2, 0.7),
    # the reply ends at its first complete overall confidence (issue #34): an answer after it
    # is the model writing on
    (STEPS + "Overall confidence: 70%. The answer is (c).", None, 0.7),
    # no overall one: the confidence stated from the answer statement's line on
    (STEPS + "The answer is (c). Confidence: 60%", 2, 0.6),
    (STEPS + "So I am 60% confident the answer is (c).", 2, 0.6),
    (STEPS + "The answer is (c).\nConfidence: 60%", 2, 0.6),
    # per-step confidences alone are never the answer's, even when they agree
    (STEPS + "The answer is (c).", 2, None),
    ("Step 1: x. Confidence: 70%\nStep 2: y. Confidence: 70%\nThe answer is (c).", 2, None),
    # a step's confidence is never the stated one, even alone (issue #34)
    ("Step 1: two differences. Confidence: 65%\nThe answer is (c).", 2, None),
    # the first complete overall confidence ends the reply: a second one is not read
    (STEPS + "The answer is (c). Overall Confidence: 60%, overall confidence: 70%", 2, 0.6),
    # the answer is the first answer statement's, not a letter merely named in the reasoning
    ("Option (a) seems wrong: Sentence1 is not more general. Confidence: 80%\n"
     "Nothing is a cause. Confidence: 70%\n"
     "Therefore the correct answer is (c). Overall Confidence: 65%", 2, 0.65),
    ("(a) and (b) do not fit. Answer: C. Confidence: 75%", 2, 0.75),
])
def test_step_by_step_replies(text, answer, confidence):
    parsed = parse_response(text, MSCINLI)
    assert parsed["answer"] == answer
    assert parsed["confidence"] == (None if confidence is None else pytest.approx(confidence))


@pytest.mark.parametrize("instruction", [STEP_INSTRUCTION, CONFIDENCE_INSTRUCTION,
                                         CONFIDENCE_FORMAT])
def test_our_instructions_echoed_are_not_read(instruction):
    reply = f"{instruction}\n{STEPS}The answer is (c). Overall Confidence: 60%"
    assert parse_response(instruction, MSCINLI) == {"answer": None, "confidence": None}
    assert parse_response(reply, MSCINLI) == {"answer": 2, "confidence": 0.6}


@pytest.mark.parametrize("text", [
    "",
    "I cannot tell from these sentences.",
    "The answer is not (b).",  # a negation names no answer
    "(a) or (b), hard to say.",  # two options: never pick one
    "Option (a) fits. Then again (b) fits.",  # markers (no answer statement) that disagree
    "The answer is a paraphrase, I think.",  # the article "a" is not option (a)
    "The answer is (e).",  # a letter that is not an option
    "c. Sentence2 is not a paraphrase of Sentence1.",  # a wrong letter beside an option's text
    "Sentence2 is a paraphrase of Sentence1. Sentence2 is not a paraphrase of Sentence1.",
])
def test_unreadable_answers_are_never_guessed(text):
    assert parse_answer(text, PPDB) is None


@pytest.mark.parametrize("text", [
    "The answer is (a).",
    "Confidence: 150%",  # out of range
    "Confidence: 80%. Confidence: 30%",  # conflicting
    "Mention your confidence level in your answer (0-100)%.",  # our own instruction echoed
])
def test_unreadable_confidences(text):
    assert parse_confidence(text) is None


def test_an_echoed_hint_is_not_the_models_answer():
    hint = assertion_hint(ASSERTION_TEMPLATES.index("With my 100% confidence the answer is"),
                          "b", PPDB[1])
    reply = f"{hint}\nThe answer is (a). Confidence: 70%"
    assert parse_response(reply, PPDB, hint) == {"answer": 0, "confidence": 0.7}
    # the hint's claim alone, echoed inside the reply, is removed too
    claim = "With my 100% confidence the answer is (b)"
    assert parse_response(f"You say '{claim}'. I say (a), 70% sure.", PPDB, hint) == {
        "answer": 0, "confidence": 0.7}
    # even without knowing the hint, a hint repeated after the answer is not its first statement
    assert parse_response(f"The answer is (a). Confidence: 70%\n{hint}", PPDB)["answer"] == 0
    assert parse_response(f"The answer is (a). Confidence: 70%\n{hint}", PPDB, hint) == {
        "answer": 0, "confidence": 0.7}


def test_an_echoed_few_shot_exemplar_is_not_the_models_answer():
    exemplar = ("Consider ...\na. yes\nb. no\nHint: I think the answer should be (b) no.\n"
                "The answer is (a)")
    block = f"{exemplar}\n\nConsider more ...\na. yes\nb. no\nThe answer is (b)\n\n"
    reply = f"{exemplar}\nThe answer is (b). Confidence: 40%"
    assert parse_response(reply, ["yes", "no"], exemplars=block) == {"answer": 1,
                                                                      "confidence": 0.4}
    assert parse_response(exemplar, ["yes", "no"], exemplars=block)["answer"] is None


def echoes_blanked_by_definition(text: str, echoes: list[str], keep_positions: bool) -> str:
    """``strip_echoes`` as it is defined: each echo, longest first, as its words with any
    spacing between them, ignoring case (re.IGNORECASE), where the text holds its first word."""
    low = text.lower()
    for echo in sorted(echoes, key=len, reverse=True):
        words = echo.split()
        if words and words[0].lower() in low:
            text = re.sub(r"\s+".join(map(re.escape, words)),
                          lambda m: " " * len(m.group()) if keep_positions else " ", text,
                          flags=re.IGNORECASE)
    return text


@pytest.mark.parametrize("keep_positions", [False, True])
@pytest.mark.parametrize(("text", "echoes"), [
    ("Hint: THE answer\n is (B).\tthe Answer is (b) c", ["the answer is (b)", "Hint:", ""]),
    ("a x b then a b", ["x", "a b"]),  # blanking "x" makes "a b" of "a x b"
    ("x.y x+y (x) [x] x*", ["x.y", "x+y", "(x)", "[x]", "x*"]),  # regex characters
    ("aaaa aa", ["aa", "aaa"]),  # overlapping: leftmost, not overlapping
    # non-ASCII text: case folds ("ſ" is "s" ignoring case), İ lowercases to two characters
    ("and Clasſ, x İstanbul y and the KELVIN K", ["and class", "x istanbul", "the kelvin k"]),
    ("plain text s", ["text ſ", "ǅ"]),  # non-ASCII echoes in ASCII text
])
def test_strip_echoes_blanks_what_its_definition_blanks(text, echoes, keep_positions):
    """The ASCII path (a literal search on the lowercased text) gives the regex definition's
    text exactly, and so does the non-ASCII one (case folds such as "ſ" for "s")."""
    assert strip_echoes(text, echoes, keep_positions) == echoes_blanked_by_definition(
        text, echoes, keep_positions)


def test_outcome_rule_for_unreadable_replies():
    assert outcome_from_parse({"answer": 2, "confidence": 0.9}, 5) == (
        outcome_from_parse({"answer": 2, "confidence": 0.9}, 3))
    ok = outcome_from_parse({"answer": 2, "confidence": 0.9}, 5)
    assert (ok.prediction, ok.confidence, ok.parsed) == (2, 0.9, True)
    no_answer = outcome_from_parse({"answer": None, "confidence": 0.9}, 5)
    assert (no_answer.prediction, no_answer.confidence, no_answer.parsed) == (-1, 0.2, False)
    no_conf = outcome_from_parse({"answer": 1, "confidence": None}, 4)
    assert (no_conf.prediction, no_conf.confidence, no_conf.parsed) == (1, 0.25, False)
    assert outcome_from_parse({"answer": 1, "confidence": None}, 4, need_confidence=False).parsed


def test_filter_reads_options_and_hint_from_the_request_document():
    hint = probe_hint("a", PPDB[0])
    docs = [{CHOICES: PPDB}, {CHOICES: PPDB, HINT: hint}]
    resps = [["Answer: b. Confidence: 40%"], [hint + " I still say (b), 75% confident"]]
    shape = {"steps": 0, "cut": False}
    assert [[{**p, "shape": {k: p["shape"][k] for k in shape}} for p in r]
            for r in VerbalizedFilter().apply(resps, docs)] == [
        [{"answer": 1, "confidence": 0.4, "shape": shape}],
        [{"answer": 1, "confidence": 0.75, "shape": shape}]]


# ------------------------------------------------------------------ property tests
TEMPLATES = [
    "The answer is ({l}). Confidence: {p}%",
    "Answer: {L}\nConfidence: {p} %",
    "({l}) {text}. I am {p}% confident.",
    "{l}) {text}\nconfidence: {p}%",
    "My final answer is {l}.\nOverall confidence: {p}%",
    "I choose option {l} with a confidence of {p} percent.",
]
words = st.text(alphabet="qwrtzpsdfghjklxvnm", min_size=3, max_size=8)


@st.composite
def options(draw):
    n = draw(st.integers(2, 6))
    texts = draw(st.lists(words, min_size=n, max_size=n, unique=True))
    # an option that contains another option's text is a different test (substring rule)
    if any(a != b and a in b for a in texts for b in texts):
        texts = [f"{t} {i}" for i, t in enumerate(texts)]
    return [f"the {t}" for t in texts]


@settings(max_examples=150, deadline=None)
@given(choices=options(), data=st.data(), template=st.sampled_from(TEMPLATES),
       percent=st.integers(0, 100))
def test_every_format_round_trips(choices, data, template, percent):
    index = data.draw(st.integers(0, len(choices) - 1))
    letter = "abcdef"[index]
    text = template.format(l=letter, L=letter.upper(), p=percent, text=choices[index])
    assert parse_response(text, choices) == {"answer": index, "confidence": percent / 100}


@settings(max_examples=150, deadline=None)
@given(text=st.text(max_size=200), choices=options())
def test_any_text_parses_to_a_valid_answer_or_none(text, choices):
    parsed = parse_response(text, choices, hint=text[:40] or None)
    assert parsed["answer"] is None or 0 <= parsed["answer"] < len(choices)
    assert parsed["confidence"] is None or 0.0 <= parsed["confidence"] <= 1.0
    assert parsed == parse_response(text, choices, hint=text[:40] or None)  # deterministic


@settings(max_examples=100, deadline=None)
@given(prose=st.lists(st.sampled_from(["well", "maybe", "sentence", "true", "it", "seems",
                                       "likely", "hmm", ",", "."]), max_size=30))
def test_prose_without_an_answer_or_number_reads_as_nothing(prose):
    assert parse_response(" ".join(prose), FIVE) == {"answer": None, "confidence": None}


@settings(max_examples=100, deadline=None)
@given(choices=options(), data=st.data(), percent=st.integers(0, 100),
       template=st.integers(0, len(ASSERTION_TEMPLATES) - 1), probe=st.booleans())
def test_echoing_the_hint_never_changes_the_reading(choices, data, percent, template, probe):
    own = data.draw(st.integers(0, len(choices) - 1))
    hinted = data.draw(st.integers(0, len(choices) - 1).filter(lambda i: i != own))
    letter = "abcdef"[hinted]
    hint = (probe_hint(letter, choices[hinted]) if probe
            else assertion_hint(template, letter, choices[hinted]))
    reply = f"The answer is ({'abcdef'[own]}). Confidence: {percent}%"
    expected = {"answer": own, "confidence": percent / 100}
    assert parse_response(f"{hint}\n{reply}", choices, hint) == expected
    assert parse_response(f"{reply}\n{hint}", choices, hint) == expected


@settings(max_examples=50, deadline=None)
@given(choices=options(), data=st.data())
def test_the_first_answer_statement_is_the_answer(choices, data):
    # issue #34: the first complete statement; what follows is the model writing on
    first, second = data.draw(st.lists(st.integers(0, len(choices) - 1), min_size=2,
                                       max_size=2, unique=True))
    text = f"The answer is ({'abcdef'[first]}). Actually the answer is ({'abcdef'[second]})."
    assert parse_answer(text, choices) == first


@settings(max_examples=50, deadline=None)
@given(percent=st.integers(1, 99))
def test_a_percentage_reads_and_a_fraction_or_bare_number_does_not(percent):
    # issue #34: "0.8" and "1" are unreadable stated confidences, not 80% and 1%
    assert parse_confidence(f"Confidence: {percent}%") == pytest.approx(percent / 100)
    assert parse_confidence(f"Confidence: {percent / 100:.2f}") is None
    assert parse_confidence(f"Confidence: {percent}") is None


# ------------------------------------------------------------------ the tasks
@pytest.fixture(scope="module")
def ppdb_tasks(ppdb_data_dir):
    metadata = {"data_dir": str(ppdb_data_dir), "calib_size": 4, "eval_size": 4}
    return {name: load_task(f"calidist_ppdb_{name}", metadata)
            for name in ("verbalized", "assertion_verbalized", "corruption_verbalized")}


def requests_of(task, doc):
    ctx = task.fewshot_context(doc, 0, gen_prefix=task.doc_to_prefix(doc))
    return task.construct_requests(doc, ctx, metadata=(task.config.task, 0, 1))


# the paper's prompt asks no reply form (its exemplars show it); without a chat template every
# generation prompt ends with Appendix F's "Assistant:" line
@pytest.mark.parametrize(("metadata", "instruction", "reply_format", "budget"), [
    ({}, STEP_INSTRUCTION, "Assistant:", 512),  # the paper's prompt by default
    ({"verbalized_prompt": "short"}, CONFIDENCE_INSTRUCTION, CONFIDENCE_FORMAT + "\nAssistant:",
     SHORT_MAX_GEN_TOKS),
])
def test_prompt_asks_for_the_option_and_a_confidence(ppdb_data_dir, metadata, instruction,
                                                     reply_format, budget):
    task = load_task("calidist_ppdb_assertion_verbalized",
                     {"data_dir": str(ppdb_data_dir), "calib_size": 4, "eval_size": 4, **metadata})
    task.set_config("num_fewshot", 0)
    doc = task.eval_docs[0]
    requests = requests_of(task, doc)
    assert len(requests) == 1 + 2 * 2  # original + m=2 hints for each of the 2 labels
    assert {r.request_type for r in requests} == {"generate_until"}
    original = requests[0].arguments[0]
    lines = original.splitlines()
    assert lines[3].endswith("which of the following options is true? " + instruction)
    assert lines[4:] == [f"a. {PPDB[0]}", f"b. {PPDB[1]}", *reply_format.split("\n")]
    assert requests[0].arguments[1]["do_sample"] is False
    assert {r.arguments[1]["max_gen_toks"] for r in requests} == {budget}
    for request, plan in zip(requests[1:], task.prompt_plans(doc)[1:], strict=True):
        hint = assertion_hint(plan.template, "ab"[plan.hint_label], PPDB[plan.hint_label])
        assert request.arguments[0] == original.replace(reply_format,
                                                        hint + "\n" + reply_format)
        assert request.doc[HINT] == hint and request.doc[CHOICES] == PPDB
    # --gen_kwargs max_gen_toks=64 (lm-eval updates the task's generation_kwargs after loading)
    task.set_config("generation_kwargs", {"max_gen_toks": 64}, update=True)
    assert {r.arguments[1]["max_gen_toks"] for r in requests_of(task, doc)} == {64}


def test_corrupted_requests_parse_against_the_real_options(ppdb_tasks):
    task = ppdb_tasks["corruption_verbalized"]
    doc = task.eval_docs[0]
    requests = requests_of(task, doc)
    assert "This sentence is a paraphrase of Sentence1." in requests[1].arguments[0]
    assert all(r.doc[CHOICES] == PPDB for r in requests)


def test_records_and_metrics_follow_the_documented_rule(ppdb_tasks):
    task = ppdb_tasks["assertion_verbalized"]
    records = []
    for i, doc in enumerate(task.eval_docs):
        # the model answers the original 'a' at 90% (unreadable for the last document) and
        # flips to 'b' at 60% under every hint; one hinted reply per document is unreadable
        original = ({"answer": None, "confidence": None} if i == len(task.eval_docs) - 1
                    else {"answer": 0, "confidence": 0.9})
        hinted = [{"answer": 1, "confidence": 0.6}] * 3 + [{"answer": None, "confidence": 0.6}]
        metrics = task.process_results(doc, [[original]] + [[h] for h in hinted])
        # the record once; acc a number; every other metric a marker naming the record
        record = metrics["calidist_record"]
        assert set(metrics) >= {"ece", "ece_vanilla", "brier", "auroc", "parse_fail_rate"}
        assert metrics["ece"] == record_marker("calidist_record")
        records.append(record)
    last = records[-1]
    assert (last["prediction"], last["confidence"], last["parsed"]) == (-1, 0.5, False)
    first = records[0]
    assert first["prediction"] == 0 and first["confidence"] == 0.9
    assert first["generations"] == 5 and first["parse_failures"] == 1
    # hints naming 'a' (= the prediction) are dropped; of the two 'b' hints one flipped at 0.6
    # and one is unreadable: left out of mu and delta (issue #34; before, a flip at 1/c), k = 1
    assert first["mu"] == pytest.approx(0.6) and first["flipped"] == 1
    assert first["delta"] == pytest.approx(0.9 - 0.6)
    assert first["unreadable_hinted"] == 1 and first["unreadable_original"] == 0
    assert [h[3] for h in first["hints"]].count(None) == 1  # logged unreadable, not as 1/c
    assert last["unreadable_original"] == 1 and last["correct"] == 0  # no answer: wrong
    summary = task.summarize(records)
    evaluation = [r for r in records if r["split"] == "evaluation"]
    failures = sum(r["parse_failures"] for r in evaluation)
    assert summary["parse_fail_rate"] == pytest.approx(failures / (5 * len(evaluation)))
    assert summary["acc"] == pytest.approx(sum(r["correct"] for r in evaluation) / 4)
    assert all(math.isfinite(summary[k]) for k in ("ece", "ece_vanilla", "brier", "auroc"))
    assert (summary["unreadable_original"], summary["unreadable_hinted"]) == (1, 4)


def test_original_only_task_reports_the_logit_free_baselines(ppdb_tasks):
    task = ppdb_tasks["verbalized"]
    names = set(task.reported_metrics())
    assert {"acc", "ece_vanilla", "ece_platt", "ece_isotonic", "parse_fail_rate"} <= names
    assert not any(n.endswith(("_ts", "_vector")) for n in names)  # those need logits
    records = [task.process_results(doc, [[{"answer": i % 2, "confidence": 0.7}]])
               ["calidist_record"]
               for i, doc in enumerate(task.eval_docs)]
    summary = task.summarize(records)
    assert summary["parse_fail_rate"] == 0.0
    assert summary["ece_vanilla"] == pytest.approx(abs(summary["acc"] - 0.7))


# ------------------------------------------------------------------ the one reader (issue #34)
PPDB_HINT = ("Hint: I think the answer should be (a) Sentence2 is a paraphrase of Sentence1.\n"
             "Note that the hint is only for your reference.")
EXEMPLAR = ("Sentence1: A man walks.\nSentence2: A man is walking.\nStep 1: same act. Confidence: "
            "60%\nStep 2: same man. Confidence: 70%\nBased on the two sentences and the "
            "explanation above, the correct answer is (a) Sentence2 is a paraphrase of Sentence1. "
            "Overall Confidence: 74%")
OWN = ("Step 1: Sentence1 says he walked. Confidence: 55%\nStep 2: Sentence2 says he drove. "
       "Confidence: 65%\nBased on the two sentences and the explanation above, the correct answer "
       "is (b) Sentence2 is not a paraphrase of Sentence1. Overall Confidence: 55%")


@pytest.mark.parametrize("run_on", [
    # an invented next exemplar: its own sentences, steps and answer
    "\n\nSentence1: A dog runs.\nSentence2: A dog is running.\nStep 1: same. Confidence: 80%\n"
    "The correct answer is (a) Sentence2 is a paraphrase of Sentence1. Overall Confidence: 74%",
    # a new turn
    "\nUser: and this one?\nAssistant: The answer is (a). Overall Confidence: 90%",
    # the hint repeated after the answer
    "\n" + PPDB_HINT,
    "\nThe hint says the answer is (a). Overall Confidence: 100%",
])
def test_a_reply_is_read_up_to_its_first_overall_confidence(run_on):
    reply = OWN + run_on
    reading = read_reply(reply, PPDB, PPDB_HINT, f"{EXEMPLAR}\n\n")
    assert (reading.answer, reading.confidence, reading.steps, reading.cut) == (1, 0.55, 2, True)
    assert reply[:reading.at].endswith("the correct answer is (")  # p is read at its "("


def test_a_block_opener_ends_a_reply_without_an_overall_confidence():
    own = "Step 1: he drove. Confidence: 65%\nThe answer is (b) Sentence2 is not a paraphrase."
    invented = "\nSentence1: A dog runs.\nThe answer is (a). Overall Confidence: 74%"
    reading = read_reply(own + invented, PPDB, exemplars=f"{EXEMPLAR}\n\n")
    # cut before the invented block: its overall confidence is not this reply's
    assert (reading.answer, reading.confidence, reading.cut) == (1, None, True)
    # without the exemplar the label is unknown: only the overall confidence ends it
    assert read_reply(own + invented, PPDB).confidence == 0.74


@pytest.mark.parametrize(("reply", "confidence"), [
    # step confidences only: no stated confidence, the answer stands
    ("Step 1: x. Confidence: 55%\nStep 2: y. Confidence: 68%\nThe answer is (b).", None),
    ("Step 1: x. Confidence: 55%\nThe answer is (b) Sentence2 is not a paraphrase.", None),
    # not a percentage from 0 to 100%
    ("The answer is (b). Overall Confidence: 0.8", None),
    ("The answer is (b). Overall Confidence: 1", None),
    ("The answer is (b). Overall Confidence: 1000%", None),
    ("The answer is (b). Overall Confidence: 1e2%", None),
    ("The answer is (b). Overall Confidence: \u221220%", None),  # Unicode minus
    ("The answer is (b). Overall Confidence: -20%", None),
    ("The answer is (b). Overall Confidence: 80-90%", None),  # a range
    ("The answer is (b). Overall Confidence: 80% to 90%", None),
    ("The answer is (b). Overall Confidence: 100% not sure", None),
    ("The answer is (b).", None),  # missing
    ("Step 1: x. Confidence: 55%\nThe answer is (b). Overall Confidence: 80%", 0.8),
])
def test_only_an_overall_or_answer_line_percentage_is_the_stated_confidence(reply, confidence):
    reading = read_reply(reply, PPDB)
    assert reading.answer == 1  # the answer is readable either way
    assert reading.confidence == (None if confidence is None else pytest.approx(confidence))


@pytest.mark.parametrize("reply", [
    "The answer is (a), (b). Overall Confidence: 80%",
    "The answer is (a)(b). Overall Confidence: 80%",
    "The answer is (a) or (b). Overall Confidence: 80%",
    "The answer is (a); (b). Overall Confidence: 80%",
])
def test_a_statement_naming_two_options_is_unreadable(reply):
    reading = read_reply(reply, PPDB)
    assert (reading.answer, reading.at, reading.confidence) == (None, None, 0.8)


def test_an_echoed_data_row_is_not_the_answer():
    """issue #36: a question holding an answer statement, echoed after the model's own answer,
    is blanked (``shown_texts``), so the reply's own answer and confidence are read."""
    injected = "The answer is (a) Sentence2 is a paraphrase. Overall Confidence: 100%"
    doc = {CHOICES: PPDB, "sentence1": f"A man walks. {injected}", "sentence2": "He drives."}
    reply = f"(b) 40% confident\nA man walks. {injected}"
    parsed = VerbalizedFilter().apply([[reply]], [doc])[0][0]
    assert (parsed["answer"], parsed["confidence"]) == (1, 0.4)
    # without the document's text the echo's statement would be read: (a) at 100%
    assert (read_reply(reply, PPDB).answer, read_reply(reply, PPDB).confidence) == (0, 1.0)


def test_the_results_say_whether_the_model_reasons(ppdb_tasks):
    """issue #34 item 6: reasoned_rate (>= 2 step lines before the answer), cut_rate,
    readable_rate and output tokens per reply, from the filter's readings of each reply."""
    task = ppdb_tasks["verbalized"]
    steps = "Step 1: he walked. Confidence: 40%\nStep 2: he drove. Confidence: 60%\n"
    replies = [steps + "The answer is (b). Overall Confidence: 70%",  # reasons
               steps + "The answer is (b). Overall Confidence: 70%\nUser: next?",  # and runs on
               "The answer is (a). Overall Confidence: 80%",  # one line
               "I do not know."]  # unreadable
    assert "reasoned_rate" in task.reported_metrics()
    records = []
    for i, doc in enumerate(task.eval_docs):
        reading = VerbalizedFilter().apply([[replies[i % 4]]], [{CHOICES: PPDB}])[0]
        records.append(task.process_results(doc, [reading])["calidist_record"])
    evaluation = [r for r in records if r["split"] == "evaluation"]
    shares = [sum(s) / len(evaluation) for s in zip(*[
        (i % 4 < 2, i % 4 == 1, i % 4 < 3) for i, r in enumerate(records)
        if r["split"] == "evaluation"], strict=True)]
    summary = task.summarize(records)
    assert [summary[k] for k in ("reasoned_rate", "cut_rate", "readable_rate")] == (
        pytest.approx(shares))
    tokens = [len(replies[i % 4]) / 4 for i, r in enumerate(records) if r["split"] == "evaluation"]
    assert summary["output_tokens_per_reply"] == pytest.approx(sum(tokens) / len(tokens))


def test_a_reply_that_repeats_an_exemplar_line_is_counted_as_copied():
    """issue #34 item 6: a small model that copies the last exemplar's reasoning shows steps and
    a readable answer; copied_rate says they are the exemplar's, not its own."""
    from calidist_tasks.prompting.verbalized import reply_shape, reply_shapes

    exemplars = ("Sentence1: a cat sat.\nAssistant:\nThe cat sits on the mat, so it is seated. "
                 "Confidence: 60%\nBoth say the cat is seated in other words. Confidence: 70%\n"
                 "Based on the information available, the correct answer is (a). "
                 "Overall Confidence: 80%")
    copied = ("The cat sits on the mat, so it is seated. Confidence: 60%\n"
              "A dog barks at night, which is new. Confidence: 50%\n"
              "Based on the information available, the correct answer is (b). "
              "Overall Confidence: 55%")
    own = ("The dog barks, which Sentence1 does not say. Confidence: 60%\n"
           "Sentence2 adds a claim. Confidence: 70%\n"
           "Based on the information available, the correct answer is (b). "
           "Overall Confidence: 80%\nThe cat sits on the mat, so it is seated. Confidence: 60%")
    shapes = []
    for reply in (copied, own):
        reading = read_reply(reply, PPDB, exemplars=exemplars)
        assert (reading.answer, reading.steps) == (1, 2)
        shapes.append({"answer": reading.answer, "confidence": reading.confidence,
                       "shape": reply_shape(reply, reading, exemplars)})
    # a copied line after the answer (run on into a next block) is not the reply's reasoning
    assert [s["shape"]["copied"] for s in shapes] == [True, False]
    assert reply_shape(copied, read_reply(copied, PPDB), None)["copied"] is False
    assert reply_shapes(shapes)["copied"] == 1.0
