"""Refusals before any model time, and how ``calidist eval`` prints one.

lm-eval loads the model before it builds the tasks, so a check made when a task is built (a
misspelt ``--metadata`` key, a bad data file, a damaged stage-1 folder, a saved fit no fit can
produce) would come after the model load, and through lm-eval's CLI as a traceback. Here:

- ``check_task_names``: a name that is neither one of our tasks nor one of lm-eval's (its
  installed task folder and any ``--include_path`` folder, read by ``lm_eval_task_names``, a
  scan of their YAML text in about 1 s where lm-eval's own index takes a minute or more) is
  refused with the names it is closest to;
- ``check_command``: ``calidist eval``'s command line before lm-eval starts: the task names, the
  ``--metadata`` JSON objects (a key given twice, then every key and value, ``RunSettings``),
  ``--limit`` 0 or below, a ``--use_cache`` path that cannot be written;
- ``built_before_model``: the selection's tasks are built (and so checked) before the model
  loads; lm-eval then uses those tasks;
- ``refusals_reported``: ``calidist eval`` prints an error as ``calidist: <message>`` and exits
  1; ``--debug`` or ``CALIDIST_DEBUG=1`` shows the traceback instead.

Plain ``lm_eval`` users get the same messages as the exceptions' text.
"""

from __future__ import annotations

import difflib
import functools
import json
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from calidist_tasks.data.yaml_configs import name_folders, task_configs
from calidist_tasks.runs.command_lines import FLAG_CACHE, FLAG_TASKS, flag_values
from calidist_tasks.settings import RunSettings

PREFIX = "calidist"  # every task and group of ours is named calidist_...
DEBUG_FLAG = "--debug"
DEBUG_VARIABLE = "CALIDIST_DEBUG"
FLAG_LIMIT = ("--limit", "-L")
FLAG_METADATA = ("--metadata",)
FLAG_INCLUDE = ("--include_path",)


def check_task_names(names: Sequence[str], include_paths: Sequence[str] = ()) -> None:
    """Refuse (ValueError) a task name that is neither ours nor lm-eval's, naming the closest
    names; before any model or lm-eval indexing. A name that is not ours but is named like ours
    (``calidist...``, or within difflib's 0.85 of one of ours) is refused with the closest of
    ours; any other name not in ``lm_eval_task_names(include_paths)`` with the closest of all.
    YAML paths and patterns are lm-eval's to check."""
    ours = task_configs()
    for name in names:
        if name in ours or any(c in name for c in "/*?[") or name.endswith((".yaml", ".yml")):
            continue
        # the user's own folders first: `calidist wrap` names its tasks calidist_<task>
        theirs = folder_task_names(tuple(str(p) for p in include_paths))
        if name in theirs:
            continue
        close = difflib.get_close_matches(name, sorted(theirs | set(ours)), n=3, cutoff=0.6)
        if name.startswith(PREFIX) or difflib.get_close_matches(name, ours, n=1, cutoff=0.85):
            hint = f"did you mean {' or '.join(close)}?" if close else "no task of ours is close"
            raise ValueError(f"unknown task {name!r}; {hint} (calidist tasks lists every "
                             "task and group)")
        known = lm_eval_task_names(tuple(str(p) for p in include_paths))
        if name in known:
            continue
        close = difflib.get_close_matches(name, sorted(known | set(ours)), n=3, cutoff=0.6)
        hint = f"did you mean {' or '.join(close)}?" if close else "no task name is close"
        raise ValueError(f"unknown task {name!r}; {hint} (neither lm-eval nor calidist has it: "
                         "lm_eval ls tasks lists lm-eval's, calidist tasks ours; a task of your "
                         "own needs its folder in --include_path)")


