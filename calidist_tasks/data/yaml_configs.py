"""Our YAML task configs as plain dicts, read without lm-eval (the task list, two-stage plans)."""

from __future__ import annotations

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
