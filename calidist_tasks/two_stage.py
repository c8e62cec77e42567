"""Two-stage runs: the paper's minimum cost, 1 + (c - 1)·m prompts per document.

lm-eval builds every request before the model answers, so a single-stage hinted task sends hints
for all c labels and ``joining`` drops the ones naming the prediction ŷ. Sending only the paper's
prompts needs ŷ first, so the run is split (``--metadata stage``, ``settings.STAGES``):

1. ``stage: original``: a hinted task sends its original prompts only; its record is the
   original answer (prediction, confidence, letter log-probabilities), logged with
   ``--log_samples``;
2. ``stage: hints`` with ``original_run`` (stage 1's output folder or samples file): the task reads
   each document's stage-1 outcome (``read_stage1``: same task, same documents, checked before any
   model time) and sends only the hints naming a label other than ŷ (``hints_sent``); the record
   joins stage 1's original outcome with them (``joining.join_document``), so records and metrics
   have the single-stage form (its ``hints`` lack the hints naming ŷ, which never count).

``calidist eval --two-stage`` and ``calidist_tasks.evaluate(..., two_stage=True)`` run both stages
in one process with one model load (``lm_eval_compat.models_reused``); ``--use_cache`` answers a
rerun's stage 1 from the cache. docs/method.md, "Two-stage runs".
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from calidist_tasks.joining import Outcome, PromptPlan, outcome_from_loglikelihoods
from calidist_tasks.records import (
    INDEX_FIELD,
    LOGPROB,
    SOURCE_FIELD,
    STAGE1_FOLDER,
    is_failed,
    is_record,
)
from calidist_tasks.run_files import SAMPLES_NAME, model_name, read_jsonl, samples_file_of
from calidist_tasks.settings import STAGES
from calidist_tasks.styles import content_key
from calidist_tasks.yaml_configs import task_configs

ALL, ORIGINAL, HINTS = STAGES
LOGIT_CLASS = "calidist_tasks.task.CaliDistTask"
GENERATION_CLASS = "calidist_tasks.generation.GenerationTask"
UNKNOWN_MODEL = "unknown model"  # what run_files.model_name says when none is recorded


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
def stage1_file(path: str | Path, task: str) -> Path:
    """Stage 1's samples file of ``task`` (``run_files.samples_file_of``)."""
    return samples_file_of(path, task, "original_run",
                           "--metadata '{\"stage\": \"original\"}' --log_samples --output_path")


def read_stage1(path: str | Path, task: str, docs: Sequence[Mapping[str, Any]],
                logits: bool, model: str | None = None,
                n_choices: Callable[[Mapping[str, Any]], int] | None = None
                ) -> dict[int, Stage1]:
    """Document index -> its stage-1 answer, from ``task``'s samples under ``path``.

    Refused (ValueError naming the file, the task and the document) when stage 1 ran another
    ``model`` (``check_stage1_model``), a logged document is not this run's document of the same
    index (another data, calib_size, eval_size or split_seed) or is logged twice, a record lacks
    what stage 2 needs, or its answer is impossible (``check_stage1_answer``, with the
    document's option count from ``n_choices``). Documents stage 1 did not log (``--limit``)
    are refused when stage 2 builds their requests (``Stage1Lookup.get``)."""

    file = stage1_file(path, task)
    check_stage1_model(file, task, model)
    by_index = {doc[INDEX_FIELD]: doc for doc in docs}
    found: dict[int, Stage1] = {}
    lines: dict[int, int] = {}  # index -> the line that logged it
    for number, line in enumerate(read_jsonl(file), start=1):
        where = f"{task}: original_run {file} line {number}"
        index, record = matched_sample(line, by_index, where)
        doc = by_index[index]
        if index in lines:
            raise ValueError(f"{where}: document {index} ({doc.get(SOURCE_FIELD)}) is logged "
                             f"twice (first at line {lines[index]}); run stage 1 again")
        lines[index] = number
        if is_failed(record):
            raise ValueError(f"{where}: document {index} has no usable stage-1 answer "
                             f"({record['error']}); run stage 1 again")
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
            raise ValueError(f"{where}: the record of document {index} lacks {error} (not a "
                             f"{task} run)") from None
        check_stage1_answer(outcome, n_choices(doc) if n_choices else None,
                            f"{where}: document {index} ({doc.get(SOURCE_FIELD)})")
        # what the original prompt cost, also when stage 1 was a single-stage run
        found[index] = Stage1(outcome, len(letters) if letters else 1, line.get("prompt_hash"),
                              logprob)
    if not found:
        raise ValueError(f"{task}: original_run {file} holds no samples")
    return found


