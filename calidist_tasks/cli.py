"""The ``calidist`` command: paths, task list, lm_eval with our tasks, link/unlink, demo, report."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import textwrap
from collections.abc import Mapping, Sequence
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from calidist_tasks import task_folder
from calidist_tasks.backends import offline_models
from calidist_tasks.data.yaml_configs import task_configs
from calidist_tasks.registry import LOGIT, REASONED
from calidist_tasks.runs.command_lines import FLAG_TWO_STAGE as TWO_STAGE_FLAG
from calidist_tasks.scoring.records import CONSISTENCY, SPUQ, VERBALIZED

MARKER = ".calidist-link.json"
LINK_NAME = "calidist"
DEMO_TASK = "calidist_ppdb_assertion"
DEMO_TEXT = """
What these numbers mean (all x100; lower ECE and Brier are better, higher AUROC is better):
- ECE: expected calibration error, |accuracy - confidence| averaged over 10 equal-width confidence
  bins; "adaptive" uses 10 equal-mass bins. Brier: mean (confidence - correct)^2 of the predicted
  label. AUROC: how well the confidence separates right from wrong answers (50 = not at all).
- "Vanilla" is the model's own probability of its answer; "CaliDist (As.)" is that
  probability scaled down by how much the answer and confidence moved under misleading hints,
  fitted on the calibration documents and scored on the held-out evaluation documents. The
  prediction, and so the accuracy, never changes.
- This demo reads the letters right after the options (the direct readout: fast, no reasoning).
  The paper's protocol reads them inside a generated step-by-step reply, much slower on a CPU:
  calidist eval --tasks calidist_ppdb_assertion_cot ... (README, "The paper's protocol").
- An AUROC below 50 means the confidence is higher on wrong answers than on right ones; with
  100 documents and a model near chance, 40 to 60 is within the noise.
- A calibrated confidence can be below 1/c (1/2 here, two labels) although the model's own
  probability of its answer never is: it estimates how often such an answer is right, and for
  a model at or below chance that is rightly below 1/c.
- CaliDist only lowers a confidence (sigmoid(beta * (lambda - alpha)) * p; docs/method.md).
  Where the model is underconfident, right more often than its confidence says (SmolLM2 here
  mostly answers the majority label at about 54%), the best fit is the identity, the CaliDist
  row equals Vanilla's, and the run warns that the fit landed on the edge of its grid.
- SmolLM2-135M is at or below chance on this task (compare its accuracy with the majority class,
  "not a paraphrase"): this demo proves the pipeline runs end to end offline, not that the
  method works. See BENCHMARKS.md for measurements on a stronger model and more data.
