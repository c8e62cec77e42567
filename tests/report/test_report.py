"""``calidist report`` against hand-built lm-eval output folders (values computed by hand).

The fixture writes what lm-eval writes for a run with ``--log_samples``: a results file per model
and one samples file per task with the same date, records built by hand (6 calibration + 6
evaluation documents, two labels), and results-file numbers from the tasks' own aggregation.
"""

from __future__ import annotations

import csv
import functools
import gzip
import json
import math
import os
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

from calidist_metrics import (
    CALIDIST_COLUMNS,
    CalibrationWarning,
    CaliDistCalibrator,
    bootstrap_interval,
    expected_calibration_error,
    smooth_ece,
    stack_columns,
)
from calidist_tasks.cli import main
from calidist_tasks.registry import METHODS, task_variant, variant_named
from calidist_tasks.registry import SCORES as SCORE_FUNCTIONS
from calidist_tasks.report import write_report
from calidist_tasks.report.cells import Cell, leaderboard_cells
from calidist_tasks.report.identity import short_names
from calidist_tasks.report.loading import TaskRun, load_runs
from calidist_tasks.report.tables import (
    ALWAYS_ZERO,
    IDENTICAL,
    escape,
    intervals,
    leaderboard,
    more_scores,
)
from calidist_tasks.runs.files import RESULTS_NAME, SAMPLES_NAME, model_name, read_jsonl
from calidist_tasks.scoring.aggregation import (
    SCORES,
    UNREADABLE_LIMIT,
    summarize_baselines,
    summarize_calidist,
    summarize_generations,
)
from calidist_tasks.scoring.records import (
    SOURCE_FIELD,
    VERBALIZED,
)
from calidist_tasks.settings import RunSettings

STAMP_A, STAMP_B, STAMP_OTHER = ("2026-01-01T10-00-00.000001", "2026-01-02T10-00-00.000001",
                                 "2026-01-03T10-00-00.000001")
PROMPT = "x" * 40  # 10 tokens at characters / 4
HINTED = ("x" * 40 + "y" * 40, "x" * 40 + "z" * 40)  # 20 tokens each
CALIBRATION = {"conf": [0.6, 0.6, 0.7, 0.8, 0.9, 0.9], "correct": [0, 1, 0, 1, 1, 1],
               "mu": [0.0, 0.4, 0.6, 0.1, 0.0, 0.2]}
# Evaluation documents per (model, benchmark); mu is shared.
EVALUATION = {
    ("org/model-a", "toy"): ([0.95, 0.95, 0.85, 0.85, 0.65, 0.65], [1, 1, 1, 0, 0, 1]),
    ("org/model-a", "pair"): ([0.9, 0.7, 0.7, 0.55, 0.55, 0.95], [1, 0, 1, 1, 0, 1]),
    ("org/model-b", "toy"): ([0.75] * 6, [1, 1, 1, 0, 0, 1]),
}
EVAL_MU = [0.0, 0.1, 0.3, 0.5, 0.9, 0.0]
RESAMPLES = 20


def _record(index: int, split: str, conf: float, correct: int, mu: float,
            distracted: bool) -> dict:
    record = {"label": 0 if correct else 1, "prediction": 0, "confidence": conf,
              "correct": correct, "parsed": True,
              "letter_logprobs": [math.log(conf), math.log(1 - conf)], "index": index,
              "split": split, "requests": 6 if distracted else 2}
    if distracted:
        delta = 0.02 + 0.03 * (index % 4)
        record.update(hints=[[1, 0, int(mu > 0), 0.5]], mu=mu, delta=delta,
                      lambda_raw=(1 - mu) / (delta + 1e-10), flipped=int(mu > 0))
    return record


def _records(model: str, benchmark: str, distracted: bool) -> list[dict]:
    conf, correct = EVALUATION[(model, benchmark)]
    cal = [_record(i, "calibration", c, y, m, distracted) for i, (c, y, m) in
           enumerate(zip(CALIBRATION["conf"], CALIBRATION["correct"], CALIBRATION["mu"],
                         strict=True))]
    ev = [_record(6 + i, "evaluation", c, y, m, distracted)
          for i, (c, y, m) in enumerate(zip(conf, correct, EVAL_MU, strict=True))]
    return cal + ev


def logged_keys(task: str) -> dict:
    """What a calidist task logs in its config's metadata (``CaliDistTask.__init__``), for the
    fixture's made-up tasks: calidist_<benchmark>_<variant>."""
    benchmark, _, name = task.removeprefix("calidist_").partition("_")
    variant = variant_named(name)
    return {"benchmark": benchmark, "distractor": variant.distractor,
            "confidence": variant.source}


@functools.cache
def summarized(model: str, benchmark: str, distracted: bool) -> tuple[list[dict], dict]:
    """One fixture task's records and its aggregation's numbers (the same on every call)."""
    task = f"calidist_{benchmark}" + ("_assertion" if distracted else "")
    records = _records(model, benchmark, distracted)
    context = {"task": task, "labels": ["yes", "no"], "model": model}
    with warnings.catch_warnings():  # grid-edge fits on 6 documents are expected
        warnings.simplefilter("ignore", CalibrationWarning)
        summary = (summarize_calidist if distracted else summarize_baselines)(
            records, RunSettings(calib_size=6, eval_size=6), context)
    return records, summary


def write_run(folder: Path, model: str, benchmarks: list[str], stamp: str,
              args_as_string: bool = False, extra: dict | None = None) -> Path:
    """lm-eval's files for one model: calidist_<b> and calidist_<b>_assertion per benchmark,
    plus ``extra`` tasks given as {task: (records, results-file numbers)}."""
    folder.mkdir(parents=True, exist_ok=True)
    tasks = {f"calidist_{benchmark}" + ("_assertion" if distracted else ""):
             summarized(model, benchmark, distracted)
             for benchmark in benchmarks for distracted in (False, True)}
    tasks.update(extra or {})
    results, configs = {}, {}
    for task, (records, summary) in tasks.items():
        results[task] = {"alias": task, **{f"{k},none": v for k, v in summary.items()},
                         **{f"{k}_stderr,none": "N/A" for k in summary}}
        configs[task] = {"task": task, "doc_to_choice": ["yes", "no"],
                         "metadata": {"calib_size": 6, "eval_size": 6, "pretrained": model,
                                      **logged_keys(task)}}
        prompts = [(PROMPT, "a"), (PROMPT, "b")]
        if task.endswith("_assertion"):
            prompts += [(h, letter) for h in HINTED for letter in "ab"]
        with open(folder / f"samples_{task}_{stamp}.jsonl", "w", encoding="utf-8") as f:
            for record in records:
                line = {"doc_id": record["index"], "doc": {"text": "…"},
                        "target": str(record["label"]),
                        "arguments": {f"gen_args_{i}": {"arg_0": p, "arg_1": c}
                                      for i, (p, c) in enumerate(prompts)},
                        "resps": [[["-0.5", "False"]] for _ in prompts], "filter": "none",
                        "metrics": ["acc", "ece"], "acc": record, "ece": record}
                f.write(json.dumps(line) + "\n")
    model_args = f"pretrained={model},dtype=float32" if args_as_string else {"pretrained": model}
    data = {"results": results, "group_subtasks": {}, "configs": configs,
            "n-samples": {t: {"original": 12, "effective": len(r)} for t, (r, _) in tasks.items()},
            "config": {"model": "hf", "model_args": model_args}, "model_name": model}
    path = folder / f"results_{stamp}.json"
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")
    return path


