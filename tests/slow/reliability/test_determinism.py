"""Slow half of ``tests/reliability/test_determinism.py`` (builds the tiny model or runs lm-eval).

What the module tests: the fast half's docstring."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import run_lm_eval
from reliability.runner import summarize

TESTS = Path(__file__).resolve().parents[2]


TASKS = ["calidist_ppdb_assertion", "calidist_ppdb", "calidist_mnli_probe",
         "calidist_mnli_corruption"]


SIZES = {"calib_size": 3, "eval_size": 4}
CALIBRATION, EVALUATION = SIZES["calib_size"], SIZES["eval_size"]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory, ppdb_data_dir: Path, mnli_data_dir: Path) -> Path:
    root = tmp_path_factory.mktemp("determinism")
    shutil.copytree(ppdb_data_dir / "ppdb", root / "ppdb")
    shutil.copytree(mnli_data_dir / "mnli", root / "mnli")
    return root


def launch(spec: dict, hash_seed: int, processes: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONHASHSEED": str(hash_seed), "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    module = ["-m", "reliability.runner", json.dumps(spec)]
    if processes == 1:
        command = [sys.executable, *module]
    else:
        torchrun = Path(sys.executable).with_name("torchrun")
        command = [str(torchrun), "--standalone", f"--nproc_per_node={processes}", *module]
    return subprocess.Popen(command, env=env, cwd=spec["out"].rsplit("/", 1)[0],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(process: subprocess.Popen, out: str) -> dict:
    log, _ = process.communicate(timeout=400)
    # the first lines that say why a rank died, then the end of the log
    why = [line for line in log.splitlines()
           if any(word in line for word in ("terminate", "Error", "error:", "abort", "Abort"))]
    assert process.returncode == 0, "\n".join(why[:20]) + "\n...\n" + log[-3000:]
    return json.loads(Path(out).read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_model_dir: Path, data_dir: Path) -> dict[str, dict]:
    """One command run three ways: in this process, in a fresh process with another
    PYTHONHASHSEED, and sharded over two processes with a third PYTHONHASHSEED."""
    folder = tmp_path_factory.mktemp("runs")
    spec = {"tasks": TASKS, "model": "hf", "metadata": {"data_dir": str(data_dir), **SIZES},
            "model_args": f"pretrained={tiny_model_dir},dtype=float32", "batch_size": 1}
    single = {**spec, "out": str(folder / "single.json")}
    double = {**spec, "model": "calidist-hf-cpu-dp", "out": str(folder / "double.json")}
    started = [launch(single, 11, 1), launch(double, 2027, 2)]  # run beside the in-process one
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as OMP_NUM_THREADS=1 in the subprocesses: same float sums
    try:
        here = summarize(run_lm_eval(TASKS, tiny_model_dir, spec["metadata"], batch_size=1))
    finally:
        torch.set_num_threads(threads)
    return {"here": json.loads(json.dumps(here)), "single": finish(started[0], single["out"]),
            "double": finish(started[1], double["out"]),
            "paths": {"single": single["out"], "double": double["out"]}}


def test_every_task_ran_every_document(runs) -> None:
    for name in ("here", "single", "double"):
        run = runs[name]
        assert sorted(run) == sorted(TASKS), name
        for task in TASKS:
            docs = run[task]["docs"]
            assert [d[0] for d in docs] == list(range(CALIBRATION + EVALUATION)), (name, task)
            splits = ["calibration"] * CALIBRATION + ["evaluation"] * EVALUATION
            assert [d[3] for d in docs] == splits
            assert run[task]["metrics"]["n_evaluation,none"] == EVALUATION


def test_two_processes_each_evaluated_a_share(runs) -> None:
    """lm-eval sharded the documents: each rank sent part of the requests, none sent them all."""
    out = Path(runs["paths"]["double"])
    seen = [int(Path(f"{out}.rank{rank}").read_text()) for rank in (0, 1)]
    # per task: documents x prompts x letters
    total = (CALIBRATION + EVALUATION) * (10 + 2 + 12 + 12)
    assert all(0 < n < total for n in seen) and sum(seen) >= total, seen


@pytest.mark.parametrize("other", ["single", "double"])
def test_prompts_are_byte_identical(runs, other) -> None:
    """Same prompt_hash, same hash of all request arguments, same source line per document."""
    for task in TASKS:
        assert runs[other][task]["docs"] == runs["here"][task]["docs"], (other, task)


@pytest.mark.parametrize("other", ["single", "double"])
def test_metrics_are_identical(runs, other) -> None:
    for task in TASKS:
        here, there = runs["here"][task]["metrics"], runs[other][task]["metrics"]
        assert len(here) >= 10 and here == there, (other, task)
