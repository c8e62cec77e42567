"""Verbalized confidence: the prompt wording, a parser for (option, confidence), and its filter.

The generation variants ask the question with one of two requests for a confidence, placed after
the question as in the paper's Appendix F prompt, the one-line forms ending the prompt with a
reply-format line (``REPLY_FORMS``; ``--metadata verbalized_prompt``):

- ``paper`` (default): Appendix F's multistep request, "Think step by step, mention your
  confidence level in each step (0-100)%, and mention your overall confidence level in your answer
  (0-100)%.", and no format line: as in the paper, the exemplars show the reply (steps, each
  "... Confidence: N%", then "Based on the information available in ... the correct answer is
  (c) ... Overall Confidence: N%");
- ``short``: Appendix D's "Mention your confidence level in your answer (0-100)%." and
  "Reply in the form "The answer is (letter). Confidence: N%"".

Few-shot exemplars are answered in the same form (``ReplyForm.solved``). The parser never
guesses:

- answer: the final answer statement, i.e. the last explicit statement in the reply ("The answer
  is (b)", "Answer: B", "correct option is b."), so letters named in the reasoning ("Option (a)
  seems wrong", "the hint says the answer is (b)") do not count. Only when there is none, option
  markers ("(b)", "b)", "option b", a reply that is just "b") and then the options' own texts are
  read, and every match must name the same option. A final letter that is not an option, a final
  statement naming a second option ("the answer is (a) or (b)"), or two different options among
  markers or texts, make the answer unreadable.
- confidence: three tiers, the first that finds anything decides: "overall"/"final" confidences
  ("Overall Confidence: 60%", "Final confidence: 70%"); any confidence tied to a word ("Confidence:
  80%", "80 % confident", "90% sure", "confidence of 0.8"); a lone percentage ("(a), 70%",
  "eighty percent"). One statement is read wherever it stands. Several (the per-step confidences
  of a step-by-step reply) are read only from the final answer statement's sentence on, so the
  confidence is the one given with or after the final answer, never a step's; none there, values
  that disagree, or a value outside 0-100% make the confidence unreadable. Numbers are read
  whole ("1000%", "1,000%" and "8/10" are unreadable, not 100% or 1%), and a negated statement
  ("not 90% sure") states no confidence.
- text the prompt put in the model's mouth (the hint, its note, our instructions, the few-shot
  exemplars) is removed from the reply before parsing, so a model that repeats it is read for its
  own answer.

What happens to an unreadable reply is ``outcome_from_parse``'s rule (docs/backends.md): an
unreadable answer is wrong with confidence 1/c; a readable answer with an unreadable confidence
keeps its answer with confidence 1/c. Both count in ``parse_fail_rate``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lm_eval.api.filter import Filter
from lm_eval.api.registry import register_filter

from calidist_tasks.confidence.chat_logprobs import letter_logprobs
from calidist_tasks.prompting.distractors import HINT_NOTE, LETTERS
from calidist_tasks.prompting.parts import CHOICES, FEWSHOT, HINT  # what a request's document shows
from calidist_tasks.scoring.joining import Outcome

# Paper, Appendix F (the multistep prompt), placed after the question as there. The prompt says
# no more: the exemplars show the reply's form (``fewshot``), as in the paper.
STEP_INSTRUCTION = ("Think step by step, mention your confidence level in each step (0-100)%, "
                    "and mention your overall confidence level in your answer (0-100)%.")
# Paper, Appendix D: one confidence for the answer (--metadata verbalized_prompt=short).
CONFIDENCE_INSTRUCTION = "Mention your confidence level in your answer (0-100)%."
CONFIDENCE_FORMAT = ('Reply in the form "The answer is (letter). Confidence: N%", where N is your '
                     "confidence from 0 to 100.")
ANSWER_FORMAT = 'Reply in the form "The answer is (letter)."'  # consistency and SPUQ
# Appendix F's reply: the steps, then its final statement on what the answer rests on.
STEP_REPLY = "{text} Confidence: {confidence}%\n"
PAPER_REPLY = ("{steps}Based on the information available in {basis} and the explanation above, "
               "the correct answer is ({letter}) {option}. Overall Confidence: {confidence}%")


@dataclass(frozen=True)
class ReplyForm:
    """What a generation prompt asks for: ``instruction`` after the question (may be empty),
    ``format`` as the prompt's last line (may be empty), and ``reply``, a solved reply in that
    form with the fields ``steps``, ``basis``, ``letter``, ``option`` and ``confidence`` (for
    few-shot exemplars)."""

    instruction: str
    format: str
    reply: str

    def solved(self, letter: str, option: str, confidence: int,
               steps: Sequence[tuple[str, int]] = (), basis: str = "") -> str:
        """The reply this form asks for, answering (``letter``) ``option`` at ``confidence``%
        after ``steps`` of reasoning, each (text, confidence), where the form shows them, that
        rest on ``basis`` ("the two sentences")."""
        shown = "".join(STEP_REPLY.format(text=text, confidence=n) for text, n in steps)
        return self.reply.format(steps=shown, basis=basis, letter=letter,
                                 option=str(option).strip().rstrip(". "), confidence=confidence)


REPLY_FORMS = {
    "paper": ReplyForm(STEP_INSTRUCTION, "", PAPER_REPLY),
    "short": ReplyForm(CONFIDENCE_INSTRUCTION, CONFIDENCE_FORMAT,
                       "The answer is ({letter}). Confidence: {confidence}%"),
    "answer": ReplyForm("", ANSWER_FORMAT, "The answer is ({letter})."),
}


# Every pattern reads in linear time: whitespace quantifiers are never adjacent (an optional
# word carries its own trailing whitespace), so a reply of 100 KB of spaces, newlines or repeated
# keywords costs a scan, not a backtracking search (tests/reliability/test_parser_time.py).
_SPACE = re.compile(r"[^\S\n]+")  # keeps line breaks: "Answer: B" ends at its line
_STATED = r"(?:(?:is|was|would be|should be|must be|will be|:|=|-)\s*)?"
# A letter that names an option: "(b)", "b)", or "b" before punctuation or the line's end.
_LETTER = r"(?:\(([a-z])\)|([a-z])\)|([a-z])(?=[^\S\n]*(?:[.,;:!?\n]|$)))"
# "The answer is (b)", "Answer: b.", "correct option is b)", "my choice: (B)".
_EXPLICIT = re.compile(
    r"(?:\banswer|\b(?:correct|right|best|final|my)\s+(?:option|choice))\s*" + _STATED
    + r"(?:(?:option|choice)\s+)?" + _LETTER
)
# A second option right after the statement's: "the answer is (a) or (b)" names no one option.
_ALTERNATIVE = re.compile(r"\s*(?:or|and|/)\s*(?:(?:option|choice)\s+)?" + _LETTER)
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
# "not 90% sure", "isn't confident at 90%", "never even 80%": no confidence stated.
_NEGATED_CONFIDENCE = re.compile(
    r"(?:\bnot|n't|\bnever)\s+(?:(?:even|quite|really|fully|entirely|completely|exactly)\s+)?$")
_LOOK_BACK = 40  # characters before a marker or confidence searched for its negation
# A number as written, read whole so that "1,000", "1000" and "9/10" are refused, not cut short.
_NUMBER = r"(\d+(?:[.,/]\d+)*)\s*(%|percent\b)?"
_CONFIDENCE_VALUE = re.compile(r"\d{1,3}(?:\.\d+)?")  # "80", "80.5", "0.8"
_CONFIDENCE_AFTER = re.compile(
    r"\b(overall\s+|final\s+)?confiden(?:ce|t)(?:\s+(?:level|score))?\s*"
    r"(?:(?:is|of|at|:|=|-)\s*)?(?:(?:about|around|approximately|roughly|~)\s*)?" + _NUMBER
)
_CONFIDENCE_BEFORE = re.compile(
    r"(?<![\d.,/])(\d+(?:[.,/]\d+)*)\s*(%|percent\b)\s*(?:confiden(?:t|ce)|sure|certain)"
)
_PERCENT = re.compile(r"(?<![\d.,/\-])(\d+(?:[.,/]\d+)*)\s*(%|percent\b)")
_SENTENCE_END = re.compile(r"[.!?](?=\s)|\n")

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


def strip_echoes(text: str, echoes: Iterable[str], keep_positions: bool = False) -> str:
    """``text`` without any occurrence of ``echoes`` (case and spacing ignored), longest first:
    a whole echoed exemplar goes before the hint inside it could break it up.
    ``keep_positions``: each echo becomes as many spaces as it had characters, so that a
    position in the result is the same position in ``text`` (``locate_answer``)."""
    def blank(match: re.Match[str]) -> str:
        return " " * len(match.group()) if keep_positions else " "

    for echo in sorted(echoes, key=len, reverse=True):
        words = echo.split()
        if words:
            pattern = r"\s+".join(re.escape(w) for w in words)
            text = re.sub(pattern, blank, text, flags=re.IGNORECASE)
    return text


def _unique(values: Sequence[Any]) -> Any:
    """The single value ``values`` agree on; None when they are empty or disagree."""
    distinct = set(values)
    return distinct.pop() if len(distinct) == 1 else None


def _final_statement(lowered: str) -> re.Match[str] | None:
    """The reply's final answer statement: its last explicit one ("the answer is (c)")."""
    statements = list(_EXPLICIT.finditer(lowered))
    return statements[-1] if statements else None