"""


def lm_eval_main(argv: Sequence[str], table: bool = True) -> dict[str, Any] | None:
    """Run lm-eval's own CLI in this process with ``argv`` (without the program name), every
    reply of an OpenAI-format API backend checked as it arrives: one lm-eval cannot parse stops
    the run with ``calidist: <backend> (endpoint <url>) sent a reply ...: <what was wrong>``
    (exit status 1; ``backends.api_replies``) instead of a traceback from lm-eval. The
    ``--output_path`` is checked before any model time; a failed aggregation stops the run
    after every other task's results are written, and results lm-eval cannot write are saved
    elsewhere and stop it too (``calidist_tasks.runs.recovery``), never exit status 0.

    Returns what lm-eval's ``simple_evaluate`` returned (None on other ranks or when nothing
    ran); ``table=False`` leaves out lm-eval's results table (stage 1 of a two-stage run)."""
    import lm_eval
    import lm_eval.tasks
    import lm_eval.utils
    from lm_eval.__main__ import cli_evaluate

    from calidist_tasks.backends.api_replies import (
        APIReplyError,
        checked_replies,
        discard_unfinished_requests,
    )
    from calidist_tasks.backends.lm_eval_compat import register_prefix_cache_model
    from calidist_tasks.runs import recovery
    from calidist_tasks.runs.command_lines import FLAG_OUTPUT, flag_values, selection
    from calidist_tasks.runs.preflight import built_before_model
    from calidist_tasks.settings import BACKEND_KEY

    for output in flag_values(argv, FLAG_OUTPUT)[-1:]:  # before any model time
        try:
            recovery.check_writable(output, "--output_path")
        except OSError as error:
            raise SystemExit(f"calidist: {error}") from None
    register_prefix_cache_model()  # --model hf-prefix-cache
    saved, stopped, returned = sys.argv, None, []
    evaluate, make_table = lm_eval.simple_evaluate, lm_eval.utils.make_table
    manager = lm_eval.tasks.TaskManager  # lm-eval's CLI imports it when it runs

    def kept(*args: Any, **kwargs: Any) -> Any:  # lm-eval's CLI imports it from lm_eval
        tasks_of = kwargs.get("task_manager")
        meta = getattr(getattr(tasks_of, "_factory", None), "_meta", None)
        if isinstance(meta, dict) and isinstance(kwargs.get("model"), str):
            # the backend's kind decides the sampling (confidence.consistency.decoding), as
            # calidist_tasks.evaluate passes it; the tasks read it from their metadata
            meta.setdefault(BACKEND_KEY, kwargs["model"])
        built_before_model(tasks_of, kwargs.get("tasks"))
        returned.append(evaluate(*args, **kwargs))
        return returned[-1]

    sys.argv = ["lm_eval", *argv]
    lm_eval.simple_evaluate = kept
    lm_eval.tasks.TaskManager = with_our_tasks(manager, selection(argv))
    if not table:
        lm_eval.utils.make_table = lambda *args, **kwargs: "(stage 1: its table is stage 2's)"
    try:
        with checked_replies(), recovery.results_saved(), \
                recovery.aggregation_errors_deferred() as failed:
            cli_evaluate()
        recovery.raise_deferred(failed)  # after lm-eval wrote every other task's results
    except (APIReplyError, recovery.ResultsNotSaved, recovery.AggregationError) as error:
        stopped = f"calidist: {error}"
    finally:
        sys.argv = saved
        lm_eval.simple_evaluate, lm_eval.utils.make_table = evaluate, make_table
        lm_eval.tasks.TaskManager = manager
    if stopped:  # out of the except block, so that the failed run can be collected
        discard_unfinished_requests()
        raise SystemExit(stopped)
    return returned[-1] if returned else None


def lm_eval_help(argv: Sequence[str]) -> None:
    """lm-eval's own help for ``argv`` (its CLI alone: no model backend, task or torch import,
    so that ``calidist eval --help`` answers at once)."""
    from lm_eval.__main__ import cli_evaluate

    saved, sys.argv = sys.argv, ["lm_eval", *argv]
    try:
        cli_evaluate()
    finally:
        sys.argv = saved


def print_summary(results: Mapping[str, Any] | None) -> None:
    """calidist's compact table after lm-eval's: vanilla beside the calibrated confidences
    (x100) per task; the results file keeps every metric."""
    from calidist_tasks.report.summary import calibration_table

    if not results or not any(t.startswith("calidist_") for t in results.get("results", {})):
        return
    print("\ncalidist: calibration on the held-out evaluation documents (x100; every metric "
          "is in the results file):\n")
    print(calibration_table(results), flush=True)


HELP_FLAGS = ("-h", "--help")
TWO_STAGE_HELP = textwrap.fill(
    f"{TWO_STAGE_FLAG} (calidist eval only): the paper's minimum cost, 1 + (c-1)*m prompts per "
    "document: stage 1 sends the hinted tasks' original prompts (kept in <output_path>/stage1), "
    "stage 2 only the hints naming a label other than each document's prediction; one model "
    "load, one output folder as a single-stage run's; needs --output_path; --use_cache lets a "
    "rerun answer stage 1 from the cache (docs/method.md, \"Two-stage runs\"). A reasoned "
    "(_cot) task's replies run in two stages too: the original prompts' replies, then only the "
    "hints naming a label other than each reply's answer.", 100) + "\n"
METADATA_HELP_TITLE = "calidist options (pass as --metadata '{\"key\": value}')"
EPILOG = ("`calidist eval --help` lists calidist's own options (the --metadata keys: defaults and "
          "allowed values), then lm_eval's. A refusal prints one line and exits 1; `calidist "
          "eval --debug ...` (or CALIDIST_DEBUG=1) shows its traceback. From Python: "
          "calidist_tasks.evaluate (docs/python_api.md).")


