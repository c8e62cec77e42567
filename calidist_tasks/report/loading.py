"""Read lm-eval output folders: results JSON files and ``--log_samples`` files, joined per task.

lm-eval writes ``results_<date>.json`` (``<stem>_<date>.json`` when ``--output_path`` ends in
``.json``) and one ``samples_<task>_<date>.jsonl`` per task with the same ``<date>``, in one folder
per model. A samples file joins the results file of its folder with the same date; nothing here
raises on a bad file: every file that cannot be used is named in ``Loaded.problems`` and only the
cells that need it are left out.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from calidist_tasks.report import plain_runs
from calidist_tasks.report.identity import assign_groups, run_identity
from calidist_tasks.report.runs import TaskRun
from calidist_tasks.report.stored import read_header, read_stored
from calidist_tasks.runs.files import (
    RESULTS_NAME,
    SAMPLES_NAME,
    json_lines,
    model_name,
    stage1_folder,
)
from calidist_tasks.runs.prompt_logging import logged_prompts, resolved
from calidist_tasks.scoring.records import (
    SOURCE_FIELD,
    STAGE1_FOLDER,
    Record,
    is_failed,
    line_record,
)

TASK_PREFIX = "calidist_"


@dataclass
class Loaded:
    runs: list[TaskRun] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _metrics(values: Mapping[str, Any]) -> tuple[dict[str, float], str | None, list[str]]:
    """Numbers of one task's results entry, for one filter ("none" if present)."""
    by_filter: dict[str, dict[str, float]] = defaultdict(dict)
    for key, value in values.items():
        name, _, filter_name = key.partition(",")
        if filter_name and isinstance(value, (int, float)) and not isinstance(value, bool):
            by_filter[filter_name][name] = float(value)
    if not by_filter:
        return {}, None, []
    chosen = "none" if "none" in by_filter else sorted(by_filter)[0]
    return by_filter[chosen], chosen, sorted(set(by_filter) - {chosen})


def _infinite(path: Path, task: str, metrics: Mapping[str, float]) -> list[str]:
    """A problem line per infinite number of a results file (no metric of ours is infinite;
    NaN is a metric's own "undefined", so it is not one): shown as it is, never marked best."""
    return [f"{path}: {task} {name} is {value} (not a finite number): shown as it is, never "
            "marked best" for name, value in metrics.items() if math.isinf(value)]


def _find(paths: Sequence[str | Path], problems: list[str]
          ) -> tuple[list[Path], list[Path], list[Path]]:
    """Results files, samples files and committed benchmark records (``report.stored``)."""
    results, samples, stored = set(), set(), set()
    for given in paths:
        path = Path(given)
        if not path.exists():
            problems.append(f"{path}: no such file or folder")
            continue
        # a results file given alone brings its samples files (same folder, same date)
        match = RESULTS_NAME.match(path.name) if path.is_file() else None
        beside = sorted(path.parent.glob(f"samples_*_{match['stamp']}.jsonl*")) if match else []
        for file in ([path, *beside] if path.is_file() else sorted(path.rglob("*.json*"))):
            if path.is_dir() and STAGE1_FOLDER in file.relative_to(path).parts[:-1]:
                continue  # a two-stage run's stage 1: its stage 2 holds the whole records
            if SAMPLES_NAME.match(file.name):
                samples.add(file.resolve())
            elif RESULTS_NAME.match(file.name):
                results.add(file.resolve())
            elif file.name.endswith(".jsonl.gz") and read_header(file) is not None:
                stored.add(file.resolve())
    return sorted(results), sorted(samples), sorted(stored)


def _read_stored(path: Path, problems: list[str]) -> list[TaskRun]:
    try:
        return [read_stored(path)[1]]
    except (OSError, EOFError, ValueError, KeyError, TypeError) as error:
        problems.append(f"{path}: unreadable benchmark records ({error}); left out")
        return []


