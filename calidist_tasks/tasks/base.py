"""The lm-eval task class behind every calidist task.

Every YAML names it with ``class: !function calidist_tasks.tasks.base.CaliDistTask``.

Per document it sends the original prompt and, for distractor variants, ``m`` hinted prompts per
label, each scored over the option letters; ``process_results`` joins them (``joining``) and the
aggregation fits on the calibration documents and scores the evaluation documents
(``aggregation``). Benchmark specifics live in YAML and in an optional adapter module.

The class keeps lm-eval's hooks and hands each concern to a collaborator (docs/architecture.md):
the distractor style (``styles``, chosen once from the YAML's ``distractor``), the answer mode
(``answer_modes``: option letters or open numbers), the stage of a two-stage run
(``two_stage.RunStage``, reading stage 1 through ``staging``) and the ``--limit`` policy
(``limits``). Every prompt is rendered from its parts by ``prompting.parts.render``; the few-shot
exemplars are the YAML's (``fewshot_config: samples:``), checked, selected and laid out by
``fewshot``, each rendered by ``exemplar_turn`` with the style's misleading plan; lm-eval's
internals are reached through ``lm_eval_compat`` only.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
import math
import operator
from typing import Any

import datasets
import jinja2
import jinja2.meta
import pyarrow
from lm_eval.api.instance import Instance
from lm_eval.api.task import ConfigurableTask

from calidist_tasks.backends import gathered_records, lm_eval_compat
from calidist_tasks.data.documents import Source, build_documents
from calidist_tasks.data.limits import DocumentLimit
from calidist_tasks.prompting import distractors, fewshot
from calidist_tasks.prompting.parts import (  # the fields a prompt reads; others import them here
    CHOICES,
    FEWSHOT,
    HINT,
    PromptParts,
    is_hinted,
    render,
)
from calidist_tasks.prompting.styles import DistractorStyle, content_key, distractor_style
from calidist_tasks.registry import LOGIT, higher_is_better, metric_names, variant_of
from calidist_tasks.runs import prompt_logging, recovery, two_stage
from calidist_tasks.scoring.aggregation import (
    interval_score,
    metric_stderr,
    summarize_baselines,
    summarize_calidist,
)
from calidist_tasks.scoring.fits import calibrator_context, settings_with_saved_fit
from calidist_tasks.scoring.joining import (
    PromptPlan,
    join_document,
    outcomes_from_loglikelihoods,
)
from calidist_tasks.scoring.records import (
    CALIBRATED,
    CALIBRATED_CORRECT,
    EVALUATION,
    INDEX_FIELD,
    MODEL_KEY,
    PER_DOCUMENT_METRICS,
    RECORD_IN,
    RECORD_KEY,
    SOURCE_FIELD,
    SPLIT_FIELD,
    Record,
    bookkeeping,
    document_accuracy,
    failed_documents,
    failed_record,
    is_marker,
    is_record,
    record_marker,
)
from calidist_tasks.scoring.warnings import warnings_named
from calidist_tasks.settings import RunSettings
from calidist_tasks.tasks import context_length
from calidist_tasks.tasks.answer_modes import LETTER_LOGITS, AnswerMode

log = logging.getLogger(__name__)
# How the exemplars are laid out (``fewshot_layout`` in the results' task config): as text before
# the question, in the one user turn of a chat template, or as user/assistant turns.
PLAIN, ONE_TURN, MULTITURN = "plain", "one user turn", "user/assistant turns"

# Document tables by their documents' JSON hash, oldest first: a table is immutable, and making
# one hashes its whole content (datasets' fingerprint, about half of building a task).
_document_tables: dict[str, datasets.Dataset] = {}
DOCUMENT_TABLES_KEPT = 32

# Keys of our YAML that lm-eval's TaskConfig does not know; the task class takes them out.
OWN_KEYS = (
    "class", "benchmark", "adapter", "calibration_split", "data_dirs", "corruption", "distractor",
    "confidence", "answer_basis",
)


class CaliDistTask(ConfigurableTask):
    """An lm-eval ConfigurableTask that asks each question again under misleading hints."""

    confidence: str = LOGIT  # the confidence source (``registry.Variant``); subclasses set theirs
    answer_mode: AnswerMode = LETTER_LOGITS  # what an answer is (``answer_modes``)

    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        lm_eval_compat.cache_compiled_templates()  # our prompts render templates many times
        config = dict(config or {})
        own = {key: config.pop(key, None) for key in OWN_KEYS}
        name = config.get("task")
        self.benchmark: str = own["benchmark"] or name
        self.corruption = own["corruption"]
        self.calibration_split = own["calibration_split"]
        self.data_dirs = list(own["data_dirs"] or [])
        # what a reasoned exemplar's final statement rests on ("the two sentences": Appendix F)
        self.answer_basis: str = own["answer_basis"] or "the question"
        self.adapter = importlib.import_module(own["adapter"]) if own["adapter"] else None
        self.settings = RunSettings.from_metadata(config.get("metadata"))
        if own["confidence"] not in (None, self.confidence):  # the class decides; say so
            raise ValueError(f"{name}: confidence {own['confidence']!r} is not this task "
                             f"class's ({self.confidence})")
        try:
            self.style: DistractorStyle = distractor_style(own["distractor"] or "none",
                                                        self.settings.m, self.corruption)
        except ValueError as error:
            raise ValueError(f"{name}: {error}") from None
        self.distractor: str = self.style.name  # the YAML's name, as logged and reported
        self.m: int = self.style.m
        self._context_kwargs: dict[str, Any] = {}
        self._fewshot_pool: list[dict[str, Any]] | None = None
        self._plans: dict[int, list[PromptPlan]] = {}
        self._summary: tuple[list, dict[str, float]] | None = None  # records, metrics
        # metric_results' (carrier, markers of the other metrics) per tuple of metric names
        self._markers: dict[tuple[str, ...], tuple[str, dict[str, Any]]] = {}
        # Two-stage runs (calidist_tasks.runs.two_stage): which prompts this run sends; tasks that
        # cannot split (no hints, GSM8K's own stages) run whole whatever --metadata stage says.
        stage = self.settings.stage if self.splits_in_stages() else two_stage.ALL
        self.run_stage = two_stage.RunStage(name, stage)
        if self.run_stage.stage == two_stage.HINTS and not self.settings.original_run:
            raise ValueError(f"{name}: --metadata stage hints needs original_run, the stage-1 "
                             "run of this task (its --output_path folder or samples file)")
        # logged in the results file's config: what ``registry.task_variant`` reads back
        config["metadata"] = {**(config.get("metadata") or {}), "benchmark": self.benchmark,
                              "distractor": self.distractor,
                              "confidence": self.registered_confidence()}
        super().__init__(config=config, **kwargs)
        lm_eval_compat.set_task_metrics(self, [RECORD_KEY, *self.reported_metrics()],
                                        self._aggregate, higher_is_better, self._stderr)
        # what lm-eval's W&B and Zeno loggers read per sample: acc, a number per document
        self.config.metric_list = [dict(metric) for metric in PER_DOCUMENT_METRICS]
        self._world_size = 1  # lm-eval's processes (doc_iterator): > 1 links gathered records
        if self.style.hinted:  # a saved fit that does not fit fails now, not after the run
            self.settings = settings_with_saved_fit(self.settings, config.get("metadata"),
                                                    self.calibrator_context())

    def registered_confidence(self) -> str:
        """The confidence source this task's variant is registered under (``registry.Variant``),
        logged in its config: its own, unless a subclass reads replies another way."""
        return self.confidence

    # ------------------------------------------------------------------ data
    def download(self, dataset_kwargs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        """Our documents under the config's test split, beside the splits ``kept_splits`` gives."""
        kept = self.kept_splits(dataset_kwargs, **kwargs)
        self.dataset = datasets.DatasetDict({**kept,
                                             self.config.test_split: self.document_table()})

    def kept_splits(self, dataset_kwargs: dict[str, Any] | None = None,
                    **kwargs: Any) -> dict[str, Any]:
        """The loaded splits kept beside our documents: none, since our loader reads the
        benchmark (``documents``). A subclass whose data lm-eval loads returns
        ``lm_eval_splits``."""
        return {}

    # lm-eval's own behaviour, for a subclass that keeps it (``tasks.wrapped``: lm-eval loads
    # the wrapped task's data and its sampler picks the exemplars); this class replaces each.
    def lm_eval_splits(self, dataset_kwargs: dict[str, Any] | None = None,
                       **kwargs: Any) -> dict[str, Any]:
        """The splits lm-eval's ``download`` loads from the config (its dataset_path)."""
        super().download(dataset_kwargs, **kwargs)
        return dict(self.dataset)

    def lm_eval_fewshot_docs(self) -> Any:
        """lm-eval's exemplar documents (its fewshot_split, samples or fallback rule)."""
        return super().fewshot_docs()

    def lm_eval_fewshot_context(self, doc: dict[str, Any], num_fewshot: int,
                                **kwargs: Any) -> Any:
        """lm-eval's prompt, with its own sampler's ``num_fewshot`` exemplars."""
        return super().fewshot_context(doc, num_fewshot, **kwargs)

    def document_table(self) -> datasets.Dataset:
        """``documents`` as the table lm-eval keeps them in: one table for the tasks of a run
        that hold the same documents (a benchmark's styles; ``_document_tables``)."""
        docs = self.documents()
        try:
            key = hashlib.sha256(json.dumps(docs, sort_keys=True, default=repr).encode())
        except TypeError:  # keys of mixed types cannot be sorted: no shared table
            key = None
        if key is not None and key.hexdigest() in _document_tables:
            return _document_tables[key.hexdigest()]
        try:
            table = datasets.Dataset.from_list(docs)
        except pyarrow.ArrowException as error:  # e.g. a list field mixing numbers and text
            raise ValueError(f"{self.config.task}: the documents cannot be stored as a table "
                             f"({error}); give each field one type in every row") from None
        if key is not None:
            while len(_document_tables) >= DOCUMENT_TABLES_KEPT:
                _document_tables.pop(next(iter(_document_tables)))
            _document_tables[key.hexdigest()] = table
        return table

    def documents(self) -> list[dict[str, Any]]:
        """Calibration documents first, then evaluation documents (``documents.build_documents``).
        Stage hints also reads (and checks) stage 1's answers to them now, before model time."""
        docs = self.built_documents()
        if self.run_stage.stage == two_stage.HINTS:
            self.run_stage.read_stage1(self.settings.original_run, docs, self.answer_mode.logits,
                                       self.settings.model, self.option_count)
        return docs

    def built_documents(self) -> list[dict[str, Any]]:
        """The marked documents, calibration first (``documents.build_documents``)."""
        return build_documents(self.source(), self.settings)

    def option_count(self, doc: dict[str, Any]) -> int:
        """``doc``'s number of options, from the YAML's doc_to_choice: usable before lm-eval has
        finished building the task (its ``doc_to_choice`` needs the built task)."""
        return self.answer_mode.option_count(self.config.doc_to_choice, doc)

    # ------------------------------------------------------------------ two-stage runs
    def splits_in_stages(self) -> bool:
        """Whether this task can send its original and hinted prompts in two runs (``--metadata
        stage``): whether its variant (its style and ``registered_confidence``) does,
        ``registry.Variant.splits_in_stages``, the definition the planner reads too."""
        variant = variant_of(self.distractor, self.registered_confidence())
        return variant is not None and variant.splits_in_stages

    def sends_hints(self) -> bool:
        """Whether this run sends hinted prompts (a hinted task, not stage 1 of two)."""
        return self.style.hinted and self.run_stage.stage != two_stage.ORIGINAL

    def stage1_answer(self, doc: dict[str, Any]) -> two_stage.Stage1 | None:
        """Stage hints: the document's answer from stage 1 (None in other stages)."""
        return self.run_stage.first(doc)

    def sent_plans(self, doc: dict[str, Any]) -> list[PromptPlan]:
        """The plans of the prompts this run sends for ``doc`` (``two_stage.RunStage.sent``)."""
        return self.run_stage.sent(doc, self.prompt_plans(doc))

    def source(self) -> Source:
        """Where the benchmark's rows come from and how they become documents (from the YAML)."""
        fixed_choices = self.config.doc_to_choice
        template = self.config.doc_to_text
        fields = sorted(jinja2.meta.find_undeclared_variables(jinja2.Environment().parse(template)))
        choices_field = fixed_choices if isinstance(fixed_choices, str) else None
        return self.answer_mode.source(Source(
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
            exemplars=self.fewshot_docs() or (),
        ))

    # ------------------------------------------------------------------ prompts
    def prompt_parts(self, doc: dict[str, Any], doc_to_text: Any = None) -> PromptParts:
        """What ``doc``'s prompt shows: its exemplars, the benchmark's question (YAML
        ``doc_to_text``), the options (a corrupted copy's own) and any hint."""
        return PromptParts(
            question=self.question(doc, doc_to_text),
            options=tuple(doc.get(CHOICES) or self.doc_to_choice(doc)),
            hint=doc.get(HINT),
            exemplars=doc.get(FEWSHOT, ""),
        )

    def question(self, doc: dict[str, Any], doc_to_text: Any = None) -> str:
        """The benchmark's question: lm-eval's rendering of the YAML ``doc_to_text``."""
        return super().doc_to_text(doc, doc_to_text)

    def doc_to_text(self, doc: dict[str, Any], doc_to_text: Any = None) -> str:
        """The prompt rendered from ``prompt_parts`` (``prompting.parts.render``)."""
        return render(self.prompt_parts(doc, doc_to_text))

    def fewshot_context(self, doc: dict[str, Any], num_fewshot: int, **kwargs: Any) -> Any:
        """lm-eval's prompt (chat template, system prompt, gen_prefix) with the paper's exemplars:
        ``num_fewshot`` per label, hinted in hinted prompts (``prompting.fewshot``); user/assistant
        turns under a chat template with ``fewshot_as_multiturn``, else text before the question."""
        multiturn = self.exemplar_layout(kwargs) == MULTITURN
        if num_fewshot:
            turns = self.exemplar_turns(doc, num_fewshot, multiturn)
            if multiturn:
                kwargs["chat_template"] = fewshot.with_turns(kwargs["chat_template"], turns)
            else:
                doc = {**doc, FEWSHOT: fewshot.plain_block(turns)}
        return super().fewshot_context(doc, num_fewshot=0, **kwargs)

    @staticmethod
    def exemplar_layout(context: dict[str, Any]) -> str:
        """How ``fewshot_context``'s keywords lay the exemplars out (recorded in the results)."""
        if not (context.get("apply_chat_template") and context.get("chat_template")):
            return PLAIN
        return MULTITURN if context.get("fewshot_as_multiturn") else ONE_TURN

    def exemplar_docs(self) -> list[dict[str, Any]]:
        """The YAML's exemplar documents (``fewshot_config: samples:``), checked."""
        source = self.source()
        return fewshot.check_exemplars(self.fewshot_docs(), self.config.task,
                                       source.required_fields, source.label_field,
                                       source.n_labels, source.choices_field)

    def fewshot_docs(self) -> list[dict[str, Any]] | None:
        """The YAML's exemplar documents as lm-eval reads them (None where it has none)."""
        config = self.config.fewshot_config
        samples = config.get("samples") if isinstance(config, dict) else getattr(
            config, "samples", None)
        return list(samples) if samples else None

    def exemplar_block(self, doc: dict[str, Any], per_label: int) -> str:
        """The exemplars in front of ``doc``'s prompt as text, as the parser is told of them."""
        return fewshot.plain_block(self.exemplar_turns(doc, per_label, multiturn=False))

    def exemplar_turns(self, doc: dict[str, Any], per_label: int,
                       multiturn: bool) -> list[fewshot.Turn]:
        """The exemplars in front of ``doc``'s prompt, each (question, reply): they mislead when
        ``doc`` is a hinted copy (``fewshot.select_exemplars``)."""
        if per_label < 0:
            raise ValueError(f"{self.config.task}: --num_fewshot must be >= 0, got {per_label}")
        mislead = self.style.hinted and is_hinted(doc)
        chosen = fewshot.select_exemplars(self.fewshot_pool(), len(self.doc_to_choice(doc)),
                                          per_label, self.config.doc_to_target, self.config.task)
        return [self.exemplar_turn(e, self.misleading_plan(e) if mislead else PromptPlan(),
                                   multiturn) for e in chosen]

    def misleading_plan(self, exemplar: dict[str, Any]) -> PromptPlan:
        """The style's distraction of a few-shot exemplar, towards a label other than its own."""
        return self.style.exemplar_plan(content_key(exemplar),
                                        exemplar[self.config.doc_to_target],
                                        len(self.doc_to_choice(exemplar)), self.settings.seed)

    def exemplar_turn(self, exemplar: dict[str, Any], plan: PromptPlan,
                      multiturn: bool = False) -> fewshot.Turn:
        """One solved exemplar, (question, reply): its prompt as ``plan`` shows it
        (PromptPlan() = no hint), then its gold answer (``exemplar_answer``)."""
        shown = exemplar if plan.hint_label is None else self.distracted_doc(exemplar, plan)
        return self.doc_to_text(shown), self.exemplar_answer(exemplar, shown)

    def solved_exemplar(self, exemplar: dict[str, Any], plan: PromptPlan) -> str:
        """One solved exemplar as the plain layout shows it."""
        return "".join(self.exemplar_turn(exemplar, plan))

    def exemplar_answer(self, exemplar: dict[str, Any], shown: dict[str, Any]) -> str:
        """An exemplar's answer after the task's answer prefix: "The answer is (c)"."""
        prefix = self.doc_to_prefix(shown) or fewshot.ANSWER_PREFIX
        return f"{prefix}{distractors.LETTERS[exemplar[self.config.doc_to_target]]})"

    def fewshot_pool(self) -> list[dict[str, Any]]:
        """The exemplar documents (the YAML's), read and checked once."""
        if self._fewshot_pool is None:
            self._fewshot_pool = self.exemplar_docs()
        return self._fewshot_pool

    def prompt_plans(self, doc: dict[str, Any]) -> list[PromptPlan]:
        """The original prompt, then ``m`` hinted prompts per label (deterministic per document)."""
        index = doc.get(INDEX_FIELD)
        if index is not None and index in self._plans:  # built once in construct_requests
            return self._plans[index]
        plans = self.style.plans(doc, len(self.doc_to_choice(doc)), self.settings.seed)
        if index is not None:
            self._plans[index] = plans
        return plans

    def distracted_doc(self, doc: dict[str, Any], plan: PromptPlan) -> dict[str, Any]:
        """The document as the hinted prompt ``plan`` shows it (the style's ``hinted_copy``)."""
        return self.style.hinted_copy(doc, plan, list(self.doc_to_choice(doc)))

    def build_all_requests(self, *, limit: int | None = None, **kwargs: Any) -> None:
        # Kept so that hinted prompts get the same chat template / system prompt as the original.
        self._context_kwargs = lm_eval_compat.fewshot_context_kwargs(kwargs)
        samples = kwargs.get("samples")
        if samples:
            if EVALUATION not in self.eval_docs.select(list(samples))[SPLIT_FIELD]:
                raise ValueError(
                    f"{self.config.task}: --samples selects only calibration documents (the "
                    f"first {sum(s != EVALUATION for s in self.eval_docs[SPLIT_FIELD])} "
                    "documents calibrate); name evaluation documents too"
                )
        elif self.document_limit().sizes(limit) is not None:  # both splits (doc_iterator)
            if kwargs.get("cache_requests"):  # lm-eval's request cache keeps the first N
                kwargs = lm_eval_compat.without_request_cache(kwargs)
            if not kwargs.get("rank"):
                log.warning("%s", self.document_limit().message(limit))
        if self.config.num_fewshot:  # the YAML's exemplars are checked before model time
            self.fewshot_pool()
        layout = self.exemplar_layout(self._context_kwargs) if self.config.num_fewshot else None
        self.config.metadata = {**(self.config.metadata or {}), "fewshot_layout": layout}
        super().build_all_requests(limit=limit, **kwargs)
        context_length.warn_long_prompts(self.config.task, self.instances,
                                         self.config.metadata or {})

    def construct_requests(self, doc: dict[str, Any], ctx: str, **kwargs: Any) -> list[Instance]:
        kwargs = lm_eval_compat.instance_kwargs(kwargs)
        continuations = self.continuations(doc)
        n_choices = len(continuations)
        self.run_stage.check_prompt(doc, ctx)
        prompts = [ctx if plan.hint_label is None
                   else self.copy_prompt(self.distracted_doc(doc, plan))
                   for plan in self.sent_plans(doc)]
        self.run_stage.count(len(prompts), len(self.prompt_plans(doc)))
        return [
            Instance(
                request_type="loglikelihood",
                doc=doc,
                arguments=(prompt, continuation),
                idx=i * n_choices + j,
                **kwargs,
            )
            for i, prompt in enumerate(prompts)
            for j, continuation in enumerate(continuations)
        ]

    def continuations(self, doc: dict[str, Any]) -> list[str]:
        """What each prompt's requests score, one per option: the option letters."""
        return list(distractors.LETTERS[:len(self.doc_to_choice(doc))])

    def copy_prompt(self, copy: dict[str, Any], **context: Any) -> Any:
        """The prompt of a copy of a document (a hinted copy, a SPUQ perturbation), built as
        lm-eval built the original's: same few-shot, chat template and system prompt unless
        ``context`` says."""
        return self.fewshot_context(
            copy,
            num_fewshot=self.config.num_fewshot or 0,
            gen_prefix=self.doc_to_prefix(copy),
            **{**self._context_kwargs, **context},
        )

    # ------------------------------------------------------------------ results
    def apply_filters(self) -> Any:
        """lm-eval's hook after the model answered, before it scores and logs the documents:
        its filters, then each request's prompt shortened to its hash as ``--metadata
        log_prompts`` says (``prompt_logging``; nothing scores a prompt after the model)."""
        filtered = super().apply_filters()
        prompt_logging.shorten(self.instances, self.settings.log_prompts)
        return filtered

    def process_results(self, doc: dict[str, Any], results: list[Any]) -> dict[str, Any]:
        """lm-eval's hook: the document's record (``document_record``) under every metric name.
        Answers that cannot be used give a ``failed_record`` naming the document instead of an
        error here, which would lose every other document's answers: the aggregation refuses
        the run after saving them all (``recovery``)."""
        try:
            record = self.document_record(doc, results)
        except Exception as error:  # noqa: BLE001  raised at the aggregation, with the records
            message = str(error) if isinstance(error, ValueError) else (
                f"{self.document_name(doc)}: {type(error).__name__}: {error}")
            record = failed_record(doc, len(results), message)
        if self.settings.model:
            record[MODEL_KEY] = self.settings.model
        return self.metric_results(record)

    def document_name(self, doc: dict[str, Any]) -> str:
        """How an error names ``doc``: the task, the document's index and its source."""
        return f"{self.config.task} document {doc[INDEX_FIELD]} ({doc[SOURCE_FIELD]})"

    def document_record(self, doc: dict[str, Any], results: list[Any]) -> Record:
        """The document's record: its answers joined (``join_document``); in stage hints,
        stage 1's original answer and the hints sent now, ``requests`` counting both stages.
        Raises ValueError naming the document and prompt when an answer cannot be used."""
        sent = self.sent_plans(doc)
        n_choices = len(self.doc_to_choice(doc))
        if len(results) != len(sent) * n_choices:
            raise ValueError(f"{self.document_name(doc)}: expected {len(sent) * n_choices} "
                             f"answers, got {len(results)}")

        def where() -> str:  # the document's name, built only for an error
            return self.document_name(doc)

        outcomes = outcomes_from_loglikelihoods(self.option_loglikelihoods(doc, results),
                                                n_choices, where)
        plans, outcomes = self.run_stage.joined(doc, sent, outcomes)
        record = join_document(plans, outcomes, self.gold_label(doc), self.settings.delta_mode)
        first = self.stage1_answer(doc)
        record.update(bookkeeping(doc, len(results) + (first.requests if first else 0)))
        return record

    def option_loglikelihoods(self, doc: dict[str, Any], results: list[Any]) -> list[float]:
        """The log-likelihood of each option in each prompt, from lm-eval's (ll, is_greedy)
        results: the confidence is their softmax (``joining``)."""
        return [ll for ll, _ in results]

    def gold_label(self, doc: dict[str, Any]) -> int:
        """The index of ``doc``'s correct option (the YAML's ``doc_to_target`` field)."""
        return doc[self.config.doc_to_target]

    def metric_results(self, record: dict[str, Any]) -> dict[str, Any]:
        """What ``process_results`` returns: the document's record under ``RECORD_KEY`` (the
        first metric lm-eval aggregates), the document's accuracy under ``acc`` (a number, or
        None: ``document_accuracy``), and a small marker naming the record under every other
        metric, so that a samples line holds the record once (``_aggregate`` resolves the
        markers and the numbers to the record's metrics)."""
        names = tuple(self.metrics_of(record))
        found = self._markers.get(names)
        if found is None:  # once per set of names: a ~26-entry dict per document cost 2 us
            marker = record_marker(RECORD_KEY)  # one object, shared: nothing changes a marker
            found = self._markers[names] = {name: marker for name in names
                                            if name not in (RECORD_KEY, "acc")}
        if self._world_size > 1:  # lm-eval gathers the samples and the metrics apart
            record = gathered_records.linked(self.config.task, record)
        results = {RECORD_KEY: record}
        if "acc" in names:
            results["acc"] = document_accuracy(record)
        results.update(found)
        return results

    def metrics_of(self, record: dict[str, Any]) -> list[str]:
        """The metric names ``record`` is reported under: every metric the task reports
        (``RECORD_KEY`` among them)."""
        return lm_eval_compat.task_metric_names(self)

    def calibrator_context(self) -> dict[str, Any]:
        """What a saved fit records, so that it is refused by a task it does not fit."""
        return calibrator_context(self.config.task, self.config.doc_to_choice,
                                  self.settings.model, benchmark=self.benchmark,
                                  style=self.distractor,
                                  delta_mode=self.settings.delta_mode)  # shapes lambda_raw

    def _aggregate(self, name: str, items: list[dict[str, Any]]) -> float:
        # lm-eval calls one aggregation per metric with the same records: fit once, reuse. In one
        # process every metric gets the very same record objects (process_results returns one
        # record under every name; pickling keeps that sharing when ranks gather them), so an
        # identity check recognises them. Records equal but not identical (copies) are hashed
        # then, never on the first call: hashing 100k records cost more than fitting on them.
        last = self._summary
        if items and not is_record(items[0]):  # markers, acc's numbers: of the records before
            if last is None or len(last[0]) != len(items):
                held = (f"markers of the records under {items[0][RECORD_IN]!r}"
                        if is_marker(items[0]) else f"numbers of the records under {RECORD_KEY!r}")
                raise RuntimeError(
                    f"{self.config.task}: metric {name} holds {held}, which lm-eval did not "
                    "aggregate first (it aggregates the metrics in the order process_results "
                    "returns them)")
            return _metric(name, last)
        if last is not None and len(last[0]) == len(items) and all(
                map(operator.is_, last[0], items)):
            return _metric(name, last)
        if last is not None and _fingerprint(items) == _fingerprint(last[0]):
            self._summary = (list(items), last[1])
            return _metric(name, self._summary)
        with warnings_named(self.config.task):  # a group run fits one calibrator per task
            try:
                refuse_failed_documents(items)
                summary = self.summarize(items)
            except Exception as error:  # the model's answers are saved before the run stops
                failure = self.recovered(items, error)
                failure.__cause__ = error
                if not recovery.deferred(failure):  # calidist eval: the other tasks go on
                    raise failure from error
                summary = dict.fromkeys(self.reported_metrics(), math.nan)
        # gathered from several processes: the samples' copies get the confidences too
        gathered_records.share_calibrated(self.config.task, items,
                                          (CALIBRATED, CALIBRATED_CORRECT))
        self._summary = (list(items), summary)
        return _metric(name, self._summary)

    def _stderr(self, name: str, iters: int) -> Any:
        """lm-eval's stderr function of metric ``name`` (None: none, N/A): lm-eval calls it right
        after the metric's aggregation, on the records ``_summary`` holds (``metric_stderr``)."""
        if interval_score(name) is None:
            return None

        def stderr(items: list[dict[str, Any]]) -> float | str:
            records, summary = self._summary or ([], {})
            return metric_stderr(name, records, summary, iters)

        return stderr

    def reported_metrics(self) -> list[str]:
        """The metric names this task reports (README, "Metrics"); subclasses with other records
        extend it."""
        return metric_names(self.sends_hints(), self.confidence)

    def summarize(self, items: list[dict[str, Any]]) -> dict[str, float]:
        """Every reported metric from the per-document records (fit on calibration, score eval)."""
        summarize = summarize_calidist if self.sends_hints() else summarize_baselines
        return summarize(items, self.settings, self.calibrator_context())

    # ------------------------------------------------------------------ --limit
    def sends_calibration_documents(self) -> bool:
        """Whether the calibration documents are sent to the model (to fit on); a task that fits
        nothing (the sampling baselines) sends the evaluation documents only."""
        return True

    def document_limit(self) -> DocumentLimit:
        """Which documents a run with lm-eval's ``--limit`` sends (``limits``)."""
        return DocumentLimit(self.config.task, self.eval_docs[SPLIT_FIELD],
                             self.sends_calibration_documents())

    def doc_iterator(self, *, rank: int = 0, limit: int | None = None, world_size: int = 1,
                     samples: list[int] | None = None) -> Any:
        """(index, document) pairs this rank sends and scores. lm-eval's ``limit`` takes the first
        N documents, which are all calibration documents here; this takes both splits in their
        proportion (``limits``). ``samples`` (lm-eval's --samples) are lm-eval's own."""
        self._world_size = world_size
        if samples:
            docs = super().doc_iterator(rank=rank, limit=limit, world_size=world_size,
                                        samples=samples)
            if self.sends_calibration_documents():
                return docs
            return ((i, d) for i, d in docs if d[SPLIT_FIELD] == EVALUATION)
        chosen = self.document_limit().chosen(limit)
        pairs = ((i, doc) for i, doc in enumerate(self.eval_docs) if i in chosen)
        return lm_eval_compat.rank_share(pairs, rank, world_size)

    # ------------------------------------------------------------------ failed aggregation
    def recovered(self, items: list[dict[str, Any]], error: Exception) -> Exception:
        """The error a failed aggregation raises, after saving ``items`` (the per-document
        records) where ``calidist report`` recomputes the metrics from them (``recovery``)."""
        return recovery.save_records(
            self.config.task, items, error, docs=self.eval_docs,
            config={"task": self.config.task, "metadata": self.config.metadata,
                    "doc_to_choice": self.config.doc_to_choice},
            model=self.settings.model, instances=self.instances,
        )


def _metric(name: str, summary: tuple[list, dict[str, float]]) -> Any:
    """Metric ``name`` of an aggregation's (records, metrics): ``RECORD_KEY``'s value is the
    number of records."""
    records, metrics = summary
    return len(records) if name == RECORD_KEY else metrics[name]


def refuse_failed_documents(records: list[dict[str, Any]]) -> None:
    """Raise ValueError naming the documents whose answers cannot be used (``failed_record``):
    no metric is computed from a run missing some of its documents' answers."""
    failed = failed_documents(records)
    if failed:
        shown = "; ".join(record["error"] for record in failed[:3])
        more = f" (and {len(failed) - 3} more)" if len(failed) > 3 else ""
        raise ValueError(f"{len(failed)} of {len(records)} documents have answers that cannot "
                         f"be used: {shown}{more}")


def _fingerprint(records: list[dict[str, Any]]) -> str:
    # the answers only: not the confidences a previous aggregation logged on them
    answers = [{k: v for k, v in r.items() if k not in (CALIBRATED, CALIBRATED_CORRECT)}
               for r in sorted(records, key=lambda r: r["index"])]
    text = json.dumps(answers, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()