def check_stage1_model(file: Path, task: str, model: str | None) -> None:
    """Refuse stage-1 samples that the results file lm-eval wrote beside them (same stamp)
    says another model answered; nothing to compare when either model is unknown."""
    match = SAMPLES_NAME.match(file.name)
    results = file.parent / f"results_{match['stamp']}.json" if match else None
    if not model or results is None or not results.is_file():
        return
    try:
        config = json.loads(results.read_text(encoding="utf-8"))["config"]
        theirs = model_name({"config": {"model_args": config["model_args"]}})  # not the backend
    except (OSError, ValueError, AttributeError, KeyError, TypeError):
        return
    if theirs != UNKNOWN_MODEL and theirs != model:
        raise ValueError(f"{task}: original_run {file} was answered by model {theirs!r} "
                         f"({results.name}), not this run's {model!r}; run stage 1 with this "
                         "model")


def check_stage1_answer(outcome: Outcome, n_choices: int | None, where: str) -> None:
    """Refuse an answer no run gives (ValueError naming ``where``): a confidence that is not a
    probability, a prediction outside the document's ``n_choices`` options (-1 only when the
    reply was unreadable), letter log-probabilities of another option count, or a prediction
    and confidence that are not the softmax of its own letter log-probabilities."""
    if not (math.isfinite(outcome.confidence) and 0.0 <= outcome.confidence <= 1.0):
        raise ValueError(f"{where}: stage-1 confidence {outcome.confidence!r} is not a "
                         "probability in [0, 1]")
    prediction = outcome.prediction
    if n_choices is not None and not (0 <= prediction < n_choices or (
            prediction == -1 and not outcome.parsed)):
        raise ValueError(f"{where}: stage-1 prediction {prediction!r} is outside the label "
                         f"space 0..{n_choices - 1}")
    letters = outcome.letter_logprobs
    if letters is None:
        return
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
def matched_sample(line: Any, by_index: Mapping[int, Mapping[str, Any]],
                   where: str) -> tuple[int, dict[str, Any]]:
    """(document index, record) of one line of an earlier run's samples file. Refused
    (ValueError naming ``where``) when it is not a sample of a calidist task run with
    --log_samples, or its document is not this run's document of the same index (another data,
    calib_size, eval_size or split_seed)."""
    logged = line.get("doc") if isinstance(line, dict) else None
    record = next((v for v in line.values() if is_record(v)), None) if logged else None
    if not isinstance(logged, dict) or record is None or INDEX_FIELD not in logged:
        raise ValueError(f"{where}: not a sample of a calidist task run with --log_samples")
    index = logged[INDEX_FIELD]
    doc = by_index.get(index)
    if doc is None or content_key(doc) != content_key(logged) or (
            doc.get(SOURCE_FIELD) != logged.get(SOURCE_FIELD)):
        ours = "no such document" if doc is None else f"{doc.get(SOURCE_FIELD)}"
        raise ValueError(
            f"{where}: document {index} ({logged.get(SOURCE_FIELD)}) is not this run's "
            f"document {index} ({ours}); run both stages on the same data, calib_size, "
            "eval_size and split_seed")
    return index, record


class Stage1Lookup:
    """Stage 1's answers of one task, read once; ``get`` names what is missing."""

    def __init__(self, answers: dict[int, Stage1], file: str, task: str) -> None:
        self.answers, self.file, self.task = answers, file, task

    def get(self, doc: Mapping[str, Any]) -> Stage1:
        found = self.answers.get(doc[INDEX_FIELD])
        if found is None:
            raise ValueError(
                f"{self.task}: document {doc[INDEX_FIELD]} ({doc.get(SOURCE_FIELD)}) has no answer "
                f"in original_run {self.file}; stage 1 must log every document stage 2 runs "
                "(the same --limit, or none)")
        return found


def check_original_prompt(stage1: Stage1, prompt: Any, task: str, doc: Mapping[str, Any],
                          file: str) -> None:
    """Refuse stage 1's answer when its original prompt was not this run's (another
    --num_fewshot, chat template or system instruction)."""
    if stage1.prompt_hash is None or not isinstance(prompt, str):
        return
    from lm_eval.utils import hash_string

    if hash_string(prompt) != stage1.prompt_hash:
        raise ValueError(
            f"{task}: document {doc[INDEX_FIELD]} ({doc.get(SOURCE_FIELD)}): its original prompt "
            f"in original_run {file} is not this run's; run both stages with the same "
            "--num_fewshot, --apply_chat_template, --system_instruction and --metadata seed")


