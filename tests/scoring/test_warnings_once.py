"""Warnings a user reads once (issue #15.3): one line per task and cause, none per prompt or per
document, and no Python source line echoed under it."""

from __future__ import annotations

import json
import logging
import warnings
from collections import Counter
from pathlib import Path

from conftest import run_lm_eval

from calidist_metrics import CalibrationWarning

TASK = "calidist_mnli_assertion"


def _mnli_without_neutral(root: Path) -> Path:
    """MNLI files whose calibration split (validation_mismatched) holds no neutral pair: the
    few-shot pool is short of option (c)."""
    folder = root / "mnli"
    folder.mkdir(parents=True)
    for split, labels in (("validation_matched", [0, 1, 2, 0, 1, 2]),
                          ("validation_mismatched", [0, 2, 0, 2, 0, 2])):
        rows = [{"premise": f"The cat in {split} story {i} sat near the old river.",
                 "hypothesis": f"An animal was near water in story {i}.", "label": label,
                 "idx": i} for i, label in enumerate(labels)]
        (folder / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows),
                                               encoding="utf-8")
    return root


def test_each_cause_is_one_line_per_task(tiny_model_dir, tmp_path, caplog, capfd):
    metadata = {"data_dir": str(_mnli_without_neutral(tmp_path)), "calib_size": 4,
                "eval_size": 4, "m": 1}
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING):
        warnings.simplefilter("always")
        run_lm_eval([TASK], tiny_model_dir, metadata, num_fewshot=2)
    ours = [r.getMessage() for r in caplog.records if r.name.startswith("calidist_tasks")]
    # 8 documents x 4 prompts asked for a second exemplar of each label (the YAML ships one):
    # one line per label, not 32
    assert ours.count(f"{TASK}: few-shot: the YAML ships 1 exemplar(s) of label 2, 2 requested "
                      "per label; prompts show what there is") == 1
    assert ours.count(f"{TASK}: CaliDistCalibrator: only 4 calibration documents (< 5); the "
                      "fitted alpha, beta and bounds are unreliable") == 1
    assert any(m.startswith(f"{TASK}: CaliDistCalibrator: the fit landed on a grid edge")
               for m in ours)
    assert all(n == 1 for n in Counter(ours).values()), Counter(ours)
    assert all("\n" not in m for m in ours)
    # logged, not warned: no Python warning, so no echoed source line on stderr
    assert not [w for w in caught if issubclass(w.category, CalibrationWarning)]
    assert "warnings.warn(" not in capfd.readouterr().err


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
