"""Two-stage runs: the paper's minimum cost, 1 + (c - 1)·m prompts per document.

lm-eval builds every request before the model answers, so a single-stage hinted task sends hints
for all c labels and ``joining`` drops the ones naming the prediction ŷ. Sending only the paper's
prompts needs ŷ first, so the run is split (``--metadata stage``, ``settings.SPLIT_STAGES``):

1. ``stage: original``: a hinted task sends its original prompts only; its record is the
   original answer (prediction, confidence, letter log-probabilities), logged with
   ``--log_samples``;
2. ``stage: hints`` with ``original_run`` (stage 1's output folder or samples file): the task reads
   each document's stage-1 outcome (``Stage1Answers``: same task, same documents, checked before any
   model time) and sends only the hints naming a label other than ŷ (``hints_sent``); the record
   joins stage 1's original outcome with them (``joining.join_document``), so records and metrics
   have the single-stage form (its ``hints`` lack the hints naming ŷ, which never count).

``calidist eval --two-stage`` and ``calidist_tasks.evaluate(..., two_stage=True)`` run both stages
in one process with one model load (``lm_eval_compat.models_reused``), as ``planning.plan_runs``
plans them; ``--use_cache`` answers a rerun's stage 1 from the cache. docs/method.md, "Two-stage
runs".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from calidist_tasks.runs.command_lines import FLAG_OUTPUT, flag_values, planned_command_lines
from calidist_tasks.runs.earlier_runs import EarlierRun, Logged, described
from calidist_tasks.runs.planning import ALL, HINTS, ORIGINAL
from calidist_tasks.runs.prompt_logging import first_prompt_hash
from calidist_tasks.scoring.joining import Outcome, PromptPlan, outcome_from_loglikelihoods
from calidist_tasks.scoring.records import INDEX_FIELD, LOGPROB, STAGE1_FOLDER


class Stage1(NamedTuple):
    """One document's stage-1 answer, as stage 2 reads it from the samples file."""

    outcome: Outcome  # the original prompt's prediction, confidence, log-probabilities
    requests: int  # requests of the original prompt: one per letter, or one generation
    prompt_hash: str | None  # lm-eval's hash of the original prompt (None: not logged)
    logprob: Outcome | None = None  # a chat reply's log-prob outcome (answer_logprobs)


def hints_sent(plans: Sequence[PromptPlan], stage: str,
               prediction: Any = None) -> list[PromptPlan]:
    """The hinted plans a stage sends: every one (all), none (original), or those naming a label
    other than stage 1's ``prediction`` (hints)."""
    if stage == ORIGINAL:
        return []
    hinted = [plan for plan in plans if plan.hint_label is not None]
    if stage == HINTS:
        return [plan for plan in hinted if plan.hint_label != prediction]
    return hinted


# ---------------------------------------------------------------------- reading stage 1
class Stage1Answers:
    """Stage 1's answers of one task (stage ``hints``), read once from its run
    (``earlier_runs.EarlierRun``, key ``original_run``)."""

    def __init__(self, run: EarlierRun, answers: dict[int, Stage1]) -> None:
        self.run, self.answers = run, answers

    @classmethod
    def read(cls, path: str | Path, task: str, docs: Sequence[Mapping[str, Any]], logits: bool,
             model: str | None = None,
             n_choices: Callable[[Mapping[str, Any]], int] | None = None) -> Stage1Answers:
        """Every document's stage-1 answer from ``task``'s samples under ``path``, checked before
        any model time: refused (ValueError naming the file, the line and the document) where
        ``EarlierRun.read`` refuses the run, a record has no usable answer or lacks what stage 2
        needs (letter log-probabilities when ``logits``), or its answer is impossible
        (``check_stage1_answer``, with the document's option count from ``n_choices``).
        Documents stage 1 did not log (``--limit``) are refused when stage 2 builds their
        requests (``get``)."""
        run = EarlierRun.read(path, task=task, key="original_run", earlier_task=task,
                              how="--metadata '{\"stage\": \"original\"}' --log_samples "
                              "--output_path", docs=docs, model=model)
        by_index = {doc[INDEX_FIELD]: doc for doc in docs}
        answers = {index: stage1_answer(run, logged, logits,
                                        n_choices(by_index[index]) if n_choices else None)
                   for index, logged in run.logged.items()}
        return cls(run, answers)

    def get(self, doc: Mapping[str, Any]) -> Stage1:
        """``doc``'s stage-1 answer; refused naming the document when stage 1 did not log it."""
        self.run.get(doc)  # refuses a document stage 1 did not log, naming it and the file
        return self.answers[doc[INDEX_FIELD]]

    def check_prompt(self, doc: Mapping[str, Any], prompt: Any) -> None:
        """Refuse stage 1's answer when its original prompt was not this run's (another
        --num_fewshot, chat template, system instruction or seed)."""
        from lm_eval.utils import hash_string

        ours = hash_string(prompt) if isinstance(prompt, str) else prompt
        self.run.check_prompt(doc, ours, self.get(doc).prompt_hash, "its original prompt")


