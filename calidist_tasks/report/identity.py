"""Run identity: what makes two task runs comparable, so that the report never compares across it.

Two runs of the same model are comparable when they were asked the same questions the same way:
the model's arguments (``dtype``, ``revision``, ...), the number of few-shot examples, the chat
template and system instruction, lm-eval's ``--limit``, and calidist's own settings that change
the documents or the numbers (sizes, seeds, data, ``m``, ``lambda_scale``, ``fit``,
``verbalized_prompt``, ...; ``RunSettings``). The report puts every such setting into one block
of rows (its "group"): bold "best", paired tests and averages stay inside a block, and each
block is labelled with the settings that tell it apart from the model's other blocks.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from fnmatch import fnmatchcase
from typing import Any

from calidist_tasks.registry import Variant, task_variant
from calidist_tasks.report.runs import TaskRun
from calidist_tasks.report.tables import Table
from calidist_tasks.runs.files import MODEL_KEYS
from calidist_tasks.scoring.records import CONSISTENCY, EVALUATION, SPUQ, VERBALIZED

# model_args that change how fast, not what, a model answers
RUNTIME_ARGS = {"device", "device_map", "batch_size", "max_batch_size", "parallelize",
                "num_concurrent", "max_retries", "timeout", "base_url",
                "tokenized_requests", "tokenizer_backend", "use_fast_tokenizer", "max_gen_toks",
                "gpu_memory_utilization", "data_parallel_size", "tensor_parallel_size",
                "prefix_cache", "verify_cache"}
# calidist settings (``RunSettings``) that change the documents or the numbers, and which task
# variants (``registry.Variant``) they matter to; the others (stage, original_run,
# save_calibrator, allow_transfer) only say how a run was carried out
def _every(variant: Variant) -> bool:
    return True


def _hinted(variant: Variant) -> bool:
    return variant.distracted


SETTINGS: dict[str, Callable[[Variant], bool]] = {
    "calib_size": _every, "eval_size": _every, "split_seed": _every, "data_files": _every,
    "data_dir": _every,
    "m": lambda v: v.distractor == "assertion",  # probe and corruption have a fixed number
    "seed": lambda v: v.distracted or v.source in (CONSISTENCY, SPUQ),
    "calibrator": _hinted, "lambda_scale": _hinted, "delta_mode": _hinted, "fit": _hinted,
    "verbalized_prompt": lambda v: v.source == VERBALIZED,
    "sampling": lambda v: v.source == CONSISTENCY}
# lm-eval's results-file keys of the prompt format (chat template by its hash)
PROMPT_KEYS = (("chat_template_sha", "chat template"), ("system_instruction_sha",
               "system instruction"), ("fewshot_as_multiturn", "few-shot as multi-turn"))


def short_names(models: Iterable[str]) -> dict[str, str]:
    """Display names: the shortest trailing path parts that tell the models apart."""
    models = sorted(set(models))
    parts = {m: [p for p in m.replace("\\", "/").split("/") if p] or [m] for m in models}
    names = {}
    for model in models:
        for depth in range(1, len(parts[model]) + 1):
            name = "/".join(parts[model][-depth:])
            clash = [o for o in models if o != model and "/".join(parts[o][-depth:]) == name]
            if not clash:
                break
        names[model] = name
    return names


def _model_args(data: Mapping[str, Any]) -> dict[str, Any]:
    args = (data.get("config") or {}).get("model_args")
    if isinstance(args, str):  # "pretrained=X,dtype=float32" when given as a string
        args = dict(part.split("=", 1) for part in args.split(",") if "=" in part)
    return dict(args) if isinstance(args, Mapping) else {}


def run_identity(data: Mapping[str, Any], task: str) -> dict[str, Any]:
    """The settings of ``task`` in one lm-eval results dict that decide what its numbers mean
    (the model's name itself excluded): JSON-able values, keys in a fixed order. calidist's
    method settings count only for the tasks they change (``m`` for hinted tasks, ...)."""
    from calidist_tasks.settings import RunSettings

    args = _model_args(data)
    identity: dict[str, Any] = {f"model_args.{k}": str(v) for k, v in sorted(args.items())
                                if k not in MODEL_KEYS and k not in RUNTIME_ARGS}
    config = (data.get("configs") or {}).get(task) or {}
    shots = (data.get("n-shot") or {}).get(task, config.get("num_fewshot"))
    identity["num_fewshot"] = int(shots or 0)
    for key, _ in PROMPT_KEYS:
        identity[key] = data.get(key) or None
    identity["limit"] = (data.get("config") or {}).get("limit")
    metadata = config.get("metadata") or {}
    variant = task_variant(task, config)[1]
    kept = [key for key, matters in SETTINGS.items() if variant is None or matters(variant)]
    try:  # the values the run used: an omitted key is its default
        settings = RunSettings.from_metadata(metadata)
        values = {key: getattr(settings, key) for key in kept}
    except (TypeError, ValueError):  # metadata of another calidist version: as written
        values = {key: metadata.get(key) for key in kept}
    if "m" in values and values["m"] is None and variant is not None:
        from calidist_tasks.prompting.styles import distractor_style

        # the number the run used, so that an omitted m and the same m given are one block
        values["m"] = distractor_style(variant.distractor).m
    identity.update({key: value if value is None or isinstance(value, (int, float, str))
                     else json.dumps(value, sort_keys=True) for key, value in values.items()})
    return identity


def documents_key(run: TaskRun) -> str | None:
    """A short digest of the evaluation documents a run scored (their logged origins, file and
    line: ``records.SOURCE_FIELD``), so that runs of the same settings on other documents (other
    data behind the same data_dir, another lm-eval --samples) are other blocks; None when its
    samples were not read or logged no origin."""
    if not run.records or not run.sources or not any(run.sources):
        return None
    evaluated = sorted(str(source) for record, source in zip(run.records, run.sources,
                                                              strict=True)
                       if record.get("split") == EVALUATION)
    return hashlib.sha256("\n".join(evaluated).encode("utf-8")).hexdigest()[:8]


def _scoped(run: TaskRun) -> dict[str, Any]:
    """The run's identity with each key scoped to its benchmark (``ppdb:m``): settings are
    compared only between runs of the same benchmark, the unit a leaderboard column compares
    (PPDB and AQuA may use other sizes in one block)."""
    benchmark = task_variant(run.task, run.config)[0]
    return {f"{benchmark}:{key}": value for key, value in run.identity.items()}


def assign_groups(runs: Iterable[TaskRun]) -> list[TaskRun]:
    """The runs with their block's identity (``TaskRun.group`` names the block).

    The runs of a model form one block unless a setting differs between runs of the same
    benchmark (two ``m``, a 0-shot and a 1-shot run, two ``--limit``): then one block per
    combination of the differing settings, and a task the setting does not change (the
    original task for ``m``) joins each of them (as a copy). A block's identity is the union of
    its runs' settings, scoped per benchmark (``_scoped``), and the evaluation documents it
    scored where its samples say (``documents_key``)."""
    by_model: dict[str, list[TaskRun]] = {}
    for run in runs:
        documents = documents_key(run)
        if documents is not None:
            run = replace(run, identity={**run.identity, "documents": documents})
        by_model.setdefault(run.model, []).append(run)
    placed = []
    for members in by_model.values():
        scoped = [_scoped(run) for run in members]
        seen: dict[str, set[str]] = {}
        for identity in scoped:
            for key, value in identity.items():
                seen.setdefault(key, set()).add(json.dumps(value))
        split = sorted(key for key, values in seen.items() if len(values) > 1)
        combos = {tuple(json.dumps(identity[k]) if k in identity else None for k in split)
                  for identity in scoped if any(k in identity for k in split)} or {()}
        # a run lacking a setting (the original task lacks m) joins every block that agrees
        # with it on the rest: it makes a block of its own only where none does
        combos = {combo for combo in combos if not any(
            other != combo and all(mine is None or mine == theirs
                                   for mine, theirs in zip(combo, other, strict=True))
            for other in combos)}
        for combo in sorted(combos, key=str):
            block = [(run, identity) for run, identity in zip(members, scoped, strict=True)
                     # a setting the run lacks does not matter to it
                     if all(k not in identity or json.dumps(identity[k]) == value
                            for k, value in zip(split, combo, strict=True))]
            union = {k: v for _, identity in block for k, v in identity.items()}
            placed += [replace(run, identity=union) for run, _ in block]
    return placed


def setting_text(key: str, value: Any) -> str:
    """One setting as the tables show it: ``1-shot``, ``chat template``, ``limit 12``, ``m=2``."""
    if key == "num_fewshot":
        return f"{value}-shot"
    for name, text in PROMPT_KEYS:
        if key == name:
            return text if value else f"no {text}"
    if key == "limit":
        return "no limit" if value is None else f"limit {value:g}"
    return f"{key.removeprefix('model_args.')}={value}"


def settings_text(identity: Mapping[str, Any], keys: Iterable[str] | None = None) -> str:
    """Scoped settings (``_scoped``) per benchmark: ``ppdb: 1-shot, m=2; aqua: 0-shot``;
    ``keys`` chooses which (default: every setting that is set)."""
    chosen = [k for k in identity if identity[k] not in (None, False)
              or k.endswith((":num_fewshot", ":limit"))] if keys is None else list(keys)
    per_benchmark: dict[str, list[str]] = {}
    for scoped in chosen:
        benchmark, key = scoped.split(":", 1)
        per_benchmark.setdefault(benchmark, []).append(key)
    return "; ".join(f"{benchmark}: " + ", ".join(setting_text(k, identity.get(f"{benchmark}:{k}"))
                                                  for k in _ordered(found))
                     for benchmark, found in per_benchmark.items())


# a block's label longer than this (ids of documents, several sizes) becomes a number: row
# labels, figure titles and file names stay short; ``differences`` spells the block out once
SHORT_LABEL = 32


def differences(runs: Iterable[TaskRun]) -> dict[str, str]:
    """Per run group (``TaskRun.group``): the settings that tell it apart from the same
    model's other groups (``toy: 1-shot, limit 12``), "" for a model's only group."""
    identities: dict[str, dict[str, dict[str, Any]]] = {}
    for run in runs:
        identities.setdefault(run.model, {})[run.group] = run.identity
    found = {}
    for groups in identities.values():
        keys = {k for identity in groups.values() for k in identity}
        # a key some blocks lack (a task they do not have) does not tell them apart
        differing = [k for k in keys
                     if len({json.dumps(i[k]) for i in groups.values() if k in i}) > 1]
        for group, identity in groups.items():
            found[group] = settings_text(identity, [k for k in differing if k in identity])
    return found


def group_names(runs: Iterable[TaskRun]) -> dict[str, str]:
    """Display name per run group (``TaskRun.group``): the model's short name, followed in
    brackets by what tells the group apart from the same model's other groups
    (``differences``), or by its number among them (``model [2]``) where that text of any of
    them is longer than SHORT_LABEL characters."""
    runs = list(runs)
    models = short_names(r.model for r in runs)
    labels = differences(runs)
    by_model: dict[str, list[str]] = {}
    for run in runs:
        if run.group not in by_model.setdefault(run.model, []):
            by_model[run.model].append(run.group)
    names = {}
    for model, groups in by_model.items():
        numbered = any(len(labels[g]) > SHORT_LABEL for g in groups)
        for number, group in enumerate(sorted(groups, key=lambda g: labels[g]), start=1):
            label = str(number) if numbered else labels[group]
            names[group] = f"{models[model]} [{label}]" if label else models[model]
    return names


def _ordered(keys: Iterable[str]) -> list[str]:
    """Identity keys in the order ``run_identity`` builds them (model arguments first)."""
    fixed = ["num_fewshot", *(k for k, _ in PROMPT_KEYS), "limit", *SETTINGS]
    keys = set(keys)
    return sorted(k for k in keys if k not in fixed) + [k for k in fixed if k in keys]


def identity_table(runs: Iterable[TaskRun], names: Mapping[str, str]) -> Table:
    """The legend of the blocks: per group its model, what tells it apart from the model's
    other groups (``differences``), every setting of its identity and its tasks."""
    table = Table(["block", "model", "differs by", "settings", "tasks"])
    by_group: dict[str, list[TaskRun]] = {}
    for run in runs:
        by_group.setdefault(run.group, []).append(run)
    told = differences(r for mine in by_group.values() for r in mine)
    for group in sorted(by_group, key=lambda g: names[g]):
        mine = by_group[group]
        table.rows.append([names[group], mine[0].model, told[group] or None,
                           settings_text(mine[0].identity), ", ".join(r.task for r in mine)])
    return table


def selected(run: TaskRun, tasks: str | None, models: str | None) -> bool:
    """Whether a run passes ``--tasks`` / ``--models``: comma-separated shell patterns
    (``calidist_ppdb*``, ``*SmolLM2*``) matched against the task name and the model's name."""
    def match(name: str, patterns: str | None) -> bool:
        return patterns is None or any(fnmatchcase(name, p.strip())
                                       for p in patterns.split(",") if p.strip())

    return match(run.task, tasks) and match(run.model, models)