# ---------------------------------------------------------------------- which tasks
def expand_tasks(names: Iterable[str]) -> list[tuple[str, str]]:
    """(task, kind) of every task ``names`` selects, our groups expanded: kind ``logit`` (a
    hinted log-likelihood task: two stages), ``verbalized`` (a hinted verbalized task: two
    stages), ``reasoned`` (a reasoned task: runs after its replies' run, ``reasoned_stages``),
    ``single`` (ours, one stage: no hints, or staged itself like GSM8K), ``other`` (not ours:
    stage 2 only)."""
    configs = task_configs()
    found: list[tuple[str, str]] = []

    def visit(name: str) -> None:
        config = configs.get(name)
        if config is None:
            found.append((name, "other"))
        elif "group" in config:
            for member in config.get("task") or []:
                visit(member if isinstance(member, str) else member.get("task"))
        elif "reply_task" in config:
            found.append((name, "reasoned"))
        else:
            hinted = config.get("distractor", "none") != "none"
            kind = str(config.get("class", "")).split()[-1]
            if hinted and kind == LOGIT_CLASS:
                found.append((name, "logit"))
            elif hinted and kind == GENERATION_CLASS and config.get(
                    "confidence", "verbalized") == "verbalized":
                found.append((name, "verbalized"))
            else:
                found.append((name, "single"))

    for name in names:
        visit(name)
    return list(dict.fromkeys(found))


# ---------------------------------------------------------------------- counting
class Tally(NamedTuple):
    """Prompts a hinted task built in one stage: documents, prompts sent, and what a
    single-stage run would have sent for the same documents."""

    documents: int = 0
    sent: int = 0
    single_stage: int = 0


# (task, stage) -> Tally, added to as requests are built (``count_prompts``); read and reset by
# ``run_two_stage`` to print each stage's exact counts.
TALLIES: dict[tuple[str, str], Tally] = {}


def count_prompts(task: str, stage: str, sent: int, single_stage: int) -> None:
    """Count one document's prompts (``CaliDistTask.construct_requests``)."""
    old = TALLIES.get((task, stage), Tally())
    TALLIES[(task, stage)] = Tally(old.documents + 1, old.sent + sent,
                                   old.single_stage + single_stage)


# ---------------------------------------------------------------------- calidist eval --two-stage
FLAG_TASKS = ("--tasks", "-t")
FLAG_OUTPUT = ("--output_path", "-o")
FLAG_SAMPLES = ("--log_samples", "-s")
FLAG_CACHE = ("--use_cache", "-c")


def flag_values(argv: Sequence[str], flags: tuple[str, ...], many: bool = False) -> list[str]:
    """The values given to ``flags`` in an lm-eval argv (``--flag v``, ``--flag=v``)."""
    values: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, value = arg.partition("=")
        if name in flags and eq:
            values.append(value)
        elif arg in flags:
            j = i + 1
            while j < len(argv) and not argv[j].startswith("-"):
                values.append(argv[j])
                j += 1
                if not many:
                    break
            i = j - 1
        i += 1
    return values


def without_flags(argv: Sequence[str], flags: tuple[str, ...], many: bool = False) -> list[str]:
    """``argv`` without ``flags`` and their values."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg.partition("=")[0] in flags and "=" in arg:
            i += 1
            continue
        if arg in flags:
            i += 1
            while i < len(argv) and not argv[i].startswith("-"):
                i += 1
                if not many:
                    break
            continue
        out.append(arg)
        i += 1
    return out


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
    ``<output_path>/stage1``) and stage 2 (the whole selection, hints only) from an lm-eval argv.
    Refuses (SystemExit) what two stages cannot run."""
    argv = list(argv)
    outputs = flag_values(argv, FLAG_OUTPUT)
    names = [n.strip() for value in flag_values(argv, FLAG_TASKS, many=True)
             for n in value.split(",") if n.strip()]
    if not names:
        raise SystemExit("calidist eval --two-stage: give the tasks with --tasks (a --config file "
                         "is not read for them)")
    if not outputs:
        raise SystemExit("calidist eval --two-stage needs --output_path: stage 1's samples are "
                         f"kept in <output_path>/{STAGE1_FOLDER} and read by stage 2")
    if flag_values(argv, ("--metadata",), many=True) and any(
            '"stage"' in v or "stage=" in v or "original_run" in v
            for v in flag_values(argv, ("--metadata",), many=True)):
        raise SystemExit("calidist eval --two-stage sets --metadata stage and original_run "
                         "itself; leave them out")
    output = Path(outputs[-1])
    stage1_dir = output / STAGE1_FOLDER
    hinted = [name for name, kind in expand_tasks(names) if kind in ("logit", "verbalized")]
    stage1 = None
    if hinted:
        stage1 = [*without_flags(without_flags(argv, FLAG_TASKS, many=True), FLAG_OUTPUT),
                  "--tasks", ",".join(hinted), "--output_path", str(stage1_dir),
                  *([] if flag_values(argv, FLAG_SAMPLES) or any(a in FLAG_SAMPLES for a in argv)
                    else ["--log_samples"]),
                  "--metadata", json.dumps({"stage": ORIGINAL})]
    stage2 = [*argv, "--metadata", json.dumps({"stage": HINTS, "original_run": str(stage1_dir)})]
    return TwoStagePlan(stage1, stage2, stage1_dir, output, hinted)


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


