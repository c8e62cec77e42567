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
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from calidist_tasks.run_files import new_stamp, write_records

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
