"""Open-ended answers (GSM8K, paper Appendix K) in two explicit stages; see docs/gsm8k.md.

The harness builds every request before the model answers, and an open answer's distractors
("numbers near the predicted answer") depend on that answer, so one run cannot do both:

1. ``calidist_gsm8k`` (generate_until) asks for a worked answer; the prediction ŷ is the final
   number in it (``parse_number``). Reports accuracy and the share of unreadable answers; run it
   with ``--log_samples``.
2. ``calidist_gsm8k_assertion`` (loglikelihood) reads stage 1's logged samples
   (``--metadata '{"original_samples": PATH}'``, the samples file or the output folder) to know
   each document's ŷ, draws ``HINT_NUMBERS`` numbers near ŷ and builds ``m`` assertion-hinted
   prompts per number ("Hint: {S} {number}." and the paper's note). Every prompt (the original
   and each hinted one) ends with the readout "Answer: The answer is" and is scored over the
   candidate answers [ŷ, h_1, ...] as continuations; the softmax over the candidates' log
   probabilities gives each prompt's prediction (argmax) and confidence. The original prompt's
   confidence is the probability of ŷ itself. Agreement is numeric equality (a hinted prompt
   agrees when its argmax is ŷ). μ, δ, λ and the calibration are then those of SPEC §2.

An answer with no number is counted (``parse_fail_rate``), is wrong, has confidence 0 and is
treated as maximally unreliable (μ = δ = 1, so λ_raw = 0); it gets one placeholder request so
that lm-eval still logs the document.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from copy import deepcopy
from dataclasses import replace
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import numpy as np
from lm_eval.api.instance import Instance
from lm_eval.api.task import ConfigurableTask

from calidist_tasks import distractors
from calidist_tasks.dataset import EVALUATION, Source
from calidist_tasks.joining import Outcome, PromptPlan, join_document
from calidist_tasks.task import HINT, CaliDistTask

HINT_NUMBERS = 4  # distinct numbers near ŷ that hints assert (the "other labels" of SPEC §2)
_NUMBER = r"(?<![\w.])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
NUMBER = re.compile(_NUMBER)
# "The answer is $1,234.", "Answer: 18", "#### 18": the number a stated answer gives.
STATED = re.compile(r"(?:\banswer\s*(?:is|:|=)|####)\s*:?\s*\$?\s*(" + _NUMBER + ")", re.I)
ANSWER_FIELD = "original_answer"  # stage 2: ŷ from stage 1 ("" when it had no number)


def canonical_number(text: str) -> str | None:
    """'1,234.50' -> '1234.5', '18.' -> '18', '-0' -> '0'; None when it is not a number."""
    text = str(text).strip().replace(",", "").rstrip(".")
    try:
        value = Decimal(text)
    except InvalidOperation:
        return None
    if not value.is_finite():
        return None
    if value == value.to_integral_value():
        return str(int(value))
    return format(value.normalize(), "f")


def parse_number(text: str) -> str | None:
    """The final answer of a worked solution: the first stated answer ("The answer is N", as
    the prompt asks; what follows it is the model running on, often repeating itself until the
    token limit cuts a number short), else the last number in the text (lm-eval's gsm8k-cot
    strict and flexible matches, in that order)."""
    text = str(text or "")
    stated = STATED.findall(text)
    if stated:
        return canonical_number(stated[0])
    numbers = NUMBER.findall(text)
    return canonical_number(numbers[-1]) if numbers else None


def same_number(a: str | None, b: str | None) -> bool:
    """Numeric equality of two answers ('18' == '18.0' == '18.00')."""
    if a is None or b is None:
        return False
    return Decimal(a) == Decimal(b)


def near_numbers(answer: str, n: int, key: str, seed: int) -> list[str]:
    """``n`` distinct numbers near ``answer`` (same precision; never negative if it is not),
    chosen from the document's content ``key`` and ``seed`` (deterministic)."""
    value = Decimal(answer)
    exponent = value.as_tuple().exponent
    step = Decimal(1).scaleb(min(int(exponent), 0))
    width = max(n, math.ceil(abs(value) / 4 / step))  # within ±25% (at least ±n steps)
    low = -width if value < 0 else max(-width, -int(value / step))
    digest = hashlib.sha256(f"{seed}|{key}|{answer}".encode()).digest()
    # sampling a range draws indices, so a huge answer does not build a huge list
    offsets = random.Random(int.from_bytes(digest[:8], "big")).sample(range(low, width + 1), n + 1)
    return [canonical_number(str(value + k * step)) for k in offsets if k != 0][:n]


def number_hint(template: int, number: str) -> str:
    """'Hint: {S} {number}.' and the paper's note (assertion style, Appendix E)."""
    return f"Hint: {distractors.ASSERTION_TEMPLATES[template]} {number}.\n{distractors.HINT_NOTE}"


