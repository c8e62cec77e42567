"""lm-eval's sample loggers on our samples, and ``--metadata log_prompts`` (issue 37).

A tiny-model run of a logit task, a hinted task and a verbalized task, made once per
``log_prompts`` value and saved as ``lm_eval --output_path --log_samples`` saves it:

- lm-eval's W&B logger (``WandbLogger.log_eval_samples``, as ``--wandb_args`` calls it on the
  in-memory samples) builds its per-task sample tables: it reads ``configs[task]["metric_list"]``
  and each sample's value under each of those metrics, a number; the tables are built with a
  stub ``wandb`` (no account, no network), and, where ``wandb`` is installed, as a real
  ``wandb.Table``;
- lm-eval's Zeno exporter (``scripts/zeno_visualize.py``, its ``generate_dataset`` and
  ``generate_system_df`` in ``lm_eval_zeno``) builds its frames from the saved files, with a
  numeric column for each metric it makes a Zeno mean of;
- ``log_prompts: first`` and ``hash`` shrink the samples files, and ``calidist report`` gives the
  same tables from them as from the full run (the cost table's prompt tokens excepted, which
  need the prompts: not counted, and said so); a two-stage run and a reasoned ``_cot`` task
  read earlier runs logged with hashes only.
"""

from __future__ import annotations

import csv
import json
import math
import sys
import types
from pathlib import Path

import pandas as pd
import pytest
from lm_eval_zeno import generate_dataset, generate_system_df

import calidist_tasks
from calidist_tasks.report import write_report
from calidist_tasks.report.cost import HASHED
from calidist_tasks.runs.files import RESULTS_NAME, SAMPLES_NAME, read_jsonl, save_like_lm_eval
from calidist_tasks.runs.prompt_logging import is_prompt_marker, logged_prompts
from calidist_tasks.scoring.records import line_record

pytestmark = pytest.mark.filterwarnings("ignore::calidist_metrics.CalibrationWarning")

TASKS = ["calidist_ppdb", "calidist_ppdb_assertion", "calidist_ppdb_verbalized"]
SIZES = {"calib_size": 8, "eval_size": 10, "m": 1, "verbalized_prompt": "short"}
MODES = ("all", "first", "hash")
GEN = "max_gen_toks=4"  # a tiny model's replies: short, or a CPU takes minutes per reply
SAME_TABLES = ("leaderboard.csv", "scores.csv", "intervals.csv", "thresholds.csv")


@pytest.fixture(scope="module")
def runs(tiny_model_dir: Path, ppdb_data_dir: Path,
         tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[dict, Path]]:
    """log_prompts value -> (simple_evaluate's results, the folder they were saved in)."""
    root = tmp_path_factory.mktemp("loggers")
    found = {}
    for mode in MODES:
        results = calidist_tasks.evaluate(
            "hf", TASKS, {"data_dir": str(ppdb_data_dir), **SIZES, "log_prompts": mode},
            model_args=f"pretrained={tiny_model_dir},dtype=float32", device="cpu",
            batch_size=8, bootstrap_iters=0, gen_kwargs=GEN)
        save_like_lm_eval(results, root / mode)
        found[mode] = (results, root / mode)
    return found


def saved_files(folder: Path) -> tuple[dict, dict[str, Path]]:
    """(the results file's dict, {task: its samples file}) of a saved run."""
    results = next(p for p in folder.rglob("*.json") if RESULTS_NAME.match(p.name))
    samples = {m["task"]: p for p in folder.rglob("*.jsonl") if (m := SAMPLES_NAME.match(p.name))}
    return json.loads(results.read_text(encoding="utf-8")), samples


# ------------------------------------------------------------------ W&B
class StubRun:
    """What WandbLogger calls on a W&B run: ``log`` (its tables) and ``log_artifact``."""

    def __init__(self) -> None:
        self.logged: dict[str, pd.DataFrame] = {}

    def log(self, data: dict, step: int | None = None) -> None:
        self.logged.update(data)

    def log_artifact(self, artifact: object) -> None:
        pass


class StubArtifact:
    def __init__(self, name: str, type: str) -> None:  # noqa: A002  (wandb's own name)
        self.name = name

    def new_file(self, name: str, mode: str = "w", encoding: str = "utf-8"):
        import io

        return io.StringIO()


def wandb_tables(results: dict, monkeypatch: pytest.MonkeyPatch) -> dict[str, pd.DataFrame]:
    """The per-task sample tables lm-eval's W&B logger logs, on a stub run."""
    from lm_eval.loggers.wandb_logger import WandbLogger

    stub = types.ModuleType("wandb")
    stub.Artifact = StubArtifact  # type: ignore[attr-defined]
    logger = WandbLogger.__new__(WandbLogger)  # its __init__ starts a W&B run
    logger.run, logger.step = StubRun(), None
    data = {key: value for key, value in results.items() if key != "samples"}
    logger.post_init(data)
    logger._get_config()  # what log_eval_result does first: the task configs
    with monkeypatch.context() as patched:
        patched.setitem(sys.modules, "wandb", stub)
        logger.log_eval_samples(results["samples"])
    return {name.removesuffix("_eval_results"): table
            for name, table in logger.run.logged.items()}


