"""The generation (black-box) tasks: verbalized CaliDist, and the consistency and SPUQ baselines.

``GenerationTask`` is the ``CaliDistTask`` that asks for text instead of scoring option letters,
so it runs on any lm-eval backend that generates, chat APIs included. Its YAML (the fragments
``yaml_tasks/_verbalized_yaml``, ``_consistency_yaml``, ``_spuq_yaml``) names it with
``class: !function calidist_tasks.generation.GenerationTask`` and sets ``confidence:``

- ``verbalized``: one greedy generation per prompt (the original, and every hinted prompt of a
  distractor variant) asking for the option and a 0-100% confidence, by default with the paper's
  step-by-step request (Appendix F; ``--metadata verbalized_prompt``, ``verbalized.REPLY_FORMS``);
  the join and the calibration are the logit path's (``joining.join_document``, ``aggregation``);
- ``consistency``: N sampled answers to the original prompt (``calidist_tasks.consistency``);
- ``spuq``: the original answer and its perturbed copies (``calidist_tasks.spuq``).

Every prompt ends with the reply format it asks for, and few-shot exemplars are answered in that
format (``exemplar_reply``). The YAML's filter (``calidist_verbalized``) turns each generation into
``{"answer", "confidence"}``; ``process_results`` applies the documented rule for unreadable ones
and counts them for ``parse_fail_rate``.
"""

from __future__ import annotations

from typing import Any

from lm_eval.api.instance import Instance
from lm_eval.api.task import ConfigurableTask

from calidist_tasks import consistency, fewshot, spuq, verbalized
from calidist_tasks.aggregation import (
    SAMPLING_KINDS,
    generation_metric_names,
    summarize_generations,
)
from calidist_tasks.dataset import EVALUATION
from calidist_tasks.distractors import LETTERS, document_key
from calidist_tasks.joining import Outcome, PromptPlan, join_document
from calidist_tasks.task import CHOICES, FEWSHOT, HINT, CaliDistTask

CONFIDENCES = ("verbalized", *SAMPLING_KINDS)
DUMMY = "_calidist_dummy"  # a SPUQ dummy token for the prompt: [text, "before" | "after"]
# verbalized_prompt=short asks for no reasoning: the YAML's budget (for the step-by-step paper
# prompt) is cut to at most this unless --gen_kwargs sets max_gen_toks (lm-eval applies it later).
SHORT_MAX_GEN_TOKS = 128


