"""CaliDist (log-prob) on chat APIs: the answer token's letter probabilities from the reply itself.

The paper's logit confidence p is the probability of the answer token inside the generated,
reasoned reply (Appendix F; Table 3's "Log-Prob" rows read it from GPT-4o-mini's and Gemini's
token log-probabilities). A chat API returns, with the reply, each generated token's
log-probability and its ``top_logprobs`` alternatives (OpenAI's ``logprobs.content``), so the
same generation gives the answer, the stated confidence and p; no second request is needed.

How a reply's log-probabilities reach the task (docs/backends.md, "CaliDist (log-prob) on chat
APIs"):

1. ``api_replies.checked_replies`` (``calidist eval``) asks every chat generation for
   ``logprobs: true`` and ``top_logprobs: TOP_LOGPROBS`` and returns each reply as a
   ``ScoredReply``: the text lm-eval expects, carrying its tokens (it survives lm-eval's request
   cache, which pickles it, concurrency and batching, since it is the answer lm-eval stores);
2. the verbalized filter (``verbalized.parse_response``) finds where the reply states its final
   answer (``verbalized.answer_position``) and reads the c letters' log-probabilities at that
   token (``letter_logprobs``) into the parsed answer's ``letter_logprobs``; p is the stated
   letter's share of their softmax (``logprob_outcome``);
3. ``GenerationTask.document_record`` adds the document's log-prob record
   (``logprob_record``: the same join as the verbalized one, from these letters), and the
   aggregation reports its metrics with the suffix ``_logprob`` (``records.LOGPROB``).

Impossible values (NaN, "NaN", positive or infinite log-probabilities, probabilities adding up
to more than 1: a token listed twice)
make that reply's log-prob reading unreadable (the documented rule, wrong at 1/c), with one
warning naming the document; its stated reading stands
(``letter_logprobs``, ``logprob_record``).

Case forms: a letter's probability is that of its token in either case ("(a" and "(A" are two
tokens of one vocabulary, both ways of writing option (a)): listed both, they are summed. Two
listings conflict, and the reply's log-prob reading is unreadable in the same way, when one
spelling of a letter is listed twice (a copy, not a second token), or when summing the case forms
makes another letter the most likely than the one the most likely listed letter token names (the
spellings disagree about the answer, so the reading would rest on the merge rule).

Absent letters: a chat API lists only the K most likely tokens at a position. A letter not
among them gets the floor ``min(smallest listed log-probability, log(remaining mass / absent
letters))``: each absent token is at most as likely as the least likely listed one, and the
absent letters share at most the probability the listed tokens leave; the floor is the largest
value that respects both when that share is split evenly. It never makes an absent letter more
likely than a listed token, the generated one included.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

from calidist_tasks.prompting.distractors import LETTERS
from calidist_tasks.scoring.joining import (
    Outcome,
    PromptPlan,
    join_document,
    outcome_from_loglikelihoods,
)
from calidist_tasks.scoring.records import Record

log = logging.getLogger(__name__)
# top_logprobs asked of a chat API: OpenAI's maximum (vLLM's default max_logprobs is 20 too);
# ``--gen_kwargs top_logprobs=N`` asks for another number, ``logprobs=false`` for none.
TOP_LOGPROBS = 20

# One generated token: (its text, its log-probability, the listed alternatives (text, logprob)).
Token = tuple[str, float, tuple[tuple[str, float], ...]]


class ScoredReply(str):
    """A chat reply's text that carries its generated tokens (``Token``) for the answer's
    letter probabilities; everything else (the parser, lm-eval's logs) sees a plain string."""

    tokens: tuple[Token, ...]

    def __new__(cls, text: str, tokens: Sequence[Token]) -> ScoredReply:
        reply = super().__new__(cls, text)
        reply.tokens = tuple(tokens)
        return reply

    def __reduce__(self) -> tuple[Any, ...]:  # lm-eval's request cache pickles its answers
        return ScoredReply, (str(self), self.tokens)

    def in_tokens(self, position: int | None) -> int | None:
        """Where character ``position`` of the text lies in the tokens' joined text, which may
        hold more (an end-of-turn token after it; a thinking part lm-eval cut off before it);
        None when the text is not found there."""
        start = "".join(token for token, _, _ in self.tokens).find(self)
        return None if position is None or start < 0 else start + position


def letter_logprobs(tokens: Sequence[Token], position: int | None,
                    n_choices: int) -> tuple[float, ...] | None:
    """The log-probabilities of the c option letters at the token holding character
    ``position`` of the tokens' joined text (the answer letter), None when there is none.

    A letter's token is the answer token with its letter replaced, in either case ("(c" ->
    "(a", "(A"; " B" -> " A"); both case forms listed are two tokens of one letter, summed.
    Letters not listed get the module's floor. Raises ValueError, saying which, when the listed
    values cannot be log-probabilities of one distribution: a value that is not a number, NaN,
    positive or infinite, or probabilities adding up to more than 1 (a token listed twice); or
    when the case forms conflict (``_case_conflict``)."""
    found_at = _token_at(tokens, position)
    if found_at is None:
        return None
    (text, logprob, listed), offset = found_at
    prefix, suffix = text[:offset], text[offset + 1:]
    alternatives = _checked(listed, text, logprob)
    found, single = [], []
    for letter in LETTERS[:n_choices]:
        forms = {prefix + letter.lower() + suffix, prefix + letter.upper() + suffix}
        values = [value for token, value in alternatives if token in forms]
        for form in forms:
            if sum(token == form for token, _ in alternatives) > 1:
                raise ValueError(f"the letter token {form!r} is listed twice at the answer token "
                                 f"{text!r} (a copy: its probability would count twice)")
        found.append(_logsumexp(values) if values else None)
        single.append(max(values) if values else None)
    _case_conflict(found, single, text)
    absent = found.count(None)
    if absent:
        least = min(value for _, value in alternatives)
        remaining = 1.0 - sum(math.exp(value) for _, value in alternatives)
        floor = min(least, math.log(remaining / absent)) if remaining > 0 else least
        found = [floor if value is None else value for value in found]
    return tuple(found)


def _case_conflict(merged: Sequence[float | None], single: Sequence[float | None],
                   answer_token: str) -> None:
    """ValueError when summing each letter's case forms (``merged``) makes a letter more likely
    than the letter of the most likely listed letter token (``single``: each letter's likelier
    form): the two spellings disagree about which option the model prefers."""
    listed = [i for i, value in enumerate(single) if value is not None]
    if not listed or merged == single:
        return
    top = max(listed, key=lambda i: single[i])
    rival = max(listed, key=lambda i: merged[i])
    if merged[rival] > merged[top]:
        raise ValueError(
            f"the case forms at the answer token {answer_token!r} conflict: option "
            f"({LETTERS[top]}) has the most likely letter token, but ({LETTERS[rival]}) in both "
            "cases together is likelier")


# Listed probabilities may add up to a little over 1 by rounding; beyond this they are not one
# distribution's (a token repeated at log-probability 0, say).
MASS_TOLERANCE = 1e-3


def _checked(listed: Sequence[tuple[Any, Any]], answer_token: str,
             answer_logprob: Any) -> list[tuple[str, float]]:
    """The answer token's listed alternatives (the token itself added when not listed) as
    (token, log-probability); ValueError for a value that is not a finite number <= 0, or
    values whose probabilities add up to more than 1 (a token repeated, say "(a" twice at 0.0).
    Distinct tokens may share a text (byte tokens of a whole vocabulary): both are kept."""
    pairs = [*listed] + ([] if any(token == answer_token for token, _ in listed)
                         else [(answer_token, answer_logprob)])
    checked = []
    for token, value in pairs:
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        if not (math.isfinite(number) and number <= 0.0):
            raise ValueError(f"the log-probability {value!r} of {token!r} at the answer token "
                             f"{answer_token!r} is not a finite number <= 0")
        checked.append((token, number))
    mass = sum(math.exp(value) for _, value in checked)
    if mass > 1.0 + MASS_TOLERANCE:
        raise ValueError(f"top_logprobs at the answer token {answer_token!r} add up to "
                         f"probability {mass:.3g} > 1 (a token listed twice?)")
    return checked


def _token_at(tokens: Sequence[Token], position: int | None) -> tuple[Token, int] | None:
    """The token holding character ``position`` of the joined text, and the offset in it."""
    start = 0
    for token in tokens:
        if position is not None and 0 <= position - start < len(token[0]):
            return token, position - start
        start += len(token[0])
    return None


def _logsumexp(values: Sequence[float]) -> float:
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values))


