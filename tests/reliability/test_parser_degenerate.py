"""The three degenerate replies of issue #36 ("50% " x 25,000, "(a) " x 25,000, "a) " x 33,333:
100 KB each, about 1 s per parse before) cost, per character, at most ``RATIO`` times a normal
reply's, and under ``CAP`` seconds per 100 KB, for every parser that reads a reply.

Timings are the best of ``TRIES`` (a shared machine slows one try, not all); the ratio is per
character, so a linear parser passes on any machine and a quadratic one (or one that visits
each of 25,000 markers in Python) fails."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from calidist_tasks.prompting.verbalized import (
    VerbalizedFilter,
    parse_answer,
    parse_confidence,
    parse_response,
)
from calidist_tasks.tasks.gsm8k import parse_number
from calidist_tasks.tasks.reasoned import read_reply

# timings: under pytest-xdist no other test runs beside them (tests/conftest.py)
pytestmark = pytest.mark.exclusive

RATIO = 2.0  # times a normal reply's cost per character
CAP = 0.05  # seconds per 100 KB
TRIES = 5
PPDB = ["Sentence2 is a paraphrase of Sentence1.", "Sentence2 is not a paraphrase of Sentence1."]
HINT = ("Hint: I think the answer should be (a) Sentence2 is a paraphrase of Sentence1.\n"
        "Note that the hint is only for your reference.")
REPLY = ("Sentence1 says the man walked home. Confidence: 55%\nSentence2 says he drove, which "
         "contradicts it. Confidence: 70%\nBased on the two sentences and the explanation above, "
         "the correct answer is (b) Sentence2 is not a paraphrase of Sentence1. "
         "Overall Confidence: 80%")
DOC = {"_calidist_choices": PPDB, "_calidist_hint": HINT, "sentence1": "The man walked home."}
DEGENERATE = {"50% x 25000": "50% " * 25000, "(a) x 25000": "(a) " * 25000,
              "a) x 33333": "a) " * 33333}
PARSERS: dict[str, Callable[[str], object]] = {
    "parse_confidence": parse_confidence,
    "parse_answer": lambda t: parse_answer(t, PPDB),
    "parse_response": lambda t: parse_response(t, PPDB, HINT),
    "reasoned.read_reply": lambda t: read_reply(t, DOC),
    "VerbalizedFilter": lambda t: VerbalizedFilter().apply([[t]], [DOC]),
    "gsm8k.parse_number": parse_number,
}


def _per_character(parse: Callable[[str], object], text: str, repeats: int,
                   budget: float = 0.0) -> float:
    """Seconds per character, the best of ``TRIES`` tries, or of up to 3 x ``TRIES`` while
    above ``budget`` (a machine shared with other runs slows some tries, not all)."""
    best, tries = float("inf"), 0
    while tries < TRIES or (best > budget and tries < 3 * TRIES):
        start = time.perf_counter()
        for _ in range(repeats):
            parse(text)
        best = min(best, (time.perf_counter() - start) / repeats / len(text))
        tries += 1
    return best


@pytest.mark.parametrize("name", PARSERS)
def test_degenerate_replies_cost_what_a_normal_reply_costs_per_character(name):
    parse = PARSERS[name]
    normal = _per_character(parse, REPLY, 50)
    slow = []
    for label, text in DEGENERATE.items():
        cost = _per_character(parse, text, 1, min(RATIO * normal, CAP / 100_000))
        per_100kb = cost * 100_000
        if cost > RATIO * normal or per_100kb > CAP:
            slow.append(f"{label}: {cost / normal:.1f}x a normal reply per character, "
                        f"{per_100kb:.3f} s per 100 KB")
    assert not slow, f"{name}: {slow}"
