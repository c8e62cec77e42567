"""The reasoned protocol, the paper's own: one reasoned reply per prompt, three readings.

The paper's Appendix F asks every prompt to "Think step by step, mention your confidence level in
each step (0-100)%, and mention your overall confidence level in your answer (0-100)%", and its
Vanilla, CaliDist (log-prob) and CaliDist (verbalized) numbers (Tables 1, 3, 4) are all read from
that one generated reply per prompt:

- the answer: the reply's first answer statement ("... the correct answer is (c) ..."), the
  reply cut at its first complete overall confidence or a new block (``verbalized.read_reply``,
  the one reader of every path);
- the stated confidence: its "Overall Confidence: 60%";
- p: the softmax over the c option letters at the answer's position, i.e. the letters'
  log-likelihoods after the prompt and the reply's own text up to its answer's letter
  (``verbalized.read_reply``'s ``at``), taken at the letter the reply wrote (as GSM8K's last
  stage takes a chain's own number, ``tasks.gsm8k``).

lm-eval builds every request before the model answers, so a reply cannot be scored in the run
that generates it. A reasoned task ``calidist_<b>[_<style>]_cot`` is therefore the later stage of
the matching verbalized task ``calidist_<b>[_<style>]_verbalized``, which generates exactly these
replies (greedy, ``verbalized_prompt=paper``): it reads that run's logged samples (``--metadata
replies=PATH``), rebuilds each prompt (refusing one that differs from the logged one) and sends,
per reply that counts, c loglikelihood requests. ``calidist eval`` and
``calidist_tasks.evaluate`` run both stages by themselves (``reasoned_stages``). The records hold,
per prompt, the reply, its answer, its stated confidence and its letter log-probabilities, and
the aggregation reports both readings from one run (``summarize_reasoned``).

The reply run is one stage (every prompt answered; the hints naming the original reply's answer
are logged, not scored) or, with ``--two-stage``, two (``two_stage``): stage 1 the original
replies, stage 2 only the hints naming a label other than the original reply's answer (all of
them where it has none), the paper's 1 + (c - 1)·m replies. The reasoned task reads either
(``logged``; stage 2's results file names stage 1's folder) and scores the letters after the
replies that count; its records and CaliDist numbers are the one-stage run's, less the replies to
the hints naming the answer, which never count. One case differs: an original reply whose answer
is read from an option's text alone (no letter to score) is unreadable here but named that option
for the reply run, whose stage 2 then did not send the hints naming it; they are not counted.

A reply whose answer cannot be located (none, several, or only an option's text) is unreadable in
both readings: the documented rule (wrong at 1/c; docs/backends.md), counted in
``parse_fail_rate``, its letter log-probabilities those of the rule's uniform 1/c.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from lm_eval.api.instance import Instance

from calidist_tasks.backends import lm_eval_compat
from calidist_tasks.prompting import verbalized
from calidist_tasks.prompting.distractors import LETTERS
from calidist_tasks.prompting.parts import CHOICES, FEWSHOT, HINT
from calidist_tasks.registry import (
    REASONED,
    REASONING_METRICS,
    STATED,
    metric_names,
    unreadable_metrics,
)
from calidist_tasks.runs.earlier_runs import EarlierRun, Logged, described
from calidist_tasks.runs.files import stage1_folder
from calidist_tasks.runs.two_stage import HINTS, hints_sent
from calidist_tasks.scoring.aggregation import (
    lift_reading,
    reasoning_metrics,
    summarize_generations,
    summarize_letters,
)
from calidist_tasks.scoring.fits import reading_settings, second_reading, split_records
from calidist_tasks.scoring.joining import Outcome, PromptPlan, join_document, outcome_at
from calidist_tasks.scoring.records import (
    INDEX_FIELD,
    SOURCE_FIELD,
    VERBALIZED,
    Record,
    bookkeeping,
)
from calidist_tasks.tasks.generation import GenerationTask

# Shared by both readings of a reply (the log-prob one under the logit tasks' names, the stated
# one under those + ``registry.STATED``): the prediction, so acc and flip_rate, and the counts.
SHARED_METRICS = ("acc", "flip_rate", "requests_per_doc", "n_calibration", "n_evaluation")
SCORING = "scoring"  # letter log-probabilities from a later loglikelihood stage


def reasoned_metric_names(distracted: bool) -> list[str]:
    """Both readings' metrics: the log-prob reading under the logit tasks' names with its
    ``parse_fail_rate`` and unreadable counts, then the verbalized task's names + ``STATED``."""
    spoken = [name + STATED for name in metric_names(distracted, VERBALIZED)
              if name not in SHARED_METRICS]
    return [*metric_names(distracted), *unreadable_metrics(distracted), *spoken,
            *REASONING_METRICS]


