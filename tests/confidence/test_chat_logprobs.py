"""CaliDist (log-prob) on chat APIs (confidence.chat_logprobs): the answer token's letter
log-probabilities read from the same reply, unit-tested, then end to end through
local-chat-completions against the scripted server (tests/openai_server.py, the tiny model)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from calidist_tasks.backends.api_replies import APIReplyError, checked_replies
from calidist_tasks.confidence.chat_logprobs import ScoredReply, letter_logprobs
from calidist_tasks.prompting.verbalized import answer_position, parse_response

CHOICES = ["first", "second", "third"]


def logsumexp(values: list[float]) -> float:
    return math.log(sum(math.exp(v) for v in values))


# ------------------------------------------------------------------ the pure reading
def test_letters_at_the_answer_token_in_either_case_and_the_floor():
    """"(b" chosen; "(a" and "(A" both listed: two tokens of one letter, summed (a model's whole
    vocabulary lists both: tests below compare with a forward pass); "(c" absent: the floor."""
    listed = (("(b", -0.5), ("(a", -1.9), ("(A", -2.5), (" (", -3.0), ("x", -4.0))
    tokens = [("The answer is", -0.1, ()), (" ", -0.2, ()), ("(b", -0.5, listed), (")", -0.1, ())]
    text = "".join(t for t, _, _ in tokens)
    position = answer_position(text, CHOICES)
    assert text[position] == "b"
    remaining = 1 - sum(math.exp(v) for _, v in listed)
    floor = min(-4.0, math.log(remaining))  # one absent letter takes at most the rest
    assert letter_logprobs(tokens, position, 3) == pytest.approx(
        (logsumexp([-1.9, -2.5]), -0.5, floor))


@pytest.mark.parametrize("listed", [
    (("(b", -0.5), ("(a", float("nan"))),
    (("(b", -0.5), ("(a", "NaN")),
    (("(b", -0.5), ("(a", 0.5)),  # positive
    (("(b", -0.5), ("(a", float("inf"))),
    (("(b", -0.5), ("(a", None)),
    (("(b", -0.5), ("(a", 0.0), ("(a", 0.0)),  # the same token repeated
])
def test_impossible_top_logprobs_are_refused_for_this_reply(listed):
    """issue #36: such values make this reply's log-prob reading unreadable (a ValueError that
    ``parse_response`` turns into ``letter_logprobs: None`` with its reason); the stated
    reading stands."""
    tokens = [("The answer is ", -0.1, ()), ("(b", -0.5, listed), (") Overall Confidence: 70%",
                                                                  -0.1, ())]
    text = "".join(t for t, _, _ in tokens)
    with pytest.raises(ValueError, match="answer token"):
        letter_logprobs(tokens, answer_position(text, CHOICES), 3)
    parsed = parse_response(ScoredReply(text, tokens), CHOICES)
    assert (parsed["answer"], parsed["confidence"], parsed["letter_logprobs"]) == (1, 0.7, None)
    assert "answer token" in parsed["logprob_error"]


def test_an_impossible_reading_leaves_the_document_and_its_stated_reading(caplog):
    """One reply's impossible log-probabilities: that reply's log-prob outcome is unreadable
    (wrong at 1/c), one warning names the document, nothing raises."""
    from calidist_tasks.confidence.chat_logprobs import logprob_record
    from calidist_tasks.scoring.joining import PromptPlan

    good = {"answer": 1, "confidence": 0.7, "letter_logprobs": (-2.0, -0.2, -3.0)}
    bad = {"answer": 0, "confidence": 0.6, "letter_logprobs": None,
           "logprob_error": "the log-probability nan of '(a' ..."}
    with caplog.at_level("WARNING"):
        record = logprob_record([good, bad], [PromptPlan(), PromptPlan(0, 0)], 3, 1, "mean",
                                "task document 7")
    assert record["parse_failures"] == 1 and record["prediction"] == 1
    assert [r.getMessage() for r in caplog.records if "document 7" in r.getMessage()]


def test_the_floor_splits_the_remaining_mass_but_never_exceeds_a_listed_token():
    """Two absent letters share what the listed tokens leave; where that share is more than the
    least listed token's, the least listed log-probability bounds them."""
    few = (("C", -0.1),)
    tokens = [("Answer:", -0.1, ()), (" ", -0.1, ()), ("C", -0.1, few), ("\n", -0.2, ())]
    text = "".join(t for t, _, _ in tokens)
    position = answer_position(text, CHOICES)
    assert text[position] == "C"
    share = math.log((1 - math.exp(-0.1)) / 2)
    assert letter_logprobs(tokens, position, 3) == pytest.approx((min(-0.1, share),) * 2 + (-0.1,))
    listed = (("c", math.log(0.5)), ("a", math.log(0.1)))  # 0.4 left for "b": bounded by 0.1
    tokens[2] = ("c", math.log(0.5), listed)
    assert letter_logprobs(tokens, position, 3) == pytest.approx(
        (math.log(0.1), math.log(0.1), math.log(0.5)))


@pytest.mark.parametrize(("reply", "letter_at"), [
    ("Step 1: (a) looks wrong, 40%. The answer is (c) third. Overall Confidence: 70%", "is (c"),
    ("(c) or (a)? I said (a) first.\nthe answer is c.\nConfidence: 70%", "is c"),
    ("(c)", "(c"),
])
def test_the_answer_token_is_the_final_answer_letter(reply, letter_at):
    """Letters named in the reasoning do not count: the final statement's does."""
    assert answer_position(reply, CHOICES) == reply.rindex(letter_at) + len(letter_at) - 1


