"""The per-document record, and the names around it: one schema, defined here only.

A record is what a task's ``process_results`` returns for one document (the same object under
every metric name) and what lm-eval logs in its samples file; the aggregation, ``calidist report``
and the benchmarks read it back. At runtime it is a plain dict (``Record`` names its keys for type
checkers) and its JSON is the samples file's. Its hints and letter log-likelihoods are plain
tuples (a hint: ``Hint``'s fields), written as JSON lists (``[label, template, prediction,
confidence]``): a run holds every record until the aggregation, and the garbage collector stops
scanning a tuple of numbers (not a list, nor a NamedTuple), and a dict that holds only those.
``hints_of`` gives ``Hint``s.

Also here: the fields this package adds to every document (``SPLIT_FIELD``, ``INDEX_FIELD``,
``SOURCE_FIELD``) and the one rule for which document fields are ours (``is_own_field``); the
metric names (``metric_name``: a score under a confidence's suffix) and the confidences that
name them (the baselines, the sampling baselines' kinds).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NamedTuple, TypedDict

from calidist_metrics import STABILITY_EPSILON

# ------------------------------------------------------------------ document fields
# Every document carries these (``documents.build_documents``); a benchmark's rows may not.
SPLIT_FIELD = "calidist_split"  # CALIBRATION or EVALUATION
MODEL_KEY = "model"  # a record's model (``Record.model``)
INDEX_FIELD = "calidist_index"  # position in the task's document list (calibration first)
SOURCE_FIELD = "calidist_source"  # where the row came from: "dev.jsonl:12", "path/split[3]"
CALIBRATION, EVALUATION = "calibration", "evaluation"  # the split values
# Our fields start with one of these: the ones above, and the prompt fields a document copy
# carries ("_calidist_hint", ..., ``prompts``). A benchmark row may hold none of them.
OWN_PREFIXES = ("calidist_", "_calidist_")
# calidist eval --two-stage keeps stage 1's output here, inside --output_path (its records lack
# the hints; stage 2's records are whole, so reports read stage 2's only).
STAGE1_FOLDER = "stage1"


def is_own_field(name: Any) -> bool:
    """Whether a document field is one this package adds (left out of a document's content
    key, refused in a benchmark's rows)."""
    return str(name).startswith(OWN_PREFIXES)


# ------------------------------------------------------------------ the record
class Hint(NamedTuple):
    """One hinted prompt of a document, as its record logs it (a JSON list)."""

    label: int  # the label the hint names (an option index; GSM8K: a candidate's index)
    template: int | None  # assertion template index (None for fixed templates)
    prediction: Any  # the model's answer under the hint (-1: none)
    confidence: float | None  # its confidence in that answer; None: the reply was unreadable


class Record(TypedDict, total=False):
    """Every key a record may hold; which ones depends on the task (see each key)."""

    # the original prompt (every task)
    label: Any  # the gold label (an option index; GSM8K: the gold number, text)
    prediction: Any  # the predicted label (GSM8K: ŷ, text; None: no number)
    confidence: float  # the model's confidence in it (p)
    correct: int  # 1 when the prediction is the gold label, else 0
    parsed: bool  # False when an answer or confidence of the document could not be read
    unreadable_original: int  # 1: the original reply was unreadable (scored at 1/c, no fit)
    letter_logprobs: tuple[float, ...]  # logit path: the option letters' log-likelihoods
    # the hinted prompts (distractor tasks): ``joining.join_document``
    # in the order sent, each a plain tuple of Hint's fields; JSON lists read back: ``hints_of``
    hints: tuple[tuple[Any, ...], ...]
    mu: float  # prediction instability
    delta: float  # confidence instability
    lambda_raw: float  # (1 - mu) / (delta + epsilon); STABLE_LAMBDA_RAW at most
    flipped: int  # 1 when a hint naming another label changed the answer
    unreadable_hinted: int  # hinted replies that were unreadable (logged confidence None)
    # where the document stands (``bookkeeping``)
    index: int  # the document's INDEX_FIELD
    split: str  # the document's SPLIT_FIELD: CALIBRATION or EVALUATION
    requests: int  # requests sent for the document
    # generation tasks
    generations: int  # replies read for the record
    parse_failures: int  # of them, the unreadable ones
    reply_shape: dict[str, float]  # verbalized replies: steps, cuts, tokens (reply_shapes)
    confidences: dict[str, float]  # sampling baselines: kind -> confidence (SAMPLING_KINDS)
    answers: list[Any]  # sampled answers (consistency, SPUQ); GSM8K: the hinted chains' numbers
    agreement: list[int]  # SPUQ: per perturbed answer, 1 when it equals the original one
    # every confidence the task reports of this answer, {key: value}, and whether the answer
    # behind it is correct, {key: 0/1} (CALIBRATED below); None on a calibration document
    calibrated: dict[str, float] | None
    calibrated_correct: dict[str, int] | None
    # GSM8K (``open_ended``): what a later stage reads of an earlier stage's record
    chain: str  # stage 1's worked answer C0
    chains: list[str]  # stage 2's regenerated chains, one per hinted prompt
    candidates: list[str]  # [ŷ, h_1, ...]: the predicted number and the hinted numbers
    # a document whose answers cannot be used (``failed_record``): bookkeeping and this only
    error: str  # why, naming the task, the document, its source and the prompt
    # every task: the model that answered (--model_args pretrained= / model=), so that a later
    # stage reads it from the samples themselves (``earlier_runs.check_model``)
    model: str


def hints_of(record: Mapping[str, Any]) -> list[Hint]:
    """The record's hinted prompts in the order they were sent (prompt 1, 2, ... after the
    original), as logged or as read back from JSON; [] for a record without hints."""
    return [Hint(*hint) for hint in record.get("hints") or []]


def is_record(value: Any) -> bool:
    """Whether a value of a samples-file line is a record (lm-eval logs what
    ``process_results`` returned under each metric name, beside the document, the arguments
    and the responses: the record under ``RECORD_KEY``, the document's accuracy under ``acc``,
    ``record_marker`` under the others; files written before held the record under ``acc``, and
    before the marker under every metric)."""
    return isinstance(value, dict) and "split" in value and "index" in value


# The metric whose per-document value is the record: its own key, so that every metric lm-eval's
# loggers read per sample (the task config's ``metric_list``: ``acc``) holds a number. Its
# aggregated value (lm-eval's table) is the number of records.
RECORD_KEY = "calidist_record"
# where runs logged before RECORD_KEY hold the record (every task reports acc)
OLD_RECORD_KEY = "acc"
RECORD_IN = "calidist_record_in"  # a marker's key: the metric whose value is the record
# what lm-eval's W&B and Zeno loggers read per sample (``config["metric_list"]``): the metrics
# whose per-document value is a number, each with lm-eval's aggregation of those numbers
PER_DOCUMENT_METRICS = ({"metric": "acc", "aggregation": "mean", "higher_is_better": True},)


def record_marker(carrier: str) -> dict[str, str]:
    """What ``process_results`` returns under every metric but ``carrier`` and ``acc``: the
    record is stored once per samples line, not once per metric (one copy per metric name)."""
    return {RECORD_IN: carrier}


def is_marker(value: Any) -> bool:
    return isinstance(value, dict) and RECORD_IN in value


def document_accuracy(record: Mapping[str, Any]) -> int | None:
    """A record's value under ``acc`` in the samples: 1 / 0 for an evaluation document's answer
    (right / wrong), None for a calibration document (the fits are made on it; the task's acc
    is over the evaluation documents) and for a ``failed_record``. Their mean is the task's
    acc, as lm-eval's ``mean`` aggregation of ``PER_DOCUMENT_METRICS`` says."""
    if record.get("split") != EVALUATION or "correct" not in record:
        return None
    return int(record["correct"])


def line_record(line: Mapping[str, Any]) -> dict[str, Any] | None:
    """The record of a samples-file line, None when it holds none: the value of the first
    metric the line lists (``metrics``) that is a record or a marker pointing at one, else of
    any other key but the document (lines written without ``metrics``), else the dict under
    ``RECORD_KEY`` or, in runs logged before it, ``acc`` (``OLD_RECORD_KEY``)."""
    names = [*(line.get("metrics") or ()), *(key for key in line if key != "doc")]
    for name in names:
        value = line.get(name) if isinstance(name, str) else None
        if is_marker(value):
            value = line.get(value[RECORD_IN])
        if is_record(value):
            return value
    for key in (RECORD_KEY, OLD_RECORD_KEY):
        found = line.get(key)
        if isinstance(found, dict):
            return found
    return None


# the lambda_raw of a fully stable document (mu = delta = 0), also logged in place of a
# non-finite one (JSON holds no infinity)
STABLE_LAMBDA_RAW = 1.0 / STABILITY_EPSILON


def logged_lambda_raw(value: float) -> float:
    """lambda_raw as a record holds it: a float, STABLE_LAMBDA_RAW when not finite."""
    return float(value) if math.isfinite(value) else STABLE_LAMBDA_RAW


def answer_record(label: Any, prediction: Any, confidence: float, correct: bool | int,
                  parsed: bool, letter_logprobs: Any = None) -> Record:
    """A record of the original prompt's answer (a task without hints stops here)."""
    record: Record = {"label": label, "prediction": prediction, "confidence": confidence,
                      "correct": int(correct), "parsed": parsed}
    if letter_logprobs is not None:
        record["letter_logprobs"] = tuple(letter_logprobs)  # a tuple: see the module's doc
    return record


def with_hints(record: Record, hints: tuple[tuple[Any, ...], ...], mu: float, delta: float,
               lambda_raw: float, flipped: bool, parsed: bool) -> Record:
    """``record`` (an ``answer_record``) with its hinted prompts and their instability."""
    record.update(hints=hints, mu=float(mu), delta=float(delta),
                  lambda_raw=logged_lambda_raw(lambda_raw), flipped=int(flipped), parsed=parsed)
    return record


def unreadable_record(label: Any, place: Record) -> Record:
    """The record of a document whose answer has no number (GSM8K): wrong, confidence 0,
    maximally unreliable (mu = delta = 1, so lambda_raw = 0); its one reply was unreadable.
    ``place``: the document's ``bookkeeping``."""
    record = with_hints(answer_record(label, None, 0.0, 0, False), (), 1.0, 1.0, 0.0, False,
                        False)
    record.update(generations=1, parse_failures=1, **place)
    return record


def bookkeeping(doc: Mapping[str, Any], requests: int) -> Record:
    """Where a document's record stands: its index and split, and the requests it took."""
    return Record(index=doc[INDEX_FIELD], split=doc[SPLIT_FIELD], requests=requests)


def failed_record(doc: Mapping[str, Any], requests: int, error: str) -> Record:
    """The record of a document whose answers cannot be used (a non-finite log-probability, a
    missing answer): where it stands and why. ``process_results`` returns it instead of raising,
    so that the other documents' answers reach the aggregation, which refuses the run only after
    saving every record (``recovery``); ``calidist report`` leaves these documents out."""
    record = bookkeeping(doc, requests)
    record["error"] = error
    return record


def is_failed(record: Mapping[str, Any]) -> bool:
    """Whether ``record`` is a ``failed_record``."""
    return "error" in record


def failed_documents(records: list[Record]) -> list[Record]:
    """The ``failed_record``s among ``records``."""
    return [record for record in records if is_failed(record)]


# ------------------------------------------------------------------ metric names
# A metric is a score (``registry.SCORES``: ece, brier, auroc, ...) of one confidence:
# ``metric_name("ece", VANILLA)`` = "ece_vanilla"; CaliDist's calibrated confidence (CALIDIST) is
# the bare score ("ece"). The confidence names below are also the keys of the per-document
# confidences the aggregation and the report rebuild.
CALIDIST = ""  # CaliDist's calibrated confidence: the task's own metrics
VANILLA = "vanilla"  # the model's own confidence on the original prompt
TEMPERATURE_SCALING, PLATT, ISOTONIC, VECTOR_SCALING = "ts", "platt", "isotonic", "vector"
LOGIT_BASELINES = (TEMPERATURE_SCALING, PLATT, ISOTONIC, VECTOR_SCALING)  # fitted on logits
VERBALIZED_BASELINES = (PLATT, ISOTONIC)  # the logit baselines that need no logits
# The generation tasks' confidence sources (YAML ``confidence:``), and the confidences a
# sampling baseline reports (a record's ``confidences``), each a metric suffix of its own.
VERBALIZED, CONSISTENCY, SPUQ = "verbalized", "consistency", "spuq"
ENTROPY, FSD = "entropy", "fsd"
CONSISTENCY_KINDS = (CONSISTENCY, ENTROPY, FSD)  # ``consistency.vote``'s three confidences
# A verbalized task's CaliDist (log-prob) reading of the same replies on a chat API
# (``answer_logprobs``): the record's sub-record and the suffix of its metrics ("ece_logprob").
LOGPROB = "logprob"
SAMPLING_KINDS = {CONSISTENCY: CONSISTENCY_KINDS, SPUQ: (SPUQ,)}


def metric_name(score: str, suffix: str = CALIDIST) -> str:
    """The results-file name of ``score`` of the confidence named ``suffix``: "ece_vanilla",
    "ece" (CaliDist's, suffix "")."""
    return f"{score}_{suffix}" if suffix else score


# ------------------------------------------------------------------ per-document confidences
# The aggregation logs in each evaluation record every confidence the task reports of its answer
# (CALIBRATED) and whether the answer behind it is correct (CALIBRATED_CORRECT: vector scaling
# may change the answer), keyed by the confidence's metric suffix ("vanilla", "ts",
# "platt_logprob": ``confidence_key``), so that record["calibrated"]["ts"] is the document's
# confidence behind "ece_ts". A calibration record holds None in both: the fits were made on it.
CALIBRATED, CALIBRATED_CORRECT = "calibrated", "calibrated_correct"
CALIDIST_KEY = "calidist"  # CaliDist's own confidence, whose metrics have no suffix


def confidence_key(suffix: str) -> str:
    """The CALIBRATED key of a confidence named by its metric suffix: the suffix, CaliDist's
    "calidist"."""
    return suffix or CALIDIST_KEY