def write_runs(root: Path) -> Path:
    write_run(root / "org__model-a", "org/model-a", ["toy", "pair"], STAMP_A)
    write_run(root / "org__model-b", "org/model-b", ["toy"], STAMP_B, args_as_string=True)
    return root


def report(root: Path, out: Path, transfers=(), figures: bool = False):
    result = write_report([root], out, transfers, n_resamples=RESAMPLES, figures=figures)
    return result, {p.name: p for p in result.files}


@pytest.fixture(scope="module")
def intact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_runs(tmp_path_factory.mktemp("intact") / "runs")


@pytest.fixture
def runs(intact: Path, tmp_path: Path) -> Path:
    """A copy of the fixture's folders, for a test to damage."""
    return Path(shutil.copytree(intact, tmp_path / "runs"))


@pytest.fixture(scope="module")
def full(intact: Path, tmp_path_factory: pytest.TempPathFactory):
    """The whole report of the intact fixture but its figures, built once for the tests that
    only read it."""
    out = tmp_path_factory.mktemp("out")
    result, files = report(intact, out, ["calidist_toy_assertion:calidist_pair_assertion"])
    return result, files, out


def write_drawn(root: Path) -> Path:
    """The runs of the report with figures (``conftest.drawn``): model-a's toy tasks and
    model-b's toy_assertion alone, the fewest that show every kind of figure."""
    write_run(root / "org__model-a", "org/model-a", ["toy"], STAMP_A)
    write_run(root / "org__model-b", "org/model-b", [], STAMP_B,
              extra={"calidist_toy_assertion": summarized("org/model-b", "toy", True)})
    return root


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8") as f:
        return list(csv.DictReader(f))


def row(rows: list[dict], **match) -> dict:
    found = [r for r in rows if all(r[k] == v for k, v in match.items())]
    assert len(found) == 1, (match, found)
    return found[0]


# --------------------------------------------------------------------------- leaderboard
def test_leaderboard_values_by_hand(full) -> None:
    result, files, _ = full
    # the only problem of the intact fixture: model-b has no run of the transfer's target
    assert result.problems == [
        "transfer calidist_toy_assertion -> calidist_pair_assertion [model-b]: no usable "
        "logged samples of calidist_pair_assertion"]
    board = read_csv(files["leaderboard.csv"])
    vanilla = row(board, model="model-a", method="Vanilla")
    # toy: bins 0.9 (2 right), 0.8 (1 of 2), 0.6 (1 of 2): (0.05 + 0.35 + 0.15) / 3
    assert float(vanilla["toy_ece"]) == pytest.approx(18.3333, abs=1e-4)
    assert float(vanilla["toy_brier"]) == pytest.approx(100 * 1.295 / 6, abs=1e-4)
    assert float(vanilla["toy_auroc"]) == pytest.approx(75.0)
    # pair: (0.075 + 0.2 + 0.05) / 3, Brier 1.0975 / 6, AUROC 6 / 8
    assert float(vanilla["pair_ece"]) == pytest.approx(10.8333, abs=1e-4)
    assert float(vanilla["pair_brier"]) == pytest.approx(100 * 1.0975 / 6, abs=1e-4)
    assert float(vanilla["average_ece"]) == pytest.approx((18.3333 + 10.8333) / 2, abs=1e-4)
    assert float(vanilla["average_auroc"]) == pytest.approx(75.0)
    # Isotonic on calibration (0.6: 1/2, 0.7: 0, 0.8: 1, 0.9: 1) -> PAV y = 1/3, 1/3, 1, 1;
    # evaluation confidences become 1, 1, 1, 1, 1/3, 1/3
    isotonic = row(board, model="model-a", method="Isotonic")
    assert float(isotonic["toy_ece"]) == pytest.approx(100 * (4 * 0.25 + 2 / 6) / 6, abs=1e-4)
    assert float(isotonic["toy_brier"]) == pytest.approx(100 * (14 / 9) / 6, abs=1e-4)
    assert float(isotonic["toy_auroc"]) == pytest.approx(62.5)
    # model-b has no "pair" run: its rows get no average
    b_vanilla = row(board, model="model-b", method="Vanilla")
    assert float(b_vanilla["toy_ece"]) == pytest.approx(100 * abs(4 / 6 - 0.75), abs=1e-4)
    assert float(b_vanilla["toy_auroc"]) == pytest.approx(50.0)
    assert b_vanilla["pair_ece"] == b_vanilla["average_ece"] == ""
    # every method of the fixture is a row, for each model, in METHODS order
    methods = [r["method"] for r in board if r["model"] == "model-a"]
    assert methods == ["Vanilla", "Temperature scaling", "Platt", "Isotonic", "Vector scaling",
                       "CaliDist (As.)"]
    # a mark is the best of its block's column, and only where the paired test against the next
    # best is significant (not on the averages): not every best value is marked here
    bests = 0
    for model in ("model-a", "model-b"):
        mine = [r for r in board if r["model"] == model]
        for key in [f"{b}_{s}" for b in ("toy", "pair") for s in ("ece", "brier", "auroc")]:
            values = [round(float(r[key]), 2) for r in mine if r[key]]
            if not values:  # model-b has no pair run
                continue
            best = max(values) if key.endswith("auroc") else min(values)
            for r in mine:
                if key in r["best"].split(";"):
                    assert round(float(r[key]), 2) == best
                bests += bool(r[key]) and round(float(r[key]), 2) == best
    marked = sum(len(r["best"].split(";")) for r in board if r["best"])
    assert 0 < marked < bests
    assert not any("average" in r["best"] for r in board)
    # accuracy beside every method; no unreadable share for tasks that score the letters
    assert float(vanilla["toy_acc"]) == pytest.approx(100 * 4 / 6, abs=1e-4)
    assert vanilla["toy_parse_fail_rate"] == vanilla["average_parse_fail_rate"] == ""
    markdown = files["leaderboard.md"].read_text()
    # benchmarks outside the paper's list come in alphabetical order; per benchmark: Acc, ECE,
    # Brier, AUROC, Unreadable
    assert ("| model-a | Vanilla | 66.67 | 10.83 | 18.29 | 75.00 | – | 66.67 | 18.33 | 21.58 | "
            "75.00 | – | 66.67 | 14.58 |") in markdown