def version_text() -> str:
    """``calidist --version``: ours and the lm-eval it runs on."""
    from importlib.metadata import PackageNotFoundError, version

    from calidist_tasks import __version__

    try:
        harness = version("lm_eval")
    except PackageNotFoundError:
        harness = "not installed"
    return f"calidist {__version__} (lm-eval {harness})"


# task options that are not RunSettings (read by the open-ended GSM8K tasks themselves)
TASK_OPTIONS = {"original_samples": "open-ended GSM8K stages 2 and 3: the samples of the stage "
                "before (its samples file or output folder; docs/gsm8k.md)"}


def metadata_help(width: int = 100) -> str:
    """calidist's --metadata keys with default, allowed values and description, generated from
    the fields of ``RunSettings`` (their ``metadata``), internal fields left out."""
    from calidist_tasks.settings import RunSettings

    lines = [f"{METADATA_HELP_TITLE}:"]
    for option in dataclasses.fields(RunSettings):
        info = option.metadata
        if info.get("internal"):
            continue
        if "help" not in info:
            raise TypeError(f"RunSettings.{option.name} has no help text: declare it with "
                            "settings._option(default, help, ...)")
        default = info.get("shown") or json.dumps(option.default)
        text = f"{info['help']} (default: {default}"
        if "choices" in info:
            text += f"; one of: {', '.join(info['choices'])}"
        lines += textwrap.wrap(f"{text})", width, initial_indent=f"  {option.name:<19}",
                               subsequent_indent=" " * 21, break_on_hyphens=False)
    for name, text in TASK_OPTIONS.items():
        lines += textwrap.wrap(f"{text} (no default)", width, initial_indent=f"  {name:<19}",
                               subsequent_indent=" " * 21, break_on_hyphens=False)
    note = ("lm-eval merges --model_args into the metadata too, so other keys are allowed; a key "
            "that looks like a misspelling of one of these is refused.")
    lines += ["", *textwrap.wrap(note, width), ""]
    return "\n".join(lines)


def with_include_path(argv: Sequence[str]) -> list[str]:
    """``argv`` with our task folder as lm-eval's --include_path, unless the user gave one (then
    ``lm_eval_main`` adds ours beside it: ``include_paths``) or ``calidist link`` put our tasks
    in lm-eval's own folder (registering them twice would warn once per task)."""
    argv = list(argv)
    if linked() or any(a == "--include_path" or a.startswith("--include_path=") for a in argv):
        return argv
    return [*argv, "--include_path", task_folder()]


def linked() -> bool:
    """Whether ``calidist link`` mirrored our tasks into lm-eval's task folder."""
    spec = find_spec("lm_eval.tasks")
    return bool(spec and spec.submodule_search_locations) and (
        Path(spec.submodule_search_locations[0]) / LINK_NAME / MARKER).exists()


def include_paths(given: Any) -> Any:
    """A TaskManager's include_path with our task folder added after the user's (a user's
    --include_path adds to ours instead of hiding them), unless already there or linked."""
    paths = [] if given is None else list(given) if isinstance(given, (list, tuple)) else [given]
    ours = Path(task_folder()).resolve()
    if linked() or any(Path(p).resolve() == ours for p in paths):
        return given
    return [*paths, str(ours)]


def with_our_tasks(manager: Any, tasks: Sequence[str] = ()) -> Any:
    """What builds lm-eval's TaskManager, its include_path extended by ``include_paths``; without
    lm-eval's own task folder where the include path registers all of ``tasks`` (the names
    ``--tasks`` gives): indexing that folder is most of a run's start-up (about 16 CPU-s, twice
    in a run of two stages) and finds nothing those tasks use."""
    from calidist_tasks.backends.lm_eval_compat import registered_in

    def build(*args: Any, include_path: Any = None, include_defaults: bool = True,
              **kwargs: Any) -> Any:
        paths = include_paths(include_path)
        listed = [] if paths is None else [paths] if isinstance(paths, (str, Path)) else paths
        if include_defaults and listed and registered_in(tasks, listed):
            include_defaults = False
        return manager(*args, include_path=paths, include_defaults=include_defaults, **kwargs)

    return build


