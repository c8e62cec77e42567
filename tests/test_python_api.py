"""The Python API through the real lm-eval pipeline (tiny model, a few PPDB documents):
``calidist_tasks.evaluate`` runs our tasks with the metadata, and
``report.write_report_from_results`` builds from its dict the report the folder reader builds from
the same run saved as ``lm_eval --output_path --log_samples`` saves it."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.filterwarnings("ignore::calidist_metrics.CalibrationWarning")


def test_the_documented_saved_fit_example_runs(tmp_path: Path, monkeypatch) -> None:
    """docs/python_api.md's "For new answers" example, run as written."""
    from calidist_metrics import CaliDistCalibrator, stack_columns

    text = (Path(__file__).parents[1] / "docs" / "python_api.md").read_text(encoding="utf-8")
    section = text[text.index("### For new answers"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(code, "python_api.md", "exec"), namespace)  # noqa: S102  our own docs
    fit = namespace["fit"]
    assert isinstance(fit, CaliDistCalibrator) and (tmp_path / "fit.json").is_file()
    # document 1 kept its answer (mu 0, delta |0.9 - 0.85|); document 2 flipped (mu 0.6, delta
    # |0.8 - 0.6|): lambda_raw = (1 - mu) / (delta + 1e-10)
    raw = [1 / (0.05 + 1e-10), 0.4 / (0.2 + 1e-10)]
    expected = fit.predict(stack_columns(("lambda_raw", "confidence"),
                                         lambda_raw=raw, confidence=[0.9, 0.8]))
    np.testing.assert_allclose(namespace["calibrated"], expected, rtol=1e-9)
    assert namespace["calibrated"][1] < namespace["calibrated"][0]
