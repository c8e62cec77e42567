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

Few-shot exemplars are answered in the same form (``ReplyForm.solved``). Every path reads a
reply with one reader, ``read_reply`` (the verbalized filter, the reasoned ``_cot`` tasks, the
chat log-probability reading, the consistency samples; docs/method.md, "Reading a reply"). It
never guesses:

- text the prompt put in the model's mouth (the hint, its note, our instructions, the few-shot
  exemplars, the question's own text) is blanked first, so a model that repeats it is read for
  its own answer;
- the reply ends at its first complete "Overall Confidence: N%" or where a line opens a new block
  (the turn openers "User:", "Assistant:", an exemplar's first label such as "Sentence1:"):
  what follows is the model writing on into an invented next exemplar. Generation stops there
  too where the backend takes the YAML's ``until`` (hf, vLLM, local-completions take every
  string; OpenAI's chat API only the first 4, the end-of-turn strings, so the cut does the rest);
- answer: the first answer statement of that reply ("The answer is (b)", "Answer: B", "correct
  option is b."), its letter's position the place a log-probability reading takes p. Only when
  there is none, option markers ("(b)", "b)", "option b", a reply that is just "b") and then the
  options' own texts are read, and every match must name the same option. A letter that is not
  an option, a statement naming a second option ("(a) or (b)", "(a), (b)", "(a)(b)"), or two
  different options among markers or texts make the answer unreadable;
- confidence: the reply's "Overall Confidence: N%" (or "final confidence"), else the one
  confidence on the answer statement's own line ("The answer is (b). Confidence: 80%", the
  short form's). A step's "Confidence: N%" on a line before the answer is never read as the
  overall one. Only a percentage from 0 to 100% without a sign is read: "0.8", "1", "1000%",
  "1e2%", "−20%", a range ("80-90%") and a negated value ("not 90% sure", "100% not sure") are
  unreadable, and so is a missing overall confidence, while the answer (and its letter
  probability) may still be readable.

What happens to an unreadable reply is ``outcome_from_parse``'s rule (docs/backends.md): an
unreadable answer is wrong with confidence 1/c; a readable answer with an unreadable confidence
keeps its answer with confidence 1/c. Both count in ``parse_fail_rate``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any, NamedTuple

from lm_eval.api.filter import Filter
from lm_eval.api.registry import register_filter

from calidist_tasks.confidence.chat_logprobs import letter_logprobs
from calidist_tasks.prompting.distractors import HINT_NOTE, LETTERS
from calidist_tasks.prompting.parts import CHOICES, FEWSHOT, HINT  # what a request's document shows
from calidist_tasks.scoring.joining import Outcome
from calidist_tasks.scoring.records import is_own_field

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


# ---------------------------------------------------------------------- reading a reply
# Every pattern reads in linear time: whitespace quantifiers are never adjacent (an optional
# word carries its own trailing whitespace), so a reply of 100 KB of spaces, newlines or repeated
# keywords costs a scan, not a backtracking search; a reply's many markers are counted by
# ``findall`` rather than visited one by one (tests/reliability/test_parser_time.py). Patterns
# read the reply as written (ignoring case), so that a position is the reply's own.
_STATED = r"(?:(?:is|was|would be|should be|must be|will be|:|=|-)\s*)?"
# A letter that names an option: "(b)", "b)", or "b" before punctuation or the line's end.
_LETTER = r"(?:\(([a-z])\)|([a-z])\)|([a-z])(?=[^\S\n]*(?:[.,;:!?\n]|$)))"
# "The answer is (b)", "Answer: b.", "correct option is b)", "my choice: (B)".
_EXPLICIT = re.compile(
    r"(?:\banswer|\b(?:correct|right|best|final|my)[^\S\n]+(?:option|choice))\s*" + _STATED
    + r"(?:(?:option|choice)\s+)?" + _LETTER, re.IGNORECASE)
# GSM8K's statement: "The answer is 18", "Answer: $5" (the line its confidence is read on).
_NUMBER_STATEMENT = re.compile(r"\banswer\s*(?:is|:|=)\s*[-\u2212$]?\d", re.IGNORECASE)
# A second option right after the statement's: "the answer is (a) or (b)", "(a), (b)", "(a)(b)"
# name no one option.
_ALTERNATIVE = re.compile(r"[^\S\n]*(?:(?:or|and|/|,|;|&)[^\S\n]*)?(?:(?:option|choice)\s+)?"
                          r"(?:\([a-z]\)|[a-z]\))", re.IGNORECASE)
# (marker, whether a letter that is not an option still counts as naming one, the text it holds
# around a letter x): "(b)", a reply that starts with "b." or is just "b" name a letter; " b)"
# and "option b" only an option's.
_MARKERS = (
    (r"(?<![a-z])\(([a-z])\)", True, "(x)"),
    (r"^\s*([a-z])[.:](?:\s|$)", True, "x"),
    (r"^\s*([a-z])\s*$", True, "x"),
    (r"(?:^|\s)([a-z])\)", False, "x)"),
    (r"\boption\s+([a-z])\b", False, "x"),
)
ALPHABET = "abcdefghijklmnopqrstuvwxyz"


@cache
def _marker(pattern: str, letter: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """``pattern`` naming ``letter``, and the same marker negated ("not (b)" names no (b))."""
    named = pattern.replace("([a-z])", f"({letter})")
    return re.compile(named), re.compile(r"\bnot\s*(?:option\s*)?" + named.lstrip("^"))


def _marked_letters(low: str, valid: str) -> set[str]:
    """The letters the lowered reply names by option markers, less negated ones. A letter is
    looked for only where the reply holds its marker's text ("(b)"), so a reply of 25,000
    markers costs a few scans, not 25,000 matches visited one by one."""
    named = set()
    for pattern, strict, around in _MARKERS:
        if pattern.startswith("^"):  # at the reply's start only: one match, never negated
            found = re.match(pattern, low)
            if found and (strict or found.group(1) in valid):
                named.add(found.group(1))
            continue
        for letter in ALPHABET if strict else valid:
            if around.replace("x", letter) not in low:
                continue
            marker, negated = _marker(pattern, letter)
            if ("not" in low and len(marker.findall(low)) > len(negated.findall(low))
                    or "not" not in low and marker.search(low)):
                named.add(letter)
    return named
# "not 90% sure", "isn't confident at 90%", "never even 80%": no confidence stated.
_NEGATED_CONFIDENCE = re.compile(
    r"(?:\bnot|n't|\bnever)\s+(?:(?:even|quite|really|fully|entirely|completely|exactly)\s+)?$",
    re.IGNORECASE)
_LOOK_BACK = 40  # characters before a confidence searched for its negation
# A confidence as written, read whole (sign, digits, separators, exponent) so that "1000%",
# "1,000%", "9/10", "1e2%" and "−20%" are refused, not cut short.
_NUMBER = r"([-+\u2212\u2013]?)(\d[\d.,/]*(?:e[-+]?\d+)?)[^\S\n]*(%|percent\b)?"
_CONFIDENCE_VALUE = re.compile(r"\d{1,3}(?:\.\d+)?")  # "80", "80.5"
_CONFIDENCE_AFTER = re.compile(
    r"\b(overall\s+|final\s+)?confiden(?:ce|t)(?:\s+(?:level|score))?\s*"
    r"(?:(?:is|of|at|:|=|-)\s*)?(?:(?:about|around|approximately|roughly|~)\s*)?" + _NUMBER,
    re.IGNORECASE)
_CONFIDENCE_BEFORE = re.compile(
    r"(?<![\w.,/\-\u2212])([-+\u2212\u2013]?)(\d[\d.,/]*(?:e[-+]?\d+)?)[^\S\n]*(%|percent\b)"
    r"\s*(?:confiden(?:t|ce)|sure|certain)", re.IGNORECASE)
# After a stated value: a range ("80-90%", "80% to 90%") or a negation ("100% not sure").
_AFTER_VALUE = re.compile(
    r"[^\S\n]*(?:(?:-|\u2013|\u2014|to\b)[^\S\n]*\d|not\b|un(?:sure|certain))", re.IGNORECASE)
# A complete overall confidence ("Overall Confidence: 60%"): where a reply ends.
_OVERALL = re.compile(_CONFIDENCE_AFTER.pattern.replace("(overall\\s+|final\\s+)?",
                                                        "(overall\\s+|final\\s+)", 1)
                      .removesuffix("?"), re.IGNORECASE)
# Lines that open a new turn: where an instruct model writing on begins an invented next block.
TURN_OPENERS = ("User", "Assistant", "Human", "System")
_LABEL = re.compile(r"[^\S\n]*([A-Za-z][A-Za-z0-9 ]{0,30}):")  # "Sentence1:", "Question:"
# A shown text shorter than this is a word, not an echo ("entailment", a label's name).
MIN_ECHO = 12
CHARS_PER_TOKEN = 4  # output tokens of a reply without its tokens (report.cost's estimate too)


class ReplyReading(NamedTuple):
    """One reply as read (``read_reply``)."""

    answer: int | None  # the option it names; None: unreadable
    confidence: float | None  # its stated overall confidence, a fraction; None: unreadable
    at: int | None  # where its answer statement's letter stands in the reply (p is read there)
    steps: int  # lines stating a confidence before the answer's line (the reasoning's steps)
    cut: bool  # the reply ran on past its end (``reply_end``) and was cut there


def strip_echoes(text: str, echoes: Iterable[str], keep_positions: bool = False) -> str:
    """``text`` without any occurrence of ``echoes`` (case and spacing ignored), longest first:
    a whole echoed exemplar goes before the hint inside it could break it up.
    ``keep_positions``: each echo becomes as many spaces as it had characters, so that a
    position in the result is the same position in ``text``."""
    def blank(match: re.Match[str]) -> str:
        return " " * len(match.group()) if keep_positions else " "

    low, ascii_text = text.lower(), text.isascii()
    for echo in sorted(echoes, key=len, reverse=True):
        words = echo.split()
        if not words or words[0].lower() not in low:
            continue
        if ascii_text and echo.isascii():
            # in ASCII, ignoring case is matching lowercase: the same matches at the same
            # positions, found by a literal search several times faster than re.IGNORECASE's
            pieces, last = [], 0
            for match in _echo_pattern(echo.lower(), 0).finditer(text.lower()):
                pieces += [text[last:match.start()], blank(match)]
                last = match.end()
            text = "".join(pieces) + text[last:]
        else:
            text = _echo_pattern(echo, re.IGNORECASE).sub(blank, text)
    return text


@lru_cache(maxsize=4096)
def _echo_pattern(echo: str, flags: int) -> re.Pattern[str]:
    """``echo``'s words with any spacing between them (a prompt holds a few hundred echoes)."""
    return re.compile(r"\s+".join(map(re.escape, echo.split())), flags)


def block_openers(exemplars: str | None) -> tuple[str, ...]:
    """The labels that open a block of the prompt: the turn openers ("User:", "Assistant:") and
    each exemplar's first label ("Sentence1:", "Question:"), where a model that writes on into
    an invented next exemplar begins it."""
    labels = [_LABEL.match(block.strip()) for block in (exemplars or "").split("\n\n")]
    return tuple(dict.fromkeys([*TURN_OPENERS, *(m.group(1).strip() for m in labels if m)]))


@lru_cache(maxsize=64)
def _opener_pattern(openers: tuple[str, ...]) -> re.Pattern[str]:
    words = "|".join(r"[^\S\n]+".join(map(re.escape, o.split())) for o in openers)
    return re.compile(r"\n[^\S\n]*(?:" + words + r")[^\S\n]*:", re.IGNORECASE)


def reply_end(text: str, openers: tuple[str, ...] = TURN_OPENERS) -> int:
    """Where the reply ends as read: right after its first complete overall confidence ("Overall
    Confidence: 60%"), or where a line after its first opens a new block (``openers``),
    whichever comes first; ``len(text)`` when neither does. What follows is the model writing
    on, not its reply."""
    ends = [len(text)]
    overall = _OVERALL.search(text) if "confiden" in text.lower() else None
    if overall:
        ends.append(overall.end())
    # an opener before any text of the reply's own (an echo of the prompt blanked in front of
    # it), or right after a line whose start was echo (blanked by ``strip_echoes``: the prompt's
    # own cue after its echoed options, hint or corrupted option), begins the reply, not a next
    # block
    pattern = _opener_pattern(openers) if "\n" in text else None
    at = len(text) - len(text.lstrip())
    while pattern and (block := pattern.search(text, at)):
        before = text[text.rfind("\n", 0, block.start()) + 1:block.start()]
        if not before[:1].isspace():
            ends.append(block.start())
            break
        at = block.end()
    return min(ends)


def _fraction(sign: str, number: str, unit: str | None) -> float | None:
    """A stated confidence as a fraction: a percentage from 0 to 100% without a sign; None for
    "0.8", "1", "1000%", "1,000%", "9/10", "1e2%", "−20%"."""
    if sign or not unit or not _CONFIDENCE_VALUE.fullmatch(number):
        return None
    value = float(number) / 100
    return value if value <= 1.0 else None


def _value(text: str, match: re.Match[str], first: int) -> float | None:
    """The confidence ``match`` states (its groups ``first`` on: sign, number, unit); None when
    negated ("not 90% sure", "100% not sure"), a range ("80-90%") or not a percentage."""
    start = max(0, match.start() - _LOOK_BACK)
    if _NEGATED_CONFIDENCE.search(text, start, match.start()):
        return None
    if _AFTER_VALUE.match(text, match.end()):
        return None
    return _fraction(*match.group(first, first + 1, first + 2))


def _stated_confidence(text: str, end: int, statement: int | None) -> float | None:
    """The stated confidence of the reply ``text[:end]``: its overall confidence (the first;
    the reply is cut after it), else the confidences stated from its answer statement's line on
    ("The answer is (b). Confidence: 80%", the short form's; without a statement, its closing
    line), which must agree. A step's
    "Confidence: N%", on a line before the answer's, is never read as the overall one; none, or
    values that disagree, are unreadable. What follows ``end`` still qualifies a value ("100%
    not sure")."""
    low = text.lower()
    confidence = "confiden" in low
    overall = _OVERALL.search(text, 0, end) if confidence else None
    if overall:
        return _value(text, overall, 2)
    if statement is None:  # no statement (an answer by its text, a GSM8K last number): the
        statement = len(text[:end].rstrip())  # confidence on the reply's closing line
    start = text.rfind("\n", 0, statement) + 1
    values = ([_value(text, m, 2) for m in _CONFIDENCE_AFTER.finditer(text, start, end)]
              if confidence else [])
    if _holds(low, "confiden", "sure", "certain"):
        values += [_value(text, m, 1) for m in _CONFIDENCE_BEFORE.finditer(text, start, end)]
    return _unique(values)


def _holds(low: str, *words: str) -> bool:
    """Whether the lowered text holds any of ``words`` (a scan the patterns need not make)."""
    return any(word in low for word in words)


def _unique(values: Sequence[Any]) -> Any:
    """The single value ``values`` agree on; None when they are empty or disagree."""
    distinct = set(values)
    return distinct.pop() if len(distinct) == 1 else None


def _answer(text: str, choices: Sequence[str]) -> tuple[int | None, int | None, int | None]:
    """(the option ``text`` names, where its letter stands, where its statement starts): the
    first answer statement ("the answer is (c)"), else option markers that all agree (the
    statement: the first marker naming it), else the options' own texts (no letter; a GSM8K
    "The answer is 18" is the statement). Several options named, or a letter that is not an
    option, are unreadable."""
    low = text.lower()  # for what the reply holds, never for positions
    statement = _EXPLICIT.search(text) if _holds(low, "answer", "option", "choice") else None
    if statement:
        group = next(g for g in (1, 2, 3) if statement.group(g))
        index = LETTERS.find(statement.group(group).lower())
        if _ALTERNATIVE.match(text, statement.end()) or not 0 <= index < len(choices):
            return None, None, statement.start()
        return index, statement.start(group), statement.start()
    numbered = _NUMBER_STATEMENT.search(text) if "answer" in low else None
    valid = LETTERS[: len(choices)]
    named = _marked_letters(low, valid)
    if named:
        letter = _unique(named)  # "c. <option b's text>" with two options: unreadable
        if letter is None or letter not in valid:
            return None, None, numbered.start() if numbered else None
        # where it is first named: its first marker; p is read at its first "(x)"
        # on the lowered text where it keeps the positions (a scan without case folding)
        hay, flags = (low, 0) if len(low) == len(text) else (text, re.IGNORECASE)
        found = [(re.match if marker.startswith("^") else re.search)(
                     marker.replace("([a-z])", f"({letter})"), hay, flags)
                 if around.replace("x", letter) in low else None
                 for marker, _, around in _MARKERS]
        first = min((f.start(1) for f in found if f), default=None)
        written = found[0]  # its first "(x)"
        return LETTERS.index(letter), written.start(1) if written else None, first
    return _option_by_text(text.lower(), choices), None, numbered.start() if numbered else None


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


def read_reply(
    text: str, choices: Sequence[str], hint: str | None = None, exemplars: str | None = None,
    shown: Sequence[str] = (),
) -> ReplyReading:
    """One reply read as every path reads it (docs/method.md, "Reading a reply").

    Echoes of the prompt (``prompt_echoes``: the hint, the exemplars, our instructions, and
    ``shown``, the question's own text) are blanked first; the reply is cut at its end
    (``reply_end``); the answer is the cut reply's first answer statement, its letter's position
    ``at`` (where a log-probability reading takes p); the stated confidence its overall
    confidence (``_stated_confidence``)."""
    text = str(text or "")
    masked = strip_echoes(text, prompt_echoes(hint, exemplars, shown=shown), keep_positions=True)
    end = reply_end(masked, block_openers(exemplars))
    own = masked[:end]
    answer, at, statement = _answer(own, choices)
    confidence = _stated_confidence(masked, end, statement)
    before = (own[: own.rfind("\n", 0, statement) + 1]
              if statement is not None and _holds(own.lower(), "confiden", "sure", "certain")
              else "")
    steps = sum(bool(_CONFIDENCE_AFTER.search(line) or _CONFIDENCE_BEFORE.search(line))
                for line in before.split("\n"))
    return ReplyReading(answer, confidence, at, steps, bool(masked[end:].strip()))


def parse_answer(text: str, choices: Sequence[str]) -> int | None:
    """The option index the reply names (``read_reply``), or None when it names none or several."""
    return read_reply(text, choices).answer


def parse_confidence(text: str) -> float | None:
    """The reply's stated confidence as a fraction in [0, 1] (``read_reply``), or None: absent,
    only a step's, conflicting, negated, a range, or not a percentage from 0 to 100%."""
    return read_reply(text, ()).confidence


def answer_position(
    text: str, choices: Sequence[str], hint: str | None = None, exemplars: str | None = None
) -> int | None:
    """Where in ``text`` the letter of its answer statement stands (``read_reply``'s ``at``);
    None when the answer is unreadable or named by its text only."""
    return read_reply(text, choices, hint, exemplars).at


def strip_confidence(text: str) -> str:
    """``text`` without its confidence statements ("Confidence: 80%", "90% sure"), so that a
    number read from the rest is not the stated confidence."""
    return _CONFIDENCE_BEFORE.sub(" ", _CONFIDENCE_AFTER.sub(" ", text))


def prompt_echoes(
    hint: str | None = None, exemplars: str | None = None, formats: Sequence[str] = (),
    shown: Sequence[str] = (),
) -> list[str]:
    """What the prompt put in the model's mouth: ``hint`` and ``exemplars`` (the few-shot block,
    exemplars separated by blank lines), our instructions, ``formats`` (the prompt's own
    reply-format lines) and ``shown`` (the question's own text, ``shown_texts``)."""
    ours = [line for form in REPLY_FORMS.values() for line in (form.instruction, form.format)]
    echoes = [*ours, *formats, "(0-100)%", HINT_NOTE, *shown]
    if exemplars:
        echoes += [e for e in exemplars.split("\n\n") if e.strip()]
    if hint:  # the whole hint, and its claim alone ("I think the answer should be (b)")
        lines = [line.removeprefix("Hint:") for line in hint.splitlines()]
        echoes = lines + [line[: line.index(")") + 1] for line in lines if ")" in line] + echoes
    return echoes


def shown_texts(doc: Mapping[str, Any]) -> list[str]:
    """The lines of a request document's own text fields (the question, the sentences), less
    options' texts and lines shorter than ``MIN_ECHO``: a reply that repeats them (a data row
    holding "The answer is (a) ... Overall Confidence: 100%") is not answering."""
    options = {" ".join(str(c).split()).lower() for c in doc.get(CHOICES) or ()}
    lines = [line.strip() for name, value in doc.items()
             if isinstance(value, str) and not is_own_field(name) for line in value.splitlines()]
    # the option lines as the prompt lays them out ("e. 10"): echoed, they are not an answer
    # (and the prompt's cue after them does not open a next block); an answer statement names
    # its option as "(e)"
    listed = [f"{LETTERS[i]}. {c}" for i, c in enumerate(doc.get(CHOICES) or ())]
    return [line for line in dict.fromkeys(lines)
            if len(line) >= MIN_ECHO and " ".join(line.split()).lower() not in options
            ] + (listed if len(listed) > 1 else [])


def own_text(
    text: str, hint: str | None = None, exemplars: str | None = None, formats: Sequence[str] = ()
) -> str:
    """The reply without what the prompt put in the model's mouth (``prompt_echoes``)."""
    return strip_echoes(str(text or ""), prompt_echoes(hint, exemplars, formats))


def parse_response(
    text: str, choices: Sequence[str], hint: str | None = None, exemplars: str | None = None,
    shown: Sequence[str] = (),
) -> dict[str, Any]:
    """``{"answer": index | None, "confidence": fraction | None}`` read from one reply
    (``read_reply``), plus ``"letter_logprobs"`` for a reply that carries its tokens
    (``parsed``)."""
    return parsed(text, read_reply(text, choices, hint, exemplars, shown), len(choices))


def parsed(text: str, reading: ReplyReading, n_choices: int) -> dict[str, Any]:
    """``reading`` of ``text`` as the filter passes it on: its answer and confidence, and, for a
    reply that carries its tokens (``chat_logprobs.ScoredReply``), ``"letter_logprobs"``: the c
    letters' log-probabilities at its answer statement's letter, None when there is none or
    they cannot be read (``"logprob_error"`` then says why: this reading of this reply only)."""
    result = {"answer": reading.answer, "confidence": reading.confidence}
    tokens = getattr(text, "tokens", None)
    if tokens is not None:
        try:
            result["letter_logprobs"] = letter_logprobs(tokens, text.in_tokens(reading.at),
                                                        n_choices)
        except ValueError as error:
            result["letter_logprobs"], result["logprob_error"] = None, str(error)
    return result


def reply_shape(text: str, reading: ReplyReading, exemplars: str | None = None) -> dict[str, Any]:
    """How a reply reasoned ("does the model reason?", ``aggregation.reasoning_metrics``): its
    step lines before the answer, whether it was cut, whether it copied an exemplar
    (``copies_exemplar``), and its output tokens (the tokens a chat API returned, else
    characters / ``CHARS_PER_TOKEN``)."""
    tokens = getattr(text, "tokens", None)
    length = len(tokens) if tokens is not None else len(str(text)) / CHARS_PER_TOKEN
    return {"steps": reading.steps, "cut": reading.cut,
            "copied": copies_exemplar(str(text), reading, exemplars),
            "output_tokens": float(length)}


def copies_exemplar(text: str, reading: ReplyReading, exemplars: str | None) -> bool:
    """Whether the reply, up to its answer's line, repeats a line of the exemplars word for word
    (a step, or the final statement with its confidence): a small model that copies the last
    exemplar's reasoning shows steps and a readable answer that are not its own."""
    if not exemplars:
        return False
    own = text if reading.at is None else text[: (text.find("\n", reading.at) + 1) or None]
    shown = {_normal(line) for line in exemplars.splitlines() if len(line.strip()) >= MIN_ECHO}
    return any(_normal(line) in shown for line in own.splitlines()
               if len(line.strip()) >= MIN_ECHO)


def _normal(line: str) -> str:
    return " ".join(line.split()).lower()


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


def reply_shapes(parsed: Sequence[Mapping[str, Any]]) -> dict[str, float] | None:
    """One document's replies as ``aggregation.reasoning_metrics`` counts them: ``replies``,
    ``reasoned`` (two or more step lines before the answer), ``cut`` (ran on past their end),
    ``readable`` (answer and confidence read), ``copied`` (repeat an exemplar's line,
    ``copies_exemplar``) and their ``output_tokens``; None when the
    readings carry no shape (``reply_shape``: the verbalized filter's)."""
    shapes = [(p, p["shape"]) for p in parsed if "shape" in p]
    if not shapes:
        return None
    return {"replies": float(len(shapes)),
            "reasoned": float(sum(shape["steps"] >= 2 for _, shape in shapes)),
            "cut": float(sum(bool(shape["cut"]) for _, shape in shapes)),
            "readable": float(sum(p["answer"] is not None and p["confidence"] is not None
                                  for p, _ in shapes)),
            "copied": float(sum(bool(shape.get("copied")) for _, shape in shapes)),
            "output_tokens": float(sum(shape["output_tokens"] for _, shape in shapes))}


@register_filter("calidist_verbalized")
class VerbalizedFilter(Filter):
    """lm-eval filter: each generation -> ``{"answer", "confidence"}`` (see ``parse_response``).

    The request's document carries the options it showed (``_calidist_choices``), its hint
    (``_calidist_hint``) and its few-shot exemplars (``_calidist_fewshot``), which the task puts
    there when it builds the request, and the question's own fields (``shown_texts``).
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)

    def apply(self, resps: Iterable[Sequence[str]], docs: Sequence[Mapping[str, Any]]) -> list:
        return [[self._read(r, doc) for r in responses]
                for responses, doc in zip(resps, docs, strict=True)]

    @staticmethod
    def _read(text: str, doc: Mapping[str, Any]) -> dict[str, Any]:
        reading = read_reply(text, doc[CHOICES], doc.get(HINT), doc.get(FEWSHOT),
                             shown_texts(doc))
        return {**parsed(text, reading, len(doc[CHOICES])),
                "shape": reply_shape(text, reading, doc.get(FEWSHOT))}
