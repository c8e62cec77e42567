"""The plan of a multi-run selection: which lm-eval runs, in which order, reading what.

lm-eval builds every request before the model answers, so two kinds of task need an earlier run
of the same command: a reasoned (``_cot``) task reads its ``_verbalized`` task's replies
(``reply_runs``), and with ``--two-stage`` a hinted task's stage 2 reads stage 1's answers
(``two_stage``). ``plan_runs`` decides it once, as data: the reply run first (two-stage itself
with ``--two-stage``), then the rest of the selection, each split into stage 1 (the hinted
tasks' original prompts) and stage 2 under ``--two-stage``. The executors only carry the plan
out: ``calidist_tasks.evaluate`` (Python: one ``simple_evaluate`` per run) and ``calidist eval``
(``cli.run_plan``: one lm-eval command line per run, ``command_lines.planned_command_lines``),
neither deciding anything the plan does not say. A run's folders are named by role
(``REPLIES``, ``REPLIES_STAGE1``, ``STAGE1``, ``OUTPUT``); each executor says where they are.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from calidist_tasks.data.yaml_configs import task_configs
from calidist_tasks.registry import splits_in_stages
from calidist_tasks.settings import SPLIT_STAGES

ALL, ORIGINAL, HINTS = SPLIT_STAGES
ONE_STAGE = {"stage": ALL}  # a reply run without --two-stage sends every prompt
# (task, kind) kinds of ``expand_tasks``
SPLIT = "split"  # runs in two stages under --two-stage (``registry.splits_in_stages``)
REASONED = "reasoned"  # reads its replies' run (``reply_task``)
SINGLE = "single"  # ours, one run: no hints, or staged itself like GSM8K
OTHER = "other"  # not ours: stage 2 only

# The folders of a plan's runs, by role
OUTPUT = "output"  # the command's own output (--output_path; Python: the returned results)
STAGE1 = "stage1"  # stage 1 of the selection (<output_path>/stage1; Python: stage1_dir)
REPLIES = "replies"  # the reply run (<output_path>/replies; Python: replies_dir)
REPLIES_STAGE1 = "replies/stage1"  # stage 1 of a two-stage reply run


class PlannedRun(NamedTuple):
    """One lm-eval run of a plan."""

    role: str  # what it is, in messages: "replies stage 1", "replies", "stage 1", ""
    tasks: tuple[str, ...]
    metadata: Mapping[str, str]  # the --metadata keys it sets itself (``stage``)
    reads: Mapping[str, str]  # --metadata key -> the folder (a role above) of the run it reads
    folder: str  # where its samples go: a role above


def expand_tasks(names: Iterable[str], include_path: Sequence[str] = ()
                 ) -> list[tuple[str, str]]:
    """(task, kind) of every task ``names`` selects, our groups expanded (with the reasoned
    variants a family group lists under ``metadata: reasoned``): kind ``SPLIT`` (two stages
    under --two-stage: its variant splits, ``registry.splits_in_stages``), ``REASONED`` (a
    reasoned task: runs after its replies' run), ``SINGLE`` (ours, one stage: no hints, or
    staged itself like GSM8K), ``OTHER`` (not ours: stage 2 only). ``include_path``: the run's
    other task folders (wrapped tasks, ``calidist wrap``)."""
    configs = task_configs(include_path)
    found: list[tuple[str, str]] = []

    def visit(name: str) -> None:
        config = configs.get(name)
        if config is None:
            found.append((name, OTHER))
        elif "group" in config:
            # a family group's reasoned variants are under its metadata (plain lm-eval runs the
            # group without them: they need their replies' run first)
            members = [*(config.get("task") or []),
                       *(config.get("metadata") or {}).get("reasoned", [])]
            for member in members:
                visit(member if isinstance(member, str) else member.get("task"))
        elif "reply_task" in config:
            found.append((name, REASONED))
        else:
            found.append((name, SPLIT if splits_in_stages(name, config) else SINGLE))

    for name in names:
        visit(name)
    return list(dict.fromkeys(found))


def staged_selection(names: Iterable[str]) -> tuple[list[str], list[str]]:
    """(reply tasks to run first, tasks to run then) for a selection with reasoned tasks;
    ([], the selection) when it has none."""
    names = list(names)
    expanded = expand_tasks(names)
    configs = task_configs()
    replies = list(dict.fromkeys(configs[name]["reply_task"] for name, kind in expanded
                                 if kind == REASONED))
    if not replies:
        return [], names
    return replies, [name for name, _ in expanded if name not in replies]


def _two_stage(tasks: list[str], role: str, stage1: str, folder: str,
               reads: Mapping[str, str], include_path: Sequence[str] = ()) -> list[PlannedRun]:
    hinted = tuple(name for name, kind in expand_tasks(tasks, include_path) if kind == SPLIT)
    first = [PlannedRun(f"{role} stage 1".strip(), hinted, {"stage": ORIGINAL}, reads, stage1)]
    return [*(first if hinted else []),
            PlannedRun(role, tuple(tasks), {"stage": HINTS}, {**reads, "original_run": stage1},
                       folder)]


def plan_runs(names: Iterable[str], two_stage: bool = False, replies_given: bool = False,
              include_path: Sequence[str] = ()) -> list[PlannedRun]:
    """The runs of a selection, in order: the reasoned tasks' reply run first (unless
    ``replies_given``: ``--metadata replies`` names an earlier one), one stage (every prompt)
    or two with ``two_stage``; then the rest of the selection (groups expanded, the reply tasks
    left out), reading the replies, split into stage 1 (its hinted tasks' original prompts) and
    stage 2 (every task, hints only) with ``two_stage``. One run when nothing needs another."""
    names = list(names)
    replies, rest = ([], names) if replies_given else staged_selection(names)
    runs: list[PlannedRun] = []
    reads: dict[str, str] = {}
    if replies:
        runs += (_two_stage(replies, "replies", REPLIES_STAGE1, REPLIES, {}) if two_stage
                 else [PlannedRun("replies", tuple(replies), ONE_STAGE, {}, REPLIES)])
        reads = {"replies": REPLIES}
    runs += (_two_stage(rest, "", STAGE1, OUTPUT, reads, include_path) if two_stage
             else [PlannedRun("", tuple(rest), {}, reads, OUTPUT)])
    return runs
