"""Verbalized confidence: the prompt wording, a parser for (option, confidence), and its filter.

The generation variants ask the question in the paper's words (Appendix D/F: "Mention your
confidence level in your answer (0-100)%") and read back which option the model chose and the
confidence it stated. The parser never guesses:

- answer: explicit statements ("The answer is (b)", "Answer: B", "correct option is b.") are read
  first; only when there is none, option markers ("(b)", "b)", "option b", a reply that is just
  "b") and then the options' own texts are read. Within the first tier that finds anything, every
  match must name the same option; two different options (or a stated letter that is not an
  option) make the answer unreadable.
- confidence: a number tied to the word "confidence"/"confident" ("Confidence: 80%", "80 %
  confident", "confidence of 0.8", "eighty percent"), an "overall"/"final" confidence winning over
  per-step ones; without any, a lone percentage ("I am 90% sure"). Different values at the same
  tier, or a value outside 0-100%, make the confidence unreadable.
- text the prompt put in the model's mouth (the hint, its note, our instructions) is removed from
  the reply before parsing, so a model that repeats the hint is read for its own answer.

What happens to an unreadable reply is ``outcome_from_parse``'s rule (docs/backends.md): an
unreadable answer is wrong with confidence 1/c; a readable answer with an unreadable confidence
keeps its answer with confidence 1/c. Both count in ``parse_fail_rate``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from lm_eval.api.filter import Filter
from lm_eval.api.registry import register_filter

from calidist_tasks.distractors import HINT_NOTE, LETTERS
from calidist_tasks.joining import Outcome
from calidist_tasks.task import CHOICES, FEWSHOT, HINT  # what a request's document shows

# Paper, Appendix D ("...Mention your confidence level in your answer (0-100)%"), placed after the
# question as in Appendix F; the reply format line makes real models' answers readable.
CONFIDENCE_INSTRUCTION = "Mention your confidence level in your answer (0-100)%."
ANSWER_FORMAT = 'Reply in the form "The answer is (letter)."'
CONFIDENCE_FORMAT = ('Reply in the form "The answer is (letter). Confidence: N%", where N is your '
                     "confidence from 0 to 100.")


_SPACE = re.compile(r"[^\S\n]+")  # keeps line breaks: "Answer: B" ends at its line
_STATED = r"(?:is|was|would be|should be|must be|will be|:|=|-)?"
# "The answer is (b)", "Answer: b.", "correct option is b)", "my choice: (B)".
_EXPLICIT = re.compile(
    r"(?:\banswer|\b(?:correct|right|best|final|my)\s+(?:option|choice))\s*" + _STATED
    + r"\s*(?:option\s+|choice\s+)?"
    r"(?:\(([a-z])\)|([a-z])\)|([a-z])(?=\s*(?:[.,;:!?\n]|$)))"
)
# (marker, whether a letter that is not an option still counts as naming one): "(b)", a reply
# that starts with "b." or is just "b" name a letter; " b)" and "option b" only an option's.
_MARKERS = (
    (re.compile(r"(?<![a-z])\(([a-z])\)"), True),
    (re.compile(r"^\s*([a-z])[.:](?:\s|$)"), True),
    (re.compile(r"^\s*([a-z])\s*$"), True),
    (re.compile(r"(?:^|\s)([a-z])\)"), False),
    (re.compile(r"\boption\s+([a-z])\b"), False),
)
_NEGATED = re.compile(r"\bnot\s*(?:option\s*)?$")  # "not (b)" does not name (b)
_NUMBER = r"(\d{1,3}(?:\.\d+)?)\s*(%|percent\b)?"
_CONFIDENCE_AFTER = re.compile(
    r"\b(overall\s+|final\s+)?confiden(?:ce|t)(?:\s+(?:level|score))?\s*"
    r"(?:is|of|at|:|=|-)?\s*(?:about|around|approximately|roughly|~)?\s*" + _NUMBER
)
_CONFIDENCE_BEFORE = re.compile(
    r"(\d{1,3}(?:\.\d+)?)\s*(%|percent\b)\s*(?:confiden(?:t|ce)|sure|certain)"
)
_PERCENT = re.compile(r"(?<![\d.\-])(\d{1,3}(?:\.\d+)?)\s*(%|percent\b)")

_UNITS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen "
          "fourteen fifteen sixteen seventeen eighteen nineteen").split()
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
_WORD_NUMBERS = {word: i for i, word in enumerate(_UNITS)}
_WORD_NUMBERS.update({word: 20 + 10 * i for i, word in enumerate(_TENS)})
_WORDS_PERCENT = re.compile(
    r"\b(one hundred|a hundred|hundred|(?:" + "|".join(_TENS) + r")(?:[-\s](?:"
    + "|".join(_UNITS[1:10]) + r"))?|" + "|".join(_UNITS) + r")\s*(?:percent|%)"
)


def _normalize(text: str) -> str:
    return _SPACE.sub(" ", text).strip().lower()


def strip_echoes(text: str, echoes: Iterable[str]) -> str:
    """``text`` without any occurrence of ``echoes`` (case and spacing ignored), longest first:
    a whole echoed exemplar goes before the hint inside it could break it up."""
    for echo in sorted(echoes, key=len, reverse=True):
        words = echo.split()
        if words:
            pattern = r"\s+".join(re.escape(w) for w in words)
            text = re.sub(pattern, " ", text, flags=re.IGNORECASE)
    return text


def _unique(values: Sequence[Any]) -> Any:
    """The single value ``values`` agree on; None when they are empty or disagree."""
    distinct = set(values)
    return distinct.pop() if len(distinct) == 1 else None


def parse_answer(text: str, choices: Sequence[str]) -> int | None:
    """The option index the reply names, or None when it names none or several."""
    lowered = _normalize(text)
    stated = [next(g for g in m.groups() if g) for m in _EXPLICIT.finditer(lowered)]
    if stated:
        letter = _unique(stated)
        index = LETTERS.find(letter) if letter else -1
        return index if 0 <= index < len(choices) else None
    valid = LETTERS[: len(choices)]
    marked = [m.group(1) for pattern, strict in _MARKERS for m in pattern.finditer(lowered)
              if (strict or m.group(1) in valid) and not _NEGATED.search(lowered[: m.start()])]
    if marked:
        letter = _unique(marked)  # "c. <option b's text>" with two options: unreadable
        return LETTERS.index(letter) if letter is not None and letter in valid else None
    return _option_by_text(lowered, choices)


def _option_by_text(lowered: str, choices: Sequence[str]) -> int | None:
    lowered = " ".join(lowered.split())
    # An option whose text lies inside a longer option's matched text ("paraphrase" inside
    # "not a paraphrase") is not a separate mention.
    spans = []
    for index, choice in enumerate(choices):
        needle = " ".join(str(choice).lower().split()).rstrip(".!?")
        if needle:
            spans += [(m.start(), m.start() + len(needle), index)
                      for m in re.finditer(re.escape(needle), lowered)]
    named = [i for s, e, i in spans
             if not any(s2 <= s and e <= e2 and (e2 - s2) > (e - s) for s2, e2, _ in spans)]
    return _unique(named)


def _to_fraction(number: str, unit: str | None) -> float | None:
    value = float(number)
    if unit:
        value /= 100
    elif "." not in number or value > 1:
        value /= 100  # a bare number answers "(0-100)%"; "0.8" is a fraction
    return value if 0.0 <= value <= 1.0 else None


def parse_confidence(text: str, lone_percent: bool = True) -> float | None:
    """The stated confidence as a fraction in [0, 1], or None (absent, conflicting, invalid).

    ``lone_percent=False`` reads only confidences tied to a word ("confidence", "confident",
    "sure", "certain"): in a worked maths answer a lone percentage is part of the solution."""
    lowered = _normalize(text)
    overall, plain = [], []
    for m in _CONFIDENCE_AFTER.finditer(lowered):
        (overall if m.group(1) else plain).append(_to_fraction(m.group(2), m.group(3)))
    plain += [_to_fraction(m.group(1), m.group(2)) for m in _CONFIDENCE_BEFORE.finditer(lowered)]
    for candidates in (overall, plain):
        if candidates:
            return _unique(candidates)
    if not lone_percent:
        return None
    loose = [_to_fraction(m.group(1), m.group(2)) for m in _PERCENT.finditer(lowered)]
    loose += [_word_percent(m.group(1)) for m in _WORDS_PERCENT.finditer(lowered)]
    return _unique(loose) if loose else None


def _word_percent(words: str) -> float:
    if "hundred" in words:
        return 1.0
    return sum(_WORD_NUMBERS[w] for w in re.split(r"[-\s]", words)) / 100


def strip_confidence(text: str) -> str:
    """``text`` (normalized) without its confidence statements ("Confidence: 80%", "90% sure"),
    so that a number read from the rest is not the stated confidence."""
    return _CONFIDENCE_BEFORE.sub(" ", _CONFIDENCE_AFTER.sub(" ", _normalize(text)))


def own_text(
    text: str, hint: str | None = None, exemplars: str | None = None, formats: Sequence[str] = ()
) -> str:
    """The reply without what the prompt put in the model's mouth: ``hint`` and ``exemplars``
    (the few-shot block, exemplars separated by blank lines), our instructions and ``formats``
    (the prompt's own reply-format lines)."""
    echoes = [CONFIDENCE_INSTRUCTION, ANSWER_FORMAT, CONFIDENCE_FORMAT, *formats, "(0-100)%",
              HINT_NOTE]
    if exemplars:
        echoes += [e for e in exemplars.split("\n\n") if e.strip()]
    if hint:  # the whole hint, and its claim alone ("I think the answer should be (b)")
        lines = [line.removeprefix("Hint:") for line in hint.splitlines()]
        echoes = lines + [line[: line.index(")") + 1] for line in lines if ")" in line] + echoes
    return strip_echoes(str(text or ""), echoes)


def parse_response(
    text: str, choices: Sequence[str], hint: str | None = None, exemplars: str | None = None
) -> dict[str, Any]:
    """``{"answer": index | None, "confidence": fraction | None}`` read from one reply.

    ``hint`` and ``exemplars`` are what the prompt showed; echoes of them are not the model's
    answer (``own_text``)."""
    own = own_text(text, hint, exemplars)
    return {"answer": parse_answer(own, choices), "confidence": parse_confidence(own)}


def outcome_from_parse(
    parsed: Mapping[str, Any], n_choices: float, need_confidence: bool = True
) -> Outcome:
    """The documented rule: unreadable answer = wrong (-1) at 1/c; unreadable confidence = 1/c.
    An open answer has no finite option set: ``n_choices=math.inf`` gives confidence 0."""
    answer, confidence = parsed.get("answer"), parsed.get("confidence")
    if answer is None:
        return Outcome(-1, 1.0 / n_choices, parsed=False)
    if confidence is None:
        return Outcome(int(answer), 1.0 / n_choices, parsed=not need_confidence)
    return Outcome(int(answer), float(confidence))


@register_filter("calidist_verbalized")
class VerbalizedFilter(Filter):
    """lm-eval filter: each generation -> ``{"answer", "confidence"}`` (see ``parse_response``).

    The request's document carries the options it showed (``_calidist_choices``), its hint
    (``_calidist_hint``) and its few-shot exemplars (``_calidist_fewshot``), which the task puts
    there when it builds the request.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)

    def apply(self, resps: Iterable[Sequence[str]], docs: Sequence[Mapping[str, Any]]) -> list:
        return [
            [parse_response(r, doc[CHOICES], doc.get(HINT), doc.get(FEWSHOT)) for r in responses]
            for responses, doc in zip(resps, docs, strict=True)
        ]
