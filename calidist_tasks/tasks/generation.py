"""The generation (black-box) tasks: verbalized CaliDist, and the consistency and SPUQ baselines.

``GenerationTask`` is the ``CaliDistTask`` that asks for text instead of scoring option letters,
so it runs on any lm-eval backend that generates, chat APIs included. Its YAML (the fragments
``yaml_tasks/_verbalized_yaml``, ``_consistency_yaml``, ``_spuq_yaml``) names it with
``class: !function calidist_tasks.tasks.generation.GenerationTask`` and sets ``confidence:``

- ``verbalized``: one greedy generation per prompt (the original, and every hinted prompt of a
  distractor variant) asking for the option and a 0-100% confidence, by default with the paper's
  step-by-step request (Appendix F; ``--metadata verbalized_prompt``, ``verbalized.REPLY_FORMS``);
  the join and the calibration are the logit path's (``joining.join_document``, ``aggregation``);
- ``consistency``: N sampled answers to the original prompt (``confidence.consistency``);
- ``spuq``: the original answer and its perturbed copies (``calidist_tasks.confidence.spuq``).

The confidence source is a strategy object (``confidence.sources.SOURCES``) chosen once from
``confidence:``; the prompt is the logit prompt's parts (``CaliDistTask.prompt_parts``) with the
source's reply form added, rendered by ``prompting.parts.render``.

Few-shot exemplars are answered in the form the prompt asks for (``exemplar_reply``): the paper's
prompt shows Appendix F's reasoned reply and asks no more, the one-line forms end the prompt with
their format line. Without a chat template, exemplars and question end with "Assistant:". The
YAML's filter (``calidist_verbalized``) turns each generation into ``{"answer", "confidence"}``;
``process_results`` applies the documented rule for unreadable ones and counts them for
``parse_fail_rate``.
"""

from __future__ import annotations

from typing import Any

from lm_eval.api.instance import Instance

from calidist_tasks.backends import lm_eval_compat
from calidist_tasks.confidence.chat_logprobs import logprob_record
from calidist_tasks.confidence.sources import (
    SHORT_MAX_GEN_TOKS,
    SOURCES,
    Ask,
    ConfidenceSource,
)
from calidist_tasks.prompting import fewshot, verbalized
from calidist_tasks.prompting.distractors import LETTERS
from calidist_tasks.prompting.parts import CHOICES, CUE, DUMMY, FEWSHOT, PromptParts
from calidist_tasks.registry import REASONING_METRICS
from calidist_tasks.runs.two_stage import HINTS
from calidist_tasks.scoring.aggregation import logprob_metric_names, summarize_generations
from calidist_tasks.scoring.joining import PromptPlan
from calidist_tasks.scoring.records import (
    INDEX_FIELD,
    LOGPROB,
    VERBALIZED,
    Record,
    bookkeeping,
    is_failed,
)
from calidist_tasks.tasks.answer_modes import LETTER_REPLIES
from calidist_tasks.tasks.base import PLAIN, CaliDistTask

CONFIDENCES = tuple(SOURCES)
__all__ = ["CONFIDENCES", "DUMMY", "SHORT_MAX_GEN_TOKS", "GenerationTask"]


