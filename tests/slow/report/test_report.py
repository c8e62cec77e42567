"""Slow half of ``tests/report/test_report.py`` (builds the tiny model, runs lm-eval or draws
the figures).

What the module tests: the fast half's docstring."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from test_report import read_csv, report, row

from calidist_metrics import smooth_ece
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


# --------------------------------------------------------------------------- figures
def test_figures_data_pinned(drawn) -> None:
    result, files, out = drawn
    figures = {(f["kind"], f["model"], f["task"]): f for f in result.figures}
    # one reliability figure and one risk-coverage figure per task, one panel per method
    reliability = {k[1:]: f for k, f in figures.items() if k[0] == "reliability"}
    assert set(reliability) == {("model-a", "calidist_toy"), ("model-a", "calidist_toy_assertion"),
                                ("model-b", "calidist_toy_assertion")}
    toy = reliability[("model-a", "calidist_toy")]
    assert toy["methods"] == list(toy["panels"]) == [
        "Vanilla", "Temperature scaling", "Platt", "Isotonic", "Vector scaling"]
    assert reliability[("model-b", "calidist_toy_assertion")]["methods"] == [
        "Vanilla", "CaliDist (As.)"]  # the task's own vanilla beside the method
    vanilla, iso = toy["panels"]["Vanilla"], toy["panels"]["Isotonic"]
    assert vanilla["counts"] == [0, 0, 0, 0, 0, 0, 2, 0, 2, 2]
    assert vanilla["accuracy"] == [0, 0, 0, 0, 0, 0, 0.5, 0, 0.5, 1.0]
    assert vanilla["mce"] == pytest.approx(0.35, abs=1e-6)
    assert vanilla["ece"] == pytest.approx(0.55 / 3, abs=1e-6)
    # Wilson 95%: 2 of 2 right -> [1 / (1 + z^2 / 2), 1]; 1 of 2 -> centred on 0.5
    z = 1.959963984540054
    assert vanilla["wilson_low"][9] == pytest.approx(1 / (1 + z * z / 2), abs=1e-6)
    assert vanilla["wilson_high"][9] == 1.0 and vanilla["wilson_low"][0] is None
    assert vanilla["wilson_low"][6] + vanilla["wilson_high"][6] == pytest.approx(1.0)
    assert iso["counts"] == [0, 0, 0, 2, 0, 0, 0, 0, 0, 4]
    assert iso["accuracy"][3] == 0.5 and iso["accuracy"][9] == 0.75
    assert iso["ece"] == pytest.approx((4 * 0.25 + 2 / 6) / 6, abs=1e-6)
    assert iso["smece"] == pytest.approx(smooth_ece(*_isotonic_toy()), abs=1e-6)
    for words in ("model-a", "calidist_toy", "reliability", "n=6 evaluation documents"):
        assert words in toy["title"]
    # risk-coverage: vanilla toy (0.95 x2 right | 0.85 one wrong | 0.65 one wrong), ties at
    # their average: risks 0, 0, 0.5/3, 1/4, 1.5/5, 2/6
    curves = figures[("risk_coverage", "model-a", "calidist_toy")]["curves"]
    assert curves["Vanilla"]["aurc"] == pytest.approx((0.5 / 3 + 0.25 + 0.3 + 2 / 6) / 6)
    assert curves["Vanilla"]["acc_at_80_coverage"] == pytest.approx(0.7)
    assert list(curves) == toy["methods"]
    mu = figures[("instability", "model-a", "calidist_toy_assertion")]
    assert mu["counts"] == [3, 1, 1, 0, 1]  # mu 0, 0.1, 0 | 0.3 | 0.5 | - | 0.9
    assert mu["accuracy"] == [1.0, 1.0, 0.0, 0.0, 0.0]
    # every figure as PNG and as PDF, both listed in the report's files
    import matplotlib.image

    for figure in result.figures:
        png, pdf = out / figure["file"], out / figure["vector"]
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png
        assert pdf.read_bytes()[:5] == b"%PDF-", pdf
        assert {png, pdf} <= set(result.files)
    # panels side by side: 3.1 in per panel + 0.4 in, at 110 dpi
    assert matplotlib.image.imread(out / toy["file"]).shape[1] == round((3.1 * 5 + 0.4) * 110)
    two = reliability[("model-a", "calidist_toy_assertion")]
    assert matplotlib.image.imread(out / two["file"]).shape[1] == round((3.1 * 2 + 0.4) * 110)
    assert "(figures/reliability_model-a_calidist_toy.pdf)" in files["report.md"].read_text()


def _isotonic_toy() -> tuple[list[float], list[int]]:
    # Isotonic on the toy calibration documents: evaluation confidences 1, 1, 1, 1, 1/3, 1/3
    return [1.0, 1.0, 1.0, 1.0, 1 / 3, 1 / 3], [1, 1, 1, 0, 0, 1]


def test_model_figure(drawn) -> None:
    _, files, out = drawn
    models = [f for f in json.loads(files["figures.json"].read_text())
              if f["kind"] == "models"]
    assert [f["task"] for f in models] == ["toy"]
    assert set(models[0]["values"]["ece"]["Vanilla"]) == {"model-a", "model-b"}
    assert (out / models[0]["file"]).stat().st_size > 0