def samples_file(path: str | Path, task: str) -> Path:
    """Stage 1's samples: the file itself, or the newest samples_<task>_<date>.jsonl below a
    folder (lm-eval's --output_path)."""
    path = Path(path)
    if path.is_file():
        return path
    if path.is_dir():
        pattern = re.compile(rf"^samples_{re.escape(task)}_\d{{4}}-.*\.jsonl$")
        found = [p for p in path.rglob("samples_*.jsonl") if pattern.match(p.name)]
        if found:
            return max(found, key=lambda p: p.stat().st_mtime)
        raise FileNotFoundError(
            f"original_samples: no samples_{task}_*.jsonl under {path}; run {task} with "
            "--log_samples and --output_path first"
        )
    raise FileNotFoundError(f"original_samples: {path} does not exist")


def read_original_records(
    path: Path, fields: tuple[str, ...] = ("prediction",), task: str = "calidist_gsm8k"
) -> dict[str, dict[str, Any]]:
    """Question text -> stage 1's record (``fields`` of it) from stage 1's samples file."""
    records: dict[str, dict[str, Any]] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
        if not line.strip():
            continue
        try:
            sample = json.loads(line)
            record, question = sample["acc"], sample["doc"]["question"]
            kept = {field: record[field] for field in fields}
        except (json.JSONDecodeError, KeyError, TypeError) as error:
            raise ValueError(
                f"{path.name}:{number}: not a sample of the first stage ({task} run with "
                f"--log_samples): {type(error).__name__} {error}"
            ) from None
        records.setdefault(question.strip(), kept)
    if not records:
        raise ValueError(f"{path}: no samples")
    return records


def read_original_answers(path: Path) -> dict[str, str]:
    """Question text -> ŷ ("" when the answer had no number) from stage 1's samples file."""
    return {q: r["prediction"] or "" for q, r in read_original_records(path).items()}


def unreadable_record(target: str, where: dict[str, Any]) -> dict[str, Any]:
    """Stage 2's record of a document whose stage-1 answer had no number: wrong, confidence 0,
    maximally unreliable (μ = δ = 1, so λ_raw = 0)."""
    return {"label": target, "prediction": None, "confidence": 0.0, "correct": 0, "parsed": False,
            "hints": [], "mu": 1.0, "delta": 1.0, "lambda_raw": 0.0, "flipped": 0, **where}


def softmax(values: list[float]) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    probs = np.exp(array - array.max())
    return probs / probs.sum()


