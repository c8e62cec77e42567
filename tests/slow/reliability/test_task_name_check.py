"""Slow half of ``tests/reliability/test_task_name_check.py``: lm-eval's own index of its whole
task tree (~35 CPU-s), compared with the names the preflight scan reads.

What the module tests: the fast half's docstring."""

from __future__ import annotations

import pytest

from calidist_tasks.backends import lm_eval_compat
from calidist_tasks.backends.lm_eval_compat import _task_index
from calidist_tasks.runs import preflight


def test_the_scan_knows_every_name_of_lm_evals_index() -> None:
    """A superset of lm-eval's own index, so that no name lm-eval knows is refused (tags defined
    in templates without a .yaml suffix, in lists below the key, in flow lists)."""
    missing = sorted(set(_task_index(())) - preflight.lm_eval_task_names())
    assert not missing, missing[:10]


def _answers(names: list[str]) -> dict[str, tuple]:
    """What wrap and a wrapped task look up about each name: its kind, its leaf tasks, and a
    task's whole config."""
    found = {}
    for name in names:
        kind = lm_eval_compat.registered_kind(name)
        found[name] = (kind, lm_eval_compat.member_names(name))
        if kind in ("task", "python task"):
            found[name] += (lm_eval_compat.task_config(name),)
    return found


def test_a_name_is_looked_up_as_lm_evals_whole_index_has_it(monkeypatch) -> None:
    """``calidist wrap`` and a wrapped task index only the folders whose YAML can define the name
    and its members: the same kind, members and config as lm-eval's whole index, for tasks,
    groups (nested), a tag and one name in 300 of the index; a task without lm-eval's whole
    index (a tag, or a group that lists one, as mmlu's do, takes the whole index)."""
    whole = sorted(_task_index(()))
    names = ["arc_easy", "ai2_arc", "mmlu_stem", "mmlu", "gsm8k", "hellaswag", *whole[::300]]
    found = _answers(names)
    assert found["mmlu_stem"][0] == "group" and len(found["mmlu"][1]) == 57
    with monkeypatch.context() as patch:
        patch.setattr(lm_eval_compat, "_index_for", lambda name, path: _task_index(path))
        assert _answers(names) == found
    lm_eval_compat._folders_index.cache_clear()
    monkeypatch.setattr(lm_eval_compat, "_task_index", lambda *args, **kwargs: pytest.fail(
        "lm-eval's whole task tree was indexed"))
    alone = ["arc_easy", "gsm8k", "hellaswag"]
    assert _answers(alone) == {n: found[n] for n in alone}
