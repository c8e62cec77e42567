"""Slow half of ``tests/report/test_report.py`` (builds the tiny model or runs lm-eval).

What the module tests: the fast half's docstring."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest
from test_report import read_csv, report, row

from calidist_tasks.report.latex import latex_escape
from calidist_tasks.report.tables import (
    escape,
)
from calidist_tasks.runs.files import read_jsonl
from calidist_tasks.scoring.records import (
    RECORD_IN,
    is_record,
    line_record,
)


# --------------------------------------------------------------------------- real lm-eval files
@pytest.mark.filterwarnings("ignore::calidist_metrics.CalibrationWarning")
def test_report_reads_real_lm_eval_output(tiny_model_dir: Path, ppdb_data_dir: Path,
                                          tmp_path: Path) -> None:
    """Files written by lm-eval's own EvaluationTracker; the refits reproduce its numbers."""
    from conftest import assert_report_rebuilds_results, run_lm_eval
    from lm_eval.loggers import EvaluationTracker

    tracker = EvaluationTracker(output_path=str(tmp_path / "lm"))
    results = run_lm_eval(["calidist_ppdb", "calidist_ppdb_assertion"], tiny_model_dir,
                          {"data_dir": str(ppdb_data_dir), "calib_size": 8, "eval_size": 10},
                          evaluation_tracker=tracker)
    samples = results.pop("samples")
    tracker.save_results_aggregated(results=results, samples=samples)
    for task in results["configs"]:
        tracker.save_results_samples(task_name=task, samples=samples[task])
    # each samples line holds the record once (under calidist_record), the document's
    # accuracy (a number or None) under acc, a small marker under every other metric, and
    # lm-eval's aggregation of every metric still saw the records
    for path in (tmp_path / "lm").rglob("samples_calidist_ppdb_assertion_*.jsonl"):
        for line in read_jsonl(path):
            values = [line[m] for m in line["metrics"]]
            assert sum(map(is_record, values)) == 1 and is_record(line_record(line))
            assert all(v == {RECORD_IN: "calidist_record"} for name, v in zip(
                line["metrics"], values, strict=True) if not is_record(v) and name != "acc")
            assert line["acc"] in (0, 1, None)
    assert not math.isnan(results["results"]["calidist_ppdb_assertion"]["ece_vanilla,none"])
    assert sorted(assert_report_rebuilds_results(tmp_path / "lm")) == [
        "calidist_ppdb", "calidist_ppdb_assertion"]
    result, files = report(tmp_path / "lm", tmp_path / "out")
    assert result.problems == []
    board = read_csv(files["leaderboard.csv"])
    assert [r["method"] for r in board] == ["Vanilla", "Temperature scaling", "Platt",
                                            "Isotonic", "Vector scaling", "CaliDist (As.)"]
    calidist = row(board, method="CaliDist (As.)")
    assert float(calidist["ppdb_ece"]) == pytest.approx(
        100 * results["results"]["calidist_ppdb_assertion"]["ece,none"], abs=1e-4)
    cost = row(read_csv(files["cost.csv"]), task="calidist_ppdb_assertion")
    assert cost["token_count"] == "model tokenizer"
    assert float(cost["requests_per_doc"]) == pytest.approx(
        results["results"]["calidist_ppdb_assertion"]["requests_per_doc,none"])


# --------------------------------------------------------------------------- end to end
@pytest.mark.filterwarnings("ignore::calidist_metrics.CalibrationWarning")
def test_two_models_two_settings_grouped_and_exported(tiny_model_dir: Path, ppdb_data_dir: Path,
                                                      tmp_path: Path) -> None:
    """Fresh runs of two (tiny) models, each 0-shot and 1-shot: four blocks, each labelled
    with its few-shot setting, best marked within each, exported as Markdown, CSV and LaTeX."""
    from conftest import run_lm_eval

    from calidist_tasks.report import write_report_from_results

    models = []
    for name in ("tiny-a", "tiny-b"):
        shutil.copytree(tiny_model_dir, tmp_path / name)
        models.append(tmp_path / name)
    metadata = {"data_dir": str(ppdb_data_dir), "calib_size": 4, "eval_size": 5}
    results = [run_lm_eval(["calidist_ppdb", "calidist_ppdb_assertion"], model, metadata,
                           num_fewshot=shots) for model in models for shots in (0, 1)]
    result = write_report_from_results(results, tmp_path / "out", n_resamples=20,
                                       figures=False)
    files = {p.name: p for p in result.files}
    assert {"leaderboard.md", "leaderboard.csv", "leaderboard.tex"} <= set(files)
    board = read_csv(files["leaderboard.csv"])
    blocks = [f"{m} [ppdb: {s}-shot]" for m in ("tiny-a", "tiny-b") for s in (0, 1)]
    assert sorted({r["model"] for r in board}) == blocks
    for block in blocks:
        mine = [r for r in board if r["model"] == block]
        assert mine[0]["method"] == "Vanilla" and mine[-1]["method"] == "CaliDist (As.)"
        lowest = min(round(float(r["ppdb_ece"]), 2) for r in mine)  # marks stay in a block
        assert all(round(float(r["ppdb_ece"]), 2) == lowest for r in mine
                   if "ppdb_ece" in r["best"].split(";"))
    tex = files["leaderboard.tex"].read_text(encoding="utf-8")
    markdown = files["leaderboard.md"].read_text(encoding="utf-8")
    for block in blocks:
        assert latex_escape(block) in tex and escape(block) in markdown
    assert not any("superseded" in p for p in result.problems)