# What a task is, by its registered confidence source (``calidist tasks``' fourth column).
PAPER = "the paper's protocol (reasoned reply): "
DESCRIPTIONS = {
    REASONED: PAPER + "one reply per prompt, read as log-prob and as stated confidence",
    LOGIT: "direct letter readout, no reasoning (opt-in: cheap, lm-eval's usual multiple choice)",
    VERBALIZED: "stated confidence only (black-box, any backend; the replies of the _cot task)",
    CONSISTENCY: "15 sampled reasoned replies: self-consistency, entropy, FSD",
    SPUQ: "SPUQ: the reply under 9 perturbations",
}


def _matches(name: str, pattern: str | None) -> bool:
    """Whether ``name`` matches ``pattern``: comma-separated shell patterns (None: all)."""
    from fnmatch import fnmatchcase

    return not pattern or any(fnmatchcase(name, p.strip()) for p in pattern.split(","))


def _described(name: str, config: Mapping[str, Any]) -> tuple[str, str, str]:
    """A task's family, what it is and what it reports (the ``calidist report`` rows it fills;
    a GSM8K stage: what it hands on)."""
    from calidist_tasks.registry import methods_of, task_variant

    family, variant = task_variant(name, config)
    what = (DESCRIPTIONS.get(variant.source, "") if variant
            else "GSM8K, one stage of three (docs/gsm8k.md)")
    rows = ", ".join(m.label for m in methods_of(variant)) if variant else ""
    return family, what, rows or "the stage's generations (read by the next stage)"


def list_tasks(pattern: str | None = None) -> list[tuple[str, str, str, str, str]]:
    """(name, kind, output type, what it is, what it reports) for every task and group in our
    YAML folder whose name matches ``pattern`` (comma-separated shell patterns), the paper's
    protocol (the reasoned ``_cot`` tasks) first; "what it reports" = the leaderboard rows of
    ``calidist report`` it fills, or a group's tasks."""
    found = []
    for name, config in task_configs().items():
        if not _matches(name, pattern):
            continue
        if "group" in config:
            tasks = [t if isinstance(t, str) else str(t.get("task", t))
                     for t in config.get("task") or []]
            # the reasoned variants need their replies' run: calidist eval runs them too
            tasks += [f"{t} (calidist eval)"
                      for t in (config.get("metadata") or {}).get("reasoned", [])]
            found.append((name, "group", "-", "every task of the family", ", ".join(tasks)))
            continue
        _, what, rows = _described(name, config)
        found.append((name, "task", str(config.get("output_type", "-")), what, rows))
    return sorted(found, key=lambda row: not row[3].startswith(PAPER))


ORIGINAL = "(original)"  # the variant name of calidist_<family> itself


def task_overview(pattern: str | None = None, width: int | None = None) -> str:
    """``calidist tasks``: a header, then per family its variants (a task is named
    ``calidist_<family>_<variant>``), then per variant what it is and the ``calidist report``
    rows it fills, each said once and wrapped to ``width`` (default: the terminal's)."""
    width = width or shutil.get_terminal_size((100, 24)).columns
    families: dict[str, list[str]] = {}
    variants: dict[str, tuple[str, str]] = {}
    for name, config in task_configs().items():
        if not _matches(name, pattern):
            continue
        if "group" in config:
            family, variant = name.removeprefix("calidist_").removesuffix("_all"), "all"
            what, rows = "group: every task of the family", "its tasks' rows"
        else:
            family, what, rows = _described(name, config)
            variant = name.removeprefix(f"calidist_{family}").lstrip("_") or ORIGINAL
        families.setdefault(family, []).append(variant)
        variants.setdefault(variant, (what, rows))
    if not families:
        return f"calidist tasks: no task matches {pattern!r}"
    order = sorted(variants, key=lambda v: (not variants[v][0].startswith(PAPER),
                                            v not in (ORIGINAL, "cot"), v == "all", v))
    count = sum(map(len, families.values()))
    lines = textwrap.wrap(
        f"calidist tasks: {count} tasks and groups in {len(families)} families, each named "
        "calidist_<family>_<variant> (the paper's protocol: the _cot variants). `calidist tasks "
        "--full [PATTERN]`: one tab-separated row per task (name, kind, output type, what it "
        "is, what it reports).", width) + [""]
    column = max(len("family"), *map(len, families)) + 2
    lines.append(f"{'family':<{column}}variants")
    for family in sorted(families):
        mine = sorted(families[family], key=order.index)
        lines += textwrap.wrap(" ".join(mine), width, initial_indent=f"{family:<{column}}",
                               subsequent_indent=" " * column, break_on_hyphens=False)
    column = max(len("variant"), *map(len, variants)) + 2
    lines += ["", f"{'variant':<{column}}what it is; the rows `calidist report` shows"]
    for variant in order:
        what, rows = variants[variant]
        lines += textwrap.wrap(f"{what}; rows: {rows}", width,
                               initial_indent=f"{variant:<{column}}",
                               subsequent_indent=" " * column, break_on_hyphens=False)
    return "\n".join(lines)