# ---------------------------------------------------------------------- one reply, read
class Reading(NamedTuple):
    """One reply as the reasoned tasks read it."""

    answer: int | None  # the option of its located final answer; None: unreadable
    stated: float | None  # its stated (overall) confidence, as a fraction
    cut: int | None  # where its answer's letter starts in the reply
    upper: bool = False  # the reply wrote the letter in upper case ("(C)")
    shape: dict[str, Any] | None = None  # how it reasoned (``verbalized.reply_shape``)

    def letters(self, n_choices: int) -> list[str]:
        """The c letters scored at the answer, in the case the reply wrote its own."""
        letters = LETTERS[:n_choices]
        return list(letters.upper() if self.upper else letters)


def read_reply(reply: str, shown: Mapping[str, Any]) -> Reading:
    """The answer, stated confidence and answer position of ``reply`` to the prompt ``shown``
    (a request document: its options, hint, exemplars and question;
    ``GenerationTask._request_doc``), as every path reads a reply (``verbalized.read_reply``).
    An answer named by an option's text alone has no letter to score: unreadable here."""
    reading = verbalized.read_reply(reply, shown[CHOICES], shown.get(HINT), shown.get(FEWSHOT),
                                    verbalized.shown_texts(shown))
    shape = verbalized.reply_shape(reply, reading, shown.get(FEWSHOT))
    if reading.at is None:
        return Reading(None, reading.confidence, None, shape=shape)
    return Reading(reading.answer, reading.confidence, reading.at, reply[reading.at].isupper(),
                   shape)


# ---------------------------------------------------------------------- the reply run's samples
class LoggedReplies(NamedTuple):
    """One document's answered prompts, as the verbalized task's run logged them: their plans
    (in ``prompt_plans`` order), prompts and replies."""

    plans: list[PromptPlan]
    prompts: list[Any]
    replies: list[str]


def logged_replies(run: EarlierRun, logged: Logged) -> tuple[list[Any], list[str]]:
    """The prompts and replies of one line of the reply task's samples; refused naming the file
    and line when they are not there, or not one text reply per prompt."""
    where = run.where(logged)
    arguments = logged.sample.get("arguments")
    arguments = list(arguments.values()) if isinstance(arguments, Mapping) else arguments
    try:
        prompts = [list(a.values())[0] if isinstance(a, Mapping) else a[0] for a in arguments]
        replies = [r[0] if isinstance(r, list) else r for r in logged.sample["resps"]]
    except (KeyError, IndexError, TypeError):
        raise ValueError(f"{where}: no prompts and replies (arguments, resps) logged") from None
    if len(prompts) != len(replies) or not all(isinstance(r, str) for r in replies):
        raise ValueError(f"{where}: expected one text reply per prompt, got "
                         f"{len(replies)} replies to {len(prompts)} prompts")
    return prompts, replies


