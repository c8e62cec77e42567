"""Result joining: one document's answers to its original and hinted prompts -> one record.

The record (``records.Record``, plain JSON in lm-eval's samples file) holds everything the
aggregation and ``calidist report`` need: the prediction and confidence on the original prompt,
every hinted prompt's outcome, and the instability measures of the paper's section 3
(docs/method.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from calidist_metrics import confidence_instability, prediction_instability, reliability_score
from calidist_tasks.scoring.records import Record, answer_record, logged_lambda_raw, with_hints


# NamedTuples, not dataclasses: several are built per document and a frozen dataclass's
# __init__ cost showed in the per-document overhead.
class PromptPlan(NamedTuple):
    """What one prompt of a document is: the original (hint_label None) or a hinted copy."""

    hint_label: int | None = None
    template: int | None = None  # assertion template index, None for fixed templates


class Outcome(NamedTuple):
    """The model's answer to one prompt: the predicted label and its confidence."""

    prediction: int
    confidence: float
    letter_logprobs: tuple[float, ...] | None = None  # logit path only
    parsed: bool = True  # verbalized path: False when the answer could not be read


def outcome_from_loglikelihoods(loglikelihoods: Sequence[float], where: str) -> Outcome:
    """Softmax over the option letters' log-likelihoods: prediction = argmax, confidence = max."""
    # Plain Python, not numpy: this runs for every prompt of every document, and for a handful
    # of letters numpy's per-call overhead dominated our per-document cost.
    try:  # None (a null in an API response) becomes NaN here and is refused below
        values = tuple(math.nan if v is None else float(v) for v in loglikelihoods)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: the model returned log-probabilities that are not numbers: "
                         f"{list(loglikelihoods)!r:.200}; check the model backend") from None
    if len(values) < 2:
        raise ValueError(f"{where}: expected one log-probability per option (at least 2), got "
                         f"{list(values)!r:.200}")
    if not all(map(math.isfinite, values)):
        raise ValueError(
            f"{where}: the model returned non-finite log-probabilities {list(values)} "
            "(NaN or inf); check the model backend"
        )
    top = max(values)
    best = values.index(top)  # the first maximum, as numpy's argmax
    return Outcome(best, 1.0 / _exp_total(values, top), values)


def _exp_total(values: Sequence[float], top: float) -> float:
    """The softmax's denominator: exp(v - top) added from left to right (as ``sum`` adds floats
    up to Python 3.11); a loop, not ``sum`` over a list, because it runs for every prompt."""
    total = 0.0
    for v in values:
        total += math.exp(v - top)
    return total


def outcome_at(loglikelihoods: Sequence[float], answer: int, where: str) -> Outcome:
    """The answer the model wrote (``answer``, an index into ``loglikelihoods``) at its softmax
    probability among the scored candidates (not necessarily the most likely one)."""
    values = outcome_from_loglikelihoods(loglikelihoods, where).letter_logprobs  # checked
    top = max(values)
    return Outcome(answer, math.exp(values[answer] - top) / _exp_total(values, top), values)


def outcomes_from_loglikelihoods(
    loglikelihoods: Sequence[float], n_choices: int, where: str | Callable[[], str]
) -> list[Outcome]:
    """One outcome per prompt from the flat list lm-eval returns (``n_choices`` per prompt).

    Checks the whole list once and then splits it: the per-prompt checks of
    ``outcome_from_loglikelihoods`` run only to name the prompt of a bad value. ``where``
    names the document in an error: a string, or a function that builds it (called only then:
    this runs for every document).
    """
    try:
        values = list(map(float, loglikelihoods))  # None -> TypeError
        usable = n_choices >= 2 and all(map(math.isfinite, values))
    except (TypeError, ValueError):
        usable = False
    if not usable or len(values) % n_choices:
        where = where() if callable(where) else where
        for i in range(0, max(len(loglikelihoods), 1), n_choices):  # raises, naming the prompt
            outcome_from_loglikelihoods(loglikelihoods[i:i + n_choices],
                                        f"{where} prompt {i // n_choices}")
        raise ValueError(f"{where}: expected {n_choices} log-probabilities per prompt, got "
                         f"{len(loglikelihoods)} in all")
    outcomes = []
    # one iterator zipped n_choices times: the prompts' n_choices-tuples, without slicing
    for chunk in zip(*[iter(values)] * n_choices, strict=True):
        top = max(chunk)
        outcomes.append(_new_outcome(Outcome, (chunk.index(top), 1.0 / _exp_total(chunk, top),
                                               chunk, True)))
    return outcomes


