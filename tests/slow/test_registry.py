"""Slow half of ``tests/test_registry.py`` (builds the tiny model or runs lm-eval).

What the module tests: the fast half's docstring."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest
from conftest import assert_report_rebuilds_results
from test_registry import (
    FRIEND_HINT,
    friend,  # noqa: F401 (a fixture)
)

from calidist_tasks import registry


def test_a_new_style_runs_end_to_end(friend, tiny_model_dir: Path, ppdb_data_dir: Path,
                                     tmp_path: Path) -> None:
    """The toy style through lm-eval on the tiny model: its YAML is the generator's, its prompts
    carry its hint, its results file names it in the config lm-eval logs, and ``calidist report``
    rebuilds its CaliDist row from the samples (not from the task's name, which no YAML of ours
    holds)."""
    import lm_eval
    from data.test_task_yaml_generated import gen  # tests/ is on sys.path (its conftest)
    from lm_eval.loggers import EvaluationTracker
    from lm_eval.tasks import TaskManager

    from calidist_tasks import task_folder
    from calidist_tasks.report import write_report

    folder = tmp_path / "tasks"
    folder.mkdir()
    shutil.copy(Path(task_folder()) / "ppdb" / "_template_yaml", folder / "_template_yaml")
    name = "calidist_ppdb_friend"
    (folder / f"{name}.yaml").write_text(gen.render("ppdb")[f"{name}.yaml"], encoding="utf-8")
    manager = TaskManager(include_path=str(folder), include_defaults=False,
                          metadata={"data_dir": str(ppdb_data_dir), "calib_size": 6,
                                    "eval_size": 6})
    tracker = EvaluationTracker(output_path=str(tmp_path / "lm"))
    results = lm_eval.simple_evaluate(
        model="hf", model_args=f"pretrained={tiny_model_dir},dtype=float32", tasks=[name],
        task_manager=manager, batch_size=8, device="cpu", log_samples=True, bootstrap_iters=0,
        evaluation_tracker=tracker)
    samples = results.pop("samples")
    for doc in samples[name]:  # the original prompt, then m = 1 hinted prompt per label
        prompts = list(dict.fromkeys(arg[0] for arg in doc["arguments"]))
        assert [FRIEND_HINT in p.rpartition("Sentence1:")[2] for p in prompts] == [
            False, True, True], prompts
    assert len(samples[name]) == 12  # calibration and evaluation documents
    assert results["configs"][name]["metadata"]["distractor"] == "friend"  # logged
    assert set(registry.metric_names(True)) <= {k.split(",")[0] for k in results["results"][name]}
    tracker.save_results_aggregated(results=results, samples=samples)
    tracker.save_results_samples(task_name=name, samples=samples[name])

    assert assert_report_rebuilds_results(tmp_path / "lm") == [name]
    report = write_report([tmp_path / "lm"], tmp_path / "out", (), n_resamples=20)
    assert report.problems == []
    with open(tmp_path / "out" / "leaderboard.csv", encoding="utf-8") as file:
        (row,) = list(csv.DictReader(file))
    assert row["method"] == "CaliDist (Fr.)"  # rebuilt from the samples: no problem above
    assert float(row["ppdb_ece"]) == pytest.approx(100 * results["results"][name]["ece,none"],
                                                   abs=1e-4)
