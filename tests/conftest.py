"""Shared pytest fixtures. Tests never reach the network: the model they use is built locally."""

from __future__ import annotations

import copy
import functools
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

# Test modules import helpers from one another by module name ("from test_report import
# write_run"); tests live in one folder per package concern, so each folder is importable. The
# slow tier mirrors those folders under tests/slow/ (packages: "slow.report.test_report" beside
# "test_report"), whose modules import the fast halves' helpers by the same bare names.
SLOW_TIER = Path(__file__).parent / "slow"
for _folder in sorted(Path(__file__).parent.iterdir()):
    if _folder.is_dir() and not _folder.name.startswith((".", "_")) and _folder != SLOW_TIER:
        if str(_folder) not in sys.path:
            sys.path.append(str(_folder))

# Set before anything imports transformers, datasets or huggingface_hub.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Llama model with its own BPE tokenizer, built once per test session."""
    from calidist_tasks.backends.offline_models import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny_model"))


def run_lm_eval(
    tasks: list[str],
    model_dir: Path,
    metadata: dict,
    *,
    model: str = "hf",
    model_args: str | None = None,
    **kwargs,
) -> dict:
    """Run lm-eval in this process (no ~20 s CLI start-up) on our tasks; returns its results."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    from calidist_tasks import task_folder

    model_args = model_args or f"pretrained={model_dir},dtype=float32"
    # only our folder: indexing lm-eval's own task folder costs ~10 s per call
    manager = TaskManager(include_path=task_folder(), include_defaults=False, metadata=metadata)
    return lm_eval.simple_evaluate(
        model=model,
        model_args=model_args,
        tasks=tasks,
        task_manager=manager,
        batch_size=kwargs.pop("batch_size", 8),
        device="cpu",
        log_samples=kwargs.pop("log_samples", True),
        bootstrap_iters=0,
        **kwargs,
    )


@functools.cache
def _indexed() -> Any:
    """lm-eval's TaskManager over our task folder alone, indexed once per session (indexing is
    most of a fresh TaskManager's time; each build reads its YAML anew)."""
    from lm_eval.tasks import TaskManager

    from calidist_tasks import task_folder

    return TaskManager(include_path=task_folder(), include_defaults=False)


def load_task(name: str, metadata: dict):
    """Build one of our tasks as lm-eval does (YAML + --metadata), without lm-eval's own tasks:
    what ``TaskManager(metadata=metadata)`` builds (its metadata lives in its TaskFactory), on
    the shared index."""
    from lm_eval.tasks._factory import TaskFactory

    manager = copy.copy(_indexed())
    assert isinstance(manager._factory, TaskFactory)  # lm-eval 0.4.13's TaskManager layout
    manager.metadata, manager._factory = metadata, TaskFactory(meta=metadata)
    return manager.load([name])["tasks"][name]


def doc_requests(task, doc: dict, num_fewshot: int = 0) -> list:
    """The requests lm-eval builds for one document, from the prompt lm-eval renders."""
    ctx = task.fewshot_context(doc, num_fewshot, gen_prefix=task.doc_to_prefix(doc))
    return task.construct_requests(doc, ctx, metadata=(task.config.task, 0, 1))


def assert_report_rebuilds_results(folder: Path) -> list[str]:
    """``calidist report`` rebuilds, from the logged records alone, every score lm-eval saved for
    every leaderboard row of every task under ``folder`` (the report's fits are the
    aggregation's); returns the tasks checked. A NaN in the results file stands only for a task
    whose replies were mostly unreadable (its aggregation writes NaN on purpose)."""
    import math

    from calidist_tasks.registry import SCORES, methods_of, task_variant
    from calidist_tasks.report.cells import task_cells
    from calidist_tasks.report.loading import load_runs

    checked = []
    for run in load_runs([folder]).runs:
        problems: list[str] = []
        cells = {cell.method.label: cell for cell in task_cells(run, problems, [])}
        assert problems == [], problems
        for method in methods_of(task_variant(run.task, run.config)[1]):
            saved = {s: run.metrics[method.metric(s)] for s in SCORES
                     if method.metric(s) in run.metrics}
            if not saved:  # a reading this run does not hold (log-prob rows off a chat API)
                assert method.label not in cells, (run.name, method.label)
                continue
            cell = cells[method.label]
            assert cell.confidence is not None, (run.name, method.label)
            for score, value in saved.items():
                where = (run.name, method.label, score)
                if math.isnan(value):
                    assert cell.unreadable, where
                else:
                    assert cell.values[score] == pytest.approx(value, rel=1e-12, abs=1e-12), where
        checked.append(run.task)
    return checked