def test_the_answer_is_found_among_tokens_that_hold_more_than_the_reply():
    """vLLM's tokens end with the end-of-turn token, which the reply's content lacks; lm-eval cuts
    a thinking part (think_end_token) off the front of the content."""
    listed = (("B", -0.2), ("A", -1.9))
    tokens = [("<think>(a)</think>", -0.1, ()), ("Answer:", -0.1, ()), (" ", -0.1, ()),
              ("B", -0.2, listed), ("<|im_end|>", -0.1, ())]
    parsed = parse_response(ScoredReply("Answer: B", tokens), CHOICES[:2])
    assert parsed["answer"] == 1 and parsed["letter_logprobs"] == pytest.approx((-1.9, -0.2))
    parsed = parse_response(ScoredReply("Answer: B", tokens[:1]), CHOICES[:2])
    assert parsed["answer"] == 1 and parsed["letter_logprobs"] is None  # not among its tokens


def test_a_reply_without_an_answer_letter_is_unreadable_not_an_error():
    tokens = [(word, -1.0, ((word, -1.0),)) for word in ("I would", " rather", " not say.")]
    parsed = parse_response(ScoredReply("I would rather not say.", tokens), CHOICES)
    assert parsed == {"answer": None, "confidence": None, "letter_logprobs": None}
    tokens = [("the third one", -1.0, ())]  # named by its text: no letter to read
    parsed = parse_response(ScoredReply("the third one", tokens), CHOICES)
    assert parsed["answer"] == 2 and parsed["letter_logprobs"] is None
    assert "letter_logprobs" not in parse_response("The answer is (c).", CHOICES)  # plain text


def test_a_scored_reply_survives_pickling():
    """lm-eval's request cache (--use_cache) pickles the answers."""
    import pickle

    reply = ScoredReply("The answer is (a).", [("The answer is (a).", -1.0, (("x", -2.0),))])
    again = pickle.loads(pickle.dumps(reply))
    assert again == reply and again.tokens == reply.tokens and isinstance(again, ScoredReply)


def test_the_chat_backend_asks_for_logprobs_and_its_parser_carries_them(monkeypatch):
    """Within checked_replies: the payload asks for them (unless the kwargs say otherwise), a
    reply's tokens ride on its text, a null reply is an empty unreadable one, a reply without
    them is APIReplyError."""
    from lm_eval.models.openai_completions import LocalChatCompletion, OpenAIChatCompletion

    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    url = "http://127.0.0.1:9/v1/chat/completions"
    messages = [{"role": "user", "content": "Hi"}]
    content = [{"token": "(b", "logprob": -0.5, "top_logprobs": [{"token": "(a", "logprob": -1.5}]},
               {"token": ")", "logprob": -0.1, "top_logprobs": []}]
    good = {"choices": [{"index": 0, "message": {"content": "(b)"}, "logprobs": {
        "content": content}}]}
    null = {"choices": [{"index": 0, "message": {"content": None}, "finish_reason": "length"}]}
    with checked_replies():
        for lm in (LocalChatCompletion(model="m", base_url=url), OpenAIChatCompletion(model="m")):
            body = lm._create_payload(messages, generate=True, gen_kwargs={"until": ["x"]})
            assert (body["logprobs"], body["top_logprobs"]) == (True, 20)
        [reply] = lm.parse_generations(outputs=good)
        assert reply == "(b)" and parse_response(reply, CHOICES)["letter_logprobs"] == (
            pytest.approx((-1.5, -0.5, math.log(1 - math.exp(-0.5) - math.exp(-1.5)))))
        [empty] = lm.parse_generations(outputs=null)
        assert parse_response(empty, CHOICES) == {"answer": None, "confidence": None,
                                                  "letter_logprobs": None}
        with pytest.raises(APIReplyError, match="no logprobs for chat completions"):
            lm.parse_generations(outputs={"choices": [{"index": 0, "message": {"content": "a"}}]})
        body = lm._create_payload(messages, generate=True, gen_kwargs={"logprobs": False})
        assert not body["logprobs"] and "top_logprobs" not in body
        assert lm.parse_generations(outputs=null) == [None]  # nothing asked: lm-eval's own
    assert "logprobs" not in lm._create_payload(messages, generate=True, gen_kwargs={})


def test_a_logprob_row_shows_its_own_readings_unreadable_share_and_accuracy():
    """The log-prob reading may find fewer answer letters than the verbalized one finds answers
    (an answer named by its text): a log-prob row's ⚠ and results-file accuracy are its own."""
    from calidist_tasks.registry import METHODS
    from calidist_tasks.report.cells import Cell
    from calidist_tasks.report.runs import TaskRun

    metrics = {"acc": 0.7, "parse_fail_rate": 0.1, "acc_logprob": 0.4,
               "parse_fail_rate_logprob": 0.9}
    run = TaskRun("calidist_toy_verbalized", "m", "stamp", Path("r.json"), metrics, {})
    found = {}
    for label in ("Verbalized", "Vanilla (log-prob)"):
        method = next(m for m in METHODS if m.label == label)
        cell = Cell("m", "toy", method, run, {"ece": 0.1})
        found[label] = (cell.accuracy, cell.parse_fail_rate, cell.unreadable)
    assert found == {"Verbalized": (0.7, 0.1, False), "Vanilla (log-prob)": (0.4, 0.9, True)}