# ---------------------------------------------------------------------- the task
class ReasonedTask(GenerationTask):
    """``calidist_<b>[_<style>]_cot``: scores the letters at the answer of every reply of the
    matching verbalized task's run, and reports CaliDist (log-prob) and CaliDist (verbalized),
    or Vanilla and the baselines, from those same replies (module docstring)."""

    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        config = dict(config or {})
        name = config.get("task") or ""
        self.reply_task: str = config.pop("reply_task", None)
        if not self.reply_task:  # yaml_tasks/_generate_configs.py writes it (Variant.reply)
            raise ValueError(f"{name}: a reasoned task needs reply_task, the task whose replies "
                             "it reads")
        self._replies: EarlierRun | None = None  # the reply task's run, read by build_all_requests
        self._originals: EarlierRun | None = None  # a two-stage reply run's stage 1 (stage1_of)
        self._readings: dict[int, list[Reading]] = {}
        super().__init__(config={**config, "confidence": VERBALIZED}, **kwargs)

    def registered_confidence(self) -> str:
        """Registered (and logged) as ``registry.REASONED``, though its replies are verbalized."""
        return REASONED

    def letter_logprobs_source(self) -> str:
        """Where a reply's letter log-probabilities come from: ``SCORING``, a later stage (this
        task) that scores the c letters after the prompt and the reply up to its answer, for the
        backends that score any text (hf, vllm, local-completions). Chat backends
        (local-chat-completions, openai-chat-completions) will supply them with the generation
        itself (the answer token's top log-probabilities) and need no scoring stage: this is the
        one place that chooses."""
        return SCORING

    # ------------------------------------------------------------------ data
    def build_all_requests(self, **kwargs: Any) -> None:
        """Read the replies (``--metadata replies``) before building the requests. Here, not when
        the task is built, so that a group holding reasoned tasks (``calidist_<b>_all``) loads
        and lists without them; a run without them stops here, before any model time is spent
        on this task, saying how to get them."""
        if not self.settings.replies:
            raise ValueError(
                f"{self.config.task} scores the replies of {self.reply_task}: run that task "
                "with --log_samples --output_path REPLIES first, then this one (or its group) "
                "with --metadata '{\"replies\": \"REPLIES\"}'; calidist eval and "
                "calidist_tasks.evaluate run both by themselves (README, \"The paper's protocol\")")
        docs = list(self.eval_docs)
        self._replies = EarlierRun.read(
            self.settings.replies, task=self.config.task, key="replies",
            earlier_task=self.reply_task, how="--log_samples --output_path", docs=docs,
            model=self.settings.model)
        self._originals = self.stage1_of(self._replies, docs)
        super().build_all_requests(**kwargs)

    def stage1_of(self, replies: EarlierRun, docs: Sequence[Mapping[str, Any]]
                  ) -> EarlierRun | None:
        """The original replies of a two-stage reply run, whose samples (stage 2's) hold the
        hints only: its stage 1, in the folder its results file names
        (``runs.files.stage1_folder``); None for a one-stage run, and for replies without hints
        (their task ran whole in stage 2)."""
        metadata = replies.metadata()
        if metadata.get("stage") != HINTS or not self.style.hinted:
            return None
        folder = stage1_folder(metadata, replies.file.parent)
        if folder is None:
            raise ValueError(
                f"{self.config.task}: replies {replies.file} is stage 2 of a two-stage run of "
                f"{self.reply_task}, and its stage 1 (original_run "
                f"{metadata.get('original_run')!r}) is not there; give the replies of a run "
                "whose stage-1 folder is kept")
        return EarlierRun.read(folder, task=self.config.task, key="replies' stage 1",
                               earlier_task=self.reply_task,
                               how="--two-stage --log_samples --output_path", docs=docs,
                               model=self.settings.model)

    def logged(self, doc: dict[str, Any]) -> LoggedReplies:
        """The document's answered prompts: every prompt of ``prompt_plans`` from a one-stage
        reply run; from a two-stage one the original (stage 1) and the hints naming a label other
        than its answer (stage 2, ``two_stage.hints_sent``). Refused naming the document when
        any other number of replies is logged (another m, or prompts missing)."""
        if self._replies is None:
            raise RuntimeError(f"{self.config.task}: the replies are read by build_all_requests")
        prompts, replies = logged_replies(self._replies, self._replies.get(doc))
        plans = self.prompt_plans(doc)
        sent = f"{len(plans)} prompts here"
        if self._originals is not None:  # stage 2 logged the hints, stage 1 the original
            first = self._originals.get(doc)
            answer = self._originals.fields(first, ["prediction"])["prediction"]
            original, reply = logged_replies(self._originals, first)
            prompts, replies = original + prompts, reply + replies
            plans = [plans[0], *hints_sent(plans, HINTS, answer)]
            sent = (f"{len(plans)} prompts sent by two stages (the original and the hints naming "
                    f"a label other than its answer {answer}; stage 1 {self._originals.file})")
        if len(replies) != len(plans):
            raise ValueError(
                f"{self.config.task}: {described(doc)}: {len(replies)} replies logged, {sent} "
                f"(replies {self._replies.file}); run {self.reply_task} again with the same m")
        return LoggedReplies(plans, prompts, replies)

    # ------------------------------------------------------------------ requests
    def readings(self, doc: dict[str, Any]) -> list[Reading]:
        """Every reply of the document read (original first, in ``logged`` order)."""
        index = doc[INDEX_FIELD]
        if index not in self._readings:
            choices = list(self.doc_to_choice(doc))
            logged = self.logged(doc)
            shown = [self._request_doc(doc if plan.hint_label is None
                                       else self.distracted_doc(doc, plan), choices)
                     for plan in logged.plans]
            self._readings[index] = [read_reply(reply, s) for reply, s
                                     in zip(logged.replies, shown, strict=True)]
        return self._readings[index]

    def counted(self, doc: dict[str, Any]) -> list[bool]:
        """Per answered prompt, whether it counts: the original, and the hints naming a label
        other than the original reply's answer (the paper's k = (c - 1)·m; the others are not
        scored, and a two-stage reply run did not send them)."""
        prediction = self.readings(doc)[0].answer
        return [plan.hint_label is None or plan.hint_label != prediction
                for plan in self.logged(doc).plans]

    def construct_requests(self, doc: dict[str, Any], ctx: Any, **kwargs: Any) -> list[Instance]:
        """c loglikelihood requests per counted, readable reply: the prompt and the reply up to
        its answer's letter, continued by each letter; one placeholder when there is none (so
        that lm-eval still logs the document)."""
        kwargs = lm_eval_compat.instance_kwargs(kwargs)
        logged = self.logged(doc)
        prompts = [ctx if plan.hint_label is None
                   else self.copy_prompt(self.distracted_doc(doc, plan))
                   for plan in logged.plans]
        for j, (ours, theirs) in enumerate(zip(prompts, logged.prompts, strict=True)):
            self._replies.check_prompt(doc, ours, theirs, f"prompt {j}")
        n_choices = len(self.doc_to_choice(doc))
        requests = []
        if self.letter_logprobs_source() == SCORING:
            for prompt, reply, reading, counts in zip(prompts, logged.replies, self.readings(doc),
                                                      self.counted(doc), strict=True):
                if counts and reading.cut is not None:
                    context = prompt + reply[:reading.cut]
                    requests += [(context, letter) for letter in reading.letters(n_choices)]
        if not requests:
            requests = [(ctx, LETTERS[0])]
        return [Instance(request_type="loglikelihood", doc=doc, arguments=arguments, idx=i,
                         **kwargs) for i, arguments in enumerate(requests)]

    # ------------------------------------------------------------------ results
    def document_record(self, doc: dict[str, Any], results: list[Any]) -> Record:
        """Both readings joined (``join_document``): the log-prob reading is the record itself,
        the verbalized one its ``verbalized``; ``replies`` lists every prompt's reply, answer,
        stated confidence and letter log-probabilities (null where it was not scored), for every
        prompt the reply run answered (a two-stage one: not the hints naming the answer)."""
        where = f"{self.config.task} document {doc[INDEX_FIELD]} ({doc[SOURCE_FIELD]})"
        n_choices = len(self.doc_to_choice(doc))
        logged, readings, counted = self.logged(doc), self.readings(doc), self.counted(doc)
        plans = logged.plans
        scored = sum(c and r.cut is not None for r, c in zip(readings, counted, strict=True))
        if len(results) != max(scored * n_choices, 1):
            raise ValueError(f"{where}: expected {scored * n_choices} answers, got "
                             f"{len(results)}")
        uniform = (math.log(1.0 / n_choices),) * n_choices  # the unreadable rule's 1/c
        kept: list[PromptPlan] = []
        by_logprob: list[Outcome] = []
        by_statement: list[Outcome] = []
        replies, start = [], 0
        for j, (plan, reply, reading, counts) in enumerate(
                zip(plans, logged.replies, readings, counted, strict=True)):
            logprobs = None
            if counts and reading.cut is not None:
                values = [ll for ll, _ in results[start:start + n_choices]]
                start += n_choices
                outcome = outcome_at(values, reading.answer, f"{where} prompt {j}")
                logprobs = list(outcome.letter_logprobs)
            else:
                outcome = Outcome(-1, 1.0 / n_choices, uniform, parsed=False)
            stated = verbalized.outcome_from_parse(
                {"answer": reading.answer, "confidence": reading.stated}, n_choices)
            replies.append({"hint_label": plan.hint_label, "template": plan.template,
                            "counted": counts, "reply": reply, "answer": reading.answer,
                            "stated_confidence": reading.stated, "letter_logprobs": logprobs})
            if counts:
                kept.append(plan)
                by_logprob.append(outcome)
                by_statement.append(stated)
        label = doc[self.config.doc_to_target]
        place = bookkeeping(doc, len(plans) + scored * n_choices)  # generations + scorings
        record = join_document(kept, by_logprob, label, self.settings.delta_mode)
        spoken = join_document(kept, by_statement, label, self.settings.delta_mode)
        unlocated = sum(r.answer is None for r in readings)
        record.update(place, generations=len(plans), parse_failures=unlocated, replies=replies,
                      reply_shape=verbalized.reply_shapes(
                          [{"answer": r.answer, "confidence": r.stated, "shape": r.shape}
                           for r in readings]))
        record["verbalized"] = {
            **spoken, **place, "generations": len(plans),
            "parse_failures": sum(not verbalized.outcome_from_parse(
                {"answer": r.answer, "confidence": r.stated}, n_choices).parsed
                for r in readings)}
        return record

    # ------------------------------------------------------------------ metrics
    def reported_metrics(self) -> list[str]:
        return reasoned_metric_names(self.style.hinted)

    def summarize(self, items: list[dict[str, Any]]) -> dict[str, float]:
        return summarize_reasoned(items, self.settings, self.calibrator_context(),
                                  self.style.hinted)


def summarize_reasoned(records: Sequence[Mapping[str, Any]], settings: Any,
                       context: Mapping[str, Any], distracted: bool) -> dict[str, float]:
    """Both readings of the same replies: the log-prob reading (CaliDist, or Vanilla and the
    logit baselines on the replies' letter log-probabilities) under the plain names, the
    verbalized reading (CaliDist, or Vanilla, Platt and isotonic on the stated confidence) under
    ``registry.STATED``. A saved or saving ``calibrator`` is the log-prob reading's; the verbalized
    reading always fits on its calibration documents."""
    results = summarize_letters(records, settings, context, distracted)
    spoken = summarize_generations(second_reading(records, VERBALIZED), reading_settings(settings),
                                   context, VERBALIZED, distracted)
    lift_reading(records, VERBALIZED)  # logged under the STATED names: "vanilla_verbalized"
    results.update({name + STATED: value for name, value in spoken.items()
                    if name not in SHARED_METRICS})
    results.update(reasoning_metrics(split_records(records)[1]))
    return results