def stage1_answer(run: EarlierRun, logged: Logged, logits: bool,
                  n_choices: int | None) -> Stage1:
    """One line's stage-1 answer (``Stage1Answers.read``)."""
    record = run.record(logged)
    where = f"{run.where(logged)}: {described(logged.sample['doc'])}"
    try:
        letters = record.get("letter_logprobs")
        if logits and not letters:
            raise KeyError("letter_logprobs")
        outcome = Outcome(record["prediction"], float(record["confidence"]),
                          tuple(letters) if letters else None, bool(record["parsed"]))
        scored = record.get(LOGPROB)
        logprob = None if scored is None else Outcome(
            scored["prediction"], float(scored["confidence"]),
            tuple(scored.get("letter_logprobs") or ()) or None, bool(scored["parsed"]))
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"{where}: its record lacks {error} (not a {run.task} run)") from None
    check_stage1_answer(outcome, n_choices, where)
    # what the original prompt cost, also when stage 1 was a single-stage run
    return Stage1(outcome, len(letters) if letters else 1, first_prompt_hash(logged.sample),
                  logprob)


def check_stage1_answer(outcome: Outcome, n_choices: int | None, where: str) -> None:
    """Refuse an answer no run gives (ValueError naming ``where``): a confidence that is not a
    probability, a prediction that is not an integer or lies outside the document's
    ``n_choices`` options (-1 only when the reply was unreadable), letter log-probabilities
    that are not finite numbers at most 0 or of another option count, or a prediction
    and confidence that are not the softmax of its own letter log-probabilities."""
    if not (math.isfinite(outcome.confidence) and 0.0 <= outcome.confidence <= 1.0):
        raise ValueError(f"{where}: stage-1 confidence {outcome.confidence!r} is not a "
                         "probability in [0, 1]")
    prediction = outcome.prediction
    if isinstance(prediction, bool) or not isinstance(prediction, int):
        raise ValueError(f"{where}: stage-1 prediction {prediction!r} is not an option index "
                         "(an integer)")
    if n_choices is not None and not (0 <= prediction < n_choices or (
            prediction == -1 and not outcome.parsed)):
        raise ValueError(f"{where}: stage-1 prediction {prediction!r} is outside the label "
                         f"space 0..{n_choices - 1}")
    letters = outcome.letter_logprobs
    if letters is None:
        return
    impossible = [value for value in letters if isinstance(value, bool) or not isinstance(
        value, (int, float)) or not (math.isfinite(value) and value <= 0.0)]
    if impossible:
        raise ValueError(f"{where}: stage-1 letter log-probabilities {list(letters)} hold "
                         f"{impossible[0]!r}; a log-probability is a finite number at most 0")
    if n_choices is not None and len(letters) != n_choices:
        raise ValueError(f"{where}: stage 1 has {len(letters)} letter log-probabilities for "
                         f"{n_choices} options")
    own = outcome_from_loglikelihoods(letters, where)
    if own.prediction != prediction or not math.isclose(own.confidence, outcome.confidence,
                                                        rel_tol=1e-9, abs_tol=1e-12):
        raise ValueError(f"{where}: stage-1 prediction {prediction!r} at confidence "
                         f"{outcome.confidence!r} contradicts its own letter log-probabilities "
                         f"{list(letters)} (prediction {own.prediction}, confidence "
                         f"{own.confidence:.6g})")