def lm_eval_task_dir() -> Path:
    spec = find_spec("lm_eval.tasks")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("calidist link: lm-eval is not installed in this environment")
    return Path(spec.submodule_search_locations[0])


def link(target_root: Path | None = None) -> Path:
    """Mirror our YAML folder into lm-eval's task folder (real folders, per-file links)."""
    root = target_root or lm_eval_task_dir()
    dest = root / LINK_NAME
    if not os.access(root, os.W_OK):
        raise SystemExit(
            f"calidist link: {root} is not writable; use "
            f"`lm_eval --include_path \"$(calidist path)\"` or `calidist eval` instead"
        )
    if dest.exists():
        if not (dest / MARKER).exists():
            raise SystemExit(f"calidist link: {dest} exists and was not made by calidist; refusing")
        unlink(root)
    made: list[str] = []
    source = Path(task_folder())
    for path in sorted(source.rglob("*")):
        if path.is_dir() or path.suffix == ".py" or "__pycache__" in path.parts:
            continue
        target = dest / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            target.symlink_to(path)
        except OSError:  # no symlinks on this filesystem: copy
            shutil.copy2(path, target)
        made.append(str(target.relative_to(dest)))
    (dest / MARKER).write_text(json.dumps({"source": str(source), "files": made}, indent=1))
    return dest