def _read_results(path: Path, problems: list[str]) -> list[TaskRun]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        problems.append(f"{path}: unreadable results file ({error}); left out")
        return []
    if not isinstance(data, dict) or not isinstance(data.get("results"), dict):
        return []  # some other JSON file that happens to carry a date in its name
    model = model_name(data)
    groups = set(data.get("group_subtasks") or {})
    stamp = RESULTS_NAME.match(path.name)["stamp"]
    runs = []
    for task, values in data["results"].items():
        if task in groups or not isinstance(values, dict):
            continue  # groups repeat their tasks' numbers
        config = (data.get("configs") or {}).get(task) or {}
        if not is_calidist(task):  # a plain lm-eval task: its choices' log-likelihoods
            output_type = config.get("output_type")
            if output_type != plain_runs.MULTIPLE_CHOICE:
                problems.append(f"{path}: {task} is not a multiple-choice task (output_type "
                                f"{output_type}): skipped")
                continue
            config = plain_runs.plain_config(task, config)
        metrics, chosen, others = _metrics(values)
        problems += _infinite(path, task, metrics)
        if others:
            problems.append(f"{path}: {task} has filters {[chosen, *others]}; "
                            f"only filter {chosen!r} is reported")
        effective = ((data.get("n-samples") or {}).get(task) or {}).get("effective")
        runs.append(TaskRun(task, model, stamp, path, metrics, config,
                            effective if isinstance(effective, int) else None, chosen or "none",
                            identity=run_identity(data, task)))
    return runs


def is_calidist(task: str) -> bool:
    """Whether ``task`` is a calidist task (its samples hold our records), not a plain lm-eval
    task (``plain_runs``)."""
    return task.startswith(TASK_PREFIX)


def _attach(sample_file: Path, runs: list[TaskRun], problems: list[str]) -> None:
    """Join one samples file to the run it belongs to, by folder, task and date."""
    match = SAMPLES_NAME.match(sample_file.name)
    task, stamp = match["task"], match["stamp"]
    # lm-eval writes a run's samples files into the folder of its results file
    here = [r for r in runs if r.task == task and sample_file.parent == r.results_file.parent]
    exact = [r for r in here if r.stamp == stamp]
    if exact:
        exact[0].samples_file = sample_file
        return
    models = sorted({r.model for r in here})
    if not here:
        problems.append(f"{sample_file}: no results file in its folder lists {task}; left out")
    elif len(models) > 1:
        problems.append(
            f"{sample_file}: no results file with its date {stamp}, and its folder holds "
            f"{task} results of several models ({', '.join(models)}): cannot tell which model "
            "it belongs to; left out"
        )
    else:
        newest = max(here, key=lambda r: r.stamp)
        if newest.samples_file is None:
            newest.samples_file = sample_file
            problems.append(f"{sample_file}: no results file with its date {stamp}; joined to "
                            f"{newest.results_file.name} (same folder, task and model)")
        else:
            problems.append(f"{sample_file}: no results file with its date {stamp}; left out")


def _prompts(line: Mapping[str, Any]) -> list[tuple[str, int]]:
    """(prompt, times sent) per request of one logged document; repeats count each sample. A
    prompt logged by its hash (``--metadata log_prompts``) is its text where the line logged
    that text too, else its marker (``prompt_logging``)."""
    logged = logged_prompts(line)
    resps = line.get("resps") or []
    prompts = []
    for i, (prompt, text) in enumerate(zip(logged, resolved(logged), strict=True)):
        times = len(resps[i]) if i < len(resps) and isinstance(resps[i], list) else 1
        prompts.append((str(prompt if text is None else text), max(times, 1)))
    return prompts


def _generations(line: Mapping[str, Any]) -> list[str]:
    """The texts a generation task's requests returned (none for log-likelihood requests)."""
    texts = []
    for resp in line.get("resps") or []:
        if isinstance(resp, list):
            texts += [text for text in resp if isinstance(text, str)]
    return texts


