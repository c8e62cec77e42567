"""The lm-eval task class behind every calidist task.

Every YAML names it with ``class: !function calidist_tasks.task.CaliDistTask``.

Per document it sends the original prompt and, for distractor variants, ``m`` hinted prompts per
label, each scored over the option letters; ``process_results`` joins them (``joining``) and the
aggregation fits on the calibration documents and scores the evaluation documents
(``aggregation``). Benchmark specifics live in YAML and in an optional adapter module.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
from functools import partial
from typing import Any

import datasets
import jinja2
import jinja2.meta
import pyarrow
from lm_eval.api.instance import Instance
from lm_eval.api.task import ConfigurableTask

from calidist_tasks import context_length, distractors, fewshot
from calidist_tasks.aggregation import (
    applied_calibrator,
    higher_is_better,
    metric_names,
    summarize_baselines,
    summarize_calidist,
    warnings_named,
)
from calidist_tasks.dataset import EVALUATION, Source, build_documents
from calidist_tasks.joining import PromptPlan, join_document, outcomes_from_loglikelihoods
from calidist_tasks.settings import RunSettings

log = logging.getLogger(__name__)

# Keys of our YAML that lm-eval's TaskConfig does not know; the task class takes them out.
OWN_KEYS = (
    "class", "benchmark", "adapter", "calibration_split", "data_dirs", "corruption", "distractor",
)
HINT = "_calidist_hint"
CHOICES = "_calidist_choices"
FEWSHOT = "_calidist_fewshot"  # the solved exemplars put in front (calidist_tasks.fewshot)
CONTEXT_KWARGS = ("system_instruction", "apply_chat_template", "fewshot_as_multiturn",
                  "chat_template")


class CaliDistTask(ConfigurableTask):
    """An lm-eval ConfigurableTask that asks each question again under misleading hints."""

    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        config = dict(config or {})
        own = {key: config.pop(key, None) for key in OWN_KEYS}
        name = config.get("task")
        self.benchmark: str = own["benchmark"] or name
        self.distractor: str = own["distractor"] or "none"
        self.corruption = own["corruption"]
        self.calibration_split = own["calibration_split"]
        self.data_dirs = list(own["data_dirs"] or [])
        self.adapter = importlib.import_module(own["adapter"]) if own["adapter"] else None
        self.settings = RunSettings.from_metadata(config.get("metadata"))
        if self.distractor not in distractors.STYLES:
            raise ValueError(f"{name}: unknown distractor style {self.distractor!r}; "
                             f"use one of {distractors.STYLES}")
        if self.distractor == "corruption" and not self.corruption:
            raise ValueError(f"{name}: the corruption style needs a 'corruption' block in its YAML")
        self.m = self.settings.m or distractors.DEFAULT_M[self.distractor]
        if self.distractor in ("probe", "corruption") and self.m != 1:
            raise ValueError(f"{name}: the {self.distractor} style has one fixed template, so m "
                             f"must be 1 (got m={self.m}); m > 1 is for assertion")
        n_templates = len(distractors.ASSERTION_TEMPLATES)
        if self.distractor == "assertion" and self.m > n_templates:
            raise ValueError(f"{name}: m must be between 1 and {n_templates} (distinct assertion "
                             f"templates per label), got m={self.m}")
        self._context_kwargs: dict[str, Any] = {}
        self._fewshot_pool: list[dict[str, Any]] | None = None
        self._plans: dict[int, list[PromptPlan]] = {}
        self._summary: tuple[list, dict[str, float]] | None = None  # records, metrics
        super().__init__(config=config, **kwargs)
        names = self.reported_metrics()
        self._metric_fn_list = dict.fromkeys(names)
        self._metric_fn_kwargs = {n: {} for n in names}
        self._aggregation_list = {n: partial(self._aggregate, n) for n in names}
        self._higher_is_better = {n: higher_is_better(n) for n in names}
        if self.distractor != "none":  # a saved fit that does not fit fails now, not after the run
            applied_calibrator(self.settings, self.calibrator_context())

    # ------------------------------------------------------------------ data
    def download(self, dataset_kwargs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        docs = self.documents()
        try:
            table = datasets.Dataset.from_list(docs)
        except pyarrow.ArrowException as error:  # e.g. a list field mixing numbers and text
            raise ValueError(f"{self.config.task}: the documents cannot be stored as a table "
                             f"({error}); give each field one type in every row") from None
        self.dataset = datasets.DatasetDict({self.config.test_split: table})

    def documents(self) -> list[dict[str, Any]]:
        """Calibration documents first, then evaluation documents (``dataset.build_documents``)."""
        return build_documents(self.source(), self.settings)

    def source(self) -> Source:
        """Where the benchmark's rows come from and how they become documents (from the YAML)."""
        fixed_choices = self.config.doc_to_choice
        template = self.config.doc_to_text
        fields = sorted(jinja2.meta.find_undeclared_variables(jinja2.Environment().parse(template)))
        choices_field = fixed_choices if isinstance(fixed_choices, str) else None
        return Source(
            benchmark=self.benchmark,
            hub_path=self.config.dataset_path,
            hub_name=self.config.dataset_name,
            evaluation_split=self.config.test_split,
            calibration_split=self.calibration_split,
            data_dirs=self.data_dirs,
            required_fields=fields + ([choices_field] if choices_field else []),
            label_field=self.config.doc_to_target,
            n_labels=len(fixed_choices) if isinstance(fixed_choices, list) else None,
            choices_field=choices_field,
            read_file=getattr(self.adapter, "read_file", None),
            process_row=getattr(self.adapter, "process_row", None),
        )

    # ------------------------------------------------------------------ prompts
    def doc_to_text(self, doc: dict[str, Any], doc_to_text: Any = None) -> str:
        """The benchmark's question (YAML ``doc_to_text``), lettered options, then any hint."""
        stem = super().doc_to_text(doc, doc_to_text)
        choices = doc.get(CHOICES) or self.doc_to_choice(doc)
        lines = [stem, *(f"{distractors.LETTERS[i]}. {c}" for i, c in enumerate(choices))]
        if doc.get(HINT):
            lines.append(doc[HINT])
        return doc.get(FEWSHOT, "") + "\n".join(lines) + "\n"

    def fewshot_context(self, doc: dict[str, Any], num_fewshot: int, **kwargs: Any) -> Any:
        """lm-eval's prompt (chat template, system prompt, gen_prefix) with the paper's exemplars:
        ``num_fewshot`` per label, hinted in hinted prompts (``calidist_tasks.fewshot``)."""
        if num_fewshot:
            hinted = HINT in doc or CHOICES in doc  # what distracted_doc adds
            doc = {**doc, FEWSHOT: fewshot.exemplar_block(self, doc, num_fewshot, hinted)}
        return super().fewshot_context(doc, num_fewshot=0, **kwargs)

    def fewshot_pool(self) -> list[dict[str, Any]]:
        """The documents exemplars are drawn from: the calibration documents, in order."""
        if self._fewshot_pool is None:
            self._fewshot_pool = fewshot.calibration_pool(self.eval_docs)
        return self._fewshot_pool

    def prompt_plans(self, doc: dict[str, Any]) -> list[PromptPlan]:
        """The original prompt, then ``m`` hinted prompts per label (deterministic per document)."""
        index = doc.get("calidist_index")
        if index is not None and index in self._plans:  # built once in construct_requests
            return self._plans[index]
        plans = self._build_prompt_plans(doc)
        if index is not None:
            self._plans[index] = plans
        return plans

    def _build_prompt_plans(self, doc: dict[str, Any]) -> list[PromptPlan]:
        plans = [PromptPlan()]
        if self.distractor == "none":
            return plans
        key = distractors.document_key(doc, [f for f in doc if not f.startswith("calidist_")])
        for label in range(len(self.doc_to_choice(doc))):
            if self.distractor == "assertion":
                templates = distractors.choose_templates(key, self.settings.seed, label, self.m)
                plans += [PromptPlan(label, t) for t in templates]
            else:
                plans.append(PromptPlan(label))
        return plans

    def distracted_doc(self, doc: dict[str, Any], plan: PromptPlan) -> dict[str, Any]:
        """The document as the hinted prompt ``plan`` shows it."""
        choices = list(self.doc_to_choice(doc))
        letter = distractors.LETTERS[plan.hint_label]
        option = choices[plan.hint_label]
        if self.distractor == "assertion":
            return {**doc, HINT: distractors.assertion_hint(plan.template, letter, option)}
        if self.distractor == "probe":
            return {**doc, HINT: distractors.probe_hint(letter, option)}
        corrupted, choices = distractors.corrupt(doc, plan.hint_label, choices, self.corruption)
        return {**corrupted, CHOICES: choices}

    def build_all_requests(self, *, limit: int | None = None, **kwargs: Any) -> None:
        # Kept so that hinted prompts get the same chat template / system prompt as the original.
        self._context_kwargs = {k: kwargs.get(k) for k in CONTEXT_KWARGS}
        selected = kwargs.get("samples") or range(len(self.eval_docs) if limit is None
                                                   else min(int(limit), len(self.eval_docs)))
        splits = self.eval_docs.select(list(selected))["calidist_split"]
        if EVALUATION not in splits:
            raise ValueError(
                f"{self.config.task}: --limit {limit} selects only calibration documents (the "
                f"first {sum(s != EVALUATION for s in self.eval_docs['calidist_split'])} documents "
                "calibrate); raise --limit or lower --metadata calib_size"
            )
        super().build_all_requests(limit=limit, **kwargs)
        context_length.warn_long_prompts(self.config.task, self.instances,
                                         self.config.metadata or {})

    def construct_requests(self, doc: dict[str, Any], ctx: str, **kwargs: Any) -> list[Instance]:
        kwargs.pop("apply_chat_template", None)
        kwargs.pop("chat_template", None)
        n_choices = len(self.doc_to_choice(doc))
        prompts = [ctx] + [self.variant_prompt(self.distracted_doc(doc, plan))
                           for plan in self.prompt_plans(doc)[1:]]
        return [
            Instance(
                request_type="loglikelihood",
                doc=doc,
                arguments=(prompt, distractors.LETTERS[j]),
                idx=i * n_choices + j,
                **kwargs,
            )
            for i, prompt in enumerate(prompts)
            for j in range(n_choices)
        ]

    def variant_prompt(self, variant: dict[str, Any], **context: Any) -> Any:
        """The prompt of a variant of a document (a hinted copy), built as lm-eval built the
        original's: same few-shot, chat template and system prompt unless ``context`` says."""
        return self.fewshot_context(
            variant,
            num_fewshot=self.config.num_fewshot or 0,
            gen_prefix=self.doc_to_prefix(variant),
            **{**self._context_kwargs, **context},
        )

    # ------------------------------------------------------------------ results
    def process_results(self, doc: dict[str, Any], results: list[Any]) -> dict[str, Any]:
        plans = self.prompt_plans(doc)
        n_choices = len(self.doc_to_choice(doc))
        if len(results) != len(plans) * n_choices:
            raise ValueError(f"{self.config.task} document {doc['calidist_index']}: expected "
                             f"{len(plans) * n_choices} answers, got {len(results)}")
        where = f"{self.config.task} document {doc['calidist_index']} ({doc['calidist_source']})"
        outcomes = outcomes_from_loglikelihoods([ll for ll, _ in results], n_choices, where)
        record = join_document(plans, outcomes, doc[self.config.doc_to_target],
                               self.settings.delta_mode)
        record.update(index=doc["calidist_index"], split=doc["calidist_split"],
                      requests=len(results))
        return dict.fromkeys(self._metric_fn_list, record)

    def calibrator_context(self) -> dict[str, Any]:
        """What a saved fit records, so that it is refused by a task it does not fit."""
        choices = self.config.doc_to_choice
        return {
            "task": self.config.task,
            "benchmark": self.benchmark,
            "labels": list(choices) if isinstance(choices, list) else f"per-document {choices}",
            "style": self.distractor,
            "model": self.settings.model,
        }

    def _aggregate(self, name: str, items: list[dict[str, Any]]) -> float:
        # lm-eval calls one aggregation per metric with the same records: fit once, reuse. In one
        # process every metric gets the very same record objects (process_results returns one
        # record under every name; pickling keeps that sharing when ranks gather them), so an
        # identity check recognises them. Records equal but not identical (copies) are hashed
        # then, never on the first call: hashing 100k records cost more than fitting on them.
        last = self._summary
        if last is not None and len(last[0]) == len(items) and all(
                a is b for a, b in zip(last[0], items, strict=True)):
            return last[1][name]
        if last is not None and _fingerprint(items) == _fingerprint(last[0]):
            self._summary = (list(items), last[1])
            return last[1][name]
        with warnings_named(self.config.task):  # a group run fits one calibrator per task
            self._summary = (list(items), self.summarize(items))
        return self._summary[1][name]

    def reported_metrics(self) -> list[str]:
        """The metric names this task reports (README, "Metrics"); subclasses with other records extend it."""
        return metric_names(distracted=self.distractor != "none")

    def summarize(self, items: list[dict[str, Any]]) -> dict[str, float]:
        """Every reported metric from the per-document records (fit on calibration, score eval)."""
        summarize = summarize_calidist if self.distractor != "none" else summarize_baselines
        return summarize(items, self.settings, self.calibrator_context())


def _fingerprint(records: list[dict[str, Any]]) -> str:
    text = json.dumps(sorted(records, key=lambda r: r["index"]), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()