def unlink(target_root: Path | None = None) -> list[Path]:
    """Remove exactly what ``link`` made (and the folders it left empty); return what was
    removed. The marker's list is checked first: a name outside our folder (``../x``, an
    absolute path) is refused, and so is a folder that cannot be written, before anything is
    removed, so that an edited marker or a read-only folder never leaves half a link."""
    dest = (target_root or lm_eval_task_dir()) / LINK_NAME
    marker = dest / MARKER
    if not marker.exists():
        raise SystemExit(f"calidist unlink: nothing linked at {dest}")
    try:
        names = json.loads(marker.read_text(encoding="utf-8"))["files"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise SystemExit(f"calidist unlink: {marker} is not a list of linked files "
                         f"({type(error).__name__}: {error}); remove {dest} by hand") from None
    made = []
    for name in names if isinstance(names, list) else [names]:
        path = Path(os.path.normpath(dest / str(name)))
        if not isinstance(name, str) or path.parent == dest.parent or dest not in path.parents:
            raise SystemExit(f"calidist unlink: {marker} names {name!r}, outside {dest}: not "
                             "made by calidist link; nothing was removed")
        made.append(path)
    present = [path for path in made if path.is_symlink() or path.is_file()]
    folders = {dest.parent, dest, *(path.parent for path in present)}
    locked = sorted(str(f) for f in folders if f.is_dir() and not os.access(f, os.W_OK))
    if locked:
        raise SystemExit(f"calidist unlink: {', '.join(locked)} cannot be written; nothing was "
                         "removed")
    for path in present:
        path.unlink()
    marker.unlink()
    removed = [*present, marker]
    for folder in sorted((p for p in dest.rglob("*") if p.is_dir()), reverse=True):
        if not any(folder.iterdir()):
            folder.rmdir()
            removed.append(folder)
    if not any(dest.iterdir()):
        dest.rmdir()
        removed.append(dest)
    return removed


def demo(args: argparse.Namespace, extra: Sequence[str]) -> None:
    """The README's first command: PPDB assertion on the bundled sample with SmolLM2."""
    from calidist_tasks.backends.offline_models import prepare_smollm2
    from calidist_tasks.report.summary import calibration_table, latest_results

    out = Path(args.output_path).resolve()
    print(f"calidist demo: the run (lm-eval's results and per-document samples) goes to {out}",
          flush=True)
    model = args.model or str(prepare_smollm2())
    data_dir = Path(__file__).parent / "sample_data"
    metadata = {"data_dir": str(data_dir), "calib_size": args.calib_size,
                "eval_size": args.eval_size, "m": args.m}
    lm_eval_main(with_include_path([
        "--model", "hf", "--model_args", f"pretrained={model},dtype=float32",
        "--tasks", args.tasks, "--batch_size", "8", "--device", "cpu",
        "--metadata", json.dumps(metadata), "--output_path", str(out), "--log_samples",
        *extra,
    ]))
    print("\nCalibration on the held-out evaluation documents (x100):\n")
    print(calibration_table(latest_results(out)))
    print(DEMO_TEXT if args.model is None else DEMO_TEXT.replace(
        "SmolLM2-135M is at or below chance", f"{Path(model).name} may be at or below chance"))
    print(f"lm-eval output (results and per-document samples): {out}")


def evaluate_command(argv: Sequence[str]) -> None:
    """``calidist eval`` (``argv`` starts with "eval"): its command line checked
    (``preflight.check_command``), then lm-eval, the reasoned tasks' replies first."""
    from calidist_tasks.runs.preflight import check_command

    if any(a in HELP_FLAGS for a in argv[1:]):
        print(metadata_help(), flush=True)  # then lm_eval's own help (it exits)
        print(TWO_STAGE_HELP, flush=True)
    else:
        check_command(argv[1:])
    rest = [a for a in argv[1:] if a != TWO_STAGE_FLAG]
    if any(a in HELP_FLAGS for a in rest):
        lm_eval_help(rest)
        return
    from calidist_tasks.backends.lm_eval_compat import models_reused

    # models_reused stops an in-process vLLM engine when the run ends: a live engine process
    # would keep Python from exiting after the results are printed
    with models_reused():
        print_summary(run_plan(with_include_path(rest), two_stage=len(rest) < len(argv) - 1))


def run_plan(argv: Sequence[str], two_stage: bool = False) -> dict[str, Any] | None:
    """``calidist eval``'s executor: the runs ``runs.planning.plan_runs`` plans for ``argv``'s
    selection, each through lm-eval's CLI in this process (``lm_eval_main``) as
    ``runs.command_lines.planned_command_lines`` writes it, in order, the model loaded once:
    the reasoned tasks' reply run first, stage 1 (no results table: its numbers are
    original-prompt baselines under the hinted tasks' names) before stage 2 with
    ``two_stage``. Every folder is checked before the first run's model time; a failing run
    keeps the earlier runs' folders and says how to resume. Returns the last run's results."""
    import tempfile

    from calidist_tasks.backends.lm_eval_compat import models_reused
    from calidist_tasks.runs import two_stage as staged
    from calidist_tasks.runs.command_lines import FLAG_CACHE, flag_values, planned_command_lines
    from calidist_tasks.runs.planning import HINTS, ORIGINAL, OUTPUT, REPLIES, REPLIES_STAGE1
    from calidist_tasks.runs.recovery import check_writable

    command = "calidist eval --two-stage" if two_stage else "calidist eval"
    with tempfile.TemporaryDirectory(prefix="calidist-replies-") as scratch:
        lines = planned_command_lines(argv, two_stage, scratch)
        if len(lines) == 1 and not two_stage:
            return lm_eval_main(lines[0].argv)
        folders = {line.run.folder: line.folder for line in lines}
        for role, folder in sorted(folders.items(), key=lambda item: item[0] != OUTPUT):
            if folder is not None and not str(folder).startswith(scratch):
                try:  # before any model time
                    check_writable(folder, "--output_path" if role == OUTPUT else
                                   f"the {role} folder")
                except OSError as error:
                    raise SystemExit(f"{command}: {error}") from None
        cache = flag_values(argv, FLAG_CACHE)
        replies = [line for line in lines if line.run.folder in (REPLIES, REPLIES_STAGE1)]
        results, stage1, done = None, None, []
        with models_reused():
            for line in lines:
                run = line.run
                stage = run.metadata.get("stage")
                if replies and line is replies[0]:
                    print(f"calidist reasoned tasks: replies first ({', '.join(run.tasks)}), "
                          f"samples in {folders[REPLIES]}", flush=True)
                elif replies and done and done[-1] is replies[-1]:
                    print(f"calidist reasoned tasks: scoring the replies "
                          f"({', '.join(lines[-1].run.tasks)}); the reply tasks' own results "
                          f"are in {folders[REPLIES]}", flush=True)
                if stage == ORIGINAL:
                    staged.TALLIES.clear()
                    print(f"calidist two-stage: stage 1 ({', '.join(run.tasks)}): original "
                          f"prompts, samples in {line.folder}", flush=True)
                elif stage == HINTS and stage1 is None:
                    print("calidist two-stage: no hinted task selected; one stage", flush=True)
                try:
                    results = lm_eval_main(line.argv, table=stage != ORIGINAL)
                except (Exception, SystemExit) as error:  # noqa: BLE001 - reported, re-raised
                    if not done or (isinstance(error, SystemExit) and not error.code):
                        raise
                    earlier = ("stage 1 is", "this run's stage 1 was", "it runs") if stage1 \
                        else ("the earlier runs are", "the earlier runs were", "they run")
                    resume = (f"rerun the same command: {earlier[0]} answered from the cache "
                              f"{cache[-1]}" if cache else "rerun the same command with "
                              f"--use_cache PATH ({earlier[1]} not cached, so {earlier[2]} once "
                              "more)")
                    if stage1 is not None:
                        print(f"calidist two-stage: stage 2 failed ({type(error).__name__}: "
                              f"{error}); stage 1's samples are kept in {stage1.folder}; to "
                              f"resume, {resume}", file=sys.stderr, flush=True)
                    else:
                        kept = ", ".join(str(d.folder) for d in done if d.folder is not None)
                        print(f"calidist: {run.role or 'the last run'} failed "
                              f"({type(error).__name__}: {error}); the samples of the runs "
                              f"before it are kept in {kept}; to resume, {resume}",
                              file=sys.stderr, flush=True)
                    raise
                done.append(line)
                if stage == ORIGINAL:
                    stage1 = line
                elif stage == HINTS:
                    counts = staged.count_lines(stage1.run.tasks) if stage1 else []
                    if counts:
                        print("calidist two-stage prompt counts:", *counts, sep="\n", flush=True)
                    stage1 = None
    return results


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="calidist", description=__doc__, epilog=EPILOG)
    parser.add_argument("--version", action="version", version=version_text())
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("path", help="print the folder to pass to lm_eval --include_path")
    tasks = sub.add_parser("tasks", help="our task families, their variants and what each "
                           "reports (--full: one row per task; same list: lm-eval ls tasks "
                           "--include_path \"$(calidist path)\")")
    tasks.add_argument("--full", action="store_true", help="one tab-separated row per task and "
                       "group: name, kind, output type, what it is, what it reports")
    tasks.add_argument("pattern", nargs="?", help="comma-separated shell patterns, e.g. "
                       "'calidist_ppdb*'")
    sub.add_parser("eval", help="run lm_eval with our tasks (every lm_eval flag passes through; "
                   "--help lists the --metadata keys first)", add_help=False)
    sub.add_parser("link", help="make plain `lm_eval --tasks calidist_...` work (opt-in)")
    sub.add_parser("unlink", help="undo `calidist link`")
    model = sub.add_parser("model", help="convert a bundled offline model, print its folder")
    model.add_argument("name", choices=list(offline_models.PREPARE))
    run_demo = sub.add_parser("demo", help="PPDB assertion on bundled data with SmolLM2")
    run_demo.add_argument("--tasks", default=DEMO_TASK)
    run_demo.add_argument("--model", help="a local HF model folder (default: converted SmolLM2)")
    run_demo.add_argument("--calib_size", type=int, default=50)
    run_demo.add_argument("--eval_size", type=int, default=100)
    run_demo.add_argument("--m", type=int, default=1, help="hints per label (paper: 2)")
    run_demo.add_argument("--output_path", default="runs/demo",
                          help="where lm-eval writes the run (default: runs/demo, here)")
    wrapped = sub.add_parser("wrap", help="CaliDist tasks for lm-eval multiple-choice tasks or "
                             "groups (docs/wrap.md): writes calidist_<task>[_assertion|_probe]")
    wrapped.add_argument("wrapped_tasks", nargs="+", metavar="TASK",
                         help="registered lm-eval task, group or tag names")
    wrapped.add_argument("--out", default="calidist_wrapped",
                         help="folder to write the YAML into (pass it to lm_eval --include_path)")
    wrapped.add_argument("--include_path", action="append", default=[],
                         help="a folder of your own lm-eval task configs (repeatable)")
    wrapped.add_argument("--answer_cue", help="the hint goes before the last occurrence of this "
                         "text in each prompt ('' : before the whole prompt); default: the "
                         "prompt's last line when it is a short label ending in ':'")
    wrapped.add_argument("--acc_norm", action=argparse.BooleanOptionalAction, default=None,
                         help="also write the length-normalised tasks (calidist_<task>_norm*); "
                         "default: when the task reports acc_norm")
    pools = wrapped.add_mutually_exclusive_group()
    pools.add_argument("--pool", help="make every task given one calibration pool of this name "
                       "(default: each group given is one, named after it)")
    pools.add_argument("--no-pool", dest="pool", action="store_false", default=None,
                       help="no calibration pool: each task calibrates on its own documents")
    report = sub.add_parser("report", help="leaderboard, intervals, diagrams, cost and transfer "
                            "from lm-eval output folders (no model is run)")
    report.add_argument("run_dirs", nargs="+", metavar="RUN_DIR",
                        help="lm-eval --output_path folders (or results / samples files)")
    report.add_argument("--out", default="calidist-report", help="folder to write the report to")
    report.add_argument("--transfer", action="append", default=[],
                        metavar="SOURCE_TASK:TARGET_TASK",
                        help="refit CaliDist on SOURCE's calibration documents, score it on "
                        "TARGET's evaluation documents (repeatable)")
    report.add_argument("--bootstrap", type=int, default=1000,
                        help="bootstrap resamples for intervals and paired tests (0: none)")
    report.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    report.add_argument("--target-accuracy", dest="target_accuracy",
                        metavar="ACC[,ACC...]", help="the Thresholds table's target accuracies "
                        "(fractions, comma-separated; default 0.8,0.9,0.95)")
    report.add_argument("--no_figures", action="store_true", help="tables only (faster)")
    report.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    report.add_argument("--tasks", metavar="PATTERN", help="only these tasks: comma-separated "
                        "shell patterns, e.g. 'calidist_ppdb*,calidist_mnli'")
    report.add_argument("--models", metavar="PATTERN", help="only these models (the name in the "
                        "results file): comma-separated shell patterns, e.g. '*SmolLM2*'")
    argv = list(sys.argv[1:] if argv is None else argv)
    from calidist_tasks.runs.preflight import DEBUG_FLAG, debugging, refusals_reported

    if argv[:1] == ["eval"]:
        with refusals_reported(debugging(argv)):
            evaluate_command([a for a in argv if a != DEBUG_FLAG])
        return
    args, extra = parser.parse_known_args(argv)
    if extra and args.command != "demo":
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command == "path":
        print(task_folder())
    elif args.command == "tasks" and args.full:
        for row in list_tasks(args.pattern):
            print("\t".join(row))
    elif args.command == "tasks":
        print(task_overview(args.pattern))
    elif args.command == "link":
        with refusals_reported(debugging(argv)):
            print(f"linked: {link()}")
    elif args.command == "unlink":
        with refusals_reported(debugging(argv)):
            removed, dest = unlink(), lm_eval_task_dir() / LINK_NAME
        print(f"removed: {len(removed)} file(s) and folder(s) calidist link made in {dest}"
              + ("; the folder itself is kept: it holds files link did not make"
                 if dest.exists() else ""))
    elif args.command == "model":
        print(offline_models.PREPARE[args.name]())
    elif args.command == "demo":
        demo(args, extra)
    elif args.command == "wrap":
        from calidist_tasks.tasks.wrapped import wrap

        try:
            written = wrap(args.wrapped_tasks, args.out, include_path=args.include_path,
                           answer_cue=args.answer_cue, acc_norm=args.acc_norm,
                           pool=args.pool)
        except ValueError as error:
            sys.exit(f"calidist wrap: {error}")
        print("\n".join(map(str, written)))
        print(f"run them with: lm_eval --include_path {args.out} --tasks "
              f"{','.join(p.stem for p in written)} ...")
    elif args.command == "report":
        from calidist_tasks.report import run_command

        sys.exit(run_command(args))


if __name__ == "__main__":
    main()
