"""Slow half of ``tests/tasks/test_wrapped.py`` (builds the tiny model or runs lm-eval).

What the module tests: the fast half's docstring."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_wrapped import (
    data_files,  # noqa: F401 (a fixture)
    metadata_for,
)


# ---------------------------------------------------------------------- end to end
def command(name: str) -> str:
    found = Path(sys.executable).parent / name
    return str(found) if found.exists() else shutil.which(name) or pytest.skip(f"no {name}")


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env=env)
    assert done.returncode == 0, f"{argv[:3]} failed:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    return done


def test_wrapped_arc_easy_runs_through_plain_lm_eval(tmp_path, tiny_model_dir, data_files):
    """The issue's "done when": ``calidist wrap arc_easy`` (local ARC-schema data), then plain
    ``lm_eval --include_path`` prints vanilla and CaliDist ECE / Brier / AUROC; ``calidist
    report`` on a plain lm-eval run of the ARC config prints its calibration table."""
    folder = tmp_path / "wrapped"
    run([command("calidist"), "wrap", "arc_easy", "--out", str(folder), "--no-acc_norm"], tmp_path)
    # beside them, lm-eval's own arc_easy config with its data pointed at the same files: one
    # plain lm_eval run (one index of lm-eval's task tree, ~20 CPU-s, one model load) runs both
    import lm_eval

    # found by path, not through lm-eval's whole task index
    arc_yaml = Path(lm_eval.__file__).parent / "tasks" / "arc" / "arc_easy.yaml"
    assert arc_yaml.is_file(), arc_yaml
    (folder / "arc_easy_local.yaml").write_text(
        f"include: {arc_yaml}\ntask: arc_easy_local\ndataset_path: json\ndataset_name: null\n"
        "training_split: null\n"  # no train file: lm-eval would read its exemplars from it
        f"dataset_kwargs:\n  data_files: {json.dumps(data_files['arc_easy'])}\n")
    metadata = metadata_for("arc_easy", data_files, m=1)
    out = tmp_path / "run"
    done = run([command("lm_eval"), "--model", "hf", "--model_args",
                f"pretrained={tiny_model_dir},dtype=float32", "--device", "cpu",
                "--batch_size", "16", "--include_path", str(folder),
                "--tasks", "calidist_arc_easy,calidist_arc_easy_assertion,arc_easy_local",
                "--metadata", json.dumps(metadata), "--output_path", str(out), "--log_samples"],
               tmp_path)
    for name in ("ece", "brier", "auroc", "ece_vanilla", "brier_vanilla", "auroc_vanilla",
                 "ece_ts"):
        assert f"|{name}" in done.stdout.replace(" ", ""), name
    (results,) = out.rglob("results_*.json")
    numbers = json.loads(results.read_text())["results"]
    assert 0 <= numbers["calidist_arc_easy_assertion"]["ece,none"] <= 1
    assert 0 <= numbers["calidist_arc_easy"]["brier_vanilla,none"] <= 1
    assert 0 <= numbers["arc_easy_local"]["acc,none"] <= 1

    # calidist report on that plain run: the ARC config's calibration table beside ours
    report = run([command("calidist"), "report", str(out), "--out",
                  str(tmp_path / "report"), "--no_figures", "--bootstrap", "50"], tmp_path)
    assert "wrote" in report.stdout
    board = (tmp_path / "report" / "leaderboard.csv").read_text()
    assert "arc_easy_local_ece" in board
    for row in ("Vanilla", "Temperature scaling", "Platt", "Isotonic", "Vector scaling"):
        assert f",{row}," in board, row
    assert "seeded held-out slice" in (tmp_path / "report" / "report.md").read_text()
