"""``calidist report`` rebuilds a wrapped group's calibration pool (issue #35, docs/wrap.md).

A pool of three lm-eval ``mmlu_*`` subjects (tests/tasks/test_wrapped_pool.py's local files and
``calidist-fake``) is run through ``simple_evaluate`` with ``log_samples``, saved as lm-eval's CLI
saves it (``runs.files.save_like_lm_eval``) and read back by the report: every member's rows
equal the task's own results-file numbers (fitted on the pool, not on the member alone), and the
pool's own row ``<pool>_pooled`` equals the results file's ``<metric>_pooled``.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from calidist_tasks.registry import SCORES
from calidist_tasks.report import write_report
from calidist_tasks.report.cells import leaderboard_cells, refit
from calidist_tasks.report.loading import load_runs
from calidist_tasks.runs.files import save_like_lm_eval
from slow.tasks.test_wrapped_pool import POOL, members, pooled, run  # noqa: F401 (fixture)

pytestmark = pytest.mark.slow  # runs lm-eval

VARIANTS = ("", "_assertion")


@pytest.fixture(autouse=True)
def recovered_here(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("CALIDIST_RECOVERED_DIR", str(tmp_path))


@pytest.fixture(scope="module")
def saved(pooled, tmp_path_factory) -> dict:  # noqa: F811
    out = run(pooled, [f"calidist_{POOL}{v}" for v in VARIANTS])
    folder = tmp_path_factory.mktemp("runs")
    save_like_lm_eval(out, folder)
    return {"out": out, "folder": folder}


def cells_of(paths: list[Path]) -> tuple[list, list[str], list[str]]:
    loaded = load_runs(paths)
    problems, notes = list(loaded.problems), []
    return leaderboard_cells(loaded.runs, problems, notes), problems, notes


def test_the_report_fits_every_member_on_its_pool(saved):
    results = saved["out"]["results"]
    cells, problems, notes = cells_of([saved["folder"]])
    assert problems == []
    assert not [n for n in notes if "calibration pool" in n]  # every member is there
    checked = set()
    for cell in cells:
        if cell.run.task not in results or cell.confidence is None:
            continue
        numbers = results[cell.run.task]
        for score in SCORES:
            key = f"{cell.method.metric(score)},none"
            if key in numbers:
                assert cell.values[score] == pytest.approx(numbers[key], abs=1e-9), (
                    cell.run.task, cell.method.label, score)
                checked.add((cell.method.label, score))
    assert {("CaliDist (As.)", s) for s in ("ece", "brier", "auroc")} <= checked
    # a member fitted alone gives other numbers: the test would fail on such a report
    loaded = load_runs([saved["folder"]])
    calidist = next(c for c in cells if c.method.label == "CaliDist (As.)"
                    and c.run.task in results)
    member = next(r for r in loaded.runs if r.task == calidist.run.task)
    alone = refit(member, [calidist.method])[calidist.method.label]
    assert not all(math.isclose(float(fn(alone.confidence, alone.correct)), calidist.values[s],
                                abs_tol=1e-9) for s, fn in SCORES.items())


def test_the_report_adds_the_pooled_row(saved):
    results = saved["out"]["results"]
    cells, _, _ = cells_of([saved["folder"]])
    pooled_cells = [c for c in cells if c.benchmark == f"{POOL}_pooled"]
    assert pooled_cells
    checked = set()
    for cell in pooled_cells:
        group = cell.run.task  # the pool's name: calidist_mmlu3 / calidist_mmlu3_assertion
        assert group in {f"calidist_{POOL}{v}" for v in VARIANTS}
        assert cell.n == 42 - 9  # every member's evaluation documents
        first = results[members(group.removeprefix(f"calidist_{POOL}"))[0]]
        for score in SCORES:
            key = f"{cell.method.metric(score)}_pooled,none"
            if key in first:
                assert cell.values[score] == pytest.approx(first[key], abs=1e-9), (
                    group, cell.method.label, score)
                assert results[group][key] == pytest.approx(first[key], abs=1e-12)
                checked.add((cell.method.label, score))
    assert {("CaliDist (As.)", s) for s in ("ece", "brier", "auroc")} <= checked
    report = write_report([saved["folder"]], saved["folder"].parent / "report", n_resamples=0,
                          figures=False)
    assert report.problems == []
    with open(report.out / "leaderboard.csv", encoding="utf-8") as file:
        board = list(csv.DictReader(file))
    row = next(r for r in board if r["method"] == "CaliDist (As.)")
    assert row[f"{POOL}_pooled_ece"]
    subjects = [m.removeprefix("calidist_").removesuffix("_assertion")
                for m in members("_assertion")]
    # the average is over the members only: the pool's row is not counted twice
    shown = [float(row[f"{s}_ece"]) for s in subjects]  # rounded to 4 decimals
    assert float(row["average_ece"]) == pytest.approx(sum(shown) / len(shown), abs=1e-3)
    with_pool = (sum(shown) + float(row[f"{POOL}_pooled_ece"])) / (len(shown) + 1)
    assert abs(with_pool - sum(shown) / len(shown)) > 1e-3  # the check tells them apart


def test_a_member_without_its_pool_mates_is_fitted_alone_with_a_note(saved, tmp_path):
    out = saved["out"]
    name = members("_assertion")[0]
    alone = {**out, "results": {name: out["results"][name]},
             "configs": {name: out["configs"][name]}, "samples": {name: out["samples"][name]},
             "group_subtasks": {}, "groups": {}, "versions": {name: out["versions"][name]},
             "n-shot": {name: out["n-shot"][name]}, "higher_is_better": {},
             "n-samples": {name: out["n-samples"][name]}}
    save_like_lm_eval(alone, tmp_path / "runs")
    cells, problems, notes = cells_of([tmp_path / "runs"])
    assert problems == []
    missing = [n for n in notes if "calibration pool" in n]
    assert len(missing) == 1 and all(m in missing[0] for m in members("_assertion")[1:])
    assert not [c for c in cells if c.benchmark.endswith("_pooled")]  # one member: no pool row
    member = next(c for c in cells if c.method.label == "CaliDist (As.)")
    assert member.n == out["results"][name]["n_evaluation,none"]
