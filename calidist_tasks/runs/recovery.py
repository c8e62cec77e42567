"""An aggregation that fails never loses the model's work.

lm-eval writes its samples file only after every task's aggregation has returned, so an error in
the aggregation (a calibrator problem, an unwritable ``save_calibrator`` path, a bug) would throw
away every answer the model gave. The task class (``CaliDistTask._aggregate``) catches any error
of its summary and calls ``save_records`` first: the per-document records are written as an
lm-eval output folder that ``calidist report`` reads (a ``results_<date>.json`` naming the task,
its configuration and no metrics, and a ``samples_<task>_<date>.jsonl`` with one line per
document: ``doc_id``, ``doc``, the record under ``acc`` as lm-eval logs it, and the prompts and
replies where this process holds them); then the run stops with ``AggregationError`` naming the
task, the original error, the folder and the command that recomputes the metrics without the
model.

Where: ``calidist-recovered/<task>-<date>/`` under the working directory (lm-eval does not tell a
task its ``--output_path``), or under ``$CALIDIST_RECOVERED_DIR`` when set; when that folder
cannot be written, under the system's temporary folder.

``calidist eval`` and ``calidist_tasks.evaluate`` go further (``aggregation_errors_deferred``): a
failed aggregation is saved as above, its task's metrics are NaN, every other task of the run is
aggregated (and ``calidist eval`` lets lm-eval write every task's results and samples to
``--output_path``), and only then does the run stop with the ``AggregationError``. Their output
folder is checked before any model time (``check_writable``), and a results file lm-eval still
fails to write after the run (it only logs "Could not save results") stops the run, the results
and samples saved under the folder above instead (``results_saved``).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from calidist_tasks.backends import lm_eval_compat
from calidist_tasks.runs.files import new_stamp, write_records, write_run

RECOVERED_DIR = "calidist-recovered"
RECOVERED_DIR_VARIABLE = "CALIDIST_RECOVERED_DIR"


class AggregationError(RuntimeError):
    """A task's aggregation failed after the model had answered; its records are saved."""

    def __init__(self, message: str, folder: Path | None) -> None:
        super().__init__(message)
        self.folder = folder


def recovered_folder(task: str, stamp: str) -> Path:
    """A new folder for ``task``'s records (see the module doc for where)."""
    bases = [Path(os.environ.get(RECOVERED_DIR_VARIABLE) or RECOVERED_DIR),
             Path(tempfile.gettempdir()) / RECOVERED_DIR]
    for base in bases:
        folder = base / f"{task}-{stamp}"
        try:
            folder.mkdir(parents=True, exist_ok=False)
        except OSError:
            continue
        return folder.resolve()
    raise OSError(f"cannot create a folder for the records under {' or '.join(map(str, bases))}")


def save_records(task: str, records: Sequence[Mapping[str, Any]], error: Exception, docs: Any,
                 config: Mapping[str, Any], model: str | None,
                 instances: Sequence[Any] | None = None) -> AggregationError:
    """Save a failed aggregation's records (``write_records``) and return the error to raise:
    it names the task, the original error, the folder and the command to recompute."""
    stamp = new_stamp()
    cause = f"{type(error).__name__}: {error}"
    try:
        folder = recovered_folder(task, stamp)
        write_records(folder, stamp, task, records, docs, config, model, instances)
    except Exception as failure:  # noqa: BLE001  the original error must still be raised
        return AggregationError(
            f"{task}: the aggregation failed after the model answered every request ({cause}), "
            f"and its {len(records)} per-document records could not be saved either "
            f"({type(failure).__name__}: {failure}); rerun with lm-eval's --use_cache PATH to "
            "keep the answers across runs", None)
    return AggregationError(
        f"{task}: the aggregation failed after the model answered every request ({cause}). Its "
        f"{len(records)} per-document records are saved in {folder}; recompute the metrics from "
        f"them without the model: calidist report {folder} --out {folder}/report", folder)


# ---------------------------------------------------------------------- deferred failures
_DEFERRED: list[AggregationError] | None = None  # set while aggregation_errors_deferred runs