def test_best_is_marked_only_where_significant_and_never_on_ties() -> None:
    """Bold needs the paired bootstrap (p < 0.05) against the next best of the block's column:
    never for a difference within the noise, values that all tie, or results-file numbers."""
    correct = np.array([1.0, 0.0] * 100)  # accuracy 0.5 on 200 documents

    def cell(model: str, label: str, conf: float, per_doc: bool = True) -> Cell:
        method = next(m for m in METHODS if m.label == label)
        confidence = np.full(correct.size, conf)
        values = {s: SCORE_FUNCTIONS[s](confidence, correct) for s in ("ece", "brier", "auroc")}
        made = Cell(model, "toy", method, None, values)
        if per_doc:
            made.confidence, made.correct = confidence, correct
        return made

    cells = [cell("m", "Vanilla", 0.95), cell("m", "Platt", 0.5),  # ECE 45 vs 0: significant
             cell("n", "Platt", 0.5), cell("n", "Isotonic", 0.52),  # ECE 0 vs 2: noise
             cell("r", "Vanilla", 0.95), cell("r", "Platt", 0.5, per_doc=False)]
    table = leaderboard(cells, {"m": "m", "n": "n", "r": "r"}, n_resamples=200)
    assert [r[1] for r in table.rows] == ["Vanilla", "Platt", "Platt", "Isotonic", "Vanilla",
                                          "Platt †"]
    assert table.columns[2:] == ["Toy Acc", "Toy ECE↓", "Toy Brier↓", "Toy AUROC↑",
                                 "Toy Unreadable"]  # one benchmark
    # m: Platt's ECE and Brier beat Vanilla's; AUROC is 50 for every row (a tie): unmarked;
    # n: no significant difference; r: no documents behind Platt, no test
    assert table.marks == {(1, 3), (1, 4)}
    assert "| m | Platt | 50.00 | **0.00** | **25.00** | 50.00 | – |" in table.markdown()
    one = leaderboard([cell("m", "Vanilla", 0.95)], {"m": "m"}, n_resamples=200)
    assert one.marks == set()  # a row alone is best of nothing


def test_mostly_unreadable_method_is_flagged_and_never_best() -> None:
    """parse_fail_rate 0.9 (> aggregation.UNREADABLE_LIMIT): the lowest ECE and the highest
    AUROC of the column, yet flagged and not bold; the other rows get the marks."""
    def cell(label: str, ece: float, auroc: float, metrics: dict) -> Cell:
        method = next(m for m in METHODS if m.label == label)
        run = TaskRun(f"calidist_toy_{label.lower()}", "m", STAMP_A, Path("r.json"), metrics, {})
        return Cell("m", "toy", method, run, {"ece": ece, "brier": 0.2, "auroc": auroc})

    assert UNREADABLE_LIMIT == 0.5
    cells = [cell("Vanilla", 0.30, 0.60, {"acc": 0.7}),
             cell("Verbalized", 0.01, 0.99, {"acc": 0.4, "parse_fail_rate": 0.9}),
             cell("SPUQ", 0.20, 0.65, {"acc": 0.6, "parse_fail_rate": 0.5})]  # at the limit
    assert [c.unreadable for c in cells] == [False, True, False]
    table = leaderboard(cells, {"m": "m"})
    assert [r[1] for r in table.rows] == ["Vanilla †", "Verbalized † ⚠", "SPUQ †"]
    assert table.rows[1][2:] == [40.0, 1.0, 20.0, 99.0, 90.0]  # shown, x100
    # results-file numbers only: no paired test, so no mark (and never on the flagged row)
    assert table.marks == set()
    assert "| m | Verbalized † ⚠ | 40.00 | 1.00 | 20.00 | 99.00 | 90.00 |" in table.markdown()
    # the same rule in the "more scores" table: flagged there too
    assert [r[2] for r in more_scores(cells, {"m": "m"}).rows] == [
        "Vanilla †", "Verbalized ⚠ †", "SPUQ †"]


def verbalized_records(split: str, first: int, conf: list[float], correct: list[int],
                       generations: int = 1, failures: int = 0) -> list[dict]:
    """A verbalized task's records: label 0, the prediction right where ``correct`` says so."""
    return [{"index": first + i, "split": split, "label": 0, "prediction": 0 if y else 1,
             "confidence": c, "correct": y, "generations": generations,
             "parse_failures": failures, "requests": 1}
            for i, (c, y) in enumerate(zip(conf, correct, strict=True))]


def report_with_verbalized(tmp_path: Path, records: list[dict],
                           numbers: dict) -> tuple[dict[str, dict], dict[str, Path]]:
    """The report of the fixture's model-a run plus ``calidist_toy_verbalized``: leaderboard rows
    by method, and the files; the verbalized task must raise no problem."""
    root = tmp_path / "runs"
    write_run(root / "m", "org/model-a", ["toy"], STAMP_A,
              extra={"calidist_toy_verbalized": (records, numbers)})
    result, files = report(root, tmp_path / "out")
    assert not any("verbalized" in p for p in result.problems), result.problems
    return {r["method"]: r for r in read_csv(files["leaderboard.csv"])}, files


def test_unreadable_task_in_a_report(tmp_path: Path) -> None:
    """A verbalized task whose results file holds NaN scores (its aggregation refused them):
    the samples rebuild the numbers without a mismatch, the row is flagged, not bold."""
    conf, correct = [1.0, 1.0, 1.0, 0.0, 0.0, 1.0], [1, 1, 1, 0, 0, 1]  # ECE 0: the lowest
    records = verbalized_records("evaluation", 6, conf, correct, generations=10, failures=9)
    numbers = {"acc": 4 / 6, "parse_fail_rate": 0.9, "n_calibration": 6.0, "n_evaluation": 6.0,
               **{f"{s}{x}": math.nan for s in SCORES for x in ("_vanilla", "_platt",
                                                                   "_isotonic")}}
    board, files = report_with_verbalized(tmp_path, records, numbers)
    flagged = board["Verbalized ⚠"]
    assert float(flagged["toy_ece"]) == 0.0 and float(flagged["toy_parse_fail_rate"]) == 90.0
    assert float(flagged["toy_acc"]) == pytest.approx(100 * 4 / 6, abs=1e-4)
    assert flagged["best"] == ""  # the lowest ECE, yet flagged: never marked
    assert board["Verbalized + Platt † ⚠"]["toy_ece"] == ""  # NaN in the results file: "–"
    assert "| **0.00** |" not in files["leaderboard.md"].read_text()
    assert any(r["method"] == "Verbalized ⚠" for r in read_csv(files["intervals.csv"]))
    # and the panel of its reliability diagram says so in its title too
    from calidist_tasks.report import task_series

    cells = leaderboard_cells(load_runs([tmp_path / "runs"]).runs, [], [])
    labels = [label for _, series in task_series(cells) for label, _, _ in series]
    assert "Verbalized ⚠" in labels


def test_verbalized_recalibrations_are_rebuilt(tmp_path: Path) -> None:
    """Verbalized + Platt / isotonic are refitted from the records' verbalized confidences (no
    log-probabilities needed), equal the task's own aggregation and get intervals paired with
    the verbalized row on the same documents."""
    conf_e, correct_e = EVALUATION[("org/model-a", "toy")]
    logged = (verbalized_records("calibration", 0, CALIBRATION["conf"], CALIBRATION["correct"])
              + verbalized_records("evaluation", 6, conf_e, correct_e))
    context = {"task": "calidist_toy_verbalized", "labels": ["yes", "no"], "model": "m"}
    numbers = summarize_generations(logged, RunSettings(calib_size=6, eval_size=6), context,
                                    VERBALIZED, distracted=False)
    board, files = report_with_verbalized(tmp_path, logged, numbers)
    # isotonic on the calibration confidences gives 1, 1, 1, 1, 1/3, 1/3 (as for the logit row)
    isotonic = board["Verbalized + isotonic"]  # no "†": rebuilt from the records
    assert float(isotonic["toy_ece"]) == pytest.approx(100 * (4 * 0.25 + 2 / 6) / 6, abs=1e-4)
    assert float(isotonic["toy_ece"]) == pytest.approx(100 * numbers["ece_isotonic"], abs=1e-4)
    assert float(board["Verbalized + Platt"]["toy_brier"]) == pytest.approx(
        100 * numbers["brier_platt"], abs=1e-4)
    rows = read_csv(files["intervals.csv"])
    for method in ("Verbalized + Platt", "Verbalized + isotonic"):
        brier = row(rows, task="calidist_toy_verbalized", method=method, score="brier")
        assert float(brier["ci_low"]) <= float(brier["value"]) <= float(brier["ci_high"])
        verbalized = row(rows, task="calidist_toy_verbalized", method="Verbalized",
                         score="brier")
        assert float(brier["diff_vs_vanilla"]) == pytest.approx(
            float(brier["value"]) - float(verbalized["value"]), abs=1e-3)