class GenerationTask(CaliDistTask):
    """A CaliDist task answered by generation: verbalized confidence, consistency or SPUQ."""

    answer_mode = LETTER_REPLIES

    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        config = dict(config or {})
        self.confidence: str = config.pop("confidence", None) or VERBALIZED
        name = config.get("task")
        if self.confidence not in SOURCES:
            raise ValueError(f"{name}: confidence must be one of {CONFIDENCES}, "
                             f"got {self.confidence!r}")
        self.confidence_source: ConfidenceSource = SOURCES[self.confidence]
        if not self.confidence_source.takes_distractor and config.get("distractor",
                                                                      "none") != "none":
            raise ValueError(f"{name}: the {self.confidence} baseline takes no distractor")
        super().__init__(config=config, **kwargs)
        generation = self.config.generation_kwargs or {}
        budget = self.confidence_source.generation_kwargs(generation, self.settings)
        if budget is not generation:  # a new dict: the YAML's may be shared
            self.set_config("generation_kwargs", budget)

    def reported_metrics(self) -> list[str]:
        names = self.confidence_source.metric_names(self.sends_hints())
        if self.confidence == VERBALIZED:  # reported where the replies carry log-probabilities
            names += [*logprob_metric_names(self.sends_hints()), *REASONING_METRICS]
        return names

    def metrics_of(self, record: dict[str, Any]) -> list[str]:
        """Every reported metric; the log-prob ones only for a record that has a log-prob
        reading (a chat API's replies; ``answer_logprobs``)."""
        names = super().metrics_of(record)
        if LOGPROB not in record and not is_failed(record):
            names = [name for name in names if not name.endswith(f"_{LOGPROB}")]
        if "reply_shape" not in record and not is_failed(record):  # a filter that reads none
            names = [name for name in names if name not in REASONING_METRICS]
        return names

    def summarize(self, items: list[dict[str, Any]]) -> dict[str, float]:
        summary = summarize_generations(items, self.settings, self.calibrator_context(),
                                        self.confidence, self.sends_hints())
        extras = self.confidence_source.summary_extras(self.config.generation_kwargs or {},
                                                       self.settings)
        return {**summary, **extras}

    # ------------------------------------------------------------------ prompts
    def reply_form(self) -> verbalized.ReplyForm:
        """What the prompts ask for: the option and a confidence in the form --metadata
        verbalized_prompt names (verbalized), or the option alone (consistency, SPUQ)."""
        return self.confidence_source.reply_form(self.settings)

    def exemplar_reply(self, exemplar: dict[str, Any]) -> str:
        """A few-shot exemplar's reply, in the form the prompt asks for: for the paper's prompt
        its explanation, each step with a confidence, then its gold option resting on the YAML's
        ``answer_basis`` with an overall confidence (Appendix F); the confidences are drawn from
        its content and the run's seed (the paper's exemplars state random ones)."""
        label = exemplar[self.config.doc_to_target]
        option = self.doc_to_choice(exemplar)[label]
        seed = self.settings.seed
        return self.reply_form().solved(LETTERS[label], option,
                                        fewshot.exemplar_confidence(exemplar, seed),
                                        fewshot.exemplar_steps(exemplar, seed), self.answer_basis)

    def exemplar_answer(self, exemplar: dict[str, Any], shown: dict[str, Any]) -> str:
        return self.exemplar_reply(exemplar)

    def exemplar_turn(self, exemplar: dict[str, Any], plan: PromptPlan,
                      multiturn: bool = False) -> fewshot.Turn:
        """As the logit task's, with "Assistant:" before the reply unless it is a turn of its own
        (Appendix F's plain layout)."""
        shown = exemplar if plan.hint_label is None else self.distracted_doc(exemplar, plan)
        cue = {} if multiturn else {CUE: fewshot.ASSISTANT}
        return self.doc_to_text({**shown, **cue}), self.exemplar_reply(exemplar)

    def fewshot_context(self, doc: dict[str, Any], num_fewshot: int, **kwargs: Any) -> Any:
        """As the logit task's; without a chat template the question ends with "Assistant:", as
        its exemplars' do."""
        if self.exemplar_layout(kwargs) == PLAIN:
            doc = {**doc, CUE: fewshot.ASSISTANT}
        return super().fewshot_context(doc, num_fewshot, **kwargs)

    def prompt_parts(self, doc: dict[str, Any], doc_to_text: Any = None) -> PromptParts:
        """The logit prompt's parts, plus the request for a confidence after the question (as in
        the paper's Appendix F), the reply format at the end, and a SPUQ dummy token where the
        document carries one."""
        form = self.reply_form()
        dummy = doc.get(DUMMY)
        return super().prompt_parts(doc, doc_to_text)._replace(
            instruction=form.instruction, reply_format=form.format,
            dummy=tuple(dummy) if dummy else None, cue=doc.get(CUE, ""))

    def sends_calibration_documents(self) -> bool:
        """The sampling baselines fit nothing: their calibration documents would be wasted calls
        (``CaliDistTask.doc_iterator`` then sends the evaluation documents only)."""
        return not self.confidence_source.evaluation_only

    def construct_requests(self, doc: dict[str, Any], ctx: Any, **kwargs: Any) -> list[Instance]:
        """generate_until requests, as the confidence source asks (``Ask``): one per prompt
        (verbalized), N samples (consistency), or the original and its perturbations (SPUQ).
        Each request's document carries the options and hint it showed, for the parser
        (``verbalized.VerbalizedFilter``)."""
        kwargs = lm_eval_compat.instance_kwargs(kwargs)
        # lm-eval's evaluator passes (task, doc_id, repeats); its own task tests pass nothing
        metadata = kwargs.pop("metadata", (self.config.task, None, self.config.repeats))
        choices = list(self.doc_to_choice(doc))
        plain = self._request_doc(doc, choices)
        base = dict(self.config.generation_kwargs or {})
        self.run_stage.check_prompt(doc, ctx)
        plans = self.sent_plans(doc)
        hinted_copies = [self.distracted_doc(doc, plan) for plan in plans
                         if plan.hint_label is not None]
        asks = self.confidence_source.asks(doc, hinted_copies, base,
                                           lm_eval_compat.metadata_repeats(metadata),
                                           self.settings, original=self.run_stage.stage != HINTS)
        self.run_stage.count(len(asks), len(self.prompt_plans(doc)))
        return [
            Instance(request_type="generate_until",
                     doc=plain if ask.shown is None else self._request_doc(ask.shown, choices),
                     arguments=(self._ask_prompt(ask, ctx), dict(ask.gen_kwargs)), idx=i,
                     metadata=lm_eval_compat.with_repeats(metadata, ask.repeats), **kwargs)
            for i, ask in enumerate(asks)
        ]

    def _ask_prompt(self, ask: Ask, ctx: Any) -> Any:
        """The prompt of one request: the original (``ctx``) or built as lm-eval built it."""
        if ask.prompt_doc is None:
            return ctx
        if ask.system is None:
            return self.copy_prompt(ask.prompt_doc)
        own = self._context_kwargs.get("system_instruction")
        system = f"{ask.system}\n{own}" if own else ask.system
        return self.copy_prompt(ask.prompt_doc, system_instruction=system)

    def _request_doc(self, variant: dict[str, Any], choices: list[str]) -> dict[str, Any]:
        """What the parser needs to know of a prompt: the options' own texts (not a corrupted
        copy), the hint, and the few-shot exemplars shown (echoes of them are not answers)."""
        request = {**variant, CHOICES: choices}
        shots = self.config.num_fewshot or 0
        if shots:  # the same block fewshot_context put in front of this prompt
            request[FEWSHOT] = self.exemplar_block(variant, shots)
        return request


    # ------------------------------------------------------------------ results
    def document_record(self, doc: dict[str, Any], results: list[Any]) -> Record:
        """Parsed generations -> one record (the confidence source's), joined and aggregated as
        the logit path's."""
        where = f"{self.config.task} document {doc[INDEX_FIELD]}"
        parsed = [p for per_request in results for p in per_request]
        if not all(isinstance(p, dict) and "answer" in p for p in parsed):
            raise ValueError(f"{where}: expected parsed answers; the task's filter_list must "
                             "use the calidist_verbalized filter")
        first = self.stage1_answer(doc)  # stage hints: the original reply, read in stage 1
        record, failures = self.confidence_source.record(
            parsed, self.sent_plans(doc), len(self.doc_to_choice(doc)),
            doc[self.config.doc_to_target], self.settings, where,
            first=first.outcome if first else None)
        before = first.requests if first else 0  # stage 1's reply (counted in failures too)
        place = bookkeeping(doc, len(parsed) + before)
        record.update(place, generations=len(parsed) + before, parse_failures=failures)
        if self.confidence != VERBALIZED:
            return record
        shape = verbalized.reply_shapes(parsed)  # "does the model reason?"
        if shape:
            record["reply_shape"] = shape
        # CaliDist (log-prob) from the same replies, where they carry token log-probabilities
        scored = logprob_record(parsed, self.sent_plans(doc), len(self.doc_to_choice(doc)),
                                doc[self.config.doc_to_target], self.settings.delta_mode, where,
                                first.logprob if first else None)
        if scored is not None:
            record[LOGPROB] = {**scored, **place}
        return record