@pytest.fixture(scope="session")
def drawn(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, dict[str, Path], Path]:
    """(report, its files by name, its folder): the report with figures that the figure tests of
    tests/slow/report/test_report.py and test_html.py read (drawing is most of a report's time), of
    the runs ``test_report.write_drawn`` writes; drawn once (``SHARED_UNITS`` sends both
    modules to one test process)."""
    from test_report import report, write_drawn

    out = tmp_path_factory.mktemp("drawn_report")
    result, files = report(write_drawn(tmp_path_factory.mktemp("drawn")), out, figures=True)
    return result, files, out


def write_mnli(folder: Path, n_matched: int = 40, n_mismatched: int = 20) -> Path:
    """MNLI in the hub schema: validation_matched / validation_mismatched .jsonl in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    animals = ["cat", "dog", "bird", "horse", "fox", "owl", "frog"]
    for split, n in (("validation_matched", n_matched), ("validation_mismatched", n_mismatched)):
        rows = [
            {"premise": f"The {animals[i % 7]} in {split} story {i} sat near the old river.",
             "hypothesis": f"A {animals[(i + i // 7) % 7]} was near water in story {i}.",
             "label": i % 3, "idx": i}
            for i in range(n)
        ]
        text = "".join(json.dumps(r) + "\n" for r in rows)
        (folder / f"{split}.jsonl").write_text(text, encoding="utf-8")
    return folder


@pytest.fixture(scope="session")
def mnli_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """data_dir with mnli/validation_matched.jsonl (40 rows) and validation_mismatched (20)."""
    root = tmp_path_factory.mktemp("mnli_data")
    write_mnli(root / "mnli")
    return root


@pytest.fixture(scope="session")
def ppdb_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """data_dir with a small PPDB file in the corpus's own TSV format (from the bundled sample)."""
    root = tmp_path_factory.mktemp("data")
    (root / "ppdb").mkdir()
    sample = Path(__file__).parents[1] / "calidist_tasks/sample_data/twitter_url_corpus/test.tsv"
    lines = sample.read_text(encoding="utf-8").splitlines()[:60]
    (root / "ppdb" / "test.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


# The slow tier is every test under tests/slow/ (each builds a model, runs lm-eval, draws the
# report's figures or starts a browser) and is marked ``slow`` here, so that ``pytest -m "not
# slow"`` (or ``pytest tests --ignore=tests/slow``) is the fast tier (README, "Tests"). A test
# elsewhere that uses a fixture building a model or drawing the report's figures (directly or
# through another fixture) is marked ``slow`` too, with a warning to move it there.
SLOW_FIXTURES = {"tiny_model_dir": "builds the tiny model", "drawn": "draws the figures"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if SLOW_TIER in Path(item.path).parents:
            item.add_marker(pytest.mark.slow)
        elif slow := SLOW_FIXTURES.keys() & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
            item.warn(pytest.PytestWarning(f"{item.nodeid} {SLOW_FIXTURES[min(slow)]}: its "
                                           "place is under tests/slow/"))


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """``-m "not slow"`` does not even import the slow tier's modules (torch, transformers and
    lm-eval's HF model at collection: seconds), as ``--ignore=tests/slow``."""
    if collection_path == SLOW_TIER and config.getoption("markexpr").replace(" ", "") == "notslow":
        return True
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """Under pytest-xdist (``scripts/test.sh`` runs ``-n 2``), a test marked ``exclusive``
    changes what every process sees (``calidist link`` writes into lm-eval's own task folder) or
    times itself (the parser timings), so it runs, fixtures and all, while no other test does:
    it holds an exclusive lock on one file per test run, every other test a shared one."""
    workerinput = getattr(item.config, "workerinput", None)
    if workerinput is None:  # one process: nothing runs beside it
        yield
        return
    import fcntl
    import tempfile

    lock = Path(tempfile.gettempdir()) / f"calidist-tests-{workerinput['testrunuid']}.lock"
    with open(lock, "a") as handle:
        exclusive = item.get_closest_marker("exclusive") is not None
        fcntl.flock(handle, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield


# Modules that read one session-scoped fixture too costly to build in both test processes:
# under ``--dist loadscope`` each module is one unit of work, and these are one unit together
# (``drawn``, the report with figures: ~8 s a build).
SHARED_UNITS = {"tests/slow/report/test_html.py": "tests/slow/report/test_report.py"}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadscope``, with the modules of ``SHARED_UNITS`` sent to one process."""
    if config.getoption("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedUnits(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            return SHARED_UNITS.get(scope, scope)

    return SharedUnits(config, log)
