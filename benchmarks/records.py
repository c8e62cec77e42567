"""Committed per-document records: ``benchmarks/results/<model>/<task>.jsonl.gz``.

After each finished task the benchmark keeps what its analysis needs, read from lm-eval's
output folder by ``calidist_tasks.report.loading`` (the project's one samples reader):

- line 1, the header: the task, the model's short name, the sizes it was asked for, the exact
  lm-eval and benchmark commands (portable: no absolute paths; the model folder written as
  ``$(calidist model NAME)``), the run's wall time, and from lm-eval's results file the task's
  numbers, its config (the run's metadata: lambda_scale, delta_mode, fit, ...; output type;
  options) and its evaluation time;
- one line per document: the calidist record that ``process_results`` logged (every field the
  report's refits read), the document's origin (its source field: file and line, which pairs
  documents across tasks), and its cost: per prompt sent, its token count (the model's own
  tokenizer) and how many requests sent it, plus the generated tokens; for a reasoned (``_cot``)
  task also ``replies``: per reply its run scored, [prompt tokens, reply tokens] of the reply
  run that ``calidist eval`` ran first into ``<output_path>/replies`` (the generation the
  letter scoring reads, in prompt order: the paper's Table 4 counts it).

No prompt or document text is kept: a few hundred bytes per document, gzip-compressed.
``load`` turns the files back into the report's ``TaskRun`` objects, so the analysis runs the
report's own refits on them, with no lm-eval folder and no model.
"""

from __future__ import annotations

import gzip
import io
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from benchmarks.commands import (
    command_metadata,
    command_model_dir,
    machine,
    portable,
    requested,
)
from calidist_tasks.data.yaml_configs import task_configs
from calidist_tasks.registry import task_variant
from calidist_tasks.report.cost import prompt_groups, token_counter
from calidist_tasks.report.loading import TaskRun, load_runs
from calidist_tasks.report.stored import FORMAT, read_header, read_stored
from calidist_tasks.scoring.records import MODEL_KEY, STAGE1_FOLDER


@dataclass
class Stored:
    """One committed task run: the report's TaskRun plus the benchmark's header and costs."""

    model: str  # short name (smollm2, qwen-coder)
    task: str
    header: dict[str, Any]
    run: TaskRun
    costs: list[dict[str, Any]]  # per document, as ``run.records``
    path: Path

    @property
    def benchmark(self) -> str:
        return task_variant(self.task, self.run.config)[0]

    @property
    def suffix(self) -> str:
        """The task's variant's suffix (``registry.Variant``), from its config."""
        variant = task_variant(self.task, self.run.config)[1]
        return variant.suffix if variant else ""

    @property
    def two_stage(self) -> bool:
        """Run with ``calidist eval --two-stage``: hints naming the prediction were not sent."""
        return bool(self.header.get("two_stage"))

    @property
    def scored(self) -> bool:
        """Log-likelihood requests (one forward pass per prompt), not generation."""
        return self.header["lm_eval"]["config"].get("output_type") != "generate_until"

    @property
    def eval_seconds(self) -> float:
        seconds = self.header["lm_eval"].get("total_evaluation_time_seconds")
        return float(seconds) if seconds not in (None, "") else float(self.header["wall_s"])


# ``<results>/SAME_DOCUMENTS/<model>/<task>.jsonl.gz``: the direct-readout counterparts of the
# reasoned tasks, run at the reasoned runs' sizes so that both protocols score the same
# documents (BENCHMARKS.md, "The reasoned reply beside the direct readout"); ``load(results)``
# does not see them (one folder deeper), ``load(results / SAME_DOCUMENTS)`` reads them.
SAME_DOCUMENTS = "same-documents"


def path_for(results: Path, model: str, task: str) -> Path:
    return Path(results) / model / f"{task}.jsonl.gz"


def matches(results: Path, model: str, task: str, metadata: Mapping[str, Any]) -> bool:
    """Whether committed records of ``task`` exist for the sizes ``metadata`` asks for."""
    header = read_header(path_for(results, model, task))
    return header is not None and header.get("requested") == requested(metadata)


