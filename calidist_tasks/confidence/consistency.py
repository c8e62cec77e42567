"""Consistency baselines (paper, Appendix D): N sampled answers per question -> three confidences.

- self-consistency: the majority answer's vote share, count / N (Wang et al.);
- entropy-based: 1 - H(p) / log |unique answers| over the answers' empirical distribution p;
  when every sample gives the same answer (|unique| = 1, H = 0, 0/0) the confidence is 1;
- first-second distance (FSD): (count of the most frequent answer - count of the second) / N
  (Lyu et al., 2025); 0 for the second when there is none.

An unreadable sample (the verbalized parser found no answer) is a vote for "no answer": it
counts in N and is one more category for the entropy and FSD, but it is never the prediction
(so FSD is floored at 0: "no answer" may outvote the readable prediction).
The prediction is the most frequent readable answer, ties going to the one sampled first. A
question with no readable sample at all is answered wrong (-1) with every confidence 1/c, the
same rule as a single unreadable verbalized answer. The answers may be any values that compare
equal when they are one answer: option indices, or GSM8K's canonical numbers, whose open answer
has no option set (c = ∞, so 1/c = 0; ``open_ended_verbalized.number_vote``).

Decoding (paper, Appendix I): top_k 50 / top_p 0.95 for local models; temperature 1.5 where an
API allows only a temperature. Which applies (``--metadata sampling=auto``) follows the model
backend's kind (``backends.lm_eval_compat.is_api_backend``: lm-eval's HTTP API models),
which ``calidist_tasks.evaluate`` and ``calidist eval`` pass to the tasks as the
``model_backend`` and ``model_api`` metadata (recorded in the results' task configs); only a
run that does not say its backend (a plain ``lm_eval`` run) falls back to whether
``--model_args`` has a ``base_url``. lm-eval's API backends send one fixed ``seed`` with every
request, which would make N identical requests return N identical samples, so on an API each
sample is its own request with its own seed (``sample_requests``).

A server that ignores the sampling settings (``transformers serve`` does unless the model's
generation config samples) or greedy decoding returns N copies of one reply: every confidence is
then 1. ``identical_samples_rate`` counts the documents whose samples all gave one answer ("no
answer" included), and ``identical_samples_warning`` says why above ``IDENTICAL_LIMIT``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from calidist_tasks.scoring.records import CONSISTENCY, CONSISTENCY_KINDS, ENTROPY, FSD

API_TEMPERATURE = 1.5  # paper, Appendix I, for APIs that take a temperature only
# Above this share of documents whose samples all agree, the samples were probably not sampled.
IDENTICAL_LIMIT = 0.9


def vote(answers: Sequence[Hashable | None], n_choices: float) -> dict[str, Any]:
    """Majority prediction and the three confidences of one question's sampled answers
    (``n_choices``: c, for the floor 1/c of a question with no readable answer)."""
    if not answers:
        raise ValueError("no sampled answers to vote on")
    counts = Counter(answers)
    readable = [a for a in dict.fromkeys(answers) if a is not None]  # in first-sampled order
    if not readable:
        floor = 1.0 / n_choices
        return {"prediction": -1, "parsed": False, **dict.fromkeys(CONSISTENCY_KINDS, floor)}
    prediction = max(readable, key=lambda a: counts[a])  # max keeps the first of equal counts
    n = len(answers)
    shares = [c / n for c in counts.values()]
    entropy = -sum(p * math.log(p) for p in shares)
    others = [c for a, c in counts.items() if a != prediction]
    return {
        "prediction": prediction,
        "parsed": True,
        CONSISTENCY: counts[prediction] / n,
        # clipped: uniform shares give 1 - H/log k a round-off below 0
        ENTROPY: max(0.0, 1.0 - entropy / math.log(len(counts))) if len(counts) > 1 else 1.0,
        # 0 when another category ("no answer" included) has as many votes as the prediction
        FSD: max(0, counts[prediction] - max(others, default=0)) / n,
    }


def decoding(gen_kwargs: Mapping[str, Any], sampling: str, api: bool) -> dict[str, Any]:
    """The generation kwargs for sampling: the YAML's top_k/top_p, or temperature 1.5 only."""
    kwargs = dict(gen_kwargs)
    if sampling == "temperature" or (sampling == "auto" and api):
        for key in ("top_k", "top_p"):
            kwargs.pop(key, None)
        kwargs["temperature"] = API_TEMPERATURE
    kwargs["do_sample"] = True
    return kwargs


def sample_requests(
    gen_kwargs: Mapping[str, Any], n: int, api: bool, seed: int = 0
) -> list[tuple[dict[str, Any], int]]:
    """(generation kwargs, repeats) per request: one request x n repeats, or n seeded requests."""
    if not api:
        return [(dict(gen_kwargs), n)]
    return [({**gen_kwargs, "seed": seed * 1000 + i}, 1) for i in range(n)]


def _identical(answers: Sequence[Hashable | None]) -> bool:
    return len(answers) > 1 and len(set(answers)) == 1


def identical_samples_rate(records: Sequence[Mapping[str, Any]]) -> float:
    """Share of the documents whose samples (two or more) all gave one answer, "no answer"
    (every sample unreadable) included: the records keep the answers, not the replies."""
    if not records:
        return math.nan
    return sum(_identical(r["answers"]) for r in records) / len(records)


def identical_samples_warning(records: Sequence[Mapping[str, Any]]) -> str | None:
    """The warning for evaluation records whose samples look unsampled (more than
    ``IDENTICAL_LIMIT`` of the documents), or None; the task's aggregation names the task."""
    rate = identical_samples_rate(records)
    if not rate > IDENTICAL_LIMIT:
        return None
    unreadable = sum(_identical(r["answers"]) and r["answers"][0] is None for r in records)
    return (
        f"on {rate:.0%} of {len(records)} evaluation documents the samples all gave the same "
        f"answer ({unreadable} of them: all unreadable), so the consistency, entropy and FSD "
        "confidences say nothing there. Likely cause: nothing was sampled: a server that "
        "ignores temperature/top_k/top_p (transformers serve decodes greedily unless the "
        "model's generation_config.json sets do_sample: true) or greedy decoding (--gen_kwargs "
        "do_sample=false or temperature=0). Fix: make the server sample (its own sampling "
        "settings; for transformers serve, do_sample: true in the model's "
        "generation_config.json) and send a temperature it honours (--metadata "
        "sampling=temperature: 1.5 alone, the default with a base_url). Check the replies "
        "(resps, --log_samples): if they differ, the model is this sure of every answer or, "
        "when they are unreadable, cannot answer in the asked format (parse_fail_rate).")