def _source(line: Mapping[str, Any]) -> str | None:
    doc = line.get("doc")
    source = doc.get(SOURCE_FIELD) if isinstance(doc, dict) else None
    return str(source) if source is not None else None


def _read_samples(run: TaskRun, problems: list[str]) -> None:
    """Fill run.records and run.prompts from its samples file, or name why they are unusable."""
    path = run.samples_file
    try:
        lines = json_lines(path)
    except (OSError, UnicodeDecodeError) as error:
        problems.append(f"{path}: unreadable ({error}); {run.name} has no per-document data")
        return
    records, prompts, generations, sources, doc_ids, bad, failed = [], [], [], [], [], [], []
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            line = json.loads(text)
        except json.JSONDecodeError:
            bad.append(f"line {number} is cut short (an interrupted run?)" if number == len(lines)
                       else f"line {number} is not valid JSON")
            continue
        if line.get("filter", run.filter_name) != run.filter_name:
            continue
        record = line_record(line)
        if record is None and not is_calidist(run.task):
            try:
                record = plain_runs.plain_record(line)
            except ValueError as error:
                bad.append(f"line {number}: {error}")
                continue
        if record is None:
            bad.append(f"line {number} holds no calidist record")
            continue
        doc_ids.append(line.get("doc_id", record.get("index")))
        if is_failed(record):  # a failed_record: counted as logged, left out of the metrics
            failed.append(record)
            continue
        records.append(record)
        prompts.append(_prompts(line))
        generations.append(_generations(line))
        sources.append(_source(line))
    expected = run.expected_docs
    if expected is None and "n_evaluation" in run.metrics:
        expected = int(run.metrics.get("n_calibration", 0) + run.metrics["n_evaluation"])
    found = set(doc_ids)
    if len(found) != len(doc_ids):
        bad.append("some documents are logged twice")
    if expected is not None and len(found) < expected:
        # a task may log a subset (e.g. evaluation documents only): name the gaps inside it
        gaps = sorted(set(range(min(found, default=0), max(found, default=-1) + 1)) - found)
        shown = ", ".join(map(str, gaps[:5])) + (" ..." if len(gaps) > 5 else "")
        bad.append(f"{expected - len(found)} of {expected} documents are missing"
                   + (f" (doc_id {shown})" if gaps else ""))
    if bad:
        problems.append(f"{path}: {'; '.join(bad)}: {run.name} left out of intervals, tests, "
                        "diagrams, costs and transfer (its results-file numbers are kept)")
        return
    if failed:
        problems.append(f"{path}: {run.name}: {len(failed)} of {len(doc_ids)} documents have "
                        "answers that cannot be used and are left out of every number: "
                        f"{failed[0]['error']}"
                        + (f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""))
    if not is_calidist(run.task):
        plain_split(run, records)
    order = sorted(range(len(records)), key=lambda i: records[i]["index"])
    run.records = [records[i] for i in order]
    run.prompts = [prompts[i] for i in order]
    run.generations = [generations[i] for i in order]
    run.sources = [sources[i] for i in order]


def plain_split(run: TaskRun, records: list[Record]) -> None:
    """A plain run's records split into calibration and evaluation (``plain_runs``), its
    metrics those of a calidist task without hints, the split stated in its identity."""
    from calidist_tasks.scoring.aggregation import summarize_baselines
    from calidist_tasks.scoring.fits import calibrator_context

    settings = plain_runs.settings_for(len(records))
    plain_runs.split_plain(records, settings)
    context = calibrator_context(run.task, run.config.get("doc_to_choice"), run.model)
    run.metrics = {**run.metrics, **summarize_baselines(records, settings, context)}
    split = {key: getattr(settings, key) for key in ("calib_size", "eval_size", "split_seed")
             if key in run.identity}  # the defaults it shows are not this run's
    run.identity = {**run.identity, **split, "calibration": plain_runs.calibration_text(settings)}


