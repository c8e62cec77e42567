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

from calidist_tasks.runs.planning import ONE_STAGE, expand_tasks, plan_runs
from calidist_tasks.runs.two_stage import (
    FLAG_OUTPUT,
    FLAG_SAMPLES,
    FLAG_TASKS,
    FLAG_TWO_STAGE,
    flag_values,
    without_flags,
)

REPLIES_FOLDER = "replies"  # inside --output_path: the reply tasks' run
# lm-eval's result keys holding one entry per task (merged by ``with_reply_results``)
PER_TASK_KEYS = ("results", "samples", "configs", "versions", "n-shot", "higher_is_better",
                 "n-samples")


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
    runs = plan_runs(names)
    if len(runs) == 1 or _has_replies(flag_values(argv, ("--metadata",), many=True)):
        return None
    replies, rest = runs[0].tasks, runs[-1].tasks
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


def with_reply_results(results: dict[str, Any], replies: Mapping[str, Any],
                       selection: Sequence[str], log_samples: bool = True) -> dict[str, Any]:
    """``results`` of the selection's last run with the reply run's entries (``replies``) of
    the tasks the selection names (``PER_TASK_KEYS``; its samples only with ``log_samples``)."""
    selected = set(selection) | {name for name, _ in expand_tasks(selection)}
    for key in PER_TASK_KEYS:
        kept = {task: value for task, value in (replies.get(key) or {}).items()
                if task in selected and (key != "samples" or log_samples)}
        if key in results or kept:
            results[key] = {**kept, **(results.get(key) or {})}
    return results