@contextmanager
def aggregation_errors_deferred() -> Iterator[list[AggregationError]]:
    """While the block runs, a task whose aggregation fails saves its records and reports NaN
    (``deferred``) instead of stopping the run, so that every other task is aggregated and
    saved; the block's list holds the errors, for ``raise_deferred`` after the results are
    written."""
    global _DEFERRED
    errors: list[AggregationError] = []
    outer, _DEFERRED = _DEFERRED, errors
    try:
        yield errors
    finally:
        _DEFERRED = outer


def deferred(error: AggregationError) -> bool:
    """Keep ``error`` for the end of the run when a caller defers them; False: raise it now."""
    if _DEFERRED is None:
        return False
    _DEFERRED.append(error)
    return True


def raise_deferred(errors: Sequence[AggregationError],
                   results: Mapping[str, Any] | None = None) -> None:
    """Raise the deferred aggregation errors as one ``AggregationError``; with ``results`` (a
    ``simple_evaluate`` dict), every task's results and samples are saved first (``save_run``)."""
    if not errors:
        return
    message = " ".join(str(error) for error in errors)
    folder = errors[0].folder
    if results is not None:
        try:
            folder = save_run(results)
        except OSError as failure:  # the aggregation errors must still be raised
            message += f" The run's other results could not be saved either ({failure})"
        else:
            message += (f" Every task's results and samples of this run are saved in {folder} "
                        "(the failed tasks' metrics NaN)")
    raise AggregationError(message, folder) from errors[0].__cause__


# ---------------------------------------------------------------------- output folders
def check_writable(path: str | os.PathLike, what: str) -> None:
    """Refuse (OSError naming ``what`` and ``path``), before any model time, a place lm-eval
    could not write a run's results to: a file in the way, a folder without write permission.
    A path ending in ``.json`` names a file (lm-eval writes beside it). Folders it had to
    create for the check are removed again: a run that writes nothing leaves nothing."""
    folder = Path(path)
    if folder.suffix == ".json":
        folder = folder.parent
    missing = [p for p in (folder, *folder.parents) if not p.exists()]
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise OSError(f"{what} {path} cannot be written ({reason}: {error.filename or folder}); "
                      "nothing was run") from None
    finally:
        for created in missing:  # innermost first
            if created.is_dir():
                created.rmdir()


def save_run(results: Mapping[str, Any], samples: Mapping[str, Sequence[Any]] | None = None
             ) -> Path:
    """Write a whole run (``write_run``; ``samples`` default: ``results["samples"]``) into a new
    folder beside the failed aggregations' (``recovered_folder``); return the folder."""
    stamp = new_stamp()
    folder = recovered_folder("run", stamp)
    write_run(folder, stamp, results, results.get("samples") if samples is None else samples)
    return folder


class ResultsNotSaved(OSError):
    """lm-eval could not write a run's results or samples; they are saved elsewhere."""


@contextmanager
def results_saved() -> Iterator[None]:
    """While the block runs (``calidist eval``), a results or samples file lm-eval's
    ``EvaluationTracker`` fails to write (it logs "Could not save results" and the run exits 0)
    raises ``ResultsNotSaved`` naming the place, after what it was given is saved under the
    recovery folder (``save_run``)."""

    def wrap(name: str, original: Any) -> Any:
        def save(tracker: Any, **kwargs: Any) -> None:
            original(tracker, **kwargs)
            task = kwargs.get("task_name")
            written = lm_eval_compat.tracker_file(tracker, task)
            if not tracker.output_path or (written is not None and written.is_file()):
                return
            if task is None:
                folder = save_run(kwargs["results"], kwargs.get("samples") or {})
            else:
                folder = save_run({}, {task: kwargs["samples"]})
            what = "results" if task is None else f"samples of {task}"
            raise ResultsNotSaved(
                f"lm-eval could not write the {what} to --output_path {tracker.output_path} "
                f"(its log above says why); they are saved in {folder} instead: calidist report "
                f"{folder} --out {folder}/report")

        return save

    with lm_eval_compat.methods_wrapped(lm_eval_compat.TRACKER_SAVES, wrap):
        yield