class OpenEndedTask(CaliDistTask):
    """Stage 1 (``distractor: none``, generate_until) or stage 2 (``assertion``) of GSM8K."""

    ORIGINAL_FIELDS: tuple[str, ...] = ("prediction",)  # what stage 2 reads of stage 1's record

    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        config = dict(config or {})
        self.original_task: str = config.pop("original_task", None) or "calidist_gsm8k"
        self.original_samples = (config.get("metadata") or {}).get("original_samples")
        if config.get("distractor", "none") not in ("none", "assertion"):
            raise ValueError(f"{config.get('task')}: open-ended tasks have the assertion style "
                             f"only, got {config.get('distractor')!r}")
        super().__init__(config=config, **kwargs)

    @property
    def stage2(self) -> bool:
        return self.distractor != "none"

    # ------------------------------------------------------------------ data
    def source(self) -> Source:
        # build_documents checks labels against a label space; an open answer has none, so every
        # document is in the one class 0 and the gold number is in doc_to_target ("target").
        return replace(super().source(), label_field="label", n_labels=1,
                       process_row=lambda row: {**self.adapter.process_row(row), "label": 0})

    def documents(self) -> list[dict[str, Any]]:
        docs = super().documents()
        return self._with_original_answers(docs) if self.stage2 else docs

    def _with_original_answers(self, docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if not self.original_samples:
            raise ValueError(
                f"{self.config.task} is the second stage of {self.original_task}: pass the first "
                f"run's samples with --metadata '{{\"original_samples\": \"PATH\"}}' (its "
                "--output_path folder or samples_*.jsonl file; see docs/gsm8k.md)"
            )
        path = samples_file(self.original_samples, self.original_task)
        answers = read_original_records(path, self.ORIGINAL_FIELDS, self.original_task)
        missing = [d["calidist_source"] for d in docs if d["question"].strip() not in answers]
        if missing:
            raise ValueError(
                f"{self.config.task}: {len(missing)} document(s) have no answer in {path} (first: "
                f"{', '.join(missing[:3])}); run {self.original_task} on the same data, "
                "calib_size, eval_size and split_seed"
            )
        return [{**d, **self.original_fields(answers[d["question"].strip()])} for d in docs]

    def original_fields(self, record: dict[str, Any]) -> dict[str, Any]:
        """The document fields stage 2 adds from stage 1's record."""
        return {ANSWER_FIELD: record["prediction"] or ""}

    # ------------------------------------------------------------------ prompts
    def doc_to_text(self, doc: dict[str, Any], doc_to_text: Any = None) -> str:
        """The question (YAML ``doc_to_text``), then any hint; no options."""
        lines = [ConfigurableTask.doc_to_text(self, doc, doc_to_text)]
        if doc.get(HINT):
            lines.append(doc[HINT])
        return "\n".join(lines) + "\n"

    def fewshot_context(self, doc: dict[str, Any], num_fewshot: int, **kwargs: Any) -> Any:
        if num_fewshot:
            raise ValueError(f"{self.config.task}: few-shot prompts are not implemented for "
                             "open-ended tasks; run with --num_fewshot 0")
        return ConfigurableTask.fewshot_context(self, doc, num_fewshot=0, **kwargs)

    def candidates(self, doc: dict[str, Any]) -> list[str]:
        """[ŷ, then the numbers the hints assert]; empty when stage 1 found no number."""
        answer = doc.get(ANSWER_FIELD)
        if not answer:
            return []
        key = distractors.document_key(doc, ["question"])
        return [answer, *near_numbers(answer, HINT_NUMBERS, key, self.settings.seed)]

    def prompt_plans(self, doc: dict[str, Any]) -> list[PromptPlan]:
        """The original prompt, then ``m`` assertion prompts per hinted number (candidate >= 1)."""
        plans = [PromptPlan()]
        if not self.stage2 or not doc.get(ANSWER_FIELD):
            return plans
        key = distractors.document_key(doc, ["question"])
        for label in range(1, HINT_NUMBERS + 1):
            templates = distractors.choose_templates(key, self.settings.seed, label, self.m)
            plans += [PromptPlan(label, t) for t in templates]
        return plans

    def distracted_doc(self, doc: dict[str, Any], plan: PromptPlan) -> dict[str, Any]:
        return {**doc, HINT: number_hint(plan.template, self.candidates(doc)[plan.hint_label])}

    def construct_requests(self, doc: dict[str, Any], ctx: str, **kwargs: Any) -> list[Instance]:
        kwargs.pop("apply_chat_template", None)
        kwargs.pop("chat_template", None)
        if not self.stage2:
            arguments = (ctx, deepcopy(self.config.generation_kwargs))
            return [Instance(request_type="generate_until", doc=doc, arguments=arguments, idx=0,
                             **kwargs)]
        candidates = self.candidates(doc)
        if not candidates:  # no number to distract from: one placeholder so the doc is logged
            return [Instance(request_type="loglikelihood", doc=doc, arguments=(ctx, " 0"), idx=0,
                             **kwargs)]
        prompts = [ctx] + [self.variant_prompt(self.distracted_doc(doc, plan))
                           for plan in self.prompt_plans(doc)[1:]]
        return [
            Instance(request_type="loglikelihood", doc=doc, arguments=(prompt, f" {candidate}"),
                     idx=i * len(candidates) + j, **kwargs)
            for i, prompt in enumerate(prompts)
            for j, candidate in enumerate(candidates)
        ]

    # ------------------------------------------------------------------ results
    def process_results(self, doc: dict[str, Any], results: list[Any]) -> dict[str, Any]:
        target = doc[self.config.doc_to_target]
        where = {"index": doc["calidist_index"], "split": doc["calidist_split"],
                 "requests": len(results)}
        if not self.stage2:
            answer = parse_number(results[0])
            record = {"label": target, "prediction": answer, "parsed": answer is not None,
                      "correct": int(same_number(answer, target)), **where}
            return dict.fromkeys(self._metric_fn_list, record)
        candidates = self.candidates(doc)
        if not candidates:
            return dict.fromkeys(self._metric_fn_list, unreadable_record(target, where))
        plans, n = self.prompt_plans(doc), len(candidates)
        if len(results) != len(plans) * n:
            raise ValueError(f"{self.config.task} document {doc['calidist_index']}: expected "
                             f"{len(plans) * n} answers, got {len(results)}")
        outcomes = []
        for i in range(len(plans)):
            logprobs = [ll for ll, _ in results[i * n:(i + 1) * n]]
            probs = softmax(logprobs)
            best = 0 if i == 0 else int(np.argmax(probs))  # the original's prediction is ŷ
            outcomes.append(Outcome(best, float(probs[best]), tuple(logprobs)))
        correct = same_number(candidates[0], target)
        record = join_document(plans, outcomes, 0 if correct else -1, self.settings.delta_mode)
        record.update(label=target, prediction=candidates[0], candidates=candidates, **where)
        return dict.fromkeys(self._metric_fn_list, record)

    # ------------------------------------------------------------------ metrics
    def reported_metrics(self) -> list[str]:
        if self.stage2:
            return [*super().reported_metrics(), "parse_fail_rate"]
        return ["acc", "parse_fail_rate", "requests_per_doc", "n_calibration", "n_evaluation"]

    def summarize(self, items: list[dict[str, Any]]) -> dict[str, float]:
        evaluation = [r for r in items if r["split"] == EVALUATION]
        if not evaluation:
            raise ValueError(f"{self.config.task}: no evaluation documents reached the aggregation")
        summary = {
            "parse_fail_rate": float(np.mean([not r["parsed"] for r in evaluation])),
            "acc": float(np.mean([r["correct"] for r in evaluation])),
            "requests_per_doc": float(np.mean([r["requests"] for r in evaluation])),
            "n_calibration": float(len(items) - len(evaluation)),
            "n_evaluation": float(len(evaluation)),
        }
        return {**super().summarize(items), **summary} if self.stage2 else summary

    def calibrator_context(self) -> dict[str, Any]:
        return {**super().calibrator_context(), "labels": "open-ended numbers"}
