"""End to end through the real command line: two lm_eval runs with the tiny model.

1. ``calidist eval`` (lm-eval's own CLI plus our include path) runs both task families, MNLI from
   hub-schema jsonl with both validation splits and PPDB from the corpus TSV, saving one
   calibrator per task.
2. After ``calidist link``, the plain ``lm_eval --tasks calidist_ppdb_probe`` (no include path)
   applies run 1's saved calibrator and reproduces run 1's metrics; ``calidist unlink`` restores
   lm-eval's task folder exactly.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_report_rebuilds_results, write_mnli

from calidist_tasks import cli
from calidist_tasks.registry import metric_names
from calidist_tasks.report.summary import calibration_table, latest_results
from calidist_tasks.runs.reply_runs import REPLIES_FOLDER
from calidist_tasks.scoring.aggregation import summarize_baselines, summarize_calidist
from calidist_tasks.scoring.records import line_record
from calidist_tasks.settings import RunSettings

SIZES = {"calib_size": 4, "eval_size": 6}
DOCUMENTS = SIZES["calib_size"] + SIZES["eval_size"]
STYLES = ("", "_assertion", "_probe", "_corruption")
PROMPTS = {"": lambda c: 1, "_assertion": lambda c: 1 + 2 * c, "_probe": lambda c: 1 + c,
           "_corruption": lambda c: 1 + c}
LABELS = {"mnli": 3, "ppdb": 2}
TASKS = [f"calidist_{b}{s}" for b in LABELS for s in STYLES]


def style_of(task: str) -> str:
    return next((s for s in STYLES[1:] if task.endswith(s)), "")


def labels_of(task: str) -> int:
    return LABELS[task.split("_")[1]]


def command(name: str) -> str:
    found = Path(sys.executable).parent / name
    return str(found) if found.exists() else shutil.which(name) or pytest.skip(f"no {name}")


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    # One torch thread: the tiny model gains nothing from more, and 2 shared cores thrash.
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env=env)
    assert done.returncode == 0, f"{argv[:3]} failed:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    return done


def model_flags(model_dir: Path, metadata: dict, output: Path) -> list[str]:
    return ["--model", "hf", "--model_args", f"pretrained={model_dir},dtype=float32",
            "--device", "cpu", "--batch_size", "16", "--metadata", json.dumps(metadata),
            "--output_path", str(output), "--log_samples"]


def results_of(output: Path) -> dict:
    """The run's results file; the reply run of its reasoned tasks is beside it in replies/."""
    (path,) = (p for p in output.rglob("results_*.json") if REPLIES_FOLDER not in p.parts)
    return json.loads(path.read_text())