class GenerationTask(CaliDistTask):
    """A CaliDist task answered by generation: verbalized confidence, consistency or SPUQ."""

    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        config = dict(config or {})
        self.confidence: str = config.pop("confidence", None) or "verbalized"
        name = config.get("task")
        if self.confidence not in CONFIDENCES:
            raise ValueError(f"{name}: confidence must be one of {CONFIDENCES}, "
                             f"got {self.confidence!r}")
        if self.confidence in SAMPLING_KINDS and config.get("distractor", "none") != "none":
            raise ValueError(f"{name}: the {self.confidence} baseline takes no distractor")
        super().__init__(config=config, **kwargs)
        generation = self.config.generation_kwargs or {}
        short = self.confidence == "verbalized" and self.settings.verbalized_prompt == "short"
        if short and "max_gen_toks" in generation:  # a new dict: the YAML's may be shared
            budget = min(int(generation["max_gen_toks"]), SHORT_MAX_GEN_TOKS)
            self.set_config("generation_kwargs", {**generation, "max_gen_toks": budget})

    def reported_metrics(self) -> list[str]:
        return generation_metric_names(self.confidence, self.distractor != "none")

    def summarize(self, items: list[dict[str, Any]]) -> dict[str, float]:
        return summarize_generations(items, self.settings, self.calibrator_context(),
                                     self.confidence, self.distractor != "none")

    # ------------------------------------------------------------------ prompts
    def reply_form(self) -> verbalized.ReplyForm:
        """What the prompts ask for: the option and a confidence in the form --metadata
        verbalized_prompt names (verbalized), or the option alone (consistency, SPUQ)."""
        if self.confidence == "verbalized":
            return verbalized.REPLY_FORMS[self.settings.verbalized_prompt]
        return verbalized.REPLY_FORMS["answer"]

    def exemplar_reply(self, exemplar: dict[str, Any]) -> str:
        """A few-shot exemplar's answer, in the format the prompt asks for: its gold option and a
        confidence drawn from its content and the run's seed (the paper's exemplars state random
        confidences)."""
        label = exemplar[self.config.doc_to_target]
        option = self.doc_to_choice(exemplar)[label]
        confidence = fewshot.exemplar_confidence(exemplar, self.settings.seed)
        return self.reply_form().solved(LETTERS[label], option, confidence)

    def doc_to_text(self, doc: dict[str, Any], doc_to_text: Any = None) -> str:
        """The logit prompt, plus the request for a confidence after the question (as in the
        paper's Appendix F), the reply format at the end, and a SPUQ dummy token where the
        document carries one."""
        text = super().doc_to_text(doc, doc_to_text)
        head = doc.get(FEWSHOT, "") + ConfigurableTask.doc_to_text(self, doc, doc_to_text)
        if not text.startswith(head):
            raise ValueError(f"{self.config.task}: unexpected prompt layout")
        question, rest = text[len(doc.get(FEWSHOT, "")):len(head)], text[len(head):].rstrip("\n")
        form = self.reply_form()
        if form.instruction:
            question = f"{question} {form.instruction}"
        body = f"{question}{rest}\n{form.format}"
        if doc.get(DUMMY):
            body = spuq.add_dummy(body, spuq.Perturbation("dummy_token", *doc[DUMMY]))
        return f"{doc.get(FEWSHOT, '')}{body}\n"

    def doc_iterator(self, **kwargs: Any) -> Any:
        # The sampling baselines fit nothing: their calibration documents would be wasted calls.
        docs = super().doc_iterator(**kwargs)
        if self.confidence in SAMPLING_KINDS:
            return ((i, d) for i, d in docs if d["calidist_split"] == EVALUATION)
        return docs

    def construct_requests(self, doc: dict[str, Any], ctx: Any, **kwargs: Any) -> list[Instance]:
        """generate_until requests: one per prompt (verbalized), N samples (consistency), or the
        original and its perturbations (SPUQ). Each request's document carries the options and
        hint it showed, for the parser (``verbalized.VerbalizedFilter``)."""
        kwargs.pop("apply_chat_template", None)
        kwargs.pop("chat_template", None)
        task, doc_id, repeats = kwargs.pop("metadata")
        choices = list(self.doc_to_choice(doc))
        plain = self._request_doc(doc, choices)
        base = dict(self.config.generation_kwargs or {})
        if self.confidence == "verbalized":
            requests = [(ctx, base, 1, plain)]
            for plan in self.prompt_plans(doc)[1:]:
                variant = self.distracted_doc(doc, plan)
                requests.append((self.variant_prompt(variant), base, 1,
                                 self._request_doc(variant, choices)))
        elif self.confidence == "consistency":
            sampled = consistency.decoding(base, self.settings.sampling, self.settings.api)
            requests = [(ctx, kw, n, plain) for kw, n in consistency.sample_requests(
                sampled, repeats, self.settings.api, self.settings.seed)]
        else:
            key = self.content_key(doc)
            requests = [(ctx, base, 1, plain)] + [
                self._spuq_request(doc, plan, ctx, base) + (1, plain)
                for plan in spuq.perturbations(key, self.settings.seed)
            ]
        return [
            Instance(request_type="generate_until", doc=request_doc,
                     arguments=(prompt, dict(gen_kwargs)), idx=i,
                     metadata=(task, doc_id, n), **kwargs)
            for i, (prompt, gen_kwargs, n, request_doc) in enumerate(requests)
        ]

    def _request_doc(self, variant: dict[str, Any], choices: list[str]) -> dict[str, Any]:
        """What the parser needs to know of a prompt: the options' own texts (not a corrupted
        copy), the hint, and the few-shot exemplars shown (echoes of them are not answers)."""
        request = {**variant, CHOICES: choices}
        shots = self.config.num_fewshot or 0
        if shots:  # the same block fewshot_context put in front of this prompt
            hinted = HINT in variant or CHOICES in variant
            request[FEWSHOT] = fewshot.exemplar_block(self, variant, shots, hinted)
        return request

    def content_key(self, doc: dict[str, Any]) -> str:
        return document_key(doc, [f for f in doc if not f.startswith("calidist_")])

    def _spuq_request(
        self, doc: dict[str, Any], plan: spuq.Perturbation, ctx: Any, base: dict[str, Any]
    ) -> tuple[Any, dict[str, Any]]:
        if plan.kind == "dummy_token":
            return self.variant_prompt({**doc, DUMMY: [plan.text, plan.position]}), base
        if plan.kind == "system_message":
            own = self._context_kwargs.get("system_instruction")
            system = f"{plan.text}\n{own}" if own else plan.text
            return self.variant_prompt(doc, system_instruction=system), base
        return ctx, {**base, "temperature": plan.temperature, "do_sample": plan.temperature > 0}

    # ------------------------------------------------------------------ results
    def process_results(self, doc: dict[str, Any], results: list[Any]) -> dict[str, Any]:
        """Parsed generations -> one record, joined and aggregated as the logit path's."""
        where = f"{self.config.task} document {doc['calidist_index']}"
        parsed = [p for per_request in results for p in per_request]
        if not all(isinstance(p, dict) and "answer" in p for p in parsed):
            raise ValueError(f"{where}: expected parsed answers; the task's filter_list must "
                             "use the calidist_verbalized filter")
        n_choices = len(self.doc_to_choice(doc))
        label = doc[self.config.doc_to_target]
        answers = [p["answer"] for p in parsed]
        if self.confidence == "verbalized":
            plans = self.prompt_plans(doc)
            if len(parsed) != len(plans):
                raise ValueError(f"{where}: expected {len(plans)} answers, got {len(parsed)}")
            outcomes = [verbalized.outcome_from_parse(p, n_choices) for p in parsed]
            record = join_document(plans, outcomes, label, self.settings.delta_mode)
            failures = sum(not o.parsed for o in outcomes)
        else:
            if self.confidence == "consistency":
                votes = consistency.vote(answers, n_choices)
                outcome = Outcome(votes["prediction"], votes["consistency"], parsed=votes["parsed"])
                extra = {"confidences": {k: votes[k] for k in consistency.KINDS}}
            else:
                reference, perturbed = answers[0], answers[1:]
                outcome = verbalized.outcome_from_parse(
                    {"answer": reference, "confidence": spuq.confidence(reference, perturbed)},
                    n_choices)
                extra = {"confidences": {"spuq": outcome.confidence},
                         "agreement": [int(a == reference) for a in perturbed]}
            record = join_document([PromptPlan()], [outcome], label)
            record.update(extra, answers=answers)
            failures = sum(a is None for a in answers)
        record.update(index=doc["calidist_index"], split=doc["calidist_split"],
                      requests=len(parsed), generations=len(parsed), parse_failures=failures)
        return dict.fromkeys(self._metric_fn_list, record)
