"""SPUQ baseline (Gao et al., EACL 2024): sampling with model-free perturbations.

Per question the original prompt is answered greedily (the reference output, whose answer is
the prediction), then perturbed copies are answered:

- dummy tokens: one of SPUQ's dummy strings ("\\n", "\\t", " ", "...", " um, ", "?", ...)
  added before and/or after the user text, as its reference implementation allows per token;
- system messages: one of SPUQ's nine system-message variants ("You are a helpful assistant.",
  ...) placed before the conversation (before a user's own ``--system_instruction``);
- temperature: the original prompt sampled at a temperature drawn uniformly from [0, 1]
  (SPUQ's T_min, T_max).

Inter-sample aggregation: SPUQ's confidence is the mean similarity between the reference output
and each perturbed output. For multiple choice the similarity of two outputs is agreement of
their parsed answers (1 or 0; an unreadable perturbed answer agrees with nothing), the exact
analogue of the text similarities SPUQ uses for free text. Uniform weights, as in SPUQ's
reference ``InterSampleAggregation``. Paraphrasing (which needs a second LLM) and SPUQ's
intra-sample (verbalized) aggregation are not implemented. An unreadable reference answer
follows the verbalized rule: wrong (-1) with confidence 1/c.

Which perturbations a question gets is drawn from a seed made of the question's content and the
run's seed, so reruns and multi-process runs build the same prompts.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass

# SPUQ's reference perturbation sets (perturbation.py of intuit-ai-research/SPUQ).
DUMMY_TOKENS = (
    ("\n", "both"), ("\t", "both"), (" ", "both"), ("...", "both"), (" um, ", "before"),
    (" uh, ", "before"), ("?", "after"), ("??", "after"), ("\n\n", "both"),
    (" um... ", "before"), (" uh... ", "before"),
)
SYSTEM_MESSAGES = (
    "you are a helpful assistant", "you are a question-answering assistant",
    "you are a nice assistant", "You are a helpful assistant",
    "You are a question-answering assistant", "You are a nice assistant",
    "You are a helpful assistant.", "You are a question-answering assistant.",
    "You are a nice assistant.",
)
TEMPERATURE_RANGE = (0.0, 1.0)
# Perturbed prompts per question: 3 of each kind, 9 in all (+1 reference = 10 requests).
COUNTS = {"dummy_token": 3, "system_message": 3, "temperature": 3}


@dataclass(frozen=True)
class Perturbation:
    """One perturbed copy of the prompt: what changes, and how."""

    kind: str  # dummy_token | system_message | temperature
    text: str = ""  # the dummy token or the system message
    position: str = ""  # dummy token: before | after
    temperature: float = 0.0


def perturbations(key: str, seed: int) -> list[Perturbation]:
    """The perturbed copies of one question (deterministic in its content key and the seed)."""
    digest = hashlib.sha256(f"spuq|{seed}|{key}".encode()).digest()
    rng = random.Random(int.from_bytes(digest[:8], "big"))
    plans = []
    for token, where in rng.sample(DUMMY_TOKENS, COUNTS["dummy_token"]):
        position = rng.choice(("before", "after")) if where == "both" else where
        plans.append(Perturbation("dummy_token", text=token, position=position))
    plans += [Perturbation("system_message", text=message)
              for message in rng.sample(SYSTEM_MESSAGES, COUNTS["system_message"])]
    low, high = TEMPERATURE_RANGE
    plans += [Perturbation("temperature", temperature=round(rng.uniform(low, high), 4))
              for _ in range(COUNTS["temperature"])]
    return plans


def confidence(reference: int | None, answers: Sequence[int | None]) -> float:
    """SPUQ inter-sample confidence: share of perturbed answers equal to the reference answer."""
    if not answers:
        raise ValueError("SPUQ needs at least one perturbed answer")
    if reference is None:
        return 0.0
    return sum(a == reference for a in answers) / len(answers)