def parse_answer(text: str, choices: Sequence[str]) -> int | None:
    """The option index the reply names, or None when it names none or several."""
    lowered = _normalize(text)
    final = _final_statement(lowered)
    if final:
        if _ALTERNATIVE.match(lowered, final.end()):
            return None
        index = LETTERS.find(next(g for g in final.groups() if g))
        return index if 0 <= index < len(choices) else None
    valid = LETTERS[: len(choices)]
    marked = [m.group(1) for pattern, strict in _MARKERS for m in pattern.finditer(lowered)
              if (strict or m.group(1) in valid) and not _preceded_by(_NEGATED, lowered, m)]
    if marked:
        letter = _unique(marked)  # "c. <option b's text>" with two options: unreadable
        return LETTERS.index(letter) if letter is not None and letter in valid else None
    return _option_by_text(lowered, choices)


def _preceded_by(pattern: re.Pattern[str], lowered: str, match: re.Match[str]) -> bool:
    """Whether ``pattern`` (ending in ``$``) matches the few characters before ``match``."""
    return bool(pattern.search(lowered, max(0, match.start() - _LOOK_BACK), match.start()))


# The answer's own patterns on the reply as written (its letter's place, not a new reading).
_AS_WRITTEN = [re.compile(p.pattern, re.IGNORECASE) for p in (_EXPLICIT, *(m for m, _ in _MARKERS))]


