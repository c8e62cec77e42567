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
  being asked. The same exemplars therefore appear in every prompt of a run.
- The original prompt shows the exemplars as they are, so its answer (ŷ, p) is the same as the
  plain ``calidist_<b>`` task's with the same shots. A hinted prompt shows every exemplar with a
  misleading distraction of the same style (paper: "append a misleading hint with each few-shot
  exemplar"; for sample corruption "corrupt each exemplar hypothesis using one of the labels"):
  the hint names a label other than the exemplar's gold label, while its answer stays the gold
  one, so the exemplars show the model a hint being ignored.
- The misleading label and assertion template are chosen from the exemplar's content and the
  run's seed, like every other distractor choice (reruns build identical prompts).
"""

from __future__ import annotations

import hashlib
import logging
from typing import TYPE_CHECKING, Any

from calidist_tasks import distractors
from calidist_tasks.dataset import CALIBRATION
from calidist_tasks.joining import PromptPlan

if TYPE_CHECKING:
    from calidist_tasks.task import CaliDistTask

log = logging.getLogger(__name__)
SEPARATOR = "\n\n"  # between exemplars, and between the last exemplar and the question
ANSWER_PREFIX = "The answer is ("  # an exemplar's answer where the task has no gen_prefix
EXEMPLAR_CONFIDENCES = range(50, 96)  # the stated confidence of a verbalized task's exemplar


def _content_key(doc: dict[str, Any]) -> str:
    return distractors.document_key(doc, [f for f in doc if "calidist_" not in f])


def select_exemplars(
    pool: list[dict[str, Any]], n_labels: int, per_label: int, label_field: str,
    exclude: int | None = None,
) -> list[dict[str, Any]]:
    """``per_label`` documents of each label 0..n_labels-1, label by label, from ``pool``."""
    chosen = []
    for label in range(n_labels):
        found = [d for d in pool if d[label_field] == label and d["calidist_index"] != exclude]
        if len(found) < per_label:
            log.warning("few-shot: the calibration documents hold %d exemplar(s) of label %d, "
                        "%d requested; using what there is", len(found), label, per_label)
        chosen += found[:per_label]
    return chosen


def misleading_plan(exemplar: dict[str, Any], label: int, n_labels: int, style: str,
                    seed: int) -> PromptPlan:
    """A distraction towards a label other than ``label`` (the exemplar's gold label)."""
    key = _content_key(exemplar)
    digest = hashlib.sha256(f"{seed}|fewshot|{key}".encode()).digest()
    hint_label = (label + 1 + digest[0] % (n_labels - 1)) % n_labels
    if style == "assertion":
        return PromptPlan(hint_label, distractors.choose_templates(key, seed, hint_label, 1)[0])
    return PromptPlan(hint_label)


def exemplar_confidence(exemplar: dict[str, Any], seed: int) -> int:
    """The confidence (%) an exemplar's answer states: from its content and the run's seed."""
    digest = hashlib.sha256(f"{seed}|fewshot-confidence|{_content_key(exemplar)}".encode()).digest()
    return EXEMPLAR_CONFIDENCES[int.from_bytes(digest[:4], "big") % len(EXEMPLAR_CONFIDENCES)]


def render_exemplar(task: CaliDistTask, exemplar: dict[str, Any], plan: PromptPlan) -> str:
    """One solved exemplar: its prompt as ``plan`` shows it (PromptPlan() = no hint), then its
    gold answer in the form the prompt asks for: after the task's answer prefix ("The answer is
    (c)"), or a generation task's ``exemplar_reply``."""
    shown = exemplar if plan.hint_label is None else task.distracted_doc(exemplar, plan)
    reply = getattr(task, "exemplar_reply", None)  # generation tasks: their reply format
    if reply is not None:
        return f"{task.doc_to_text(shown)}{reply(exemplar)}"
    prefix = task.doc_to_prefix(shown) or ANSWER_PREFIX
    label = exemplar[task.config.doc_to_target]
    return f"{task.doc_to_text(shown)}{prefix}{distractors.LETTERS[label]})"


def exemplar_block(task: CaliDistTask, doc: dict[str, Any], per_label: int, hinted: bool) -> str:
    """The few-shot block put in front of ``doc``'s prompt (ends with the separator)."""
    if per_label < 0:
        raise ValueError(f"{task.config.task}: --num_fewshot must be >= 0, got {per_label}")
    n_labels = len(task.doc_to_choice(doc))
    chosen = select_exemplars(task.fewshot_pool(), n_labels, per_label,
                              task.config.doc_to_target, exclude=doc.get("calidist_index"))
    blocks = []
    for exemplar in chosen:
        plan = PromptPlan()
        if hinted and task.distractor != "none":
            label = exemplar[task.config.doc_to_target]
            n = len(task.doc_to_choice(exemplar))
            plan = misleading_plan(exemplar, label, n, task.distractor, task.settings.seed)
        blocks.append(render_exemplar(task, exemplar, plan) + SEPARATOR)
    return "".join(blocks)


def calibration_pool(docs: Any) -> list[dict[str, Any]]:
    """The calibration documents of a task's document list, in order (the exemplar pool)."""
    return [dict(d) for d in docs if d["calidist_split"] == CALIBRATION]
