"""calidist: CaliDist confidence calibration as lm-evaluation-harness tasks."""

from __future__ import annotations

from importlib.resources import files

__version__ = "0.1.0"


def task_folder() -> str:
    """The folder to pass to ``lm_eval --include_path`` (our YAML tasks)."""
    return str(files("calidist_tasks.yaml_tasks"))