def answer_position(
    text: str, choices: Sequence[str], hint: str | None = None, exemplars: str | None = None
) -> int | None:
    """Where in ``text`` (as written) the letter of the answer ``parse_response`` reads stands:
    the last final answer statement naming it ("the answer is (c)"), else the last option marker
    naming it ("(c)"); None when the answer is unreadable or named by its text only."""
    answer = parse_answer(own_text(text, hint, exemplars), choices)
    if answer is None:
        return None
    for pattern in _AS_WRITTEN:
        places = [m.start(g) for m in pattern.finditer(text) for g in range(1, pattern.groups + 1)
                  if (m.group(g) or "").lower() == LETTERS[answer]]
        if places:
            return places[-1]
    return None


def _option_by_text(lowered: str, choices: Sequence[str]) -> int | None:
    lowered = " ".join(lowered.split())
    needles = [" ".join(str(choice).lower().split()).rstrip(".!?") for choice in choices]
    starts = [{m.start() for m in re.finditer(re.escape(n), lowered)} if n else set()
              for n in needles]
    # An option whose text lies inside a longer option's matched text ("paraphrase" inside
    # "not a paraphrase") is not a separate mention.
    named = []
    for index, needle in enumerate(needles):
        inside = [(j, offset) for j, longer in enumerate(needles) if len(longer) > len(needle)
                  for offset in range(len(longer)) if needle and longer.startswith(needle, offset)]
        named += [index for start in starts[index]
                  if not any(start - offset in starts[j] for j, offset in inside)]
    return _unique(named)