def logprob_outcome(parsed: dict[str, Any], n_choices: int, where: str) -> Outcome:
    """One reply's log-prob outcome: the answer it states, at its letter's probability (softmax
    over the c letters at the answer token; the greedy choice's letter is their argmax), so both
    readings of a reply predict the same option and a two-stage run sends the same hints for
    both. A reply whose answer letter was not found is unreadable, as ``outcome_from_parse``
    (wrong at 1/c), its letters all equal (so the fitted baselines see 1/c too)."""
    letters, answer = parsed.get("letter_logprobs"), parsed.get("answer")
    if letters is None or answer is None:
        return Outcome(-1, 1.0 / n_choices, (0.0,) * n_choices, parsed=False)
    checked = outcome_from_loglikelihoods(letters, where)  # refuses non-finite values
    answer = int(answer)
    top = max(checked.letter_logprobs)
    share = math.exp(checked.letter_logprobs[answer] - top) * checked.confidence
    return Outcome(answer, share, checked.letter_logprobs)


def logprob_record(parsed: Sequence[dict[str, Any]], plans: Sequence[PromptPlan],
                   n_choices: int, label: int, delta_mode: str, where: str,
                   first: Outcome | None = None) -> Record | None:
    """A verbalized document's CaliDist (log-prob) record from the same replies (one per prompt
    of ``plans``, the original first unless ``first``, stage 1's log-prob outcome of a two-stage
    run, gives it), or None when they carry no token log-probabilities (a backend that does not
    return them: ``hf``, ``vllm``, a plain ``lm_eval`` run)."""
    scored = ["letter_logprobs" in p for p in parsed]
    if not any(scored):
        return None
    if not all(scored):
        raise ValueError(f"{where}: {scored.count(False)} of {len(parsed)} replies carry no token "
                         "log-probabilities (a --use_cache entry from a run that did not ask for "
                         "them?): rerun without that cache")
    outcomes = [logprob_outcome(p, n_choices, f"{where} prompt {i}") for i, p in enumerate(parsed)]
    failed = [f"prompt {i}: {p['logprob_error']}" for i, p in enumerate(parsed)
              if p.get("logprob_error")]
    if failed:  # this reading of these replies only: the stated reading needs no log-probs
        log.warning("%s: log-prob reading unreadable for %s; the stated reading stands",
                    where, "; ".join(failed))
    if first is not None:
        plans, outcomes = [PromptPlan(), *plans], [first, *outcomes]
    elif plans and plans[0].hint_label is not None:
        raise ValueError(f"{where}: stage 1 logged no log-prob answer: run both stages on a chat "
                         "backend that returns log-probabilities")
    record = join_document(plans, outcomes, label, delta_mode)
    record.update(generations=len(outcomes), parse_failures=sum(not o.parsed for o in outcomes))
    return record