@pytest.mark.parametrize("mode", ["all", "first"])
def test_wandb_logs_our_samples_with_numbers_per_metric(runs, mode, monkeypatch) -> None:
    results = runs[mode][0]
    tables = wandb_tables(results, monkeypatch)
    assert sorted(tables) == sorted(TASKS)
    for task, table in tables.items():
        metrics = [m["metric"] for m in results["configs"][task]["metric_list"]]
        assert metrics == ["acc"]
        assert len(table) == 18 and pd.api.types.is_numeric_dtype(table["acc"]), task
        evaluation = [line_record(s) for s in results["samples"][task]]
        right = [r["correct"] for r in evaluation if r["split"] == "evaluation"]
        assert table["acc"].mean() == pytest.approx(sum(right) / len(right))
        assert table["acc"].mean() == pytest.approx(results["results"][task]["acc,none"])
        assert table["data"].map(lambda text: isinstance(text, str) and len(text) > 50).all()
    try:
        import wandb
    except ImportError:
        return
    for task, table in tables.items():  # what wandb.log makes of a DataFrame
        assert len(wandb.Table(dataframe=table).data) == 18, task


# ------------------------------------------------------------------ Zeno
@pytest.mark.parametrize("mode", MODES)
def test_zeno_frames_of_the_saved_run(runs, mode) -> None:
    results, files = saved_files(runs[mode][1])
    for task in TASKS:
        config = results["configs"][task]
        data = read_jsonl(files[task])
        dataset = generate_dataset(data, config)
        system = generate_system_df(data, config)
        assert len(dataset) == len(system) == 18
        assert dataset["data"].map(len).gt(0).all()
        means = [m["metric"] for m in config["metric_list"] if m.get("aggregation") == "mean"]
        assert means == ["acc"]  # each a Zeno mean over its column
        for metric in means:
            assert pd.api.types.is_numeric_dtype(system[metric]), (task, metric)
            assert system[metric].mean() == pytest.approx(results["results"][task]["acc,none"])


# ------------------------------------------------------------------ log_prompts
def test_fewer_prompts_shrink_the_samples_and_keep_every_record(runs) -> None:
    sizes = {mode: {task: path.stat().st_size for task, path in saved_files(folder)[1].items()}
             for mode, (_, folder) in runs.items()}
    print("samples file sizes (bytes):", json.dumps(sizes))
    hinted = "calidist_ppdb_assertion"
    assert sizes["first"][hinted] < 0.5 * sizes["all"][hinted]
    assert sizes["hash"][hinted] < sizes["first"][hinted]
    full = {task: read_jsonl(path) for task, path in saved_files(runs["all"][1])[1].items()}
    for mode in ("first", "hash"):
        for task, path in saved_files(runs[mode][1])[1].items():
            lines = read_jsonl(path)
            assert [line_record(a) for a in lines] == [line_record(b) for b in full[task]]
            for short, whole in zip(lines, full[task], strict=True):
                prompts, texts = logged_prompts(short), logged_prompts(whole)
                assert len(prompts) == len(texts)
                kept = 1 if mode == "first" else 0
                assert prompts[:kept] == texts[:kept]
                assert all(map(is_prompt_marker, prompts[kept:]))
                assert short["prompt_hash"] == whole["prompt_hash"] or mode == "hash"


def table_rows(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8") as file:
        return list(csv.DictReader(file))


def test_the_report_of_fewer_prompts_is_the_report_of_all(runs, tmp_path) -> None:
    reports = {mode: write_report([folder], tmp_path / mode, n_resamples=20, figures=False)
               for mode, (_, folder) in runs.items()}
    assert all(r.runs == len(TASKS) for r in reports.values())
    full = reports["all"]
    for mode in ("first", "hash"):
        report = reports[mode]
        for name in SAME_TABLES:
            assert (report.out / name).read_text() == (full.out / name).read_text(), (mode, name)
        costs, whole = table_rows(report.out / "cost.csv"), table_rows(full.out / "cost.csv")
        for row, expected in zip(costs, whole, strict=True):
            for key in ("task", "documents", "requests_per_doc", "distinct_prompts_per_doc",
                        "generated_tokens_per_doc"):
                assert row[key] == expected[key], (mode, key)
            if mode == "first" and row["task"] != "calidist_ppdb_assertion":
                # one prompt per document (the logit task's repeats, one per letter, are the
                # first's hash): every prompt's text is known
                assert row == expected
            else:
                assert row["prompt_tokens_per_doc"] == "" and row["token_count"] == HASHED


def test_later_runs_read_earlier_runs_logged_by_hash(tiny_model_dir, ppdb_data_dir,
                                                    runs) -> None:
    """A two-stage run (stage 2 checks stage 1's original prompts) and a reasoned task (it
    checks every prompt of its reply run) on earlier runs that logged prompt hashes only."""
    results = calidist_tasks.evaluate(
        "hf", ["calidist_ppdb_assertion", "calidist_ppdb_cot"],
        {"data_dir": str(ppdb_data_dir), **SIZES, "log_prompts": "hash"},
        model_args=f"pretrained={tiny_model_dir},dtype=float32", device="cpu", batch_size=8,
        bootstrap_iters=0, two_stage=True, gen_kwargs=GEN)
    one_stage = runs["all"][0]["results"]["calidist_ppdb_assertion"]
    two_stage = results["results"]["calidist_ppdb_assertion"]
    assert two_stage["ece,none"] == pytest.approx(one_stage["ece,none"])
    assert not math.isnan(results["results"]["calidist_ppdb_cot"]["acc,none"])
