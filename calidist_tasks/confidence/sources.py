"""Where a generation task's confidence comes from (YAML ``confidence:``), as strategy objects.

``GenerationTask`` picks its source once, in ``__init__`` (``SOURCES``), and asks it which
documents are sent (``evaluation_only``), the requests per document (``asks``), the record from
the parsed answers (``record``), the metric names it reports (``metric_names``) and the reply the
prompts ask for (``reply_form``):

- ``verbalized``: one greedy generation per prompt (the original and every hinted one) stating the
  option and a confidence, joined as the logit path's (``joining.join_document``);
- ``consistency``: N sampled replies to the original prompt, the vanilla reply's prompt and budget
  (``calidist_tasks.confidence.consistency``);
- ``spuq``: the original answer and its perturbed copies (``calidist_tasks.confidence.spuq``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from calidist_tasks import registry
from calidist_tasks.confidence import consistency, spuq
from calidist_tasks.prompting import verbalized
from calidist_tasks.prompting.parts import DUMMY
from calidist_tasks.prompting.styles import content_key
from calidist_tasks.scoring.joining import Outcome, PromptPlan, join_document
from calidist_tasks.scoring.records import CONSISTENCY, CONSISTENCY_KINDS, SPUQ, VERBALIZED, Record
from calidist_tasks.settings import RunSettings

# verbalized_prompt=short asks for no reasoning: the YAML's budget (for the step-by-step paper
# prompt) is cut to at most this unless --gen_kwargs sets max_gen_toks (lm-eval applies it later).
SHORT_MAX_GEN_TOKS = 128


def is_api(settings: RunSettings) -> bool:
    """Whether the run's model is an HTTP API (the paper samples at temperature 1.5 there): by
    the backend's kind where the run names it (``backends.lm_eval_compat.is_api_backend``),
    else by a ``base_url`` in its model arguments (``settings.api``)."""
    if settings.model_backend:
        from calidist_tasks.backends.lm_eval_compat import is_api_backend

        return is_api_backend(str(settings.model_backend))
    return bool(settings.api)


class Ask(NamedTuple):
    """One generate_until request of a document, before its prompt is built.

    ``prompt_doc``: the document copy the prompt is built from (None: the original prompt as
    lm-eval built it); ``system``: a system message put before the run's own; ``shown``: the
    document the parser is told the prompt showed (None: the original document)."""

    prompt_doc: dict[str, Any] | None
    gen_kwargs: dict[str, Any]
    repeats: int = 1
    system: str | None = None
    shown: dict[str, Any] | None = None


class ConfidenceSource:
    """What a generation task asks of its confidence source (the subclasses below)."""

    name = ""
    evaluation_only = False  # whether only the evaluation documents are sent
    takes_distractor = True  # whether the task may have a distractor style

    def reply_form(self, settings: RunSettings) -> verbalized.ReplyForm:
        """What the prompts ask the reply to hold (and how few-shot exemplars answer)."""
        raise NotImplementedError

    def generation_kwargs(self, generation: dict[str, Any],
                          settings: RunSettings) -> dict[str, Any]:
        """The YAML's generation kwargs for this source (a new dict when they change)."""
        return generation

    def asks(self, doc: dict[str, Any], hinted_copies: list[dict[str, Any]], base: dict[str, Any],
             repeats: int, settings: RunSettings, original: bool = True) -> list[Ask]:
        """The requests of one document: ``hinted_copies`` are its hinted copies, ``base`` the
        generation kwargs, ``repeats`` the generations lm-eval asks per request; ``original``
        False: the original prompt was answered in stage 1 of a two-stage run."""
        raise NotImplementedError

    def record(self, parsed: list[dict[str, Any]], plans: Sequence[PromptPlan], n_choices: int,
               label: int, settings: RunSettings, where: str,
               first: Outcome | None = None) -> tuple[Record, int]:
        """The document's record from its parsed answers (to the prompts of ``plans``), and how
        many were unreadable; ``first``: the original answer from stage 1 of a two-stage run."""
        raise NotImplementedError

    def metric_names(self, distracted: bool) -> list[str]:
        """The metrics a task with this source reports."""
        return registry.metric_names(distracted, self.name)

    def summary_extras(self, generation: dict[str, Any],
                       settings: RunSettings) -> dict[str, float]:
        """Settings a task with this source reports beside its scores (``generation``: its
        generation kwargs)."""
        return {}


class _ReasonedReply:
    """A source whose prompts ask for the reply ``--metadata verbalized_prompt`` names: by default
    the paper's step-by-step reply (Appendix F) within the YAML's budget, the vanilla reply's."""

    def reply_form(self, settings: RunSettings) -> verbalized.ReplyForm:
        """The form ``--metadata verbalized_prompt`` names."""
        return verbalized.REPLY_FORMS[settings.verbalized_prompt]

    def generation_kwargs(self, generation: dict[str, Any],
                          settings: RunSettings) -> dict[str, Any]:
        if settings.verbalized_prompt == "short" and "max_gen_toks" in generation:
            return {**generation, "max_gen_toks": min(int(generation["max_gen_toks"]),
                                                      SHORT_MAX_GEN_TOKS)}
        return generation