def test_intervals_and_paired_test(full) -> None:
    _, files, _ = full
    rows = read_csv(files["intervals.csv"])
    conf, correct = map(np.asarray, EVALUATION[("org/model-a", "toy")])
    vanilla = row(rows, model="model-a", task="calidist_toy", method="Vanilla", score="ece")
    value, low, high = bootstrap_interval(SCORES["ece"], conf, correct, RESAMPLES, seed=0)
    assert [float(vanilla[k]) for k in ("value", "ci_low", "ci_high")] == pytest.approx(
        [100 * value, 100 * low, 100 * high], abs=1e-4)
    assert vanilla["diff_vs_vanilla"] == vanilla["p_value"] == ""  # vanilla is not paired
    calidist = row(rows, model="model-a", task="calidist_toy_assertion",
                   method="CaliDist (As.)", score="brier")
    vanilla_brier = row(rows, model="model-a", method="Vanilla", benchmark="toy", score="brier")
    assert float(calidist["diff_vs_vanilla"]) == pytest.approx(
        float(calidist["value"]) - float(vanilla_brier["value"]), abs=1e-3)
    assert 0.0 <= float(calidist["p_value"]) <= 1.0 and calidist["note"] == ""
    assert float(calidist["diff_low"]) <= float(calidist["diff_high"])
    assert int(calidist["n"]) == 6
    # Platt is a monotone map: the same AUROC in every resample, so no p-value
    platt = row(rows, model="model-a", task="calidist_toy", method="Platt", score="auroc")
    assert (platt["diff_vs_vanilla"], platt["p_value"], platt["note"]) == ("0.0", "",
                                                                          ALWAYS_ZERO)


def test_identical_confidences_get_no_p_value() -> None:
    run = TaskRun("calidist_toy_assertion", "m", STAMP_A, Path("r.json"), {}, {})
    method = next(m for m in METHODS if m.label == "CaliDist (As.)")
    conf, correct = map(np.asarray, EVALUATION[("org/model-a", "toy")])
    # equal to numerical precision (a sigmoid factor of 1 - 1e-16), and clearly different
    same = Cell("m", "toy", method, run, {}, conf * (1 - 1e-16), correct, (conf, correct))
    other = Cell("m", "pair", method, run, {}, conf * 0.8, correct, (conf, correct))
    wide, long = intervals([same, other], {"m": "m"}, 50)
    tests = [r for r in long.rows if r[1] == "toy"]
    assert [(r[-2], r[-1]) for r in tests] == [(None, IDENTICAL)] * 3
    assert all(r[-5:-2] == [0.0, 0.0, 0.0] for r in tests)
    # named as its own task's vanilla, never "identical to vanilla" (the Vanilla row of the
    # block may come from another task, with other numbers)
    assert wide.rows[1][-3:] == [f"– ({IDENTICAL}, calidist_toy_assertion: no test)"] * 3
    assert "identical to vanilla" not in wide.markdown()
    assert all("p=" in text for text in wide.rows[0][-3:-1])  # ECE and Brier tested
    assert (1, 7) not in wide.marks and "p=" not in wide.markdown().splitlines()[3]


def test_more_scores_by_hand(full) -> None:
    _, files, _ = full
    vanilla = row(read_csv(files["scores.csv"]), model="model-a", benchmark="toy",
                  method="Vanilla")
    # toy: mean confidence 4.9 / 6, accuracy 4 / 6; bin gaps .05, .35, .15; AURC as in the
    # risk-coverage test; 5 of 6 documents kept at 80% coverage: 1.5 wrong
    expected = {"n": 6, "acc": 100 * 4 / 6, "ece_1_bin": 100 * (4.9 / 6 - 4 / 6), "mce": 35.0,
                "aurc": 100 * (0.5 / 3 + 0.25 + 0.3 + 2 / 6) / 6,
                "acc_at_80_coverage": 100 * (1 - 1.5 / 5),
                "smece": 100 * smooth_ece(*map(np.asarray, EVALUATION[("org/model-a", "toy")]))}
    for key, value in expected.items():
        assert float(vanilla[key]) == pytest.approx(value, abs=1e-4), key


def test_thresholds_by_hand(full, intact: Path, tmp_path: Path, capsys) -> None:
    _, files, _ = full
    rows = read_csv(files["thresholds.csv"])
    assert "## Thresholds: when to act on an answer" in files["report.md"].read_text()
    # model-a toy vanilla, most confident first: 0.95 (2 right) | 0.85 (1 right, 1 wrong) |
    # 0.65 (1 wrong, 1 right): kept accuracy 1, 3/4, 4/6. Every default target (80, 90, 95%)
    # is reached at 0.95 only, keeping 2 of 6
    for target in ("80.0", "90.0", "95.0"):
        found = row(rows, model="model-a", benchmark="toy", method="Vanilla",
                    target_accuracy=target)
        assert float(found["threshold"]) == pytest.approx(95.0)
        assert float(found["coverage"]) == pytest.approx(100 * 2 / 6, abs=1e-4)
        assert float(found["accuracy_kept"]) == 100.0
        assert 0 <= float(found["coverage_low"]) <= float(found["coverage_high"]) <= 100
    # model-b toy: every confidence 0.75, accuracy 4/6: no threshold reaches 80%
    missed = row(rows, model="model-b", benchmark="toy", method="Vanilla", target_accuracy="80.0")
    assert missed["threshold"] == "" and float(missed["coverage"]) == 0.0
    # other targets: 75% is reached at 0.85, keeping 4 of 6
    with pytest.raises(SystemExit) as done:
        main(["report", str(intact), "--out", str(tmp_path / "t"), "--bootstrap", "0",
              "--no_figures", "--quiet", "--target-accuracy", "0.75"])
    assert done.value.code == 0
    found = row(read_csv(tmp_path / "t" / "thresholds.csv"), model="model-a", benchmark="toy",
                method="Vanilla")
    assert float(found["target_accuracy"]) == 75.0 and float(found["threshold"]) == 85.0
    assert float(found["coverage"]) == pytest.approx(100 * 4 / 6, abs=1e-4)
    assert found["coverage_low"] == ""  # --bootstrap 0: no interval
    with pytest.raises(SystemExit) as done:
        main(["report", str(intact), "--out", str(tmp_path / "u"), "--target-accuracy", "90"])
    assert done.value.code == 2
    assert "--target-accuracy: '90' is not an accuracy in (0, 1]" in capsys.readouterr().err


