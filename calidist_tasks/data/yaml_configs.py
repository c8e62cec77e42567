"""Our YAML task configs as plain dicts, read without lm-eval (the task list, two-stage plans),
and the names any folder of lm-eval YAML can define, read as text (``name_folders``)."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from functools import cache, lru_cache
from importlib.resources import files
from pathlib import Path
from typing import Any


def task_configs(folders: Sequence[str | Path] = ()) -> dict[str, dict[str, Any]]:
    """Every task and group of our YAML folder, then of ``folders`` (a user's --include_path,
    e.g. ``calidist wrap``'s output): name -> its config with includes merged (read with a safe
    loader; ``!function`` tags are kept as their dotted names). Each file is parsed once per
    process and again only when it changes; the nested values are shared between calls, so a
    caller copies before it edits one."""
    import yaml

    merged_here: dict[Path, dict[str, Any]] = {}  # a family's template is included by every task

    def load(path: Path) -> dict[str, Any]:
        if path not in merged_here:
            stat = path.stat()
            config = dict(_parsed(path, stat.st_mtime_ns, stat.st_size))
            includes = config.pop("include", None) or []
            merged: dict[str, Any] = {}
            for include in [includes] if isinstance(includes, str) else includes:
                merged.update(load((path.parent / include).resolve()))
            merged_here[path] = {**merged, **config}
        return dict(merged_here[path])

    configs = {}
    roots = [Path(str(files("calidist_tasks.yaml_tasks"))), *map(Path, folders)]
    for path in [p for root in roots for p in sorted(root.rglob("*.yaml"))]:
        try:
            config = load(path)
        except (OSError, yaml.YAMLError):  # a user's folder: lm-eval reports its own files
            continue
        name = config.get("group") or config.get("task")
        if isinstance(name, str):
            configs[name] = config
    return configs


@cache
def _parsed(path: Path, mtime_ns: int, size: int) -> dict[str, Any]:
    """One YAML file as a dict, cached by its path, modification time and size."""
    import yaml

    class Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # libyaml: ~10x faster
        pass

    Loader.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))
    return yaml.load(path.read_text(encoding="utf-8"), Loader=Loader) or {}  # noqa: S506


@lru_cache(maxsize=1)
def benchmark_titles() -> dict[str, str]:
    """benchmark -> its title in tables and figures, its ``_template_yaml``'s ``metadata:
    title:``."""
    titles = {}
    for config in task_configs().values():
        title = (config.get("metadata") or {}).get("title")
        if config.get("benchmark") and title:
            titles[str(config["benchmark"])] = str(title)
    return titles


# a task, group or tag name in lm-eval's YAML: "task: x", "tag: [x, y]", or a list below the key,
# matched line by line over the whole file ([^\S\n]: whitespace within a line)
_NAME_KEY = re.compile(r"""^["']?(?:task|group|tag)["']?[^\S\n]*:[^\S\n]*(.*)$""", re.M)
_LIST_ITEM = re.compile(r"[^\S\n]*-[^\S\n]*(.+)")


@lru_cache(maxsize=8)
def name_folders(folders: tuple[str, ...]) -> dict[str, frozenset[str]]:
    """Each name the YAML files under ``folders`` can define (the file's name, its ``task``,
    ``group`` and ``tag`` values, read as text) -> the folders holding those files."""
    found: dict[str, set[str]] = {}
    for folder in folders:
        for name, places in _folder_names(folder).items():
            found.setdefault(name, set()).update(places)
    return {name: frozenset(places) for name, places in found.items()}


@lru_cache(maxsize=8)
def _folder_names(folder: str) -> dict[str, frozenset[str]]:
    """``name_folders`` of one folder, scanned once per process (lm-eval's 14,500 files are
    asked for alone and beside an include path)."""
    found: dict[str, set[str]] = {}
    for where, _, names in os.walk(folder):
        for file in names:
            if file.endswith((".yaml", ".yml")) or "." not in file:
                for name in {file.rsplit(".", 1)[0], *_yaml_names(os.path.join(where, file))}:
                    found.setdefault(name, set()).add(where)
    return {name: frozenset(places) for name, places in found.items()}


def _yaml_names(path: str) -> set[str]:
    def clean(value: str) -> str:
        return value.split(" #")[0].strip().strip("\"'").strip()

    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return set()
    found: set[str] = set()
    for key in _NAME_KEY.finditer(text):
        value = key.group(1).strip()
        if value.startswith("["):
            found |= {clean(v) for v in value.strip("[]").split(",")}
        elif value and not value.startswith("#"):
            found.add(clean(value))
        else:
            at = key.end() + 1
            while listed := _LIST_ITEM.match(text, at):
                found.add(clean(listed.group(1)))
                at = listed.end() + 1
    return found