def _to_fraction(number: str, unit: str | None) -> float | None:
    if not _CONFIDENCE_VALUE.fullmatch(number):
        return None  # "1000", "1,000", "9/10": not a confidence on the 0-100% scale
    value = float(number)
    if unit:
        value /= 100
    elif "." not in number or value > 1:
        value /= 100  # a bare number answers "(0-100)%"; "0.8" is a fraction
    return value if 0.0 <= value <= 1.0 else None


def parse_confidence(text: str, lone_percent: bool = True) -> float | None:
    """The stated confidence as a fraction in [0, 1], or None (absent, conflicting, invalid).

    Tiers: "overall"/"final" confidences, then confidences tied to a word ("confidence",
    "confident", "sure", "certain"), then lone percentages; the first tier that finds anything
    decides. Several statements of that tier (per-step confidences) count only from the final
    answer statement's sentence on, and must agree. A negated statement ("not 90% sure") states
    no confidence. ``lone_percent=False`` drops the last tier: in a worked maths answer a lone
    percentage is part of the solution."""
    lowered = _normalize(text)
    negated: set[int] = set()
    overall, plain = [], []
    for m in _stated(_CONFIDENCE_AFTER, 2, lowered, negated):
        value = _to_fraction(m.group(2), m.group(3))
        (overall if m.group(1) else plain).append((m.start(), value))
    plain += [(m.start(), _to_fraction(m.group(1), m.group(2)))
              for m in _stated(_CONFIDENCE_BEFORE, 1, lowered, negated)]
    tiers = [overall, plain]
    if lone_percent:
        tiers.append([(m.start(), _to_fraction(m.group(1), m.group(2)))
                      for m in _stated(_PERCENT, 1, lowered, negated)]
                     + [(m.start(), _word_percent(m.group(1)))
                        for m in _stated(_WORDS_PERCENT, 1, lowered, negated)])
    final = _final_statement(lowered)
    start = _sentence_start(lowered, final.start()) if final else 0
    for stated in tiers:
        if len(stated) > 1:  # several (per-step confidences): only the final answer's count
            return _unique([value for at, value in stated if at >= start])
        if stated:
            return stated[0][1]
    return None


def _stated(pattern: re.Pattern[str], number: int, lowered: str,
            negated: set[int]) -> list[re.Match[str]]:
    """The confidence statements ``pattern`` finds (its group ``number`` holds the number), less
    negated ones ("not 90% sure", "not confident at 90%"), whose numbers are added to
    ``negated`` (positions), so that a later tier does not read them alone either."""
    kept = []
    for m in pattern.finditer(lowered):
        if m.start(number) in negated or _preceded_by(_NEGATED_CONFIDENCE, lowered, m):
            negated.add(m.start(number))
        else:
            kept.append(m)
    return kept


def _sentence_start(lowered: str, position: int) -> int:
    """Where the sentence (or line) holding ``position`` starts."""
    ends = [m.end() for m in _SENTENCE_END.finditer(lowered, 0, position)]
    return ends[-1] if ends else 0


def _word_percent(words: str) -> float:
    if "hundred" in words:
        return 1.0
    return sum(_WORD_NUMBERS[w] for w in re.split(r"[-\s]", words)) / 100


def strip_confidence(text: str) -> str:
    """``text`` (normalized) without its confidence statements ("Confidence: 80%", "90% sure"),
    so that a number read from the rest is not the stated confidence."""
    return _CONFIDENCE_BEFORE.sub(" ", _CONFIDENCE_AFTER.sub(" ", _normalize(text)))


