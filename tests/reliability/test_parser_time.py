"""Degenerate replies cost a scan, never a backtracking search: every public parse function (and
the two filters the YAML names, and the HellaSwag markup cleaner, which reads data fields) is fed
25 KB of whitespace, of newlines and of repeats of the words its patterns look for, alone and
after a keyword ("The answer is" + 100,000 spaces took 70 s per 2,000 spaces before; "confidence"
+ 4,000 newlines 136 s: at 25 KB such a search runs for hours, stopped at ``CAP``).

The budget is a ratio to parsing a normal reply in the same test, per character: at most
``RATIO`` times a normal reply's time per character (the best of up to three tries), so linear
work passes on any machine and a quadratic one (thousands of times at this length) fails; and
below ``CAP`` seconds in any case. Per character, because a whole normal reply takes microseconds:
200x that is less than one pass of Python over 25 KB."""

from __future__ import annotations

import math
import signal
import statistics
import time
from collections.abc import Callable

import pytest

from calidist_tasks.adapters import hellaswag
from calidist_tasks.prompting.verbalized import (
    VerbalizedFilter,
    own_text,
    parse_answer,
    parse_confidence,
    parse_response,
    strip_confidence,
)
from calidist_tasks.tasks.gsm8k import (
    answer_span,
    canonical_number,
    chain_scoring,
    number_hint,
    parse_number,
    read_number,
)
from calidist_tasks.tasks.gsm8k_verbalized import NumberFilter, parse_number_response

# timings: under pytest-xdist no other test runs beside them (tests/conftest.py)
pytestmark = pytest.mark.exclusive

SIZE = 25_000  # characters of each degenerate reply (a quarter of the time of 100 KB)
RATIO = 200  # times a normal reply's time per character
CAP = 3.0  # seconds, whatever the normal reply costs

PPDB = ["Sentence2 is a paraphrase of Sentence1.", "Sentence2 is not a paraphrase of Sentence1."]
HINT = ("Hint: I think the answer should be (b) Sentence2 is not a paraphrase of Sentence1.\n"
        "Note that the hint is only for your reference.")
REPLY = ("Sentence1 says the man walked home. Confidence: 55%\nSentence2 says he drove, which "
         "contradicts it. Confidence: 70%\nThe answer is (b) Sentence2 is not a paraphrase of "
         "Sentence1. Overall Confidence: 80%")
WORKED = ("She sells 16 - 3 - 4 = 9 eggs a day at $2 each, so 9 * 2 = $18.\n"
          "The answer is 18. Confidence: 80%")
NUMBER_HINT = number_hint(0, "42")
EXEMPLAR = ("Sentence1: A man walks.\nSentence2: A man is walking.\n"
            "The answer is (a) Sentence2 is a paraphrase of Sentence1. Overall Confidence: 70%")
DOC = {"_calidist_choices": PPDB, "_calidist_hint": HINT, "_calidist_fewshot": EXEMPLAR}

# name -> (the parser on one text, a normal reply it reads)
PARSERS: dict[str, tuple[Callable[[str], object], str]] = {
    "verbalized.parse_answer": (lambda t: parse_answer(t, PPDB), REPLY),
    "verbalized.parse_confidence": (parse_confidence, REPLY),
    "verbalized.parse_response": (lambda t: parse_response(t, PPDB, HINT), REPLY),
    "verbalized.own_text": (lambda t: own_text(t, HINT), REPLY),
    "verbalized.strip_confidence": (strip_confidence, WORKED),
    "VerbalizedFilter": (lambda t: VerbalizedFilter().apply([[t]], [DOC]), REPLY),
    "open_ended.parse_number": (parse_number, WORKED),
    "open_ended.answer_span": (answer_span, WORKED),
    "open_ended.read_number": (read_number, "$1,234.50"),
    "open_ended.canonical_number": (canonical_number, "1,234.50"),
    "open_ended.chain_scoring": (lambda t: chain_scoring(t, ["18", "20"]), WORKED),
    "open_ended_verbalized.parse_number_response":
        (lambda t: parse_number_response(t, NUMBER_HINT), WORKED),
    "NumberFilter": (lambda t: NumberFilter().apply([[t]], [{"_calidist_hint": NUMBER_HINT}]),
                     WORKED),
    "adapters.hellaswag.clean": (hellaswag.clean, "[header] How to walk a dog [title] Go out."),
}


def _filled(unit: str) -> str:
    return (unit * (SIZE // len(unit) + 1))[:SIZE]


KEYWORDS = ["The answer is", "confidence", "Overall Confidence: ", "(a)", "a)", "option ",
            "not ", "0", "9", "%", "1,", "1/", "-$", "####", "["]
INPUTS = {
    "spaces": _filled(" ") + "x",
    "newlines": _filled("\n") + "x",
    "tabs and newlines": _filled("\t\n") + "x",
    **{f"{k!r} + {SIZE:,} spaces": k + _filled(" ") + "x" for k in KEYWORDS[:3]},
    **{f"{k!r} + {SIZE:,} newlines": k + _filled("\n") + "x" for k in KEYWORDS[:3]},
    **{f"{SIZE:,} characters of {k!r}": _filled(k) for k in KEYWORDS},
    f"{SIZE:,} characters of replies": _filled("The answer is (a). Confidence: 80%\n"),
}


def _seconds(parse: Callable[[str], object], text: str, repeats: int = 1) -> float:
    """Seconds per call; ``math.inf`` past ``CAP`` (the regex engine checks for signals, so a
    blow-up is stopped there rather than run for hours)."""

    def stop(*_: object) -> None:
        raise TimeoutError

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, CAP)
    start = time.perf_counter()
    try:
        for _ in range(repeats):
            parse(text)
    except TimeoutError:
        return math.inf
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return (time.perf_counter() - start) / repeats


@pytest.mark.parametrize("name", PARSERS)
def test_degenerate_replies_cost_a_scan(name: str) -> None:
    parse, normal = PARSERS[name]
    per_char = statistics.median(_seconds(parse, normal, 20) for _ in range(3)) / len(normal)
    slow = []
    for label, text in INPUTS.items():
        budget = min(RATIO * per_char * len(text), CAP)
        tries = [_seconds(parse, text)]
        while tries[-1] > budget and len(tries) < 3:  # a busy machine slows one try, not three
            tries.append(_seconds(parse, text))
        if min(tries) > budget:
            slow.append(f"{label}: {min(tries):.3f} s > {budget:.3f} s")
    assert not slow, f"{name}: {slow}"