def run_two_stage(argv: Sequence[str], run: Any) -> Any:
    """``calidist eval --two-stage``: stage 1 then stage 2 through ``run`` (lm-eval's CLI in this
    process, ``cli.lm_eval_main``), the model loaded once; stage 1 prints no results table (its
    numbers are original-prompt baselines under the hinted task's name). A failing stage 2
    keeps stage 1's folder and says how to resume. Returns what stage 2's ``run`` returned."""
    from calidist_tasks.lm_eval_compat import models_reused
    from calidist_tasks.recovery import check_writable

    plan = plan_two_stage(argv)
    for folder in (plan.output, plan.stage1_dir):  # before stage 1's model time
        try:
            check_writable(folder, "--output_path" if folder == plan.output else "stage 1 folder")
        except OSError as error:
            raise SystemExit(f"calidist eval --two-stage: {error}") from None
    cache = flag_values(argv, FLAG_CACHE)
    TALLIES.clear()
    with models_reused():
        if plan.stage1 is not None:
            print(f"calidist two-stage: stage 1 ({', '.join(plan.hinted)}): original prompts, "
                  f"samples in {plan.stage1_dir}", flush=True)
            run(plan.stage1, table=False)
        else:
            print("calidist two-stage: no hinted task selected; one stage", flush=True)
        try:
            results = run(plan.stage2)
        except (Exception, SystemExit) as error:  # noqa: BLE001 - reported, then re-raised
            if plan.stage1 is None or (isinstance(error, SystemExit) and not error.code):
                raise
            resume = (f"rerun the same command: stage 1 is answered from the cache {cache[-1]}"
                      if cache else "rerun the same command with --use_cache PATH (this run's "
                      "stage 1 was not cached, so it runs once more)")
            print(f"calidist two-stage: stage 2 failed ({type(error).__name__}: {error}); stage "
                  f"1's samples are kept in {plan.stage1_dir}; to resume, {resume}",
                  file=sys.stderr, flush=True)
            raise
    lines = count_lines(plan.hinted)
    if lines:
        print("calidist two-stage prompt counts:", *lines, sep="\n", flush=True)
    return results


def evaluate_two_stage(evaluate: Any, model: Any, tasks: Sequence[str],
                       metadata: Mapping[str, Any] | None, stage1_dir: str | os.PathLike | None,
                       **kwargs: Any) -> dict[str, Any] | None:
    """``calidist_tasks.evaluate(..., two_stage=True)``: stage 1 (the hinted tasks' original
    prompts) then stage 2 (every task, hints only) through ``evaluate``, the model loaded once;
    stage 1's samples are written to ``stage1_dir`` (default: a temporary folder) for stage 2."""
    import tempfile

    from calidist_tasks.lm_eval_compat import models_reused
    from calidist_tasks.recovery import check_writable
    from calidist_tasks.run_files import save_like_lm_eval

    metadata = dict(metadata or {})
    if {"stage", "original_run"} & set(metadata):
        raise TypeError("two_stage=True sets the metadata stage and original_run itself")
    if stage1_dir:  # before any model time
        check_writable(stage1_dir, "stage1_dir")
    hinted = [name for name, kind in expand_tasks(tasks) if kind in ("logit", "verbalized")]
    with models_reused(), tempfile.TemporaryDirectory(prefix="calidist-stage1-") as scratch:
        folder = Path(stage1_dir or scratch)
        if hinted:
            first = evaluate(model, hinted, {**metadata, "stage": ORIGINAL},
                             **{**kwargs, "log_samples": True})
            if first is None:
                raise RuntimeError("two_stage=True runs in one process; under a multi-process "
                                   "launcher run the two stages as two commands")
            save_like_lm_eval(first, folder, "stage 1")
        return evaluate(model, list(tasks), {**metadata, "stage": HINTS,
                                             "original_run": str(folder)}, **kwargs)