# ---------------------------------------------------------------------- the task's split
class RunStage:
    """Which of a hinted task's prompts this run sends (``--metadata stage``: ``ALL``,
    ``ORIGINAL`` or ``HINTS``), and in stage hints stage 1's answers: what ``CaliDistTask`` asks
    of a two-stage run."""

    def __init__(self, task: str, stage: str) -> None:
        self.task, self.stage = task, stage
        self.stage1: Stage1Answers | None = None  # stage hints: read by ``read_stage1``

    def read_stage1(self, path: str | Path, docs: Sequence[Mapping[str, Any]], logits: bool,
                    model: str | None,
                    n_choices: Callable[[Mapping[str, Any]], int] | None) -> None:
        """Stage hints: read (and check) stage 1's answers now, before model time."""
        self.stage1 = Stage1Answers.read(path, self.task, docs, logits, model, n_choices)

    def first(self, doc: Mapping[str, Any]) -> Stage1 | None:
        """Stage hints: the document's answer from stage 1 (None in other stages)."""
        return self.stage1.get(doc) if self.stage1 is not None else None

    def sent(self, doc: Mapping[str, Any], plans: list[PromptPlan]) -> list[PromptPlan]:
        """The plans of the prompts this run sends of the document's ``plans``: every one (stage
        all), the original (stage original), or the hints naming a label other than stage 1's
        prediction (stage hints; ``hints_sent``)."""
        if self.stage == ALL:
            return plans
        first = self.first(doc)
        hinted = hints_sent(plans, self.stage, first and first.outcome.prediction)
        return hinted if self.stage == HINTS else plans[:1]

    def joined(self, doc: Mapping[str, Any], sent: list[PromptPlan], outcomes: list[Outcome]
               ) -> tuple[list[PromptPlan], list[Outcome]]:
        """The plans and outcomes ``join_document`` takes, the original first: those of the
        prompts ``sent``, with stage 1's original answer in front in stage hints."""
        first = self.first(doc)
        if first is None:
            return sent, outcomes
        return [PromptPlan(), *sent], [first.outcome, *outcomes]

    def check_prompt(self, doc: Mapping[str, Any], prompt: Any) -> None:
        """Stage hints: refuse stage 1's answer to another original prompt."""
        if self.stage1 is not None:
            self.stage1.check_prompt(doc, prompt)

    def count(self, sent: int, single_stage: int) -> None:
        """Count one document's prompts in a split run (``TALLIES``)."""
        if self.stage != ALL:
            count_prompts(self.task, self.stage, sent, single_stage)


# ---------------------------------------------------------------------- counting
class Tally(NamedTuple):
    """Prompts a hinted task built in one stage: documents, prompts sent, and what a
    single-stage run would have sent for the same documents."""

    documents: int = 0
    sent: int = 0
    single_stage: int = 0


# (task, stage) -> Tally, added to as requests are built (``count_prompts``); read and reset by
# ``cli.run_plan`` to print each stage's exact counts.
TALLIES: dict[tuple[str, str], Tally] = {}


def count_prompts(task: str, stage: str, sent: int, single_stage: int) -> None:
    """Count one document's prompts (``CaliDistTask.construct_requests``)."""
    old = TALLIES.get((task, stage), Tally())
    TALLIES[(task, stage)] = Tally(old.documents + 1, old.sent + sent,
                                   old.single_stage + single_stage)


# ---------------------------------------------------------------------- calidist eval --two-stage
class TwoStagePlan(NamedTuple):
    """What ``calidist eval --two-stage`` runs: stage 1's argv (None: no hinted task) and
    stage 2's, and where stage 1's output goes."""

    stage1: list[str] | None
    stage2: list[str]
    stage1_dir: Path
    output: Path
    hinted: list[str]


def plan_two_stage(argv: Sequence[str]) -> TwoStagePlan:
    """Stage 1 (the selection's hinted tasks, original prompts only, samples logged in
    ``<output_path>/stage1``) and stage 2 (the whole selection, hints only) of an lm-eval argv
    whose replies are given or not needed: the plan's command lines
    (``command_lines.planned_command_lines``). Refuses (SystemExit) what two stages cannot
    run."""
    lines = planned_command_lines(argv, two_stage=True, replies_given=True)
    output = Path(flag_values(argv, FLAG_OUTPUT)[-1])
    first = lines[0] if len(lines) > 1 else None
    return TwoStagePlan(first and first.argv, lines[-1].argv, output / STAGE1_FOLDER, output,
                        list(first.run.tasks) if first else [])


def count_lines(tasks: Sequence[str]) -> list[str]:
    """Per hinted task, the prompts each stage built (``TALLIES``) and single-stage's count."""
    lines = []
    for task in tasks:
        first, second = TALLIES.get((task, ORIGINAL)), TALLIES.get((task, HINTS))
        if not first or not second:
            continue
        per_doc = (first.sent + second.sent) / second.documents
        lines.append(f"  {task}: stage 1 sent {first.sent} prompts ({first.documents} "
                     f"documents), stage 2 {second.sent} ({second.documents}): {per_doc:g} per "
                     f"document; single-stage: {second.single_stage / second.documents:g}")
    return lines