def add_stage1_prompts(run: TaskRun, problems: list[str],
                       stage1: dict[Path, Loaded] | None = None) -> None:
    """A two-stage run's stage 2 logs the hints only: prepend each document's stage-1 original
    prompt to ``run.prompts`` and its reply to ``run.generations``, so that its cost counts what
    the run sent and generated in both stages (as the run itself prints; a reasoned task's
    Table 4 cost reads its reply run's). ``stage1`` caches the stage-1 folders already read."""
    folder = stage1_folder(run.config.get("metadata") or {}, run.results_file.parent)
    if folder is None or run.records is None or run.prompts is None:
        return
    cache = {} if stage1 is None else stage1
    if folder not in cache:
        cache[folder] = load_runs([folder])
    found = [r for r in cache[folder].runs if r.task == run.task and r.model == run.model]
    if not found:
        if (run.config.get("metadata") or {}).get("stage") == "hints":
            problems.append(f"{run.name}: its stage-1 samples are not under {folder}: its cost "
                            "counts stage 2's hint prompts only")
        return
    first = found[0]
    originals = {r["index"]: (p, g) for r, p, g in zip(
        first.records or [], first.prompts or [], first.generations or [], strict=True)}
    missing = [r["index"] for r in run.records if r["index"] not in originals]
    if missing:
        problems.append(f"{run.name}: {len(missing)} documents have no stage-1 samples in "
                        f"{folder}: its cost counts stage 2's hint prompts only")
        return
    run.prompts = [originals[r["index"]][0] + prompts
                   for r, prompts in zip(run.records, run.prompts, strict=True)]
    if run.generations is not None:
        run.generations = [originals[r["index"]][1] + texts
                           for r, texts in zip(run.records, run.generations, strict=True)]
    run.stage1_samples = first.samples_file


def load_runs(paths: Sequence[str | Path],
              keep: Callable[[TaskRun], bool] | None = None) -> Loaded:
    """Every calidist task in the results files under ``paths``, with its logged documents;
    ``keep`` chooses runs before their samples are read (``calidist report --tasks``)."""
    loaded = Loaded()
    results_files, samples_files, stored = _find(paths, loaded.problems)
    runs = [run for path in results_files for run in _read_results(path, loaded.problems)]
    runs += [run for path in stored for run in _read_stored(path, loaded.problems)]
    for sample_file in samples_files:
        _attach(sample_file, runs, loaded.problems)
    if keep is not None:
        runs = [run for run in runs if keep(run)]
        if (results_files or stored) and not runs:
            loaded.problems.append("no calidist task under " + ", ".join(map(str, paths))
                                   + " matches --tasks / --models")
    for run in runs:  # before grouping: the documents a run evaluated are part of its identity
        if run.prompt_tokens is None and run.samples_file is not None:
            _read_samples(run, loaded.problems)
    runs = assign_groups(runs)
    newest: dict[tuple[str, str], TaskRun] = {}
    stage1: dict[Path, Loaded] = {}
    for run in sorted(runs, key=lambda r: r.stamp):
        key = (run.group, run.task)
        if key in newest:
            old = newest[key]
            loaded.problems.append(f"{old.results_file}: {old.name} is superseded by the newer "
                                   f"run in {run.results_file}; the older one is left out")
        newest[key] = run
    for run in newest.values():
        if run.prompt_tokens is not None:  # committed records: read whole already
            continue
        if run.samples_file is None:
            loaded.problems.append(
                f"{run.results_file}: {run.name} has no samples file (run without "
                "--log_samples?): results-file numbers only, no intervals, diagrams or transfer"
            )
        else:
            add_stage1_prompts(run, loaded.problems, stage1)
    loaded.runs = sorted(newest.values(), key=lambda r: (r.model, r.group, r.task))
    if not results_files and not stored:
        loaded.problems.append("no lm-eval results files found under "
                               + ", ".join(str(p) for p in paths))
    return loaded