def test_cost_table(full) -> None:
    _, files, _ = full
    rows = read_csv(files["cost.csv"])
    original = row(rows, model="model-a", task="calidist_toy")
    # the original prompt once (forward passes), and once per letter (requests)
    assert [float(original[k]) for k in ("requests_per_doc", "distinct_prompts_per_doc",
                                         "prompt_tokens_per_doc",
                                         "forward_passes_vs_original_prompt",
                                         "requests_vs_original_prompt")] == [2, 1, 20, 1, 2]
    assert original["token_count"] == "characters / 4"  # org/model-a is no local folder
    assert original["methods"].startswith("Vanilla, Temperature scaling")
    hinted = row(rows, model="model-a", task="calidist_toy_assertion")
    # requests: 2 x 10 (original prompt, two letters) + 2 hints x 2 letters x 20 tokens;
    # forward passes: 10 + 2 x 20 (each prompt once)
    assert [float(hinted[k]) for k in ("requests_per_doc", "distinct_prompts_per_doc",
                                       "prompt_tokens_per_doc",
                                       "forward_passes_vs_original_prompt",
                                       "requests_vs_original_prompt")] == [6, 3, 100, 5, 10]


def _keep_requests(samples: Path, keep) -> None:
    """Rewrite a samples file keeping the requests whose prompt passes ``keep``."""
    lines = [json.loads(text) for text in samples.read_text(encoding="utf-8").splitlines()]
    for line in lines:
        kept = [(a, r) for a, r in zip(line["arguments"].values(), line["resps"], strict=True)
                if keep(a["arg_0"])]
        line["arguments"] = {f"gen_args_{i}": a for i, (a, _) in enumerate(kept)}
        line["resps"] = [r for _, r in kept]
    samples.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


def test_cost_table_counts_the_generated_tokens_of_generation_tasks(tmp_path: Path) -> None:
    records = verbalized_records("evaluation", 6, [0.9] * 6, [1, 0, 1, 1, 0, 1])
    root = tmp_path / "runs"
    write_run(root / "m", "org/model-a", ["toy"], STAMP_A,
              extra={"calidist_toy_verbalized": (records, {"acc": 4 / 6})})
    results = root / "m" / f"results_{STAMP_A}.json"
    data = json.loads(results.read_text(encoding="utf-8"))
    data["configs"]["calidist_toy_verbalized"]["output_type"] = "generate_until"
    results.write_text(json.dumps(data), encoding="utf-8")
    samples = next((root / "m").glob("samples_calidist_toy_verbalized_*.jsonl"))
    lines = [json.loads(line) for line in samples.read_text(encoding="utf-8").splitlines()]
    for line in lines:  # a reply of 40 characters per request: 10 tokens at characters / 4
        line["resps"] = [["y" * 40] for _ in line["resps"]]
    samples.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    _, files = report(root, tmp_path / "out")
    rows = read_csv(files["cost.csv"])
    assert float(row(rows, task="calidist_toy_verbalized")["generated_tokens_per_doc"]) == 20
    assert row(rows, task="calidist_toy")["generated_tokens_per_doc"] == ""  # scored letters


def test_cost_of_a_two_stage_run_counts_both_stages(tmp_path: Path) -> None:
    """`calidist eval --two-stage`: stage 2 logs the hints only, stage 1 (<output>/stage1) the
    original prompt; the cost is that of the single-stage run that sent the same prompts."""
    root = tmp_path / "out"
    write_run(root / "model-a", "org/model-a", ["toy"], STAMP_A)
    write_run(root / "stage1" / "model-a", "org/model-a", ["toy"], STAMP_A)
    task = "calidist_toy_assertion"
    _keep_requests(root / "model-a" / f"samples_{task}_{STAMP_A}.jsonl", lambda p: p != PROMPT)
    _keep_requests(root / "stage1" / "model-a" / f"samples_{task}_{STAMP_A}.jsonl",
                   lambda p: p == PROMPT)
    result, files = report(root, tmp_path / "report")
    hinted = row(read_csv(files["cost.csv"]), task=task)
    # as the single-stage run of test_cost_table: the original prompt and 2 hints, 2 letters
    assert [float(hinted[k]) for k in ("requests_per_doc", "distinct_prompts_per_doc",
                                       "prompt_tokens_per_doc",
                                       "forward_passes_vs_original_prompt",
                                       "requests_vs_original_prompt")] == [6, 3, 100, 5, 10]
    assert not any("stage" in p for p in result.problems)


@pytest.mark.filterwarnings("ignore::calidist_metrics.CalibrationWarning")
def test_transfer_table(full) -> None:
    result, files, _ = full
    rows = read_csv(files["transfer.csv"])
    assert len(rows) == 1  # model-b has no pair run
    moved = rows[0]
    assert (moved["model"], moved["source"], moved["target"]) == (
        "model-a", "calidist_toy_assertion", "calidist_pair_assertion")
    assert float(moved["ece_vanilla"]) == pytest.approx(10.8333, abs=1e-4)
    source = _records("org/model-a", "toy", True)[:6]
    target = _records("org/model-a", "pair", True)[6:]
    def inputs(records):
        return stack_columns(CALIDIST_COLUMNS, lambda_raw=[r["lambda_raw"] for r in records],
                             confidence=[r["confidence"] for r in records])

    fit = CaliDistCalibrator().fit(inputs(source), [r["correct"] for r in source])
    calibrated = fit.predict(inputs(target))
    expected = expected_calibration_error(calibrated, [r["correct"] for r in target])
    assert float(moved["ece_transferred"]) == pytest.approx(100 * expected, abs=1e-4)
    assert float(moved["alpha_source"]) == pytest.approx(fit.alpha_, abs=1e-4)
    assert any("transfer calidist_toy_assertion -> calidist_pair_assertion [model-b]" in p
               and "calidist_pair_assertion" in p for p in result.problems)


# --------------------------------------------------------------------------- robustness
def _truncate(root: Path) -> str:
    path = root / "org__model-a" / f"samples_calidist_toy_assertion_{STAMP_A}.jsonl"
    text = path.read_text()
    path.write_text(text[: len(text) - 200])  # the last line cut mid-record
    return path.name


def _drop_document(root: Path) -> str:
    path = root / "org__model-a" / f"samples_calidist_toy_{STAMP_A}.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:3] + lines[4:]))
    return path.name


def _no_samples(root: Path) -> str:
    (root / "org__model-a" / f"samples_calidist_toy_{STAMP_A}.jsonl").unlink()
    return "calidist_toy [org/model-a] has no samples file"


def _mixed_folder(root: Path) -> str:
    shutil.copy(root / "org__model-b" / f"results_{STAMP_B}.json", root / "org__model-a")
    orphan = root / "org__model-a" / f"samples_calidist_toy_{STAMP_OTHER}.jsonl"
    shutil.copy(root / "org__model-b" / f"samples_calidist_toy_{STAMP_B}.jsonl", orphan)
    return orphan.name


def _garbage_results(root: Path) -> str:
    (root / "org__model-a" / f"results_{STAMP_OTHER}.json").write_text("{not json")
    return "unreadable results file"


