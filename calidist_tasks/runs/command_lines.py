"""``calidist eval``'s runs as lm-eval command lines: ``planning.plan_runs``'s plan, written out.

The planner decides the runs of a selection as data (the reply run before the ``_cot`` tasks,
stage 1 before stage 2); ``planned_command_lines`` writes each of them as the command line
lm-eval's CLI runs, from the user's: the same flags, the run's tasks and output folder, its
samples logged when a later run reads them, and one ``--metadata`` holding the keys the run sets
(``stage``) and the folders of the runs it reads (``original_run``, ``replies``); lm-eval merges
every ``--metadata`` of a command line. A selection that needs one run is the user's command line
unchanged. ``cli.run_plan`` carries the lines out; ``reply_runs.reply_stages`` and
``two_stage.plan_two_stage`` are views of the same lines.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from calidist_tasks.runs.planning import (
    OUTPUT,
    REPLIES,
    REPLIES_STAGE1,
    STAGE1,
    PlannedRun,
    plan_runs,
)
from calidist_tasks.scoring.records import STAGE1_FOLDER

FLAG_TASKS = ("--tasks", "-t")
FLAG_OUTPUT = ("--output_path", "-o")
FLAG_SAMPLES = ("--log_samples", "-s")
FLAG_CACHE = ("--use_cache", "-c")
FLAG_METADATA = ("--metadata",)
FLAG_INCLUDE = ("--include_path",)
FLAG_TWO_STAGE = "--two-stage"  # calidist eval's own flag: the plan's two-stage runs
REPLIES_FOLDER = "replies"  # inside --output_path: the reply tasks' run


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


def selection(argv: Sequence[str]) -> list[str]:
    """The task names ``--tasks`` gives (comma-separated, possibly several times)."""
    return [name.strip() for value in flag_values(argv, FLAG_TASKS, many=True)
            for name in value.split(",") if name.strip()]


def reads_replies(argv: Sequence[str]) -> bool:
    """Whether ``--metadata`` names the replies to read (``replies``): no reply run then."""
    return any("replies" in value for value in flag_values(argv, FLAG_METADATA, many=True))


class CommandLine(NamedTuple):
    """One planned run as an lm-eval command line."""

    run: PlannedRun
    argv: list[str]
    folder: Path | None  # where its output goes (None: no --output_path was given)


def command_line(argv: Sequence[str], run: PlannedRun, folders: Mapping[str, Path | None],
                 names: Sequence[str]) -> list[str]:
    """``run`` written from the user's ``argv`` (selecting ``names``): the same flags, its
    tasks and folder unless they are the user's, ``--log_samples`` when a later run reads it,
    and one ``--metadata`` with the keys it sets and the folders it reads."""
    if list(run.tasks) == list(names) and run.folder == OUTPUT:
        line = list(argv)
    else:
        line = [*without_flags(without_flags(argv, FLAG_TASKS, many=True), FLAG_OUTPUT),
                "--tasks", ",".join(run.tasks)]
        if folders.get(run.folder) is not None:
            line += ["--output_path", str(folders[run.folder])]
        if run.folder != OUTPUT and not any(a.partition("=")[0] in FLAG_SAMPLES for a in argv):
            line.append("--log_samples")  # a later run reads its samples
    keys = {**run.metadata, **{key: str(folders[folder]) for key, folder in run.reads.items()}}
    return [*line, "--metadata", json.dumps(keys)] if keys else line


def planned_command_lines(argv: Sequence[str], two_stage: bool = False,
                          replies_folder: str | Path | None = None,
                          replies_given: bool | None = None) -> list[CommandLine]:
    """The runs ``planning.plan_runs`` plans for ``argv``'s selection, as lm-eval command lines
    (``command_line``), in order. Their folders: ``<output_path>`` (the selection),
    ``<output_path>/stage1`` (its stage 1), ``<output_path>/replies`` (the reply run; without
    --output_path ``replies_folder``) and ``<replies>/stage1``. ``replies_given`` (default:
    ``--metadata`` names ``replies``): no reply run. Refuses (SystemExit) what two stages cannot
    run: no ``--tasks``, no ``--output_path``, a ``--metadata`` setting stage or original_run."""
    argv = list(argv)
    names = selection(argv)
    outputs = flag_values(argv, FLAG_OUTPUT)
    if two_stage:
        if not names:
            raise SystemExit("calidist eval --two-stage: give the tasks with --tasks (a --config "
                             "file is not read for them)")
        if not outputs:
            raise SystemExit("calidist eval --two-stage needs --output_path: stage 1's samples "
                             f"are kept in <output_path>/{STAGE1_FOLDER} and read by stage 2")
        if any('"stage"' in v or "stage=" in v or "original_run" in v
               for v in flag_values(argv, FLAG_METADATA, many=True)):
            raise SystemExit("calidist eval --two-stage sets --metadata stage and original_run "
                             "itself; leave them out")
    include = [p for value in flag_values(argv, FLAG_INCLUDE, many=True)
               for p in value.split(",")]  # wrapped tasks' folders (calidist wrap)
    given = reads_replies(argv) if replies_given is None else replies_given
    plan = plan_runs(names, two_stage, replies_given=given, include_path=include)
    output = Path(outputs[-1]) if outputs else None
    replies = (output / REPLIES_FOLDER if output is not None
               else Path(replies_folder) if replies_folder is not None else None)
    folders = {OUTPUT: output, STAGE1: output and output / STAGE1_FOLDER, REPLIES: replies,
               REPLIES_STAGE1: replies and replies / STAGE1_FOLDER}
    return [CommandLine(run, command_line(argv, run, folders, names), folders[run.folder])
            for run in plan]
