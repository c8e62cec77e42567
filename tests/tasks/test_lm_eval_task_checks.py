"""lm-eval's generic task checks (its tests/test_tasks.py: test_doc_to_text,
test_create_choices, test_doc_to_target, test_construct_requests), re-expressed for our tasks
on tiny local data (tests/family_data.py; no network, no model). A task config that breaks one
of them fails here as it would fail lm-eval's own suite."""

from __future__ import annotations

from pathlib import Path

import pytest
from family_data import write_all
from lm_eval.api.instance import Instance
from lm_eval.tasks import TaskManager

from calidist_tasks import task_folder

# every variant of two families (letter options; a label space) and GSM8K's first stages
PREFIXES = ("calidist_aqua", "calidist_mscinli")
GSM8K = ("calidist_gsm8k", "calidist_gsm8k_verbalized")


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = write_all(Path(tmp_path_factory.mktemp("data")))
    manager = TaskManager(include_path=task_folder(), include_defaults=False,
                          metadata={"data_dir": str(root), "calib_size": 6, "eval_size": 8})
    # not the reasoned _cot tasks: like GSM8K's later stages, they read an earlier run
    names = [n for n in manager.all_subtasks if n.startswith(PREFIXES)
             and not n.endswith("_cot")] + list(GSM8K)
    return manager.load(names)["tasks"]


def _docs(task) -> list:
    docs = task.test_docs() if task.has_test_docs() else task.validation_docs()
    return list(docs)[:3]


def test_doc_to_text(tasks) -> None:
    """lm-eval: a str, and no trailing whitespace when the target delimiter is whitespace."""
    for name, task in tasks.items():
        delimiter = task.config.target_delimiter
        for doc in _docs(task):
            text = task.doc_to_text(doc)
            assert isinstance(text, str), name
            assert not (delimiter.isspace() and text and text[-1].isspace()), (
                f"{name}: doc_to_text ends in whitespace and target_delimiter {delimiter!r} "
                "is whitespace too")


def test_create_choices_and_doc_to_target(tasks) -> None:
    for name, task in tasks.items():
        for doc in _docs(task):
            target = task.doc_to_target(doc)
            assert isinstance(target, (int, str, list)), name
            if task.OUTPUT_TYPE == "multiple_choice" or task.config.doc_to_choice is not None:
                choices = task.doc_to_choice(doc)
                assert isinstance(choices, list) and all(isinstance(c, str) for c in choices)
                if isinstance(target, int):
                    assert 0 <= target < len(choices), name


def test_construct_requests(tasks) -> None:
    """lm-eval calls construct_requests(doc=doc, ctx=ctx) with no Instance metadata."""
    for name, task in tasks.items():
        for doc in _docs(task):
            ctx = task.fewshot_context(doc, num_fewshot=0)
            requests = task.construct_requests(doc=doc, ctx=ctx)
            requests = requests if isinstance(requests, list) else [requests]
            assert requests and all(isinstance(r, Instance) for r in requests), name
