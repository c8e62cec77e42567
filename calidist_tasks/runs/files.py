"""Run files: lm-eval output folders, found, read and written in one place.

lm-eval writes ``results_<date>.json`` (``<stem>_<date>.json`` when ``--output_path`` ends in
``.json``) and one ``samples_<task>_<date>.jsonl`` per task with the same ``<date>`` (``STAMP``),
in one folder per model. Here: the names of those files, the date stamp of files we write as
lm-eval output, the reader of JSON-lines files, the search for an earlier run's samples (a later
stage reads them), lm-eval's own writer for a results dict (``save_like_lm_eval``) and the writer
of a failed aggregation's records (``write_records``, ``recovery``). The run path reads and
writes through this module only; ``calidist report`` builds on it (``report.loading``).
"""

from __future__ import annotations

import gzip
import json
import os
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from calidist_tasks.scoring.records import RECORD_KEY, STAGE1_FOLDER

STAMP = r"\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d+)?"  # lm-eval's date_id
RESULTS_NAME = re.compile(rf"^(?P<stem>.+)_(?P<stamp>{STAMP})\.json$")
SAMPLES_NAME = re.compile(rf"^samples_(?P<task>.+)_(?P<stamp>{STAMP})\.jsonl$")

def new_stamp() -> str:
    """A date_id for files we write as lm-eval output: lm-eval's own (``EvaluationTracker``:
    local time, ISO format with ":" as "-"), which ``STAMP`` matches."""
    return datetime.now().isoformat().replace(":", "-")


def samples_file_of(path: str | Path, task: str, key: str, how: str) -> Path:
    """An earlier run's samples of ``task`` (a later stage reads them): the file itself, refused
    when lm-eval named it another task's, or the newest ``samples_<task>_<date>.jsonl`` below a
    folder (lm-eval's --output_path). ``key`` names the setting that gave ``path``, ``how`` says
    how to produce the file; both go into the error."""
    given = Path(path)
    if given.is_file():  # any name, but not lm-eval's name for another task's samples
        match = SAMPLES_NAME.match(given.name)
        if match is not None and match["task"] != task:
            raise ValueError(f"{task}: {key} {given} is the samples of {match['task']}; give "
                             f"this task's samples_{task}_*.jsonl or its output folder")
        return given
    if given.is_dir():
        found = [p for p in given.rglob(f"samples_{task}_*.jsonl")
                 if (m := SAMPLES_NAME.match(p.name)) and m["task"] == task]
        if found:
            return max(found, key=lambda p: p.stat().st_mtime)
        raise FileNotFoundError(f"{task}: {key}: no samples_{task}_*.jsonl under {given}; "
                                f"run {task} with {how} first")
    raise FileNotFoundError(f"{task}: {key} {given} does not exist")


def stage1_folder(metadata: Mapping[str, Any], model_folder: Path) -> Path | None:
    """Where a two-stage run kept stage 1 (``two_stage``): its metadata's ``original_run``, else
    the ``stage1`` folder beside its model folder (``<output_path>/stage1``, where a relative
    ``original_run`` is not found from here); None when neither is a folder."""
    for folder in (metadata.get("original_run"), model_folder.parent / STAGE1_FOLDER):
        if folder and Path(folder).is_dir() and Path(folder) != model_folder:
            return Path(folder)
    return None


def json_lines(path: str | Path) -> list[str]:
    """The lines of a JSON-lines file (gzip-compressed when its name ends in ``.gz``).

    The one reader of samples files in this project. Lines end at "\\n" only: lm-eval writes
    samples with ``ensure_ascii=False``, so a document's text keeps U+2028, U+2029, U+0085 (and
    other characters ``str.splitlines()`` treats as line ends) unescaped inside JSON strings.
    A trailing "\\n" gives no extra empty line. Raises OSError / UnicodeDecodeError.
    """
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", newline="\n") as file:  # only "\n" ends a line
        return [line[:-1] if line.endswith("\n") else line for line in file]


def read_jsonl(path: str | Path) -> list[Any]:
    """Every JSON value of a JSON-lines file (see ``json_lines``); blank lines are skipped.

    A line that is not valid JSON raises ValueError naming the file and the line.
    """
    values = []
    for number, text in enumerate(json_lines(path), start=1):
        if not text.strip():
            continue
        try:
            values.append(json.loads(text))
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}:{number}: not valid JSON ({error.msg})") from None
    return values


