"""No import cycles inside calidist_tasks: every import of one of its modules by another (at
the top, inside a function, or under ``TYPE_CHECKING``) is an edge of a graph that must be
acyclic."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable
from pathlib import Path

PACKAGE = "calidist_tasks"
ROOT = Path(__file__).parents[1] / PACKAGE


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


@functools.cache
def _nodes(path: Path) -> tuple[ast.AST, ...]:
    """Every node of ``path``'s syntax tree, parsed once for all the tests here."""
    return tuple(ast.walk(ast.parse(path.read_text(encoding="utf-8"))))


def _imported(path: Path, name: str, modules: dict[str, Path]) -> set[str]:
    """The calidist_tasks modules ``path`` (module ``name``) imports."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in _nodes(path):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # "from package import module" imports the module; "from module import name" the module
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                       for a in node.names]
        else:
            continue
        found |= {t for t in targets if t in modules and t != name}
    return found


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a path (first == last), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_graph_finds_the_modules_and_their_imports() -> None:
    modules = _modules()
    graph = {name: _imported(path, name, modules) for name, path in modules.items()}
    assert {"calidist_tasks.tasks.base", "calidist_tasks.prompting.fewshot",
            "calidist_tasks.prompting.parts"} <= set(graph)
    assert "calidist_tasks.prompting.parts" in graph["calidist_tasks.tasks.base"]
    assert "calidist_tasks.tasks.base" in graph["calidist_tasks.tasks.generation"]
    assert "calidist_tasks.tasks.base" not in graph["calidist_tasks.prompting.fewshot"]


def test_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_calidist_tasks_has_no_import_cycle() -> None:
    modules = _modules()
    graph = {name: _imported(path, name, modules) for name, path in modules.items()}
    cycle = _cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def _reachable(graph: dict[str, set[str]], start: str) -> dict[str, str]:
    """Every module ``start`` imports, directly or not: {module: the module that imports it}."""
    seen: dict[str, str] = {}
    todo = [start]
    while todo:
        node = todo.pop()
        for nxt in sorted(graph[node]):
            if nxt not in seen and nxt != start:
                seen[nxt] = node
                todo.append(nxt)
    return seen


# What lm-eval runs (the task classes, the CLI's eval path): none of them may need the report.
RUN_PATH = ("calidist_tasks.tasks.base", "calidist_tasks.tasks.generation",
            "calidist_tasks.tasks.gsm8k", "calidist_tasks.tasks.gsm8k_verbalized",
            "calidist_tasks.runs.two_stage", "calidist_tasks.runs.recovery",
            "calidist_tasks.scoring.aggregation", "calidist_tasks.registry",
            "calidist_tasks.runs.files")


def test_the_run_path_never_imports_the_report() -> None:
    modules = _modules()
    graph = {name: _imported(path, name, modules) for name, path in modules.items()}
    for start in RUN_PATH:
        found = _reachable(graph, start)
        report = sorted(m for m in found if m.split(".")[:2] == [PACKAGE, "report"])
        assert not report, f"{start} imports {report[0]} (through {found[report[0]]})"
    # the check can fail: the report itself imports the report's modules
    assert "calidist_tasks.report.loading" in _reachable(graph, "calidist_tasks.report")


def _parent_skipping_calls(nodes: Iterable[ast.AST]) -> list[str]:
    """Methods called through a class name with ``self`` (``Base.method(self, ...)``): such a
    call skips every class between (``super()`` does not)."""
    return [f"{node.func.value.id}.{node.func.attr}" for node in nodes
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name) and node.func.value.id[:1].isupper()
            and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id == "self"]


def test_the_finder_finds_a_call_that_skips_a_parent() -> None:
    def calls(source: str) -> list[str]:
        return _parent_skipping_calls(ast.walk(ast.parse(source)))

    assert calls("ConfigurableTask.doc_to_text(self, doc)") == ["ConfigurableTask.doc_to_text"]
    assert not calls("super().doc_to_text(doc)\nobject.__setattr__(self, 'a', 1)")


def test_no_method_call_skips_a_parent_class() -> None:
    found = {name: calls for name, path in _modules().items()
             if (calls := _parent_skipping_calls(_nodes(path)))}
    assert not found


def _external(path: Path) -> set[str]:
    """The top-level names of what ``path`` imports from outside calidist_tasks (at the top or
    inside a function: "lm_eval" for ``from lm_eval.api import task``)."""
    found = set()
    for node in _nodes(path):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    return found - {PACKAGE}


METRICS_ROOT = Path(__file__).parents[1] / "metrics"  # imported as calidist_metrics


def test_scoring_and_calidist_metrics_never_import_lm_eval() -> None:
    """``calidist_tasks.scoring`` (records -> fits -> scores) and ``calidist_metrics`` import no
    ``lm_eval``, neither themselves nor through any module of ours they import, not even inside
    a function."""
    modules = _modules()
    graph = {name: _imported(path, name, modules) for name, path in modules.items()}
    scoring = [name for name in modules if name.startswith(f"{PACKAGE}.scoring")]
    assert f"{PACKAGE}.scoring.aggregation" in scoring
    for start in scoring:
        found = _reachable(graph, start)
        for module in [start, *found]:
            assert "lm_eval" not in _external(modules[module]), (
                f"{start} imports lm_eval through {module}"
                + (f" (imported by {found[module]})" if module in found else ""))
    for path in sorted(METRICS_ROOT.rglob("*.py")):
        assert not {"lm_eval", PACKAGE} & _external(path), path
    # the check can fail: the task classes import lm_eval
    assert "lm_eval" in _external(modules[f"{PACKAGE}.tasks.base"])


def test_importing_scoring_and_calidist_metrics_loads_no_lm_eval() -> None:
    """The same at run time, third-party imports included: a fresh interpreter importing every
    scoring module and calidist_metrics has no ``lm_eval`` (nor torch) in ``sys.modules``."""
    import subprocess
    import sys

    scoring = sorted(name for name in _modules() if name.startswith(f"{PACKAGE}.scoring"))
    code = ("import importlib, sys\n"
            f"for name in {['calidist_metrics', *scoring]!r}:\n"
            "    importlib.import_module(name)\n"
            "bad = [m for m in ('lm_eval', 'torch') if m in sys.modules]\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_declared_public_api_resolves_and_loads_lazily() -> None:
    """Every name of ``calidist_tasks.__all__`` and ``calidist_metrics.__all__`` is importable;
    ``import calidist_tasks`` loads neither numpy nor lm-eval until one is used."""
    import subprocess
    import sys

    code = ("import calidist_tasks, calidist_metrics\n"
            "for module in (calidist_tasks, calidist_metrics):\n"
            "    missing = [n for n in module.__all__ if getattr(module, n, None) is None]\n"
            "    assert not missing, (module.__name__, missing)\n"
            "assert calidist_tasks.CaliDistCalibrator is calidist_metrics.CaliDistCalibrator\n"
            "assert {'evaluate', 'task_folder', 'write_report', 'expected_calibration_error',\n"
            "        'prediction_rejection_ratio'} <= set(calidist_tasks.__all__)\n")
    subprocess.run([sys.executable, "-c", code], check=True)
    lazy = ("import sys, calidist_tasks\n"
            "assert not {'numpy', 'lm_eval', 'calidist_metrics'} & set(sys.modules)\n")
    subprocess.run([sys.executable, "-c", lazy], check=True)
