"""Few-shot prompts as in the paper's Appendix F: fixed exemplars, one per label, that reason.

Every benchmark ships its exemplar documents in its YAML, in lm-eval's convention for
chain-of-thought few-shot (``fewshot_config: samples:``, as lm-eval's gsm8k-cot does): one per
label, each a document of the benchmark (the fields its question shows and its gold label) with an
``explanation``, 2-4 steps of reasoning about that document, and the YAML's ``answer_basis`` names
what the final statement rests on ("the two sentences", "the question", ...). ``--num_fewshot k``
puts ``k`` exemplars per label in front of every prompt (``k = 1`` is the paper: one per label, in
label order). lm-eval's sampler is not used: it draws at random and answers with the option text.

An exemplar is the question as the query lays it out, (in hinted prompts) its misleading hint,
then "Assistant:" and the reply its task asks for (``CaliDistTask.exemplar_answer``):

- the verbalized tasks' paper prompt: the explanation, each step ending "Confidence: N%", then
  "Based on the information available in <answer_basis> and the explanation above, the correct
  answer is (x) <option>. Overall Confidence: N%", as Appendix F prints it;
- the other reply forms (``verbalized.REPLY_FORMS``) and the logit tasks: their one-line answer
  ("The answer is (x)" after the logit tasks' answer prefix, which shows no "Assistant:": their
  query ends in that prefix, not in a reply).

The paper assigns its exemplars random confidences; here each step's and the overall N are drawn
from 40-95 by the exemplar's content, the step and the run's seed (``exemplar_confidence``), so
reruns build identical prompts.

- Exemplar documents are never evaluated or calibrated on: the data loader drops a row equal to
  one (``data.documents``), so no prompt shows its own document as an exemplar.
- The original prompt shows the exemplars as they are, so its answer (ŷ, p) is the same as the
  plain ``calidist_<b>`` task's with the same shots. A hinted prompt shows every exemplar with a
  misleading distraction of the same style (paper: "append a misleading hint with each few-shot
  exemplar"; for sample corruption "corrupt each exemplar hypothesis using one of the labels"):
  the hint names a label other than the exemplar's gold label, while its answer stays the gold
  one, so the exemplars show the model a hint being ignored. The misleading label is drawn from
  the exemplar's content and the run's seed (``styles.DistractorStyle.exemplar_plan``).
- With a chat template, the exemplars are user/assistant turns under ``--fewshot_as_multiturn``
  (``with_turns``; lm-eval 0.4.13 turns it on with ``--apply_chat_template``), and text in the
  one user turn with ``--fewshot_as_multiturn false``; the task records which
  (``fewshot_layout`` in its config's metadata).

This module knows no task: the task checks and selects its exemplars here and renders each
(``CaliDistTask.exemplar_turn``); this module lays the rendered ones out.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from typing import Any

from calidist_tasks.prompting.styles import content_key

log = logging.getLogger(__name__)
SEPARATOR = "\n\n"  # between exemplars, and between the last exemplar and the question
ANSWER_PREFIX = "The answer is ("  # an exemplar's answer where the task has no gen_prefix
ASSISTANT = "Assistant:"  # Appendix F: the line between an exemplar's question and its reply
EXPLANATION = "explanation"  # an exemplar document's steps of reasoning
STEPS = range(2, 5)  # how many steps an explanation holds
EXEMPLAR_CONFIDENCES = range(40, 96)  # the confidences (%) an exemplar's reply states

Turn = tuple[str, str]  # an exemplar as shown: (its question, its reply)


def check_exemplars(samples: Any, task: str, fields: Sequence[str], label_field: str,
                    n_labels: int | None, choices_field: str | None = None) -> list[dict[str, Any]]:
    """The YAML's exemplar documents, checked: each has the fields its question shows, a label
    in range (``n_labels``, else its own ``choices_field`` options) and an explanation of 2-4
    steps. Raises ValueError naming the sample and the fix."""
    if not isinstance(samples, list) or not samples:
        raise ValueError(f"{task}: --num_fewshot needs exemplar documents: add fewshot_config: "
                         "samples: to its YAML (docs/adding_a_benchmark.md), or run with "
                         "--num_fewshot 0")
    for i, doc in enumerate(samples):
        where = f"{task}: fewshot_config.samples[{i}]"
        missing = [f for f in (*fields, label_field) if not isinstance(doc, dict) or f not in doc]
        if missing:
            raise ValueError(f"{where} lacks field(s) {missing}; give every exemplar the fields "
                             "its question shows and its label")
        label = doc[label_field]
        options = n_labels if n_labels is not None else len(doc[choices_field] or [])
        if isinstance(label, bool) or not isinstance(label, int) or not 0 <= label < options:
            raise ValueError(f"{where}: {label_field} {label!r} is not an option index "
                             f"0..{options - 1}")
        steps = doc.get(EXPLANATION)
        if not (isinstance(steps, list) and len(steps) in STEPS
                and all(isinstance(s, str) and s.strip() for s in steps)):
            raise ValueError(f"{where}: '{EXPLANATION}' must be a list of {STEPS[0]}-{STEPS[-1]} "
                             f"steps of reasoning about the exemplar, got {steps!r:.80}")
    return samples


def select_exemplars(pool: Sequence[dict[str, Any]], n_labels: int, per_label: int,
                     label_field: str, task: str = "") -> list[dict[str, Any]]:
    """``per_label`` documents of each label 0..n_labels-1, label by label, from ``pool``; a label
    with fewer is shown with what there is, and logged."""
    chosen = []
    for label in range(n_labels):
        found = [d for d in pool if d[label_field] == label]
        if len(found) < per_label:
            _warn_short(task, label, len(found), per_label)
        chosen += found[:per_label]
    return chosen


_WARNED: set[tuple[str, int, int]] = set()


def _warn_short(task: str, label: int, held: int, per_label: int) -> None:
    """Log once per task and label (every prompt asks again) that exemplars are missing."""
    if (task, label, per_label) not in _WARNED:
        _WARNED.add((task, label, per_label))
        log.warning("%s: few-shot: the YAML ships %d exemplar(s) of label %d, %d requested per "
                    "label; prompts show what there is", task, held, label, per_label)


def exemplar_confidence(exemplar: dict[str, Any], seed: int, step: int | None = None) -> int:
    """The confidence (%) an exemplar states for its ``step`` (None: overall), from its content
    and the run's seed."""
    salt = f"{seed}|fewshot-confidence|{'overall' if step is None else step}"
    digest = hashlib.sha256(f"{salt}|{content_key(exemplar)}".encode()).digest()
    return EXEMPLAR_CONFIDENCES[int.from_bytes(digest[:4], "big") % len(EXEMPLAR_CONFIDENCES)]


def exemplar_steps(exemplar: dict[str, Any], seed: int) -> list[tuple[str, int]]:
    """The exemplar's explanation, each step with its drawn confidence."""
    return [(step.strip(), exemplar_confidence(exemplar, seed, i))
            for i, step in enumerate(exemplar.get(EXPLANATION) or [])]


def plain_block(turns: Sequence[Turn]) -> str:
    """The exemplars as one text put in front of the question (ends with the separator)."""
    return "".join(question + reply + SEPARATOR for question, reply in turns)


def with_turns(chat_template: Callable[..., str], turns: Sequence[Turn]) -> Callable[..., str]:
    """``chat_template`` rendering the exemplars as user/assistant turns before the first user
    message (``--fewshot_as_multiturn``): each question a user turn as the query's is, each
    reply an assistant turn."""
    shots = [message for question, reply in turns
             for message in ({"role": "user", "content": question},
                             {"role": "assistant", "content": reply})]

    def render(messages: list[dict[str, Any]], **kwargs: Any) -> str:
        first = next((i for i, m in enumerate(messages) if m["role"] == "user"), len(messages))
        return chat_template(messages[:first] + shots + messages[first:], **kwargs)

    return render
