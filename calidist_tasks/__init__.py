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
from typing import Any

__version__ = "0.1.0"
__all__ = ["evaluate", "task_folder", "wrap"]


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
    if isinstance(model, str):
        if isinstance(model_args, str):
            from lm_eval.utils import simple_parse_args_string

            return dict(simple_parse_args_string(model_args))
        return dict(model_args or {})
    found = {}
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
    ``calidist eval --help`` (``calib_size``, ``eval_size``, ``m``, ``data_dir``, ``fit``, ...),
    checked when the tasks are built (a misspelt key or a bad value raises ValueError).

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
    only the hints naming a label other than each document's prediction (``calidist_tasks.
    two_stage``); stage 1's samples go to ``stage1_dir`` (default: a temporary folder). The
    result is stage 2's, in the single-stage form (same records, same metrics).

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
    folder. A ``stage1_dir`` that cannot be written is refused (OSError) before any model time.
    """
    import lm_eval
    from lm_eval.tasks import TaskManager

    import calidist_tasks.backends.prefix_cache  # noqa: F401  registers the hf-prefix-cache model
    from calidist_tasks.backends.api_replies import checked_replies
    from calidist_tasks.runs import recovery

    if "task_manager" in simple_evaluate_kwargs:
        raise TypeError("calidist_tasks.evaluate builds its own TaskManager (with our task folder "
                        "and the metadata); pass include_defaults=True for lm-eval's own tasks")
    if isinstance(tasks, str):
        tasks = [name.strip() for name in tasks.split(",") if name.strip()]
    if not (metadata or {}).get("replies"):
        from calidist_tasks.runs.reply_runs import evaluate_with_replies, staged_selection

        if staged_selection(tasks)[0]:
            return evaluate_with_replies(evaluate, model, tasks, metadata, replies_dir,
                                         model_args=model_args, log_samples=log_samples,
                                         include_defaults=include_defaults, two_stage=two_stage,
                                         stage1_dir=stage1_dir, **simple_evaluate_kwargs)
    if two_stage:
        from calidist_tasks.runs.two_stage import evaluate_two_stage

        return evaluate_two_stage(evaluate, model, tasks, metadata, stage1_dir,
                                  model_args=model_args, log_samples=log_samples,
                                  include_defaults=include_defaults, **simple_evaluate_kwargs)
    merged = {**_model_metadata(model, model_args), **dict(metadata or {})}
    manager = TaskManager(include_path=task_folder(), include_defaults=include_defaults,
                          metadata=merged)
    # an API reply lm-eval cannot parse: one clear APIReplyError; a failed aggregation: raised
    # after every other task is aggregated, the whole run saved (calidist_tasks.runs.recovery)
    with checked_replies(), recovery.aggregation_errors_deferred() as failed:
        results = lm_eval.simple_evaluate(model=model, model_args=model_args, tasks=list(tasks),
                                          task_manager=manager, log_samples=log_samples,
                                          metadata=merged, **simple_evaluate_kwargs)
    recovery.raise_deferred(failed, results)
    return results