# Outcome(...) without the NamedTuple's Python-level __new__ (the same tuple, every field given
# in field order): a document has one per prompt and this halves their cost.
_new_outcome = tuple.__new__


def hint_instability(
    prediction: Any, confidence: float, hints: Sequence[tuple[Any, ...]], delta_mode: str = "mean"
) -> tuple[float, float, float, bool]:
    """(mu, delta, lambda_raw as logged, flipped) of the original answer under ``hints``
    (``Hint``s, or plain tuples of their fields as a record holds them).

    Only hints naming a label other than the original prediction count (the harness builds
    every prompt before the model answers, so hints for all labels were sent), and of them only
    readable replies (an unreadable one is logged with confidence None: it is neither a flip
    nor a move, and two unreadable readings never agree); ``flipped``: one of them changed the
    answer. When every counted hint's reply was unreadable (k = 0 readable) the hints left the
    model unable to answer: mu = delta = 1, lambda_raw = 0, the least reliable
    (docs/paper_fidelity.md, "Unreadable replies"); no counted hint at all is refused (k == 0).
    """
    predictions = []
    confidences = []
    unreadable = 0
    for label, _, hinted_prediction, hinted_confidence in hints:
        if label == prediction:
            continue
        if hinted_confidence is None:
            unreadable += 1
        else:
            predictions.append(hinted_prediction)
            confidences.append(hinted_confidence)
    if unreadable and not predictions:
        return 1.0, 1.0, 0.0, False
    mu = prediction_instability(prediction, predictions, confidences)
    delta = confidence_instability(confidence, confidences, mode=delta_mode)
    return (float(mu), float(delta), logged_lambda_raw(reliability_score(mu, delta)),
            any([p != prediction for p in predictions]))


def join_document(
    plans: Sequence[PromptPlan],
    outcomes: Sequence[Outcome],
    label: int,
    delta_mode: str = "mean",
) -> Record:
    """Join a document's outcomes into its record (paper section 3; the first prompt is the
    original; ``hint_instability``).

    Unreadable replies are counted, not guessed (docs/paper_fidelity.md): an unreadable
    original keeps its outcome by the documented rule (an unreadable answer wrong at 1/c, an
    unreadable confidence 1/c; ``unreadable_original``), which every method scores as it is and
    no fit uses (``aggregation``); an unreadable hinted reply is logged with confidence None and
    left out of mu and delta (``unreadable_hinted`` counts them)."""
    if len(plans) != len(outcomes) or plans[0].hint_label is not None:
        raise ValueError("the first prompt must be the original and every prompt needs an outcome")
    original = outcomes[0]
    record = answer_record(int(label), original.prediction, original.confidence,
                           original.prediction == label, original.parsed,
                           original.letter_logprobs)
    record["unreadable_original"] = int(not original.parsed)
    # a tuple of plain tuples of Hint's fields, not NamedTuples (records: the garbage collector)
    hints = tuple([(plan.hint_label, plan.template, outcome.prediction,
                    outcome.confidence if outcome.parsed else None)
                   for plan, outcome in zip(plans[1:], outcomes[1:], strict=True)])
    if not hints:
        return record
    mu, delta, lambda_raw, flipped = hint_instability(original.prediction, original.confidence,
                                                      hints, delta_mode)
    record["unreadable_hinted"] = sum(not o.parsed for o in outcomes[1:])
    return with_hints(record, hints, mu, delta, lambda_raw, flipped,
                      original.parsed and all([o.parsed for o in outcomes]))