def _write(path: Path, lines: list[dict[str, Any]]) -> None:
    """gzip with a fixed timestamp (the same records give the same bytes), written atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0) as packed:
        for line in lines:
            packed.write((json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8"))
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(buffer.getvalue())
    os.replace(partial, path)


def consistency_estimate(benchmark: str, metadata: Mapping[str, Any],
                         tokens: Callable[[str], float]) -> dict[str, float]:
    """15-sample consistency's requests, forward passes and prompt tokens per document, from
    the requests lm-eval builds for ``calidist_<benchmark>_consistency`` on the same documents
    (no model runs): a lower bound of its cost, since its generated tokens only add to it."""
    from lm_eval.tasks import TaskManager

    from calidist_tasks import task_folder

    name = f"calidist_{benchmark}_consistency"
    manager = TaskManager(include_path=task_folder(), include_defaults=False,
                          metadata={k: v for k, v in metadata.items() if k != "m"})
    task = manager.load([name])["tasks"][name]
    task.build_all_requests(rank=0, world_size=1)
    per_doc: dict[int, list] = {}
    for instance in task.instances:
        per_doc.setdefault(instance.doc_id, []).append(instance)
    docs = list(per_doc.values())
    return {"documents": len(docs),
            "requests": sum(sum(i.repeats for i in d) for d in docs) / len(docs),
            "passes": sum(sum(i.repeats for i in d) for d in docs) / len(docs),
            "prompt_tokens": sum(sum(tokens(i.args[0]) * i.repeats for i in d)
                                 for d in docs) / len(docs)}


REPLY_TOKENS = "reply_tokens"  # header: whether the lines hold their reply run's tokens


@lru_cache(maxsize=1)
def reply_tasks() -> dict[str, str]:
    """Reasoned task -> the task whose replies it reads (its YAML's ``reply_task``)."""
    return {name: config["reply_task"] for name, config in task_configs().items()
            if config.get("reply_task")}


def reply_tokens(runs: list[TaskRun], run: TaskRun, tokens: Callable[[str], float],
                 problems: list[str]) -> list[list[list[float | int]]] | None:
    """Per document of a reasoned task's ``run``: [prompt tokens, reply tokens] per reply of its
    reply run among ``runs`` (the same output folder's ``replies``), in prompt order; None for
    a task that reads no replies, or (named in ``problems``) when its reply run is not there."""
    reply_task = reply_tasks().get(run.task)
    if not reply_task:
        return None
    found = [r for r in runs if r.task == reply_task and r.records is not None]
    if not found:
        problems.append(f"{run.name}: no logged samples of its reply task {reply_task} in its "
                        "output folder: the tokens of its replies are not kept")
        return None
    replies = found[0]
    by_index = {record["index"]: (prompts, texts) for record, prompts, texts in zip(
        replies.records, replies.prompts, replies.generations, strict=True)}
    per_doc = []
    for record in run.records:
        prompts, texts = by_index.get(record["index"], ([], []))
        if not prompts or len(prompts) != len(texts):
            problems.append(f"{run.name} document {record['index']}: {len(texts)} replies to "
                            f"{len(prompts)} prompts in the run of {reply_task}: the tokens of "
                            "its replies are not kept")
            return None
        per_doc.append([[_number(tokens(prompt)), _number(tokens(text))]
                        for (prompt, _), text in zip(prompts, texts, strict=True)])
    return per_doc


def export(folder: Path, model: str, task: str, results: Path, info: Mapping[str, Any],
           problems: list[str]) -> Path | None:
    """Write ``results/<model>/<task>.jsonl.gz`` from one finished lm-eval output folder.

    ``info`` is the folder's run.json (command, wall time). Returns the file written, or None
    (with the reason in ``problems``) when the folder holds no usable samples of ``task``.
    """
    loaded = load_runs([folder])
    found = [r for r in loaded.runs if r.task == task]
    if not found or found[0].records is None:
        problems.append(f"{folder}: no usable logged samples of {task}, not exported ("
                        + "; ".join(loaded.problems or ["no results file"]) + ")")
        return None
    run = found[0]
    if (folder / STAGE1_FOLDER).is_dir() and run.stage1_samples is None:
        problems.append(f"{folder}: no usable stage-1 samples of {task}, not exported ("
                        + "; ".join(loaded.problems) + ")")
        return None
    command = str(info["command"])
    model_dir = command_model_dir(command) or run.model
    models = {model: model_dir}
    count, how = token_counter(model_dir)
    tokens = lru_cache(maxsize=None)(count)  # the original prompt repeats in every task
    results_json = json.loads(Path(run.results_file).read_text(encoding="utf-8"))
    config = results_json.get("configs", {}).get(task, {})
    kept_config = {key: config[key] for key in ("output_type", "doc_to_choice", "num_fewshot",
                                                "metadata") if key in config}
    benchmark, variant = task_variant(task, config)
    header: dict[str, Any] = {
        "format": FORMAT, "model": model, "task": task,
        "requested": requested(command_metadata(command)),
        "command": portable(command, models),
        "benchmark_command": portable(str(info.get("benchmark_command", "")), models),
        "returncode": info.get("returncode", 0), "wall_s": info.get("wall_s"),
        "finished": info.get("finished"),
        "exported_on": machine(),
        "tokens": how,
        "two_stage": run.stage1_samples is not None,  # its prompts include stage 1's
        "lm_eval": {
            "metrics": run.metrics, "filter": run.filter_name, "documents": len(run.records),
            "config": json.loads(portable(json.dumps(kept_config), models)),
            "total_evaluation_time_seconds": results_json.get("total_evaluation_time_seconds"),
            "date": results_json.get("date"),
            "lm_eval_version": results_json.get("lm_eval_version")
            or (results_json.get("versions") or {}).get(task),
        },
    }
    if variant is not None and variant.name == "assertion":
        try:
            header["consistency_estimate"] = consistency_estimate(
                benchmark, command_metadata(command), tokens)
        except Exception as error:  # noqa: BLE001 - an estimate only; its absence is reported
            problems.append(f"{task} [{model}]: consistency's prompt tokens not estimated "
                            f"({type(error).__name__}: {error})")
    replies = reply_tokens(loaded.runs, run, tokens, problems)
    header[REPLY_TOKENS] = replies is not None
    lines: list[dict[str, Any]] = [header]
    for i, (record, prompts, generations, source) in enumerate(zip(
            run.records, run.prompts, run.generations, run.sources, strict=True)):
        if isinstance(record.get(MODEL_KEY), str):  # the model folder, as in the header
            record = {**record, MODEL_KEY: portable(record[MODEL_KEY], models)}
        lines.append({"source": source, "record": record,
                      "prompts": [[_number(tokens(p)), times] for p, times in
                                  prompt_groups(prompts)],
                      "generated": _number(sum(tokens(text) for text in generations)),
                      **({"replies": replies[i]} if replies else {})})
    path = path_for(results, model, task)
    _write(path, lines)
    return path


def _number(value: float) -> float | int:
    return int(value) if float(value).is_integer() else round(float(value), 2)


def export_finished(out: Path, results: Path, problems: list[str]) -> list[Path]:
    """Export every finished task under ``out`` (``<model>/<task>/run.json`` with return code 0)
    whose committed records are missing or come from an earlier run of the same sizes.

    Committed records of other sizes are kept (named in ``problems``): ``run.py`` replaces them
    only when it runs the task for the sizes asked.
    """
    written = []
    for done in sorted(Path(out).glob("*/*/run.json")):
        try:
            info = json.loads(done.read_text())
        except (OSError, ValueError):
            continue
        if info.get("returncode") != 0:
            continue
        model, task = done.parent.parent.name, done.parent.name
        header = read_header(path_for(results, model, task))
        if header is not None and header.get("finished") == info.get("finished") and not (
                REPLY_TOKENS not in header and task in reply_tasks()):
            continue  # exported already (a reasoned task's before its replies' tokens: again)
        if header is not None and header.get("requested") != requested(
                command_metadata(str(info.get("command", "")))):
            problems.append(f"{done.parent}: not exported; the committed records of {model} / "
                            f"{task} have other sizes ({header.get('requested')}); delete "
                            f"{path_for(results, model, task).name} to replace them")
            continue
        path = export(done.parent, model, task, results, info, problems)
        if path is not None:
            written.append(path)
            print(f"[bench] records of {model} / {task} -> {path}", flush=True)
    return written


def load(results: Path, problems: list[str]) -> list[Stored]:
    """Every committed records file under ``results``, as the report's TaskRun objects."""
    stored = []
    for path in sorted(Path(results).glob("*/*.jsonl.gz")):
        try:
            header, run, costs = read_stored(path)
        except (OSError, EOFError, ValueError) as error:
            problems.append(f"{path}: unreadable ({error}); left out")
            continue
        run.identity = {}  # the analysis keys its rows by the short model name (Cell.model)
        stored.append(Stored(header["model"], header["task"], header, run, costs, path))
    return stored
