"""Evidence for wrapped tasks: AQuA as a plain lm-eval multiple-choice task, wrapped by calidist.

``benchmarks/wrapped/aqua_mc.yaml`` is a plain lm-eval config (no calidist in it) over this
machine's AQuA copy (508 questions, choices A-E, MMLU-style "Answer:" cue); ``calidist wrap
aqua_mc`` wrote the ``calidist_aqua_mc*`` configs beside it (docs/wrap.md). Per model this
script runs, each resumable (one ``--use_cache`` file per model, and a finished task is not run
again):

1. ``calidist eval`` of ``calidist_aqua_mc`` (vanilla and the post-hoc calibrators),
   ``calidist_aqua_mc_assertion`` and ``calidist_aqua_mc_probe`` (CaliDist), 200 calibration
   documents from a seeded held-out slice and the other 308 for evaluation;
2. plain ``lm_eval --tasks aqua_mc --log_samples`` (answered from the same cache: its requests
   are the wrapped vanilla task's);
3. ``calidist report`` on that plain run alone, and compares its vanilla and post-hoc numbers with
   what the wrapped task's own results file holds.

Per-document records go to ``benchmarks/results/wrapped/<model>/<task>.jsonl.gz`` (the format of
``benchmarks/records.py``) and the numbers to ``benchmarks/results/wrapped_aqua_mc.json``, which
``benchmarks/run.py --steps analysis`` puts into BENCHMARKS.md::

    python benchmarks/wrapped.py --models smollm2,qwen-coder
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import records  # noqa: E402
from benchmarks.commands import (  # noqa: E402
    CALIDIST,
    RESULTS,
    model_folder,
    portable,
    run_task,
)

FOLDER = "benchmarks/wrapped"  # relative to the repository root, where the commands run
PLAIN_TASK = "aqua_mc"
TASKS = ("calidist_aqua_mc", "calidist_aqua_mc_assertion", "calidist_aqua_mc_probe")
SIZES = {"calib_size": 200, "eval_size": "all", "m": 1, "seed": 0, "split_seed": 0}
SUMMARY = RESULTS / "wrapped_aqua_mc.json"
# the leaderboard.csv columns the comparison reads, per method row of the plain run's report
COMPARED = ("acc", "ece", "brier", "auroc")


def commands(model_dir: str, out: Path) -> list[tuple[str, list[str]]]:
    """(task, command) of every run for one model, in order: the plain run right after the
    wrapped vanilla task whose cache answers it, the hinted tasks (the long ones) last."""
    cache = str(out / "lm_cache")
    common = ["--include_path", FOLDER, "--device", "cpu", "--batch_size", "8",
              "--log_samples", "--use_cache", cache]
    found = [(task, ["calidist", "eval", "--model", "hf-prefix-cache", "--model_args",
                     f"pretrained={model_dir},dtype=float32", "--tasks", task,
                     "--metadata", json.dumps(SIZES), "--output_path", str(out / task),
                     *common]) for task in TASKS]
    found.insert(1, (PLAIN_TASK, ["lm_eval", "--model", "hf", "--model_args",
                                  f"pretrained={model_dir},dtype=float32", "--tasks",
                                  PLAIN_TASK, "--output_path", str(out / PLAIN_TASK),
                                  *common]))
    return found


def _results_json(folder: Path) -> dict[str, Any]:
    files = sorted(folder.rglob("results_*.json"))
    if not files:
        raise FileNotFoundError(f"{folder}: no lm-eval results file")
    return json.loads(files[-1].read_text())


def report_rows(plain: Path, out: Path) -> dict[str, dict[str, str]]:
    """``calidist report`` on the plain run alone: its leaderboard rows, by method."""
    subprocess.run([*CALIDIST, "report", str(plain), "--out", str(out), "--no_figures",
                    "--bootstrap", "0", "--quiet"], check=True, cwd=ROOT)
    with open(out / "leaderboard.csv", newline="") as f:
        return {row["method"]: row for row in csv.DictReader(f)}


def rebuilt_differences(metrics: dict[str, float], rows: dict[str, dict[str, str]]
                        ) -> dict[str, Any]:
    """The plain run's report rows (x100, rounded to 1e-4) against the wrapped vanilla task's
    own metrics: per method, the largest absolute difference over accuracy, ECE, Brier, AUROC."""
    from calidist_tasks.registry import METHODS

    suffixes = {m.label: m.suffix for m in METHODS}
    found: dict[str, Any] = {}
    for label, row in rows.items():
        suffix = suffixes[label]
        own = {"acc": metrics.get(f"acc_{suffix}", metrics["acc"]),
               **{score: metrics[f"{score}_{suffix}"] for score in COMPARED[1:]}}
        found[label] = max(abs(100 * own[score] - float(row[f"{PLAIN_TASK}_{score}"]))
                           for score in COMPARED)
    return found


def summarize(model: str, out: Path, runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The wrapped tasks' numbers, and the plain run's report beside the vanilla task's."""
    tasks = {}
    for task in (t for t in TASKS if t in runs):
        results = _results_json(out / task)
        metrics = {k.split(",")[0]: v for k, v in results["results"][task].items()
                   if "," in k and isinstance(v, int | float)}
        tasks[task] = {"metrics": metrics, "wall_s": round(runs[task]["wall_s"], 1),
                       "n_samples": results.get("n-samples", {}).get(task)}
    rebuilt = report_rows(out / PLAIN_TASK, out / "report")
    return {"model": model, "tasks": tasks, "plain_report": rebuilt,
            "plain_report_max_abs_difference": rebuilt_differences(
                tasks[TASKS[0]]["metrics"], rebuilt),
            "plain_wall_s": round(runs[PLAIN_TASK]["wall_s"], 1),
            "not_run": [t for t in TASKS if t not in runs]}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="smollm2,qwen-coder")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "wrap-evidence")
    parser.add_argument("--tasks", default=",".join(TASKS),
                        help="the wrapped tasks to run (the vanilla one is always run: its "
                        "cache answers the plain run)")
    args = parser.parse_args(argv)
    os.chdir(ROOT)  # the commands name the config folder and the data relative to the root
    benchmark_command = shlex.join(["python", "benchmarks/wrapped.py",
                                    *(argv if argv is not None else sys.argv[1:])])
    problems: list[str] = []
    for model in [m for m in args.models.split(",") if m]:
        model_dir = model_folder(model)
        out = args.out / model
        runs = {}
        wanted = {TASKS[0], PLAIN_TASK, *args.tasks.split(",")}
        for task, command in (c for c in commands(model_dir, out) if c[0] in wanted):
            runs[task] = run_task(command, out / task, benchmark_command)
            if runs[task]["returncode"]:
                raise SystemExit(f"[wrapped] {model} / {task} failed: see "
                                 f"{out / task / 'lm_eval.log'}")
            if task != PLAIN_TASK:
                records.export(out / task, model, task, RESULTS / "wrapped", runs[task],
                               problems)
        entry = summarize(model, out, runs)
        entry["commands"] = [portable(runs[t]["command"], {model: model_dir}) for t in runs]
        # read again just before writing: another model's run may have written meanwhile
        summary = json.loads(SUMMARY.read_text()) if SUMMARY.exists() else {"models": {}}
        summary.update({"sizes": SIZES, "benchmark_command": benchmark_command})
        summary["models"][model] = entry
        SUMMARY.write_text(json.dumps(summary, indent=1) + "\n")
        print(f"[wrapped] {model}: -> {SUMMARY}", flush=True)
    for problem in problems:
        print(f"[wrapped] {problem}", file=sys.stderr)


if __name__ == "__main__":
    main()