class Verbalized(_ReasonedReply, ConfidenceSource):
    """The option and a 0-100% confidence stated in one greedy reply per prompt."""

    name = VERBALIZED

    def asks(self, doc: dict[str, Any], hinted_copies: list[dict[str, Any]], base: dict[str, Any],
             repeats: int, settings: RunSettings, original: bool = True) -> list[Ask]:
        """The original prompt (unless stage 1 asked it), then every hinted copy, greedy."""
        return ([Ask(None, base)] * original
                + [Ask(copy, base, shown=copy) for copy in hinted_copies])

    def record(self, parsed: list[dict[str, Any]], plans: Sequence[PromptPlan], n_choices: int,
               label: int, settings: RunSettings, where: str,
               first: Outcome | None = None) -> tuple[Record, int]:
        if len(parsed) != len(plans):
            raise ValueError(f"{where}: expected {len(plans)} answers, got {len(parsed)}")
        outcomes = [verbalized.outcome_from_parse(p, n_choices) for p in parsed]
        if first is not None:
            plans, outcomes = [PromptPlan(), *plans], [first, *outcomes]
        record = join_document(plans, outcomes, label, settings.delta_mode)
        return record, sum(not o.parsed for o in outcomes)


class _Sampled(ConfidenceSource):
    """The sampling baselines: several answers to the original prompt, no confidence stated."""

    evaluation_only = True  # they fit nothing: calibration documents would be wasted calls
    takes_distractor = False

    def reply_form(self, settings: RunSettings) -> verbalized.ReplyForm:
        """The option alone."""
        return verbalized.REPLY_FORMS["answer"]

    def outcome(self, answers: list[int | None],
                n_choices: int) -> tuple[Outcome, dict[str, Any]]:
        """The original prompt's outcome from the sampled answers, and what the record adds."""
        raise NotImplementedError

    def record(self, parsed: list[dict[str, Any]], plans: Sequence[PromptPlan], n_choices: int,
               label: int, settings: RunSettings, where: str,
               first: Outcome | None = None) -> tuple[Record, int]:
        answers = [p["answer"] for p in parsed]
        outcome, extra = self.outcome(answers, n_choices)
        record = join_document([PromptPlan()], [outcome], label)
        record.update(extra, answers=answers)
        return record, sum(a is None for a in answers)


class Consistency(_ReasonedReply, _Sampled):
    """N sampled replies to the vanilla reply's prompt, within its budget (the paper's Table 4:
    15 x the vanilla reply's tokens): self-consistency, entropy and first-second distance."""

    name = CONSISTENCY

    def summary_extras(self, generation: dict[str, Any],
                       settings: RunSettings) -> dict[str, float]:
        """``sampling_temperature``: the temperature the samples were drawn at (1.0, the
        samplers' default, where only top_k / top_p are set)."""
        sampled = consistency.decoding(generation, settings.sampling, is_api(settings))
        return {"sampling_temperature": float(sampled.get("temperature", 1.0))}

    def asks(self, doc: dict[str, Any], hinted_copies: list[dict[str, Any]], base: dict[str, Any],
             repeats: int, settings: RunSettings, original: bool = True) -> list[Ask]:
        sampled = consistency.decoding(base, settings.sampling, is_api(settings))
        return [Ask(None, kwargs, n) for kwargs, n in consistency.sample_requests(
            sampled, repeats, is_api(settings), settings.seed)]

    def outcome(self, answers: list[int | None],
                n_choices: int) -> tuple[Outcome, dict[str, Any]]:
        votes = consistency.vote(answers, n_choices)
        outcome = Outcome(votes["prediction"], votes[CONSISTENCY], parsed=votes["parsed"])
        return outcome, {"confidences": {k: votes[k] for k in CONSISTENCY_KINDS}}


class Spuq(_Sampled):
    """The original answer, then its perturbed copies (dummy tokens, system messages,
    temperatures); the confidence is the share agreeing with the original."""

    name = SPUQ

    def asks(self, doc: dict[str, Any], hinted_copies: list[dict[str, Any]], base: dict[str, Any],
             repeats: int, settings: RunSettings, original: bool = True) -> list[Ask]:
        asks = [Ask(None, base)]
        for plan in spuq.perturbations(content_key(doc), settings.seed):
            if plan.kind == "dummy_token":
                asks.append(Ask({**doc, DUMMY: [plan.text, plan.position]}, base))
            elif plan.kind == "system_message":
                asks.append(Ask(doc, base, system=plan.text))
            else:
                asks.append(Ask(None, {**base, "temperature": plan.temperature,
                                       "do_sample": plan.temperature > 0}))
        return asks

    def outcome(self, answers: list[int | None],
                n_choices: int) -> tuple[Outcome, dict[str, Any]]:
        reference, perturbed = answers[0], answers[1:]
        outcome = verbalized.outcome_from_parse(
            {"answer": reference, "confidence": spuq.confidence(reference, perturbed)}, n_choices)
        return outcome, {"confidences": {SPUQ: outcome.confidence},
                         "agreement": [int(a == reference) for a in perturbed]}


# the registry's table of sources (``registry.register(source=...)`` adds one), with ours
SOURCES: dict[str, ConfidenceSource] = registry.SOURCES
SOURCES.update({s.name: s for s in (Verbalized(), Consistency(), Spuq())})