def prompt_echoes(
    hint: str | None = None, exemplars: str | None = None, formats: Sequence[str] = ()
) -> list[str]:
    """What the prompt put in the model's mouth: ``hint`` and ``exemplars`` (the few-shot block,
    exemplars separated by blank lines), our instructions and ``formats`` (the prompt's own
    reply-format lines)."""
    ours = [line for form in REPLY_FORMS.values() for line in (form.instruction, form.format)]
    echoes = [*ours, *formats, "(0-100)%", HINT_NOTE]
    if exemplars:
        echoes += [e for e in exemplars.split("\n\n") if e.strip()]
    if hint:  # the whole hint, and its claim alone ("I think the answer should be (b)")
        lines = [line.removeprefix("Hint:") for line in hint.splitlines()]
        echoes = lines + [line[: line.index(")") + 1] for line in lines if ")" in line] + echoes
    return echoes


def own_text(
    text: str, hint: str | None = None, exemplars: str | None = None, formats: Sequence[str] = ()
) -> str:
    """The reply without what the prompt put in the model's mouth (``prompt_echoes``)."""
    return strip_echoes(str(text or ""), prompt_echoes(hint, exemplars, formats))


def parse_response(
    text: str, choices: Sequence[str], hint: str | None = None, exemplars: str | None = None
) -> dict[str, Any]:
    """``{"answer": index | None, "confidence": fraction | None}`` read from one reply, plus
    ``"letter_logprobs"`` (the c letters' log-probabilities at the answer token, None when it is
    not found) for a reply that carries its tokens (``answer_logprobs.ScoredReply``).

    ``hint`` and ``exemplars`` are what the prompt showed; echoes of them are not the model's
    answer (``own_text``)."""
    own = own_text(text, hint, exemplars)
    parsed = {"answer": parse_answer(own, choices), "confidence": parse_confidence(own)}
    tokens = getattr(text, "tokens", None)
    if tokens is not None:
        position = text.in_tokens(answer_position(text, choices, hint, exemplars))
        parsed["letter_logprobs"] = letter_logprobs(tokens, position, len(choices))
    return parsed


# _EXPLICIT on the reply as written (any case, any run of spaces): positions are the reply's own.
_EXPLICIT_AS_WRITTEN = re.compile(_EXPLICIT.pattern.replace(" ", r"[^\S\n]+"), re.IGNORECASE)
_PARENTHESIZED = re.compile(r"(?<![a-z])\(([a-z])\)", re.IGNORECASE)


def locate_answer(
    text: str, choices: Sequence[str], hint: str | None = None, exemplars: str | None = None
) -> tuple[int, int] | None:
    """(option index, where its letter starts in ``text``) of the reply's answer as
    ``parse_response`` reads it; None when it reads none or the answer is not a written letter.

    The letter is the final answer statement's ("... the correct answer is (c) ..."), or, in a
    reply with no statement, the last "(x)" naming the parsed option; echoes of the prompt
    (``prompt_echoes``) never count. An answer read from an option's text alone has no letter
    to locate. The reasoned tasks score the option letters right there (``reasoned``)."""
    text = str(text or "")
    answer = parse_answer(own_text(text, hint, exemplars), choices)
    if answer is None:
        return None
    masked = strip_echoes(text, prompt_echoes(hint, exemplars), keep_positions=True)
    statements = list(_EXPLICIT_AS_WRITTEN.finditer(masked))
    if statements:
        final = statements[-1]
        group = next(g for g in (1, 2, 3) if final.group(g))
        letter, start = final.group(group), final.start(group)
    else:
        markers = [m for m in _PARENTHESIZED.finditer(masked)
                   if m.group(1).lower() == LETTERS[answer]]
        if not markers:
            return None
        letter, start = markers[-1].group(1), markers[-1].start(1)
    return (answer, start) if LETTERS.find(letter.lower()) == answer else None


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
