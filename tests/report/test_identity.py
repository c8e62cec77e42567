"""Blocks of runs (``report.identity``): each task in one block, short names, one legend."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

from test_report import STAMP_A, STAMP_B, read_csv, report, write_run

from calidist_tasks.report.identity import SHORT_LABEL, differences, group_names
from calidist_tasks.report.loading import load_runs

RECORDS = Path(__file__).parents[2] / "benchmarks" / "results" / "smollm2"


def test_each_task_is_in_one_block_and_long_labels_are_numbered(tmp_path: Path) -> None:
    """SmolLM2's committed PPDB runs: the direct runs (m = 2) and the reasoned ones (m = 1) on
    other documents. The original task, which m does not change, joins the direct block only
    (it made a block of its own with duplicated rows), and the labels, which would spell out
    documents and sizes, are numbers explained once in the legend."""
    for task in ("calidist_ppdb", "calidist_ppdb_assertion", "calidist_ppdb_cot",
                 "calidist_ppdb_assertion_cot"):
        shutil.copy(RECORDS / f"{task}.jsonl.gz", tmp_path)
    runs = load_runs([tmp_path]).runs
    assert Counter(run.task for run in runs) == Counter(
        ["calidist_ppdb", "calidist_ppdb_assertion", "calidist_ppdb_cot",
         "calidist_ppdb_assertion_cot"])
    names = group_names(runs)
    blocks = {names[run.group]: set() for run in runs}
    for run in runs:
        blocks[names[run.group]].add(run.task)
    assert sorted(blocks.values(), key=sorted) == [
        {"calidist_ppdb", "calidist_ppdb_assertion"},
        {"calidist_ppdb_assertion_cot", "calidist_ppdb_cot"}]
    assert set(blocks) == {"smollm2 [1]", "smollm2 [2]"}
    told = differences(runs)
    assert all(len(told[run.group]) > SHORT_LABEL for run in runs)
    assert all("m=None" not in text for text in told.values())


def test_an_omitted_m_is_the_default_it_stands_for(tmp_path: Path) -> None:
    """m omitted (the assertion default, 2) and m = 2 given: one block, the newer run."""
    for folder, stamp, m in (("default", STAMP_A, None), ("two", STAMP_B, 2)):
        results = write_run(tmp_path / "runs" / folder, "org/model-a", ["toy"], stamp)
        data = json.loads(results.read_text(encoding="utf-8"))
        if m is not None:
            data["configs"]["calidist_toy_assertion"]["metadata"]["m"] = m
        results.write_text(json.dumps(data), encoding="utf-8")
    names = set(group_names(load_runs([tmp_path / "runs"]).runs).values())
    assert names == {"model-a"}


def test_legend_spells_out_a_numbered_block(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    for folder, stamp, size in (("small", STAMP_A, 5), ("large", STAMP_B, 6)):
        results = write_run(root / folder, "org/model-a", ["toy"], stamp)
        data = json.loads(results.read_text(encoding="utf-8"))
        for config in data["configs"].values():
            config["metadata"].update(calib_size=size, data_dir="/a/long/folder/of/the/data"
                                      + folder)
        results.write_text(json.dumps(data), encoding="utf-8")
    result, files = report(root, tmp_path / "out")
    assert {r["model"] for r in read_csv(files["leaderboard.csv"])} == {"model-a [1]",
                                                                       "model-a [2]"}
    legend = files["report.md"].read_text(encoding="utf-8")
    assert legend.count("data\\_dir=/a/long/folder/of/the/datasmall") == 2  # differs, settings
    assert "| model-a \\[1\\] | org/model-a | toy: calib\\_size=5" in legend