def test_samples_reader_keeps_documents_with_unicode_line_separators(runs: Path,
                                                                     tmp_path: Path) -> None:
    """lm-eval writes samples with ensure_ascii=False: U+2028 / U+0085 / U+2029 stay raw inside
    JSON strings, and the reader must split lines at "\\n" only (str.splitlines() would not)."""
    from calidist_tasks.report.loading import load_runs
    from calidist_tasks.runs.files import json_lines

    path = runs / "org__model-a" / f"samples_calidist_toy_{STAMP_A}.jsonl"
    lines = [json.loads(line) for line in path.read_text().split("\n") if line]
    text = "Is it\u2028the same\u0085question?\u2029"
    with open(path, "w", encoding="utf-8") as f:
        for line in lines:
            line["doc"]["text"] = text
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
    assert len(path.read_text(encoding="utf-8").splitlines()) > len(lines)  # the trap
    assert len(json_lines(path)) == len(lines) and read_jsonl(path)[0]["doc"]["text"] == text
    loaded = load_runs([runs / "org__model-a"])
    run = next(r for r in loaded.runs if r.task == "calidist_toy")
    assert not [p for p in loaded.problems if path.name in p], loaded.problems
    assert run.records is not None and len(run.records) == len(lines) == 12
    packed = tmp_path / "samples.jsonl.gz"
    packed.write_bytes(gzip.compress(path.read_bytes()))
    assert read_jsonl(packed) == read_jsonl(path)


@pytest.mark.parametrize(("damage", "affected"), [
    (_truncate, ("calidist_toy_assertion", "CaliDist (As.)")),
    (_drop_document, ("calidist_toy", "Isotonic")),
    (_no_samples, ("calidist_toy", "Platt")),
    (_mixed_folder, None),
    (_garbage_results, None),
])
def test_bad_inputs_are_named_and_the_rest_is_written(runs: Path, tmp_path: Path, damage,
                                                      affected) -> None:
    needle = damage(runs)
    result, files = report(runs, tmp_path / "out")
    assert any(needle in p for p in result.problems), result.problems
    assert "Problems" in files["report.md"].read_text() and needle.split()[0] in \
        files["report.md"].read_text().replace("\\", "")
    board = read_csv(files["leaderboard.csv"])
    intervals = read_csv(files["intervals.csv"])
    # untouched runs keep their per-document cells
    assert any(r["model"] == "model-b" and r["method"] == "CaliDist (As.)" for r in intervals)
    assert any(r["task"] == "calidist_pair_assertion" for r in intervals)
    if affected:
        task, method = affected
        assert not any(r["model"] == "model-a" and r["task"] == task and r["method"] == method
                       for r in intervals)
        marked = row(board, model="model-a", method=f"{method} †")
        assert marked["toy_ece"] != ""  # the results file's number is kept
    if damage is _drop_document:
        assert any("1 of 12 documents are missing (doc_id 3)" in p for p in result.problems)
    if damage is _mixed_folder:
        assert any("several models (org/model-a, org/model-b)" in p for p in result.problems)
        # the copied results file joins nothing new: model-b stays one run
        assert any("superseded" in p for p in result.problems)


def test_rebuilt_numbers_are_shown_not_the_results_files(runs: Path, tmp_path: Path) -> None:
    """Where the samples rebuild a row, the report shows their numbers: it reads a results
    file's number only where nothing can be rebuilt (docs/report.md)."""
    path = runs / "org__model-a" / f"results_{STAMP_A}.json"
    data = json.loads(path.read_text())
    rebuilt = data["results"]["calidist_toy_assertion"]["ece,none"]
    data["results"]["calidist_toy_assertion"]["ece,none"] += 0.01
    path.write_text(json.dumps(data))
    _, files = report(runs, tmp_path / "out")
    calidist = row(read_csv(files["leaderboard.csv"]), model="model-a", method="CaliDist (As.)")
    assert float(calidist["toy_ece"]) == pytest.approx(100 * rebuilt, abs=1e-4)


def test_calidist_refit_follows_the_runs_logged_fit(tmp_path: Path) -> None:
    task = "calidist_toy_assertion"
    records = _records("org/model-a", "toy", True)
    context = {"task": task, "labels": ["yes", "no"], "model": "org/model-a"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibrationWarning)
        refined = summarize_calidist(records, RunSettings(calib_size=6, eval_size=6, fit="refine"),
                                     context)
        grid = summarize_calidist(records, RunSettings(calib_size=6, eval_size=6), context)
    assert refined["brier"] != grid["brier"]
    root = tmp_path / "runs"
    path = write_run(root / "m", "org/model-a", [], STAMP_A, extra={task: (records, refined)})

    def shown_brier(out: str) -> float:
        _, files = report(root, tmp_path / out)
        return float(row(read_csv(files["leaderboard.csv"]), method="CaliDist (As.)")["toy_brier"])

    # no fit in the logged metadata: refitted with the paper's grid, never silently refined
    assert shown_brier("out") == pytest.approx(100 * grid["brier"], abs=1e-4)
    # the run says fit=refine: refined as the run was
    data = json.loads(path.read_text())
    data["configs"][task]["metadata"]["fit"] = "refine"
    path.write_text(json.dumps(data))
    assert shown_brier("out2") == pytest.approx(100 * refined["brier"], abs=1e-4)


