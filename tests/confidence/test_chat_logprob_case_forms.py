"""Case forms of one option letter in a chat API's ``top_logprobs`` (issue #36 item 5,
docs/backends.md "CaliDist (log-prob) on chat APIs"): "(a" and "(A" are two tokens of one
vocabulary and are summed; a listing where they conflict (one spelling listed twice, or the sum
changing which option is the most likely) makes that reply's log-prob reading unreadable, as a
NaN does, and the stated reading stands."""

from __future__ import annotations

import math

import pytest

from calidist_tasks.confidence.chat_logprobs import ScoredReply, letter_logprobs, logprob_record
from calidist_tasks.prompting.verbalized import answer_position, parse_response
from calidist_tasks.scoring.joining import PromptPlan

CHOICES = ["first", "second", "third"]


def reply(listed: tuple, answer: str = "(b") -> tuple[list, str]:
    tokens = [("The answer is ", -0.1, ()), (answer, dict(listed).get(answer, -0.5), listed),
              (") Overall Confidence: 70%", -0.1, ())]
    return tokens, "".join(t for t, _, _ in tokens)


def test_case_forms_that_agree_are_summed():
    tokens, text = reply((("(b", -0.5), ("(B", -2.0), ("(a", -2.5), ("(A", -3.0)))
    values = letter_logprobs(tokens, answer_position(text, CHOICES), 3)
    assert values[:2] == pytest.approx((math.log(math.exp(-2.5) + math.exp(-3.0)),
                                        math.log(math.exp(-0.5) + math.exp(-2.0))))


def test_a_space_is_another_token_not_a_case_form():
    """" A" is not a form of the answer token "A": only its own spelling with the letter
    replaced, in either case, counts."""
    tokens = [("Answer:", -0.1, ()), (" B", -0.5, ((" B", -0.5), ("B", -1.5), (" a", -2.0)))]
    text = "".join(t for t, _, _ in tokens)
    values = letter_logprobs(tokens, len(text) - 1, 2)
    assert values == pytest.approx((-2.0, -0.5))


@pytest.mark.parametrize(("listed", "reason"), [
    ((("(b", -1.0), ("(a", -1.2), ("(A", -1.3)), "conflict"),  # (b) top token, (a) likelier
    ((("(b", -0.5), ("(a", -3.0), ("(a", -3.0)), "listed twice"),  # one spelling twice
    ((("(b", -0.5), ("(B", -3.0), ("(B", -3.0)), "listed twice"),
])
def test_conflicting_case_forms_make_this_reply_unreadable(listed, reason, caplog):
    tokens, text = reply(listed)
    with pytest.raises(ValueError, match=reason):
        letter_logprobs(tokens, answer_position(text, CHOICES), 3)
    parsed = parse_response(ScoredReply(text, tokens), CHOICES)
    assert (parsed["answer"], parsed["confidence"], parsed["letter_logprobs"]) == (1, 0.7, None)
    assert reason in parsed["logprob_error"]
    # the document's other reply stands; the warning names the document (the NaN rule)
    good = {"answer": 1, "confidence": 0.7, "letter_logprobs": (-2.0, -0.2, -3.0)}
    with caplog.at_level("WARNING"):
        record = logprob_record([good, parsed], [PromptPlan(), PromptPlan(0, 0)], 3, 1, "mean",
                                "task document 4")
    assert record["parse_failures"] == 1 and record["prediction"] == 1
    assert any("document 4" in r.getMessage() and reason in r.getMessage()
               for r in caplog.records)