def samples_of(output: Path, task: str) -> list[dict]:
    (path,) = output.rglob(f"samples_{task}_2*.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory, ppdb_data_dir) -> Path:
    root = tmp_path_factory.mktemp("e2e_data")
    write_mnli(root / "mnli")
    shutil.copytree(ppdb_data_dir / "ppdb", root / "ppdb")
    return root


@pytest.fixture(scope="module")
def first_run(tmp_path_factory, tiny_model_dir, data_dir) -> Path:
    out = tmp_path_factory.mktemp("run1")
    metadata = {"data_dir": str(data_dir), **SIZES, "save_calibrator": str(out / "{task}.json")}
    # 8 tokens a reply: a random model never stops, and the generation tasks' own budget is 512
    run([command("calidist"), "eval", "--tasks", "calidist_mnli_all,calidist_ppdb_all",
         "--gen_kwargs", "max_gen_toks=8", *model_flags(tiny_model_dir, metadata, out)], cwd=out)
    return out


def test_every_task_reports_every_metric_in_range(first_run):
    results = results_of(first_run)
    assert set(TASKS) <= set(results["results"])
    # the groups hold reasoned (_cot) tasks: calidist eval ran their replies (the _verbalized
    # tasks) first, into replies/, then every other task of the groups
    (replies,) = first_run.rglob(f"{REPLIES_FOLDER}/**/results_*.json")
    replied = json.loads(replies.read_text())["results"]
    for benchmark in LABELS:
        assert f"calidist_{benchmark}_assertion_verbalized" in replied
        assert f"calidist_{benchmark}_assertion_cot" in results["results"]
    for task in TASKS:
        style = style_of(task)
        values = results["results"][task]
        for name in metric_names(distracted=bool(style)):
            value = values[f"{name},none"]
            assert isinstance(value, float) and math.isfinite(value), (task, name, value)
            if name.startswith(("acc", "ece", "brier", "auroc")) or name in (
                    "flip_rate", "mu_mean", "delta_mean"):
                assert 0 <= value <= 1, (task, name, value)
        c = labels_of(task)
        assert values["requests_per_doc,none"] == PROMPTS[style](c) * c, task
        assert values["n_calibration,none"] == SIZES["calib_size"]
        assert values["n_evaluation,none"] == SIZES["eval_size"]
        assert results["n-samples"][task]["effective"] == DOCUMENTS
        if style:
            assert -5 <= values["alpha,none"] <= 5 and 0.1 <= values["beta,none"] <= 5
            assert 0 <= values["lambda_min,none"] <= values["lambda_max,none"]
        else:
            assert values["temperature,none"] > 0


def test_samples_carry_the_per_document_record(first_run):
    results = results_of(first_run)["results"]
    for task in TASKS:
        samples = samples_of(first_run, task)
        assert len(samples) == DOCUMENTS
        records = [line_record(s) for s in samples]
        assert sorted(r["index"] for r in records) == list(range(DOCUMENTS))
        for sample, r in zip(samples, records, strict=True):
            assert r["split"] == ("calibration" if r["index"] < SIZES["calib_size"]
                                  else "evaluation")
            assert r["label"] == sample["doc"]["label"]
            assert r["correct"] == int(r["prediction"] == r["label"])
            assert 0 < r["confidence"] <= 1
            if style_of(task):
                assert 0 <= r["mu"] <= 1 and r["delta"] >= 0 and r["lambda_raw"] >= 0
                assert len(r["hints"]) == r["requests"] // labels_of(task) - 1
        # The logged records alone give the reported numbers (what `calidist report` refits).
        summarize = summarize_calidist if style_of(task) else summarize_baselines
        refit = summarize(records, RunSettings(**SIZES), {"task": task})
        for name, value in refit.items():
            assert results[task][f"{name},none"] == pytest.approx(value), (task, name)


def test_calibration_table_of_the_run(first_run):
    results = latest_results(first_run)
    rows = [[cell.strip() for cell in line.strip("|").split("|")]
            for line in calibration_table(results).splitlines()[2:]]
    baselines = ["Vanilla", "Temperature scaling", "Platt", "Isotonic", "Vector scaling"]
    short = {"_assertion": "As.", "_probe": "Pr.", "_corruption": "Sa."}
    for task in TASKS:
        methods = [row[1] for row in rows if row[0] == task]
        style = style_of(task)
        assert methods == (["Vanilla", f"CaliDist ({short[style]})"] if style else baselines)
    values = results["results"]["calidist_ppdb_probe"]
    (row,) = [r for r in rows if r[:2] == ["calidist_ppdb_probe", "CaliDist (Pr.)"]]
    names = ("acc", "ece", "ece_adaptive", "brier", "auroc")
    assert row[2:7] == [f"{100 * values[f'{n},none']:.2f}" for n in names]


def test_report_rebuilds_every_number_of_the_run(first_run):
    """Every task kind of both groups (scored letters, each style, verbalized, consistency,
    SPUQ, reasoned, and the replies run beside them): ``calidist report`` rebuilds lm-eval's
    numbers from the logged records."""
    from calidist_tasks.runs.planning import expand_tasks

    # what calidist eval runs of the groups: their tasks and their reasoned variants
    tasks = {task for task, _ in expand_tasks([f"calidist_{b}_all" for b in LABELS])}
    assert any(task.endswith("_cot") for task in tasks)
    assert set(assert_report_rebuilds_results(first_run)) == tasks


def lm_eval_tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if "__pycache__" not in p.parts)


