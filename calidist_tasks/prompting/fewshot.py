"""Few-shot prompts as in the paper's Appendix F: exemplars for every label, hints inside them.

``--num_fewshot k`` puts ``k`` exemplars per label in front of every prompt (``k = 1`` is the
paper: one exemplar per label, in label order; a benchmark with c labels gets c exemplars).
lm-eval's own sampler is not used: it draws at random and renders the answer as the option
text, while these prompts end in "The answer is (" and the answer is a letter.

An exemplar is answered in the form its prompt asks for: "The answer is (c)" after the logit
tasks' answer prefix; in the generation tasks the reply their format line asks for
(``GenerationTask.exemplar_reply``): for the paper's verbalized prompt "The answer is (c) <option
text>. Overall Confidence: N%", as the paper's example reply ends (the exemplars give no
step-by-step reasoning: the benchmarks have none to show). The paper gives its exemplars random
confidences; here N is drawn from 50-95 by the exemplar's content and the run's seed
(``exemplar_confidence``), so reruns build identical prompts.

- Exemplars come from the calibration documents (never from the evaluation documents): for each
  label, the first ones in document order whose gold label is that label, never the document
  being asked nor a copy of it (same content, ``styles.content_key``; ``dataset`` also drops copies
  when it reads the data). The same exemplars therefore appear in every prompt of a run. A pool
  short of a label is logged once per task and label (``ExemplarPool`` remembers), not once per
  prompt.
- The original prompt shows the exemplars as they are, so its answer (ŷ, p) is the same as the
  plain ``calidist_<b>`` task's with the same shots. A hinted prompt shows every exemplar with a
  misleading distraction of the same style (paper: "append a misleading hint with each few-shot
  exemplar"; for sample corruption "corrupt each exemplar hypothesis using one of the labels"):
  the hint names a label other than the exemplar's gold label, while its answer stays the gold
  one, so the exemplars show the model a hint being ignored.
- The misleading label and assertion template are chosen from the exemplar's content and the
  run's seed, like every other distractor choice (reruns build identical prompts); the task's
  distractor style says how (``styles.DistractorStyle.exemplar_plan``).

This module knows no task: the task passes what a block needs (the exemplar pool, the label field,
the misleading plan of its style, and a function rendering a solved exemplar from the prompt
builder, ``CaliDistTask.solved_exemplar``).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from typing import Any

from calidist_tasks.prompting.styles import content_key
from calidist_tasks.scoring.joining import PromptPlan
from calidist_tasks.scoring.records import CALIBRATION, INDEX_FIELD, SPLIT_FIELD

log = logging.getLogger(__name__)
SEPARATOR = "\n\n"  # between exemplars, and between the last exemplar and the question
ANSWER_PREFIX = "The answer is ("  # an exemplar's answer where the task has no gen_prefix
EXEMPLAR_CONFIDENCES = range(50, 96)  # the stated confidence of a verbalized task's exemplar

Render = Callable[[dict[str, Any], PromptPlan], str]  # (exemplar, plan) -> the solved exemplar


def select_exemplars(
    pool: list[dict[str, Any]], n_labels: int, per_label: int, label_field: str,
    exclude: int | None = None,
) -> list[dict[str, Any]]:
    """``per_label`` documents of each label 0..n_labels-1, label by label, from ``pool``; never
    the document numbered ``exclude`` nor, in a task's pool, one of the same content."""
    keys = getattr(pool, "keys", {})
    same = keys.get(exclude)
    chosen = []
    for label in range(n_labels):
        found = [d for d in pool if d[label_field] == label and d[INDEX_FIELD] != exclude
                 and (same is None or keys.get(d[INDEX_FIELD]) != same)]
        if len(found) < per_label:
            _warn_short(pool, label, per_label, label_field)
        chosen += found[:per_label]
    return chosen


def _warn_short(pool: list[dict[str, Any]], label: int, per_label: int, label_field: str) -> None:
    """Log that ``pool`` is short of exemplars of ``label``: once per label for a task's pool
    (``ExemplarPool``; every prompt asks again), each time for a plain list."""
    warned = getattr(pool, "warned", None)
    if warned is not None:
        if label in warned:
            return
        warned.add(label)
    held = sum(d[label_field] == label for d in pool)
    task = getattr(pool, "task", "")
    log.warning("%sfew-shot: the calibration documents hold %d exemplar(s) of label %d, %d "
                "requested per label; prompts show what there is (a document is never its own "
                "exemplar)", f"{task}: " if task else "", held, label, per_label)


def exemplar_confidence(exemplar: dict[str, Any], seed: int) -> int:
    """The confidence (%) an exemplar's answer states: from its content and the run's seed."""
    digest = hashlib.sha256(f"{seed}|fewshot-confidence|{content_key(exemplar)}".encode()).digest()
    return EXEMPLAR_CONFIDENCES[int.from_bytes(digest[:4], "big") % len(EXEMPLAR_CONFIDENCES)]


def exemplar_block(
    pool: list[dict[str, Any]], n_labels: int, per_label: int, label_field: str, render: Render,
    mislead: Callable[[dict[str, Any]], PromptPlan] | None = None, exclude: int | None = None,
) -> str:
    """The few-shot block put in front of a prompt (ends with the separator): ``per_label``
    exemplars of each of ``n_labels`` labels from ``pool`` (never the document ``exclude``), each
    rendered by ``render`` with its misleading plan (``mislead``; None: shown as they are)."""
    chosen = select_exemplars(pool, n_labels, per_label, label_field, exclude=exclude)
    return "".join(render(e, mislead(e) if mislead else PromptPlan()) + SEPARATOR
                   for e in chosen)


class ExemplarPool(list):
    """A task's exemplar pool (a list of documents) that remembers which labels it was found
    short of, so that the warning is logged once per task and label, not once per prompt, and
    the content key of every document of the task by index (``keys``), so that no prompt shows
    a copy of its own document."""

    def __init__(self, docs: Any = (), task: str = "", keys: dict[int, str] | None = None) -> None:
        super().__init__(docs)
        self.task = task  # named in the warning
        self.warned: set[int] = set()
        self.keys: dict[int, str] = keys or {}


def calibration_pool(docs: Any, task: str = "") -> ExemplarPool:
    """The calibration documents of a task's document list, in order (the exemplar pool)."""
    docs = [dict(d) for d in docs]
    keys = {d[INDEX_FIELD]: content_key(d) for d in docs}
    return ExemplarPool((d for d in docs if d[SPLIT_FIELD] == CALIBRATION), task, keys)


def name_pool(pool: list[dict[str, Any]], task: str) -> None:
    """Name the task a pool's warnings speak for (a pool built without its task's name)."""
    if isinstance(pool, ExemplarPool) and not pool.task:
        pool.task = task
