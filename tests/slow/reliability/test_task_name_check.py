"""Slow half of ``tests/reliability/test_task_name_check.py``: lm-eval's own index of its whole
task tree (~35 CPU-s), compared with the names the preflight scan reads.

What the module tests: the fast half's docstring."""

from __future__ import annotations

from calidist_tasks.backends.lm_eval_compat import _task_index
from calidist_tasks.runs import preflight


def test_the_scan_knows_every_name_of_lm_evals_index() -> None:
    """A superset of lm-eval's own index, so that no name lm-eval knows is refused (tags defined
    in templates without a .yaml suffix, in lists below the key, in flow lists)."""
    missing = sorted(set(_task_index(())) - preflight.lm_eval_task_names())
    assert not missing, missing[:10]
