"""Plain lm-eval multiple-choice runs in ``calidist report`` (docs/wrap.md, "Calibration of a run
already made").

A ``--log_samples`` line of an lm-eval ``multiple_choice`` task holds every choice's
log-likelihood (``filtered_resps``) and the target: enough for the record a calidist task logs
for its original prompt (``records.answer_record``, p = softmax over the choices'
log-likelihoods, as lm-eval's ``acc``). The documents are split as a wrapped task splits them:
the first ``calib_size`` of the documents shuffled with ``split_seed`` calibrate
(``documents.split_documents``), so a plain run and the wrapped task's vanilla run of the same
documents give the same records. The run is then reported as a calidist task with no hints:
vanilla confidence and the post-hoc calibrators fitted on the calibration slice.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from calidist_tasks.data.documents import split_documents
from calidist_tasks.registry import LOGIT
from calidist_tasks.scoring.joining import outcome_from_loglikelihoods
from calidist_tasks.scoring.records import (
    INDEX_FIELD,
    SPLIT_FIELD,
    Record,
    answer_record,
)
from calidist_tasks.settings import RunSettings

MULTIPLE_CHOICE = "multiple_choice"
DOC_ID = "calidist_doc_id"  # a record's lm-eval doc_id until the split renumbers it


def settings_for(n_docs: int) -> RunSettings:
    """The split of a plain run of ``n_docs`` documents: our default ``calib_size`` and
    ``split_seed``, at most half the documents calibrating, every other one evaluated."""
    default = RunSettings()
    return RunSettings(calib_size=max(1, min(default.calib_size, n_docs // 2)), eval_size=None,
                       split_seed=default.split_seed)


def plain_config(task: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """The task's config as the report reads a calidist task's: a task without hints, its
    confidence the choices' softmax (``registry.task_variant``)."""
    metadata = {**(config.get("metadata") or {}), "benchmark": task, "distractor": "none",
                "confidence": LOGIT}
    return {**config, "metadata": metadata}


def calibration_text(settings: RunSettings) -> str:
    """How a plain run's calibration documents were chosen, as the report states it."""
    return (f"seeded held-out slice: {settings.calib_size} documents (split_seed "
            f"{settings.split_seed})")


def plain_record(line: Mapping[str, Any]) -> Record:
    """The record of one samples line of a multiple-choice task (ValueError when its
    log-likelihoods or target cannot be read)."""
    doc_id = line.get("doc_id")
    where = f"doc_id {doc_id}"
    resps = line.get("filtered_resps") or []
    try:
        values = [float(r[0] if isinstance(r, (list, tuple)) else r) for r in resps]
    except (TypeError, ValueError, IndexError):
        raise ValueError(f"{where}: filtered_resps {resps!r:.80} are not log-likelihoods "
                         "(not a multiple-choice task?)") from None
    outcome = outcome_from_loglikelihoods(values, where)
    label = _label(line, len(values), where)
    record = answer_record(label, outcome.prediction, outcome.confidence,
                           outcome.prediction == label, True, outcome.letter_logprobs)
    record.update({DOC_ID: doc_id, "requests": len(values)})
    return record


def _label(line: Mapping[str, Any], n_choices: int, where: str) -> int:
    """The target as a choice index: lm-eval logs the index, or the choice's text."""
    target = line.get("target")
    if isinstance(target, str) and target.strip().lstrip("-").isdigit():
        target = int(target)
    if isinstance(target, str):
        arguments = line.get("arguments") or {}
        values = list(arguments.values()) if isinstance(arguments, dict) else list(arguments)
        choices = [str(a.get("arg_1") if isinstance(a, dict) else a[1]).strip() for a in values]
        if target.strip() in choices:
            target = choices.index(target.strip())
    if isinstance(target, bool) or not isinstance(target, int) or not 0 <= target < n_choices:
        raise ValueError(f"{where}: target {target!r} is not one of its {n_choices} choices")
    return target


def split_plain(records: list[Record], settings: RunSettings) -> None:
    """Mark each record calibration or evaluation and number it, calibration first, as a wrapped
    task orders its documents (in place)."""
    rows = [(str(r[DOC_ID]), {"doc_id": r[DOC_ID]})
            for r in sorted(records, key=lambda r: r[DOC_ID])]
    marked = {doc["doc_id"]: doc for doc in split_documents("plain run", rows, [], settings)}
    for record in records:
        doc = marked[record[DOC_ID]]
        record["split"], record["index"] = doc[SPLIT_FIELD], doc[INDEX_FIELD]
