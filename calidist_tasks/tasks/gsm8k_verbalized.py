"""GSM8K's verbalized (black-box) variants: the stages of ``open_ended`` answered by generation
with a stated 0-100% confidence, so they run on any backend that generates (chat APIs included);
see docs/gsm8k.md.

1. ``calidist_gsm8k_verbalized``: one greedy worked answer per document that ends with the final
   number and a stated confidence (the paper's "Mention your confidence level in your answer
   (0-100)%"). ŷ is read by ``open_ended.parse_number``, the confidence p by
   ``verbalized.parse_confidence``. Reports what every family's ``*_verbalized`` task reports.
2. ``calidist_gsm8k_assertion_verbalized``: reads stage 1's samples (ŷ and p), builds the hints
   of ``calidist_gsm8k_assertion_chains`` (numbers near ŷ), and the model writes a new worked
   answer under each hint (one greedy generation per hinted prompt): ỹ_j is its number, p'_j the
   confidence it states, and it agrees when ỹ_j equals ŷ. The outcomes are joined by
   ``joining.join_document`` and calibrated as every CaliDist task. The confidence is in the
   reply, so unlike the logit path no scoring stage follows.

3. ``calidist_gsm8k_consistency``: the consistency baselines (paper, Appendix D), N = 15 worked
   answers sampled for stage 1's prompt, within its budget and with the classification families'
   decoding (``confidence.sources.Consistency``, Appendix I). Each reply's number is read as in
   stage 1; the votes over their values (``number_vote``) give the prediction (the majority
   number, right when it equals the gold number) and the self-consistency, entropy and FSD
   confidences. Reports what every family's ``*_consistency`` task reports.

Unreadable replies follow ``verbalized.outcome_from_parse`` with c = ∞, since an open answer has
no finite option set: no number = wrong (a hinted reply: a changed answer) at confidence 0; a
number without a readable confidence = that number at confidence 0 (as ``calidist_gsm8k_assertion``
gives a stage-1 answer without a number confidence 0). Both count in ``parse_fail_rate``. A
sampled reply without a number is a vote for "no answer", as in ``consistency.vote``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from copy import deepcopy
from typing import Any

from lm_eval.api.filter import Filter
from lm_eval.api.instance import Instance
from lm_eval.api.registry import register_filter

from calidist_tasks.backends import lm_eval_compat
from calidist_tasks.confidence import consistency
from calidist_tasks.confidence.sources import SOURCES
from calidist_tasks.prompting import verbalized
from calidist_tasks.prompting.parts import HINT
from calidist_tasks.registry import metric_names
from calidist_tasks.scoring.aggregation import summarize_generations
from calidist_tasks.scoring.joining import Outcome, PromptPlan, join_document
from calidist_tasks.scoring.records import (
    CONSISTENCY,
    CONSISTENCY_KINDS,
    INDEX_FIELD,
    VERBALIZED,
    Record,
    answer_record,
    bookkeeping,
    unreadable_record,
)
from calidist_tasks.tasks.gsm8k import (
    ANSWER_FIELD,
    OpenEndedTask,
    canonical_number,
    parse_number,
    same_number,
)

OPEN = math.inf  # the c of the unreadable rule for an open answer: confidence 1/c = 0
# The reply format, after the question (and hint) as in the classification families.
NUMBER_FORMAT = ('End with the final number and your confidence in the form "The answer is N. '
                 'Confidence: C%", where C is from 0 to 100.')
CONFIDENCE_FIELD = "original_confidence"  # stage 2: stage 1's stated confidence (rule applied)
PARSED_FIELD = "original_parsed"  # stage 2: whether stage 1's answer and confidence were read


def parse_number_response(text: str, hint: str | None = None) -> dict[str, Any]:
    """``{"answer": number | None, "confidence": fraction | None}`` read from one worked reply.

    Echoes of the prompt (the hint, its note, our instructions) are removed first and the reply
    is cut where it ends (``verbalized.reply_end``), as every reply is read. The number is read
    from the rest without its confidence statements ("Confidence: 80%" is not the answer); the
    confidence is the one stated with the answer (``verbalized.parse_confidence``: a worked
    answer's percentages are not confidences).
    """
    own = verbalized.own_text(text, hint, formats=[NUMBER_FORMAT])
    own = own[:verbalized.reply_end(own)]
    return {"answer": parse_number(verbalized.strip_confidence(own)),
            "confidence": verbalized.parse_confidence(own)}


def number_outcome(reading: Mapping[str, Any], candidates: Sequence[str]) -> Outcome:
    """A reading -> Outcome: prediction = the index of the candidate its number equals
    (numerically), len(candidates) for any other number; unreadable by the documented rule."""
    number = reading["answer"]
    index = None if number is None else next(
        (i for i, c in enumerate(candidates) if same_number(number, c)), len(candidates))
    return verbalized.outcome_from_parse({"answer": index, "confidence": reading["confidence"]},
                                         OPEN)


def number_values(numbers: Sequence[str | None]) -> list[str | None]:
    """Each number's canonical value ('1,000' and '1000.0' -> '1000'); None for no number or a
    text that is none."""
    return [None if n is None else canonical_number(n) for n in numbers]


def number_vote(numbers: Sequence[str | None]) -> dict[str, Any]:
    """``consistency.vote`` over sampled final numbers by value (``number_values``; None is a
    vote for "no answer"). An open answer has no option set, so c = ∞: a document with no
    readable number has prediction None and every confidence 1/c = 0."""
    votes = consistency.vote(number_values(numbers), OPEN)
    return {**votes, "prediction": votes["prediction"] if votes["parsed"] else None}


@register_filter("calidist_verbalized_number")
class NumberFilter(Filter):
    """lm-eval filter: each worked reply -> ``{"answer", "confidence"}``; the request's document
    carries the hint its prompt showed (``_calidist_hint``)."""

    def apply(self, resps: Iterable[Sequence[str]], docs: Sequence[Mapping[str, Any]]) -> list:
        return [[parse_number_response(r, doc.get(HINT)) for r in responses]
                for responses, doc in zip(resps, docs, strict=True)]


class VerbalizedOpenEndedTask(OpenEndedTask):
    """Stage 1 (``distractor: none``) or stage 2 (``assertion``) of GSM8K, verbalized."""

    confidence = VERBALIZED

    def original_record_fields(self) -> tuple[str, ...]:
        return ("prediction", "confidence", "parsed")

    def original_fields(self, record: dict[str, Any]) -> dict[str, Any]:
        return {ANSWER_FIELD: record["prediction"] or "",
                CONFIDENCE_FIELD: float(record["confidence"]), PARSED_FIELD: bool(record["parsed"])}

    def check_original(self, doc: dict[str, Any], record: dict[str, Any], where: str) -> None:
        """Nothing to check: stage 1's reply is not logged in its record, only what was read."""

    def doc_to_text(self, doc: dict[str, Any], doc_to_text: Any = None) -> str:
        """The question (with the paper's request, in the YAML), any hint, then the format."""
        return f"{super().doc_to_text(doc, doc_to_text)}{NUMBER_FORMAT}\n"

    def construct_requests(self, doc: dict[str, Any], ctx: Any, **kwargs: Any) -> list[Instance]:
        """Stage 1: the original prompt. Stage 2: every hinted prompt (ŷ and its confidence are
        stage 1's), each request's document carrying its hint for the parser."""
        kwargs = lm_eval_compat.instance_kwargs(kwargs)
        base = dict(self.config.generation_kwargs or {})
        if not self.stage2:
            requests = [(ctx, base, doc)]
        elif not doc[ANSWER_FIELD]:  # no number to distract from: one token, so the doc is logged
            requests = [(ctx, {**base, "max_gen_toks": 1}, doc)]
        else:
            hinted_copies = [self.distracted_doc(doc, plan) for plan in self.prompt_plans(doc)[1:]]
            requests = [(self.copy_prompt(copy), base, copy) for copy in hinted_copies]
        return [Instance(request_type="generate_until", doc=request_doc,
                         arguments=(prompt, deepcopy(gen_kwargs)), idx=i, **kwargs)
                for i, (prompt, gen_kwargs, request_doc) in enumerate(requests)]

    def readings(self, doc: dict[str, Any], results: list[Any]) -> list[dict[str, Any]]:
        """The parsed replies of ``doc``, in the order sent."""
        readings = [r for per_request in results for r in per_request]
        if not all(isinstance(r, dict) and "answer" in r for r in readings):
            raise ValueError(f"{self.config.task} document {doc[INDEX_FIELD]}: expected parsed "
                             "replies; the task's filter_list must use the "
                             "calidist_verbalized_number filter")
        return readings

    def document_record(self, doc: dict[str, Any], results: list[Any]) -> Record:
        readings = self.readings(doc, results)
        target = doc[self.config.doc_to_target]
        where = bookkeeping(doc, len(readings))
        if not self.stage2:  # the gold number is the one candidate: prediction 0 = correct
            outcome = number_outcome(readings[0], [target])
            record = join_document([PromptPlan()], [outcome], 0)
            record.update(label=target, prediction=readings[0]["answer"], generations=1,
                          parse_failures=int(not outcome.parsed), **where)
            return record
        candidates = self.candidates(doc)
        if not candidates:
            return unreadable_record(target, where)
        plans = self.prompt_plans(doc)
        if len(readings) != len(plans) - 1:
            raise ValueError(f"{self.config.task} document {doc[INDEX_FIELD]}: expected "
                             f"{len(plans) - 1} replies, got {len(readings)}")
        original = Outcome(0, doc[CONFIDENCE_FIELD], parsed=doc[PARSED_FIELD])
        outcomes = [original, *(number_outcome(r, candidates) for r in readings)]
        correct = same_number(candidates[0], target)
        record = join_document(plans, outcomes, 0 if correct else -1, self.settings.delta_mode)
        # generations: stage 1's original reply and the hinted ones, all read for this record
        record.update(label=target, prediction=candidates[0], candidates=candidates,
                      answers=[r["answer"] for r in readings], generations=len(outcomes),
                      parse_failures=sum(not o.parsed for o in outcomes), **where)
        return record

    def reported_metrics(self) -> list[str]:
        return metric_names(self.stage2, self.confidence)

    def summarize(self, items: list[dict[str, Any]]) -> dict[str, float]:
        return summarize_generations(items, self.settings, self.calibrator_context(),
                                     self.confidence, self.stage2)


class ConsistencyOpenEndedTask(VerbalizedOpenEndedTask):
    """``calidist_gsm8k_consistency``: N sampled worked answers to stage 1's prompt, voted by
    number (``number_vote``). The requests and the reported sampling temperature are the
    classification families' (``confidence.sources.Consistency``)."""

    confidence = CONSISTENCY
    confidence_source = SOURCES[CONSISTENCY]

    def sends_calibration_documents(self) -> bool:
        """The baselines fit nothing: calibration documents would be wasted calls."""
        return False

    def construct_requests(self, doc: dict[str, Any], ctx: Any, **kwargs: Any) -> list[Instance]:
        """One request repeated N times, or N seeded requests on an API (``Consistency.asks``)."""
        kwargs = lm_eval_compat.instance_kwargs(kwargs)
        # lm-eval's evaluator passes (task, doc_id, repeats); its own task tests pass nothing
        metadata = kwargs.pop("metadata", (self.config.task, None, self.config.repeats))
        asks = self.confidence_source.asks(doc, [], dict(self.config.generation_kwargs or {}),
                                           lm_eval_compat.metadata_repeats(metadata),
                                           self.settings)
        return [Instance(request_type="generate_until", doc=doc,
                         arguments=(ctx, dict(ask.gen_kwargs)), idx=i,
                         metadata=lm_eval_compat.with_repeats(metadata, ask.repeats), **kwargs)
                for i, ask in enumerate(asks)]

    def document_record(self, doc: dict[str, Any], results: list[Any]) -> Record:
        """The majority number (right when it equals the gold number) at its vote share, with
        the three confidences and every sampled number."""
        answers = number_values([r["answer"] for r in self.readings(doc, results)])
        votes = number_vote(answers)
        target = doc[self.config.doc_to_target]
        record = answer_record(target, votes["prediction"], votes[CONSISTENCY],
                               same_number(votes["prediction"], target), votes["parsed"])
        record.update(confidences={kind: votes[kind] for kind in CONSISTENCY_KINDS},
                      answers=answers, generations=len(answers),
                      parse_failures=answers.count(None), **bookkeeping(doc, len(answers)))
        return record

    def summarize(self, items: list[dict[str, Any]]) -> dict[str, float]:
        extras = self.confidence_source.summary_extras(self.config.generation_kwargs or {},
                                                       self.settings)
        return {**super().summarize(items), **extras}
