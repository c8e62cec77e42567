"""A reasoned (``_cot``) task in one command: its replies' run first, then the task.

A reasoned task scores the replies a verbalized task generated (``reasoned``), and lm-eval builds
every request before the model answers, so the replies need a run of their own. ``calidist eval``
and ``calidist_tasks.evaluate`` do it by themselves, the model loaded once
(``lm_eval_compat.models_reused``):

1. the selection's reasoned tasks' reply tasks (``calidist_<b>[_<style>]_verbalized``, samples
   logged) into ``<output_path>/replies`` (a temporary folder without --output_path); their
   results are complete verbalized runs. One stage (every prompt answered), or with
   ``--two-stage`` two (``two_stage``: the original replies in ``<output_path>/replies/stage1``,
   then only the hints naming a label other than each reply's answer), the paper's cost;
2. the rest of the selection (groups expanded, the reply tasks left out: they have run) with
   ``--metadata replies=<that folder>``, through lm-eval or ``--two-stage``'s runner.

Plain lm-eval users run the two commands themselves (README, "The paper's protocol"). A run given
``--metadata replies`` already reads those replies and runs in one step.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from calidist_tasks.data.yaml_configs import task_configs
from calidist_tasks.runs.two_stage import (
    FLAG_OUTPUT,
    FLAG_SAMPLES,
    FLAG_TASKS,
    FLAG_TWO_STAGE,
    expand_tasks,
    flag_values,
    without_flags,
)
from calidist_tasks.scoring.records import STAGE1_FOLDER
from calidist_tasks.settings import SPLIT_STAGES

REPLIES_FOLDER = "replies"  # inside --output_path: the reply tasks' run
ONE_STAGE = {"stage": SPLIT_STAGES[0]}  # a reply run without --two-stage sends every prompt
# lm-eval's result keys holding one entry per task (merged by ``evaluate_with_replies``)
PER_TASK_KEYS = ("results", "samples", "configs", "versions", "n-shot", "higher_is_better",
                 "n-samples")


def staged_selection(names: Iterable[str]) -> tuple[list[str], list[str]]:
    """(reply tasks to run first, tasks to run then) for a selection with reasoned tasks;
    ([], the selection) when it has none."""
    names = list(names)
    expanded = expand_tasks(names)
    configs = task_configs()
    replies = list(dict.fromkeys(configs[name]["reply_task"] for name, kind in expanded
                                 if kind == "reasoned"))
    if not replies:
        return [], names
    return replies, [name for name, _ in expanded if name not in replies]


def _has_replies(metadata: Iterable[Any]) -> bool:
    return any("replies" in str(value) for value in metadata)


def reply_stages(argv: Sequence[str], folder: str | os.PathLike, two_stage: bool = False
                 ) -> tuple[list[str], list[str]] | None:
    """The two ``calidist eval`` command lines of ``argv``'s reasoned tasks: the reply tasks'
    run, its samples in ``folder``, then the rest of the selection reading them; None when the
    selection has no reasoned task or already reads replies (one run does). The reply run is
    one stage unless ``two_stage`` (``calidist eval``'s own --two-stage, taken off ``argv``) or
    ``argv`` holds --two-stage (a command line for ``calidist eval``, which keeps it)."""
    argv = list(argv)
    names = [n.strip() for value in flag_values(argv, FLAG_TASKS, many=True)
             for n in value.split(",") if n.strip()]
    replies, rest = staged_selection(names)
    if not replies or _has_replies(flag_values(argv, ("--metadata",), many=True)):
        return None
    outputs = flag_values(argv, FLAG_OUTPUT)
    base = without_flags(without_flags(argv, FLAG_TASKS, many=True), FLAG_OUTPUT)
    logged = [] if any(a.partition("=")[0] in FLAG_SAMPLES for a in argv) else ["--log_samples"]
    stages = [] if two_stage or FLAG_TWO_STAGE in argv else ["--metadata", json.dumps(ONE_STAGE)]
    return ([*base, "--tasks", ",".join(replies), "--output_path", str(folder), *logged, *stages],
            [*base, "--tasks", ",".join(rest),
             *(["--output_path", outputs[-1]] if outputs else []),
             "--metadata", json.dumps({"replies": str(folder)})])


def run_with_replies(argv: Sequence[str], run: Callable[[list[str]], Any],
                     then: Callable[[list[str]], None], two_stage: bool = False) -> None:
    """``calidist eval``: the reply tasks through ``run``, then the rest of the selection through
    ``then`` (both lm-eval's CLI, or with ``two_stage`` the two-stage runner), the model loaded
    once."""
    from calidist_tasks.backends.lm_eval_compat import models_reused

    outputs = flag_values(argv, FLAG_OUTPUT)
    with tempfile.TemporaryDirectory(prefix="calidist-replies-") as scratch:
        folder = Path(outputs[-1]) / REPLIES_FOLDER if outputs else Path(scratch)
        stages = reply_stages(argv, folder, two_stage)
        if stages is None:
            then(list(argv))
            return
        first, second = stages
        with models_reused():
            print(f"calidist reasoned tasks: replies first "
                  f"({flag_values(first, FLAG_TASKS)[-1]}), samples in {folder}", flush=True)
            run(first)
            print(f"calidist reasoned tasks: scoring the replies "
                  f"({flag_values(second, FLAG_TASKS)[-1]}); the reply tasks' own results are "
                  f"in {folder}", flush=True)
            then(second)


def evaluate_with_replies(evaluate: Callable[..., Any], model: Any, tasks: Sequence[str],
                          metadata: Mapping[str, Any] | None,
                          replies_dir: str | os.PathLike | None,
                          **kwargs: Any) -> dict[str, Any] | None:
    """``calidist_tasks.evaluate`` of a selection with reasoned tasks: the reply tasks, saved to
    ``replies_dir`` (default: a temporary folder; one that cannot be written is refused, OSError,
    before any reply is generated; replies it still fails to take are saved under the recovery
    folder, ``recovery.ResultsNotSaved`` naming it), then the rest reading them; one results dict
    holding every selected task (the reply tasks' entries from the first run). With
    ``two_stage`` the reply run is two-stage too, its stage 1 kept in ``replies_dir/stage1``."""
    from calidist_tasks.backends.lm_eval_compat import models_reused
    from calidist_tasks.runs.files import save_like_lm_eval
    from calidist_tasks.runs.recovery import ResultsNotSaved, check_writable, save_run

    metadata = dict(metadata or {})
    replies, rest = staged_selection(tasks)
    if not replies or "replies" in metadata:
        return evaluate(model, list(tasks), metadata, **kwargs)
    if replies_dir is not None:  # the replies are saved there: refused before they are generated
        check_writable(replies_dir, "replies_dir")
    with models_reused(), tempfile.TemporaryDirectory(prefix="calidist-replies-") as scratch:
        folder = Path(replies_dir or scratch)
        if kwargs.get("two_stage"):  # stage 1 kept beside: the reasoned tasks read it
            first = evaluate(model, replies, metadata, **{
                **kwargs, "log_samples": True, "stage1_dir": str(folder / STAGE1_FOLDER)})
        else:
            first = evaluate(model, replies, {**metadata, **ONE_STAGE},
                             **{**kwargs, "log_samples": True})
        if first is None:
            raise RuntimeError("reasoned tasks run their replies first in one process; under a "
                               "multi-process launcher run the two stages as two commands")
        try:
            save_like_lm_eval(first, folder, "replies")
        except (OSError, RuntimeError) as error:  # the folder failed after the check: keep them
            kept = save_run(first)
            raise ResultsNotSaved(
                f"the replies could not be saved in replies_dir {folder} ({error}); they are "
                f"saved in {kept}: score them without generating again with "
                f"metadata={{'replies': '{kept}'}}") from error
        second = evaluate(model, rest, {**metadata, "replies": str(folder)}, **kwargs)
    if second is not None:
        selected = set(tasks) | {name for name, _ in expand_tasks(tasks)}
        for key in PER_TASK_KEYS:
            kept = {task: value for task, value in (first.get(key) or {}).items()
                    if task in selected and (key != "samples" or kwargs.get("log_samples", True))}
            if key in second or kept:
                second[key] = {**kept, **(second.get(key) or {})}
    return second
