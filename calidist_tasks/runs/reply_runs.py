"""A reasoned (``_cot``) task in one command: its replies' run first, then the task.

A reasoned task scores the replies a verbalized task generated (``reasoned``), and lm-eval builds
every request before the model answers, so the replies need a run of their own. ``calidist eval``
and ``calidist_tasks.evaluate`` do it by themselves, the model loaded once
(``lm_eval_compat.models_reused``), as ``planning.plan_runs`` plans it:

1. the selection's reasoned tasks' reply tasks (``calidist_<b>[_<style>]_verbalized``, samples
   logged) into ``<output_path>/replies`` (a temporary folder without --output_path); their
   results are complete verbalized runs. One stage (every prompt answered), or with
   ``--two-stage`` two (``two_stage``: the original replies in ``<output_path>/replies/stage1``,
   then only the hints naming a label other than each reply's answer), the paper's cost;
2. the rest of the selection (groups expanded, the reply tasks left out: they have run) with
   ``--metadata replies=<that folder>``, itself in two stages with ``--two-stage``.

Plain lm-eval users run the two commands themselves (README, "The paper's protocol"). A run given
``--metadata replies`` already reads those replies and runs in one step.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from calidist_tasks.runs.command_lines import (
    FLAG_OUTPUT,
    FLAG_TWO_STAGE,
    command_line,
    flag_values,
    reads_replies,
    selection,
)
from calidist_tasks.runs.command_lines import REPLIES_FOLDER as REPLIES_FOLDER
from calidist_tasks.runs.planning import ONE_STAGE as ONE_STAGE
from calidist_tasks.runs.planning import OUTPUT, REPLIES, expand_tasks, plan_runs

# lm-eval's result keys holding one entry per task (merged by ``with_reply_results``)
PER_TASK_KEYS = ("results", "samples", "configs", "versions", "n-shot", "higher_is_better",
                 "n-samples")


def reply_stages(argv: Sequence[str], folder: str | os.PathLike, two_stage: bool = False
                 ) -> tuple[list[str], list[str]] | None:
    """The two ``calidist eval`` command lines of ``argv``'s reasoned tasks: the reply tasks'
    run, its samples in ``folder``, then the rest of the selection reading them
    (``command_lines.command_line`` of the one-stage plan); None when the selection has no
    reasoned task or already reads replies (one run does). The reply run is one stage unless
    ``two_stage`` or ``argv`` holds --two-stage (a command line for ``calidist eval``, which
    keeps it and splits the reply run itself)."""
    argv = list(argv)
    names = selection(argv)
    runs = plan_runs(names)
    if len(runs) == 1 or reads_replies(argv):
        return None
    replies, rest = runs
    if two_stage or FLAG_TWO_STAGE in argv:
        replies = replies._replace(metadata={})
    outputs = flag_values(argv, FLAG_OUTPUT)
    folders = {REPLIES: Path(folder), OUTPUT: Path(outputs[-1]) if outputs else None}
    return (command_line(argv, replies, folders, names),
            command_line(argv, rest, folders, names))


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