@pytest.mark.exclusive  # calidist link writes into lm-eval's task folder, which every run reads
def test_plain_lm_eval_after_link_applies_the_saved_calibrator(first_run, tiny_model_dir,
                                                               data_dir, tmp_path):
    tasks_dir = cli.lm_eval_task_dir()
    if (tasks_dir / cli.LINK_NAME).exists():
        pytest.skip(f"{tasks_dir / cli.LINK_NAME} exists already (a link made outside the tests)")
    if not os.access(tasks_dir, os.W_OK):
        pytest.skip(f"{tasks_dir} is not writable")
    before = lm_eval_tree(tasks_dir)
    calibrator = first_run / "calidist_ppdb_probe.json"
    metadata = {"data_dir": str(data_dir), **SIZES, "calibrator": str(calibrator)}
    try:
        run([command("calidist"), "link"], cwd=tmp_path)
        run([command("lm_eval"), "--tasks", "calidist_ppdb_probe",
             *model_flags(tiny_model_dir, metadata, tmp_path / "out")], cwd=tmp_path)
    finally:
        if (tasks_dir / cli.LINK_NAME / cli.MARKER).exists():
            run([command("calidist"), "unlink"], cwd=tmp_path)
    assert lm_eval_tree(tasks_dir) == before
    again = results_of(tmp_path / "out")["results"]["calidist_ppdb_probe"]
    fitted = results_of(first_run)["results"]["calidist_ppdb_probe"]
    for name in metric_names(distracted=True):
        assert again[f"{name},none"] == pytest.approx(fitted[f"{name},none"], abs=1e-4), name


def test_plain_lm_eval_runs_a_family_group_and_prints_its_row(tiny_model_dir, data_dir,
                                                               tmp_path):
    """``lm_eval --tasks calidist_ppdb_all`` (lm-eval's own CLI, our folder as --include_path, no
    earlier run): every member runs, the reasoned ones are left out, and lm-eval prints the
    group's row, the CaliDist variants' mean ECE, and a stderr for the scores. No exemplars:
    with them every prompt fills the tiny model's 1,024 positions."""
    import yaml

    from calidist_tasks import task_folder

    metadata = {"data_dir": str(data_dir), "calib_size": 4, "eval_size": 6, "m": 1}
    done = run([command("lm_eval"), "--include_path", task_folder(), "--tasks",
                "calidist_ppdb_all", "--gen_kwargs", "max_gen_toks=8", "--num_fewshot", "0",
                *model_flags(tiny_model_dir, metadata, tmp_path / "out")], cwd=tmp_path)
    members = yaml.safe_load((Path(task_folder()) / "ppdb" / "calidist_ppdb_all.yaml")
                             .read_text())["task"]
    assert not any(task.endswith("_cot") for task in members)
    results = results_of(tmp_path / "out")["results"]
    assert set(members) <= set(results)
    reporting_ece = [task for task in members if "ece,none" in results[task]]
    assert reporting_ece == [f"calidist_ppdb{s}" for s in ("_assertion", "_probe", "_corruption",
                                                       "_assertion_verbalized",
                                                       "_probe_verbalized",
                                                       "_corruption_verbalized")]
    group = results["calidist_ppdb_all"]["ece,none"]
    np.testing.assert_allclose(group, np.mean([results[t]["ece,none"] for t in reporting_ece]))
    assert "calidist_ppdb_all" in done.stdout and "|calidist_ppdb_all" in done.stdout.replace(
        " ", "")  # lm-eval's groups table
    for task in ("calidist_ppdb", "calidist_ppdb_assertion"):
        for name in ("acc", "ece_vanilla", "brier_vanilla", "auroc_vanilla"):
            assert isinstance(results[task][f"{name}_stderr,none"], float), (task, name)
    assert isinstance(results["calidist_ppdb_assertion"]["ece_stderr,none"], float)
