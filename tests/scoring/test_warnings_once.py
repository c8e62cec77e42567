"""Warnings a user reads once (issue #15.3): one line per task and cause, none per prompt or per
document, and no Python source line echoed under it."""

from __future__ import annotations

import logging
import warnings


def test_grid_edge_warning_is_one_short_line_with_the_docs():
    """The calibrator's paragraph about a grid-edge fit becomes, in a task's log, one short line
    that keeps where the fit landed and names the docs."""
    import numpy as np

    from calidist_metrics import CALIDIST_COLUMNS, CaliDistCalibrator, stack_columns
    from calidist_tasks.scoring.warnings import GRID_EDGE_DOCS, warning_lines

    lam, conf = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0]), np.full(6, 0.9)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        X = stack_columns(CALIDIST_COLUMNS, lambda_raw=lam, confidence=conf)
        CaliDistCalibrator().fit(X, np.zeros(6))  # all wrong: the flattest shrink
    edge = [str(w.message) for w in caught if "grid edge" in str(w.message)]
    assert edge and len(edge[0]) > 300  # the library keeps its explanation
    (line,) = warning_lines("calidist_x", edge)
    assert line.startswith("calidist_x: CaliDistCalibrator: the fit landed on a grid edge (")
    assert line.endswith(f"; see {GRID_EDGE_DOCS}") and len(line) < 200


def test_no_fewshot_split_warning_from_lm_eval(ppdb_data_dir, caplog):
    """Our exemplars come from the calibration documents: lm-eval's "num_fewshot > 0 but
    fewshot_split is None" (logged once per task when it builds its own sampler) is noise."""
    from lm_eval.tasks import TaskManager

    from calidist_tasks import task_folder

    manager = TaskManager(include_path=task_folder(), include_defaults=False,
                          metadata={"data_dir": str(ppdb_data_dir), "calib_size": 4,
                                    "eval_size": 4})
    with caplog.at_level(logging.WARNING):
        manager.load(["calidist_ppdb", "calidist_ppdb_verbalized"])
    assert not [r for r in caplog.records if "fewshot_split" in r.getMessage()]