def test_unknown_variant_is_reported_not_guessed(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    path = write_run(root / "m", "org/model-a", ["toy"], STAMP_A)
    data = json.loads(path.read_text())
    data["results"]["calidist_toy_newthing"] = data["results"]["calidist_toy"]
    path.write_text(json.dumps(data))
    result, _ = report(root, tmp_path / "out")
    assert any("calidist_toy_newthing [org/model-a]: no leaderboard row" in p
               for p in result.problems)


def test_sampled_methods_are_rebuilt_from_their_records(tmp_path: Path) -> None:
    """A consistency task (records carry "confidences"; evaluation documents only) fills three
    rows; a row the records cannot rebuild falls back to the results file."""
    confidence = {"consistency": [1.0, 1.0, 0.8, 0.8, 0.6, 0.6], "entropy": [1.0] * 6,
                  "fsd": [1.0, 1.0, 0.6, 0.6, 0.2, 0.2]}
    correct = [1, 1, 1, 0, 0, 1]
    records = [{"index": 6 + i, "split": "evaluation", "label": 0, "prediction": 0,
                "correct": y, "confidence": confidence["consistency"][i],
                "confidences": {k: v[i] for k, v in confidence.items()}}
               for i, y in enumerate(correct)]
    numbers = {f"{s}_{k}": float(SCORES[s](np.array(v), np.array(correct)))
               for k, v in confidence.items() for s in SCORES}
    numbers["ece_spuq"] = 0.25  # a task whose records the report cannot rebuild
    root = tmp_path / "runs"
    write_run(root / "m", "org/model-a", [], STAMP_A, extra={
        "calidist_toy_consistency": (records, numbers),
        "calidist_toy_spuq": ([{**r, "confidences": {}} for r in records], {"ece_spuq": 0.25})})
    result, files = report(root, tmp_path / "out")
    board = {r["method"]: r for r in read_csv(files["leaderboard.csv"])}
    # bins 1.0 (2 of 2 right), 0.8 (1 of 2), 0.6 (1 of 2): (0 + 0.3 + 0.1) / 3
    assert float(board["Consistency"]["toy_ece"]) == pytest.approx(100 * 0.4 / 3, abs=1e-4)
    assert float(board["Entropy"]["toy_ece"]) == pytest.approx(100 * 2 / 6, abs=1e-4)
    assert set(board) == {"Consistency", "Entropy", "FSD", "SPUQ †"}
    assert float(board["SPUQ †"]["toy_ece"]) == 25.0
    assert any("calidist_toy_spuq [org/model-a]: cannot rebuild" in p for p in result.problems)
    cost = row(read_csv(files["cost.csv"]), task="calidist_toy_consistency")
    assert cost["documents"] == "6"


# --------------------------------------------------------------------------- small parts
def test_task_names_models_and_escaping() -> None:
    # our tasks' variants from their YAML (runs logged before the task wrote them)
    assert task_variant("calidist_ppdb") == ("ppdb", variant_named(""))
    assert task_variant("calidist_ppdb_assertion") == ("ppdb", variant_named("assertion"))
    assert task_variant("calidist_mnli_probe_verbalized") == (
        "mnli", variant_named("probe_verbalized"))
    assert task_variant("calidist_csqa_consistency") == ("csqa", variant_named("consistency"))
    # a task's logged keys, whatever its name says; an unknown task has none
    logged = {"metadata": {"benchmark": "x", "distractor": "probe", "confidence": "verbalized"}}
    assert task_variant("calidist_x_assertion", logged) == ("x", variant_named("probe_verbalized"))
    assert task_variant("calidist_unknown_assertion", {"metadata": {}}) == (
        "calidist_unknown_assertion", None)
    assert model_name({"config": {"model_args": "pretrained=/a/b,dtype=float32"}}) == "/a/b"
    assert model_name({"config": {"model_args": {"model": "gpt-4o-mini", "base_url": "u"}}}) \
        == "gpt-4o-mini"
    assert model_name({"model_name": "x"}) == "x"
    assert short_names(["/r/a/model", "/r/b/model", "/r/model2"]) == {
        "/r/a/model": "a/model", "/r/b/model": "b/model", "/r/model2": "model2"}
    assert escape("a|b\n<script>_x_") == "a\\|b \\<script\\>\\_x\\_"
    # --output_path ending in .json names the results file <stem>_<date>.json; isoformat drops
    # the microseconds when they are 0
    assert RESULTS_NAME.match("myrun_2026-01-01T10-00-00.json")["stamp"] == "2026-01-01T10-00-00"
    assert SAMPLES_NAME.match(f"samples_calidist_a_b_{STAMP_A}.jsonl")["task"] == "calidist_a_b"


def test_cli_exit_status(runs: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "cli"
    with pytest.raises(SystemExit) as done:
        main(["report", str(runs), "--out", str(out), "--bootstrap", "20", "--no_figures",
              "--transfer", "calidist_toy_assertion:calidist_pair_assertion"])
    assert done.value.code == 0
    assert {"report.md", "leaderboard.md", "leaderboard.csv", "intervals.csv", "cost.csv",
            "transfer.csv", "figures.json"} <= {p.name for p in out.iterdir()}
    assert "wrote" in capsys.readouterr().out
    with pytest.raises(SystemExit) as done:
        main(["report", str(runs), "--out", str(out), "--transfer", "no-colon"])
    assert done.value.code == 2
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit) as done:
        main(["report", str(tmp_path / "empty"), "--out", str(out / "e"), "--bootstrap", "0"])
    assert done.value.code == 1
    assert "no lm-eval results files found" in capsys.readouterr().err


# --------------------------------------------------------------------------- run identity
def _with_settings(results: Path, shots: int, limit: int | None) -> None:
    """Rewrite a fixture results file as if run with ``--num_fewshot shots --limit limit``."""
    data = json.loads(results.read_text(encoding="utf-8"))
    data["n-shot"] = {task: shots for task in data["results"]}
    data["config"]["limit"] = limit
    results.write_text(json.dumps(data), encoding="utf-8")


def test_runs_of_one_model_with_other_settings_are_separate_blocks(tmp_path: Path) -> None:
    """A 0-shot and a 1-shot --limit 12 run of one model: two blocks, each with its own best,
    labelled by what differs; neither supersedes the other; --tasks / --models filter."""
    root = tmp_path / "runs"
    write_run(root / "zero", "org/model-a", ["toy"], STAMP_A)
    _with_settings(write_run(root / "one", "org/model-a", ["toy"], STAMP_B), 1, 12)
    write_run(root / "b", "org/model-b", ["toy"], STAMP_B)
    result, files = report(root, tmp_path / "out")
    assert not any("superseded" in p for p in result.problems)
    board = read_csv(files["leaderboard.csv"])
    blocks = {r["model"] for r in board}
    assert blocks == {"model-a [toy: 0-shot, no limit]", "model-a [toy: 1-shot, limit 12]",
                      "model-b"}
    for block in blocks:  # a mark is its own block's best ECE: nothing compared across blocks
        lowest = min(round(float(r["toy_ece"]), 2) for r in board if r["model"] == block)
        assert all(round(float(r["toy_ece"]), 2) == lowest for r in board
                   if r["model"] == block and "toy_ece" in r["best"].split(";"))
    assert escape("model-a [toy: 1-shot, limit 12]") in files["report.md"].read_text(
        encoding="utf-8")
    # the paired tests stay in their block: one CaliDist row per block, paired with its own run
    tests = [r for r in read_csv(files["intervals.csv"]) if r["method"] == "CaliDist (As.)"
             and r["score"] == "ece"]
    assert sorted(r["model"] for r in tests) == sorted(blocks)
    only, files = report_filtered(root, tmp_path / "only", tasks="calidist_toy_assertion",
                                  models="org/model-a")
    board = read_csv(files["leaderboard.csv"])
    assert {r["model"] for r in board} == {"model-a [toy: 0-shot, no limit]",
                                           "model-a [toy: 1-shot, limit 12]"}
    assert {r["method"] for r in board} == {"Vanilla", "CaliDist (As.)"}


def _with_sources(results: Path, name: str) -> None:
    """Give every document of the run's samples an origin in file ``name`` (SOURCE_FIELD)."""
    for samples in results.parent.glob("samples_*.jsonl"):
        lines = [json.loads(line) for line in samples.read_text(encoding="utf-8").splitlines()]
        for line in lines:
            line["doc"][SOURCE_FIELD] = f"{name}:{line['doc_id']}"
        samples.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


def test_runs_of_the_same_settings_on_other_documents_are_separate_blocks(tmp_path) -> None:
    """Same model and settings, but the evaluation documents came from other rows: two blocks
    labelled by their documents, never compared; the same rows again: the newer run only."""
    root = tmp_path / "runs"
    _with_sources(write_run(root / "old", "org/model-a", ["toy"], STAMP_A), "test.jsonl")
    _with_sources(write_run(root / "new", "org/model-a", ["toy"], STAMP_B), "other.jsonl")
    result, files = report(root, tmp_path / "out")
    blocks = {r["model"] for r in read_csv(files["leaderboard.csv"])}
    assert len(blocks) == 2 and all(b.startswith("model-a [toy: documents=") for b in blocks)
    _with_sources(root / "new" / f"results_{STAMP_B}.json", "test.jsonl")
    result, files = report(root, tmp_path / "again")
    assert {r["model"] for r in read_csv(files["leaderboard.csv"])} == {"model-a"}


def report_filtered(root: Path, out: Path, **patterns):
    result = write_report([root], out, n_resamples=RESAMPLES, figures=False, **patterns)
    return result, {p.name: p for p in result.files}


# --------------------------------------------------------------------------- failing early
def test_nothing_to_report_writes_nothing(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as done:
        main(["report", str(tmp_path / "nonexistent"), "--out", str(out), "--no_figures"])
    assert done.value.code == 1 and not out.exists()
    assert "nothing written" in capsys.readouterr().err


def test_missing_matplotlib_fails_before_reading(runs: Path, tmp_path: Path, monkeypatch,
                                                  capsys) -> None:
    import sys

    import calidist_tasks.report as report_module

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises
    monkeypatch.setattr(report_module, "load_runs", lambda *a, **k: pytest.fail("read first"))
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as done:
        main(["report", str(runs), "--out", str(out)])
    assert done.value.code == 1 and not out.exists()
    assert "--no_figures" in capsys.readouterr().err


def test_results_file_alone_brings_its_samples_and_progress_is_shown(runs: Path,
                                                                      tmp_path: Path,
                                                                      capsys) -> None:
    results = runs / "org__model-a" / f"results_{STAMP_A}.json"
    with pytest.raises(SystemExit) as done:
        main(["report", str(results), "--out", str(tmp_path / "a"), "--bootstrap", "5",
              "--no_figures"])
    assert done.value.code == 0
    err = capsys.readouterr().err
    assert "no samples file" not in err
    assert "[calidist report] bootstrap 1/" in err and "[calidist report] refitting" in err
    with pytest.raises(SystemExit):
        main(["report", str(results), "--out", str(tmp_path / "b"), "--bootstrap", "5",
              "--no_figures", "--quiet"])
    assert "[calidist report]" not in capsys.readouterr().err


def test_a_method_setting_splits_only_the_tasks_it_changes(tmp_path: Path) -> None:
    """Two assertion runs with m = 1 and m = 2 are two blocks; the original task, which m does
    not change, is the Vanilla row of both."""
    root = tmp_path / "runs"
    for folder, stamp, m in (("one", STAMP_A, 1), ("two", STAMP_B, 2)):
        results = write_run(root / folder, "org/model-a", ["toy"], stamp)
        data = json.loads(results.read_text(encoding="utf-8"))
        data["configs"]["calidist_toy_assertion"]["metadata"]["m"] = m
        results.write_text(json.dumps(data), encoding="utf-8")
    result, files = report(root, tmp_path / "out")
    board = read_csv(files["leaderboard.csv"])
    for block in ("model-a [toy: m=1]", "model-a [toy: m=2]"):
        methods = [r["method"] for r in board if r["model"] == block]
        assert methods[0] == "Vanilla" and methods[-1] == "CaliDist (As.)", (block, methods)
    assert {r["model"] for r in board} == {"model-a [toy: m=1]", "model-a [toy: m=2]"}


# --------------------------------------------------------------------------- benchmark records
def test_committed_benchmark_records_are_reportable(tmp_path: Path) -> None:
    """`calidist report benchmarks/results` on a slice (SmolLM2 PPDB, original and assertion):
    the leaderboard reproduces the numbers the runs' own results files held."""
    from calidist_tasks.report.stored import read_stored

    results = Path(__file__).parents[2] / "benchmarks" / "results" / "smollm2"
    slice_dir = tmp_path / "results" / "smollm2"
    slice_dir.mkdir(parents=True)
    for task in ("calidist_ppdb", "calidist_ppdb_assertion"):
        shutil.copy(results / f"{task}.jsonl.gz", slice_dir)
    result, files = report_filtered(tmp_path / "results", tmp_path / "out")
    assert result.problems == []
    board = read_csv(files["leaderboard.csv"])
    assert {r["model"] for r in board} == {"smollm2"}  # one block: same sizes, same data
    for task, method, suffix in (("calidist_ppdb", "Vanilla", "_vanilla"),
                                 ("calidist_ppdb", "Platt", "_platt"),
                                 ("calidist_ppdb_assertion", "CaliDist (As.)", "")):
        saved = read_stored(slice_dir / f"{task}.jsonl.gz")[1].metrics
        assert float(row(board, method=method)["ppdb_ece"]) == pytest.approx(
            100 * saved[f"ece{suffix}"], abs=1e-4)
    cost = row(read_csv(files["cost.csv"]), task="calidist_ppdb_assertion")
    # the original prompt and m = 2 hints for the other label, 2 letters each
    assert (float(cost["requests_per_doc"]), float(cost["distinct_prompts_per_doc"])) == (10, 5)
    assert cost["token_count"] == "model tokenizer"


# --------------------------------------------------------------------------- paper-ready exports
def test_latex_leaderboard_and_model_summary(full) -> None:
    _, files, _ = full
    tex = files["leaderboard.tex"].read_text(encoding="utf-8")
    assert tex.count(r"\toprule") == 1 and r"\bottomrule" in tex and r"\textbf{" in tex
    # the legend: scale, documents, what bold means, where the intervals are
    assert r"$\times$100" in tex and "n = 6" in tex and "Bold" in tex and "intervals.csv" in tex
    assert r"model-a & Vanilla" in tex and r"\midrule" in tex.split(r"model-b")[0]
    board = read_csv(files["leaderboard.csv"])
    summary = read_csv(files["models.csv"])
    assert [r["model"] for r in summary] == ["model-a", "model-b"]
    for line in summary:  # the mean of the block's vanilla ECE over its benchmarks
        vanilla = row(board, model=line["model"], method="Vanilla")
        eces = [float(vanilla[f"{b}_ece"]) for b in ("toy", "pair") if vanilla[f"{b}_ece"]]
        assert float(line["ece_vanilla"]) == pytest.approx(np.mean(eces), abs=1e-3)
    # toy is the only benchmark both have: ranks 1 and 2 there
    assert sorted(float(r["mean_rank"]) for r in summary if r["benchmarks"] == "1") in (
        [1.0], [2.0])


def test_p_values_below_the_resolution_and_reliability_axis() -> None:
    from calidist_tasks.report.plots import confidence_floor, reliability_data
    from calidist_tasks.report.tables import p_text

    assert p_text(0.0, 1000) == "p < 0.001" and p_text(0.0, 200) == "p < 0.005"
    assert p_text(0.0123, 1000) == "p=0.012"
    conf, correct = np.array([0.55, 0.7, 0.9, 0.95]), np.array([1, 0, 1, 1])
    assert confidence_floor([("a", conf, correct), ("b", conf + 0.1, correct)]) == 0.5
    data = reliability_data(conf, correct, 0.5)
    smooth = data["smooth"]
    assert smooth["t"][0] == 0.5 and smooth["t"][-1] == 1.0
    shown = [a for a in smooth["accuracy"] if a is not None]
    assert shown and all(0 <= a <= 1 for a in shown)


def test_saved_results_go_into_the_models_folder_not_none(tmp_path: Path) -> None:
    """The Python API's stage 1 (and write_report_from_results) save with lm-eval's tracker:
    into a folder named after the model, as lm-eval's CLI does, never "None"."""
    from calidist_tasks.report import save_like_lm_eval

    data = json.loads(write_run(tmp_path / "runs", "org/model-a", ["toy"], STAMP_A).read_text())
    written = save_like_lm_eval(data, tmp_path / "saved")
    folders = {Path(path).parent.name for path in written if not path.endswith(os.sep)}
    assert folders == {"org__model-a"}
