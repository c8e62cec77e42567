"""calidist: CaliDist confidence calibration as lm-evaluation-harness tasks.

From Python (docs/python_api.md)::

    import calidist_tasks
    from calidist_tasks.report import write_report_from_results

    results = calidist_tasks.evaluate(
        "hf", ["calidist_ppdb_assertion"], model_args="pretrained=MODEL,dtype=float32",
        metadata={"calib_size": 50, "eval_size": 100}, device="cpu", batch_size=8)
    results["results"]["calidist_ppdb_assertion"]["ece,none"]
    write_report_from_results(results, "report")
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from importlib.resources import files
from pathlib import Path
from typing import Any

__version__ = "0.1.0"
# What users may import from here. The report writer and calidist_metrics' scores and
# calibrators load on first use (``__getattr__``): ``import calidist_tasks`` (and the CLI's help)
# stays free of numpy, scipy and lm-eval.
_LAZY = {
    "write_report": "calidist_tasks.report",
    "write_report_from_results": "calidist_tasks.report",
    **dict.fromkeys((
        "expected_calibration_error", "brier_score", "auroc", "maximum_calibration_error",
        "smooth_ece", "aurc", "prediction_rejection_ratio", "negative_log_likelihood",
        "rms_calibration_error", "CaliDistCalibrator", "TemperatureScaling", "PlattScaling",
        "IsotonicCalibration", "VectorScaling", "load_calibrator", "save_calibrator",
    ), "calidist_metrics"),
}
__all__ = ["evaluate", "task_folder", "wrap", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'calidist_tasks' has no attribute {name!r}")


def task_folder() -> str:
    """The folder to pass to ``lm_eval --include_path`` (our YAML tasks)."""
    return str(files("calidist_tasks.yaml_tasks"))


def wrap(tasks: Sequence[str], out: str = "calidist_wrapped", **options: Any) -> list[Any]:
    """CaliDist tasks for lm-eval multiple-choice tasks, written into ``out`` (docs/wrap.md;
    ``calidist_tasks.tasks.wrapped.wrap`` lists the options)."""
    from calidist_tasks.tasks.wrapped import wrap as write

    return write(tasks, out, **options)


def _model_metadata(model: Any, model_args: str | Mapping[str, Any] | None) -> dict[str, Any]:
    """What lm-eval's CLI merges from ``--model_args`` into the task metadata; for a loaded LM
    object, the same keys read from its attributes (``pretrained``, ``model``, ``base_url``)."""
    from calidist_tasks.settings import BACKEND_KEY

    if isinstance(model, str):  # the backend's kind decides the sampling (consistency.decoding)
        if isinstance(model_args, str):
            from lm_eval.utils import simple_parse_args_string

            return {**simple_parse_args_string(model_args), BACKEND_KEY: model}
        return {**(model_args or {}), BACKEND_KEY: model}
    from calidist_tasks.backends.lm_eval_compat import api_backend

    # "LocalChatCompletion" or "MyChat (local-chat-completions)": the registered kind
    found = {BACKEND_KEY: api_backend(model).rpartition("(")[2].rstrip(")")}
    for key in ("pretrained", "model", "base_url"):
        value = getattr(model, key, None)
        if isinstance(value, str) and value:
            found[key] = value
    return found


def evaluate(
    model: Any,
    tasks: str | Sequence[str],
    metadata: Mapping[str, Any] | None = None,
    *,
    model_args: str | Mapping[str, Any] | None = None,
    log_samples: bool = True,
    include_defaults: bool = False,
    two_stage: bool = False,
    stage1_dir: str | None = None,
    replies_dir: str | None = None,
    **simple_evaluate_kwargs: Any,
) -> dict[str, Any] | None:
    """Run calidist tasks (and groups) with ``lm_eval.simple_evaluate``; return its results dict.

    ``model``: an lm-eval model name (``"hf"``, ``"hf-prefix-cache"``, ``"vllm"``,
    ``"local-completions"``, ...) with ``model_args`` (``"pretrained=...,dtype=float32"`` or a
    dict), or an already-loaded ``lm_eval.api.model.LM`` object (``model_args`` is then unused).
    ``tasks``: names, or one comma-separated string. ``metadata``: calidist's options, the keys of
    ``calidist eval --help`` (``calib_size``, ``eval_size``, ``m``, ``data_dir``, ``fit``, ...).
    Every check comes before the model loads (``calidist_tasks.runs.preflight``): a task named like
    ours but not ours, a misspelt key or a bad value, a bad data file or earlier run raise
    ValueError naming the place.

    As on the command line, ``model_args`` is merged under ``metadata`` (a model argument named like
    one of our keys reaches us; ``metadata`` wins); for an LM object its ``pretrained`` /
    ``model`` / ``base_url`` attributes play that part. The metadata is given to the
    ``TaskManager`` that builds our tasks: lm-eval's ``simple_evaluate(metadata=...)`` drops it
    when a ``task_manager`` is passed, so passing your own ``task_manager`` here is refused.
    ``include_defaults=True`` also indexes lm-eval's own tasks (about 10 s), to run them in the
    same call. Every other keyword goes to ``simple_evaluate`` (``device``, ``batch_size``,
    ``limit``, ``num_fewshot``, ``apply_chat_template``, ``bootstrap_iters``, ...).
    ``log_samples`` is on by default: the per-document records in ``results["samples"]`` are what
    ``calidist_tasks.report.write_report_from_results`` needs for intervals and diagrams.

    ``two_stage=True`` sends the paper's minimum, 1 + (c - 1)·m prompts per document, in two
    ``simple_evaluate`` calls with one model load: the hinted tasks' original prompts first, then
    only the hints naming a label other than each document's prediction
    (``calidist_tasks.runs.two_stage``); the runs are planned by ``runs.planning.plan_runs``
    (the same plan ``calidist eval`` carries out); stage 1's samples go to ``stage1_dir``
    (default: a temporary folder). The result is stage 2's, in the single-stage form (same
    records, same metrics).

    Reasoned tasks (``calidist_<b>_cot``, ``calidist_<b>_<style>_cot``: the paper's protocol)
    score the replies of their ``_verbalized`` task, which runs first, by itself, in the same call
    (one model load; ``calidist_tasks.runs.reply_runs``): its samples go to ``replies_dir``
    (default: a temporary folder) and its entries join the returned results where it was
    selected. ``metadata={"replies": PATH}`` scores an earlier run's replies instead. With
    ``two_stage=True`` the reply run is two-stage too (its stage 1 in ``replies_dir/stage1``):
    the original replies, then only those to the hints naming another label than their answer.

    Returns what ``simple_evaluate`` returns: ``results["results"][task]["ece,none"]`` and the
    other metrics of the README, ``results["samples"][task]`` per document; None on the non-zero
    ranks of a multi-process run. ``evaluate`` itself writes nothing to disk, except when a
    task's aggregation fails: every other task is still aggregated, the whole run (results and
    samples) is saved under ``calidist-recovered/`` and ``recovery.AggregationError`` names the
    folder. A ``stage1_dir`` or ``replies_dir`` that cannot be written is refused (OSError) before
    any model time.
    """
    from calidist_tasks.runs import preflight, recovery
    from calidist_tasks.runs.planning import plan_runs

    if "task_manager" in simple_evaluate_kwargs:
        raise TypeError("calidist_tasks.evaluate builds its own TaskManager (with our task folder "
                        "and the metadata); pass include_defaults=True for lm-eval's own tasks")
    if isinstance(tasks, str):
        tasks = [name.strip() for name in tasks.split(",") if name.strip()]
    preflight.check_task_names(tasks)
    if simple_evaluate_kwargs.get("limit") is not None:
        preflight.check_limit(simple_evaluate_kwargs["limit"])
    if simple_evaluate_kwargs.get("use_cache"):
        cache = simple_evaluate_kwargs["use_cache"]
        recovery.check_writable(Path(cache).parent, f"use_cache {cache}: its folder")
    metadata = dict(metadata or {})
    if two_stage and {"stage", "original_run"} & set(metadata):
        raise TypeError("two_stage=True sets the metadata stage and original_run itself")
    plan = plan_runs(tasks, two_stage, replies_given=bool(metadata.get("replies")))
    if len(plan) == 1 and not plan[0].metadata:
        return _evaluate_once(model, model_args, list(tasks), metadata, log_samples,
                              include_defaults, simple_evaluate_kwargs)
    return _evaluate_plan(plan, model, model_args, list(tasks), metadata, log_samples,
                          include_defaults, stage1_dir, replies_dir, simple_evaluate_kwargs)


def _evaluate_plan(plan: Sequence[Any], model: Any, model_args: Any, tasks: list[str],
                   metadata: dict[str, Any], log_samples: bool, include_defaults: bool,
                   stage1_dir: str | None, replies_dir: str | None,
                   kwargs: Mapping[str, Any]) -> dict[str, Any] | None:
    """The runs of ``runs.planning.plan_runs``, in order, the model loaded once: every run but
    the last saved like lm-eval (``runs.files.save_like_lm_eval``) in its folder, for the runs
    after it to read; the last run's results, with the reply run's entries of the selected
    tasks (``reply_runs.with_reply_results``)."""
    import tempfile
    from pathlib import Path

    from calidist_tasks.backends.lm_eval_compat import models_reused
    from calidist_tasks.runs import planning
    from calidist_tasks.runs.files import save_like_lm_eval
    from calidist_tasks.runs.recovery import ResultsNotSaved, check_writable, save_run
    from calidist_tasks.runs.reply_runs import with_reply_results
    from calidist_tasks.scoring.records import STAGE1_FOLDER

    if stage1_dir:  # before any model time
        check_writable(stage1_dir, "stage1_dir")
    if replies_dir:  # the replies are saved there: refused before they are generated
        check_writable(replies_dir, "replies_dir")
    with models_reused(), tempfile.TemporaryDirectory(prefix="calidist-runs-") as scratch:
        replies = Path(replies_dir or Path(scratch) / planning.REPLIES)
        folders = {planning.REPLIES: replies, planning.REPLIES_STAGE1: replies / STAGE1_FOLDER,
                   planning.STAGE1: Path(stage1_dir or Path(scratch) / planning.STAGE1)}
        done: dict[str, Any] = {}
        for run in plan:
            last = run is plan[-1]
            found = _evaluate_once(
                model, model_args, list(run.tasks),
                {**metadata, **run.metadata,
                 **{key: str(folders[folder]) for key, folder in run.reads.items()}},
                log_samples or not last, include_defaults, kwargs)
            if last:
                break
            if found is None:
                raise RuntimeError(f"{run.role} runs before the rest of the selection, in one "
                                   "process; under a multi-process launcher run the stages as "
                                   "separate commands")
            try:
                save_like_lm_eval(found, folders[run.folder], run.role)
            except (OSError, RuntimeError) as error:  # failed after the check: keep the work
                kept = save_run(found)
                keys = sorted({key for later in plan for key, folder in later.reads.items()
                               if folder == run.folder})
                raise ResultsNotSaved(
                    f"the {run.role} run could not be saved in {folders[run.folder]} ({error}); "
                    f"it is saved in {kept}: score it without running the model again with "
                    + ", ".join(f"metadata {key}={kept}" for key in keys)) from error
            done[run.role] = found
    if found is not None and planning.REPLIES in done:
        found = with_reply_results(found, done[planning.REPLIES], tasks, log_samples)
    return found


def _evaluate_once(model: Any, model_args: Any, tasks: list[str], metadata: Mapping[str, Any],
                   log_samples: bool, include_defaults: bool,
                   kwargs: Mapping[str, Any]) -> dict[str, Any] | None:
    """One ``lm_eval.simple_evaluate`` of ``tasks`` with our TaskManager and ``metadata``."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    from calidist_tasks.backends.api_replies import checked_replies
    from calidist_tasks.backends.lm_eval_compat import register_prefix_cache_model
    from calidist_tasks.runs import preflight, recovery

    register_prefix_cache_model()  # model="hf-prefix-cache"
    merged = {**_model_metadata(model, model_args), **dict(metadata)}
    manager = TaskManager(include_path=task_folder(), include_defaults=include_defaults,
                          metadata=merged)
    preflight.built_before_model(manager, list(tasks))  # every check before the model loads
    # an API reply lm-eval cannot parse: one clear APIReplyError; a failed aggregation: raised
    # after every other task is aggregated, the whole run saved (calidist_tasks.runs.recovery)
    with checked_replies(), recovery.aggregation_errors_deferred() as failed:
        results = lm_eval.simple_evaluate(model=model, model_args=model_args, tasks=tasks,
                                          task_manager=manager, log_samples=log_samples,
                                          metadata=merged, **kwargs)
    recovery.raise_deferred(failed, results)
    return results
