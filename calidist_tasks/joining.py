"""Result joining: one document's answers to its original and hinted prompts -> one record.

A record is plain JSON (it is logged in lm-eval's samples file) and holds everything the
aggregation and ``calidist report`` need: the prediction and confidence on the original prompt,
every hinted prompt's outcome, and the instability measures of the paper's section 3
(docs/method.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

from calidist_metrics import confidence_instability, prediction_instability, reliability_score


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
    return Outcome(best, 1.0 / sum([math.exp(v - top) for v in values]), values)


def outcomes_from_loglikelihoods(
    loglikelihoods: Sequence[float], n_choices: int, where: str
) -> list[Outcome]:
    """One outcome per prompt from the flat list lm-eval returns (``n_choices`` per prompt).

    Checks the whole list once and then splits it: the per-prompt checks of
    ``outcome_from_loglikelihoods`` run only to name the prompt of a bad value.
    """
    try:
        values = [float(v) for v in loglikelihoods]  # None -> TypeError
        usable = n_choices >= 2 and all(map(math.isfinite, values))
    except (TypeError, ValueError):
        usable = False
    if not usable or len(values) % n_choices:
        for i in range(0, max(len(loglikelihoods), 1), n_choices):  # raises, naming the prompt
            outcome_from_loglikelihoods(loglikelihoods[i:i + n_choices],
                                        f"{where} prompt {i // n_choices}")
        raise ValueError(f"{where}: expected {n_choices} log-probabilities per prompt, got "
                         f"{len(loglikelihoods)} in all")
    exp = math.exp
    outcomes = []
    for i in range(0, len(values), n_choices):
        chunk = tuple(values[i:i + n_choices])
        top = max(chunk)
        outcomes.append(Outcome(chunk.index(top), 1.0 / sum([exp(v - top) for v in chunk]), chunk))
    return outcomes


def join_document(
    plans: Sequence[PromptPlan],
    outcomes: Sequence[Outcome],
    label: int,
    delta_mode: str = "mean",
) -> dict[str, Any]:
    """Join a document's outcomes into its record (paper section 3; the first prompt is the
    original).

    Only hints naming a label other than the original prediction count (the harness builds every
    prompt before the model answers, so hints for all labels were sent).
    """
    if len(plans) != len(outcomes) or plans[0].hint_label is not None:
        raise ValueError("the first prompt must be the original and every prompt needs an outcome")
    original = outcomes[0]
    record: dict[str, Any] = {
        "label": int(label),
        "prediction": original.prediction,
        "confidence": original.confidence,
        "correct": int(original.prediction == label),
        "parsed": original.parsed,
    }
    if original.letter_logprobs is not None:
        record["letter_logprobs"] = list(original.letter_logprobs)
    hints = []
    predictions = []  # of the hints naming another label than the original prediction
    confidences = []
    for plan, outcome in zip(plans[1:], outcomes[1:], strict=True):
        hints.append([plan.hint_label, plan.template, outcome.prediction, outcome.confidence])
        if plan.hint_label != original.prediction:
            predictions.append(outcome.prediction)
            confidences.append(outcome.confidence)
    if not hints:
        return record
    mu = prediction_instability(original.prediction, predictions, confidences)
    delta = confidence_instability(original.confidence, confidences, mode=delta_mode)
    lambda_raw = reliability_score(mu, delta)
    record.update(
        hints=hints,
        mu=float(mu),
        delta=float(delta),
        lambda_raw=float(lambda_raw) if math.isfinite(lambda_raw) else 1e10,
        flipped=int(any([p != original.prediction for p in predictions])),
        parsed=original.parsed and all([o.parsed for o in outcomes]),
    )
    return record