def save_like_lm_eval(results: Mapping[str, Any], folder: str | os.PathLike,
                      label: str = "results") -> dict[str, str]:
    """Save one simple_evaluate dict into ``folder`` with lm-eval's EvaluationTracker, as its CLI
    does (what ``calidist report`` and a later stage read); return {path of each file written:
    how to name it in problems}."""
    folder = Path(folder)
    from lm_eval.loggers import EvaluationTracker
    from lm_eval.utils import sanitize_model_name

    data = dict(results)  # the tracker adds keys to the results and rewrites samples in place
    samples = {task: [_unsaved(doc) for doc in docs]
               for task, docs in (data.pop("samples", None) or {}).items()}
    tracker = EvaluationTracker(output_path=str(folder))
    # simple_evaluate names the model folder only on its own tracker: name ours the same way
    # (else lm-eval writes into a folder called "None")
    tracker.general_config_tracker.model_name_sanitized = sanitize_model_name(model_name(data))
    tracker.save_results_aggregated(results=data, samples=samples or None)
    for task in data.get("configs") or {}:
        if task in samples:
            tracker.save_results_samples(task_name=task, samples=samples[task])
    written = {}
    for file in sorted(folder.rglob("*.json*")):
        if RESULTS_NAME.match(file.name):
            written[str(file)] = label
        elif match := SAMPLES_NAME.match(file.name):
            written[str(file)] = f"{label}['samples'][{match['task']!r}]"
    if label not in written.values():  # the tracker logs its errors instead of raising them
        raise RuntimeError(f"lm-eval could not save {label} (see its log above)")
    written[str(folder) + os.sep] = ""
    return written


def _unsaved(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of one logged document as simple_evaluate returns it: its ``arguments`` as a list
    of tuples again when a tracker already saved it (which rewrites them to {"gen_args_i":
    {"arg_j": ...}} in place; saving that again would split each name into characters)."""
    doc = dict(doc)
    arguments = doc.get("arguments")
    if isinstance(arguments, Mapping):
        doc["arguments"] = [tuple(arg.values()) if isinstance(arg, Mapping) else arg
                            for arg in arguments.values()]
    return doc


def _prompts(instances: Sequence[Any] | None) -> dict[int, tuple[list, list]]:
    """doc_id -> (arguments, replies) of the requests this process built, in request order."""
    found: dict[int, list] = defaultdict(list)
    for instance in instances or []:
        found[instance.doc_id].append(instance)
    return {doc_id: ([list(i.args) for i in sorted(group, key=lambda i: i.idx)],
                     [i.resps for i in sorted(group, key=lambda i: i.idx)])
            for doc_id, group in found.items()}


def write_records(folder: Path, stamp: str, task: str, records: Sequence[Mapping[str, Any]],
                  docs: Any, config: Mapping[str, Any], model: str | None,
                  instances: Sequence[Any] | None = None) -> Path:
    """Write ``records`` into ``folder`` as lm-eval output ``calidist report`` reads; return the
    samples file. Prompts and replies are logged only when this process holds them for every
    document (a multi-process run gathers records, not requests, on the first process)."""
    ordered = sorted(records, key=lambda r: r["index"])
    prompts = _prompts(instances)
    complete = bool(ordered) and all(r["index"] in prompts for r in ordered)
    samples = folder / f"samples_{task}_{stamp}.jsonl"
    with samples.open("w", encoding="utf-8") as out:
        for record in ordered:
            line: dict[str, Any] = {"doc_id": record["index"], "doc": docs[int(record["index"])],
                                    "filter": "none", "metrics": [RECORD_KEY]}
            if complete:
                line["arguments"], line["resps"] = prompts[record["index"]]
            line[RECORD_KEY] = record
            out.write(json.dumps(line, ensure_ascii=False, default=str) + "\n")
    results = {
        "results": {task: {"alias": task}},
        "configs": {task: dict(config)},
        "config": {"model_args": {"pretrained": model} if model else {}},
        "n-samples": {task: {"original": len(docs), "effective": len(ordered)}},
        "calidist_recovered": "per-document records of a run whose aggregation failed; "
                              "`calidist report` recomputes the metrics from them",
    }
    (folder / f"results_{stamp}.json").write_text(
        json.dumps(results, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    return samples


MODEL_KEYS = ("pretrained", "model", "path", "engine")  # model_args naming the model


def model_name(results: Mapping[str, Any]) -> str:
    """The model a results file measured: ``pretrained=`` / ``model=`` of its model_args."""
    config = results.get("config") or {}
    args = config.get("model_args")
    if isinstance(args, str):  # "pretrained=X,dtype=float32" when given as a string
        args = dict(part.split("=", 1) for part in args.split(",") if "=" in part)
    if isinstance(args, Mapping):
        for key in MODEL_KEYS:
            if args.get(key):
                return str(args[key])
    return str(results.get("model_name") or config.get("model") or "unknown model")


def write_run(folder: Path, stamp: str, results: Mapping[str, Any],
              samples: Mapping[str, Sequence[Any]] | None) -> None:
    """``results`` (a ``simple_evaluate`` dict, its samples apart) and each task's ``samples``
    as the files of an lm-eval output folder, which ``calidist report`` reads."""
    data = {key: value for key, value in results.items() if key != "samples"}
    (folder / f"results_{stamp}.json").write_text(
        json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    for task, lines in (samples or {}).items():
        with (folder / f"samples_{task}_{stamp}.jsonl").open("w", encoding="utf-8") as out:
            for line in lines:
                out.write(json.dumps(line, ensure_ascii=False, default=str) + "\n")