@functools.lru_cache(maxsize=8)
def lm_eval_task_names(include_paths: tuple[str, ...] = ()) -> frozenset[str]:
    """Every task, group and tag name the YAML of lm-eval's installed task folder and of
    ``include_paths`` can define: each file's name and its ``task``, ``group`` and ``tag``
    values, read as text (under 1 CPU-s for lm-eval 0.4.13's 14,500 files, where its own index
    takes a minute). A superset of lm-eval's index (its templates without a .yaml suffix
    included), so that a name it knows is never refused."""
    import lm_eval

    return folder_task_names((str(Path(lm_eval.__file__).parent / "tasks"), *include_paths))


def folder_task_names(folders: tuple[str, ...]) -> frozenset[str]:
    """The task, group and tag names the YAML files under ``folders`` can define
    (``lm_eval_task_names``)."""
    return frozenset(name_folders(folders))


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"--metadata gives the key {key!r} twice ({seen[key]!r} and "
                             f"{value!r}); give it once")
        seen[key] = value
    return seen


def check_command(argv: Sequence[str]) -> None:
    """Refuse (ValueError / OSError) a mistake ``calidist eval``'s command line ``argv`` shows
    (see the module doc); the rest is checked when the tasks are built."""
    from calidist_tasks.runs.recovery import check_writable

    check_task_names([name.strip() for value in flag_values(argv, FLAG_TASKS, many=True)
                      for name in value.split(",") if name.strip()],
                     flag_values(argv, FLAG_INCLUDE, many=True))
    given: dict[str, Any] = {}
    for text in flag_values(argv, FLAG_METADATA, many=True):
        if text.lstrip().startswith("{"):
            try:
                given.update(json.loads(text, object_pairs_hook=_unique_keys))
            except json.JSONDecodeError as error:
                raise ValueError(f"--metadata {text!r} is not valid JSON ({error})") from None
    RunSettings.from_metadata(given)  # keys and values now, before lm-eval indexes its tasks
    for i, arg in enumerate(argv):  # by hand: flag_values takes "-3" for a flag
        name, eq, value = arg.partition("=")
        if name in FLAG_LIMIT and (eq or i + 1 < len(argv)):
            check_limit(value if eq else argv[i + 1])
    for cache in flag_values(argv, FLAG_CACHE):
        check_writable(Path(cache).parent, f"--use_cache {cache}: its folder")


def check_limit(limit: Any) -> None:
    """Refuse a ``--limit`` that takes no document (0 or below) or is not a number."""
    try:
        value = float(limit)
    except (TypeError, ValueError):
        raise ValueError(f"--limit must be a number, got {limit!r}") from None
    if not value > 0:
        raise ValueError(f"--limit {limit} takes no documents; give a count (or a fraction "
                         "below 1) above 0, or leave --limit out")


def built_before_model(manager: Any, tasks: Any) -> None:
    """Build ``tasks`` with lm-eval's ``manager`` now, so that every check made at task build
    comes before the model loads; ``manager.load`` then returns these tasks once for the same
    selection (lm-eval calls it right after loading the model) instead of building them again."""
    if manager is None or tasks is None:
        return
    loaded, load = manager.load(tasks), manager.load

    def reuse(selection: Any) -> Any:
        manager.load = load  # once: a later call (another run on this manager) builds anew
        return loaded if selection == tasks else load(selection)

    manager.load = reuse


def debugging(argv: Sequence[str]) -> bool:
    """Whether ``calidist eval`` shows tracebacks: ``--debug`` in ``argv`` or CALIDIST_DEBUG=1."""
    return DEBUG_FLAG in argv or os.environ.get(DEBUG_VARIABLE, "") not in ("", "0")


@contextmanager
def refusals_reported(debug: bool) -> Iterator[None]:
    """An error inside the block ends the program with ``calidist: <message>`` (exit status 1),
    no traceback, unless ``debug``."""
    try:
        yield
    except Exception as error:  # noqa: BLE001  every error: the message is what a user needs
        if debug:
            raise
        text = str(error) if isinstance(error, (ValueError, OSError)) and str(error) else (
            f"{type(error).__name__}: {error} (rerun with {DEBUG_FLAG} for the traceback)")
        print(f"calidist: {' '.join(text.split())}", file=sys.stderr, flush=True)
        raise SystemExit(1) from None
