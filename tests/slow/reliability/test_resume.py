"""Resume: with lm-eval's ``--use_cache PATH`` a run killed part-way and started again sends only
the requests not answered yet, and ends with the metrics of an uninterrupted run.

The model is ``calidist-fake`` (tests/reliability/models.py), a stand-in for a paid API: its
answers are a pure function of the request, it counts what it is sent (in a file, so that a
killed process leaves its count), and it stores each answer through lm-eval's cache hook as it
goes, as lm-eval's own ``hf`` and API backends do. The run is killed with SIGKILL, the way an
interrupted job dies, once the cache holds some answers.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import run_lm_eval
from reliability.models import FakeLM

TESTS = Path(__file__).resolve().parents[2]
TASKS = ["calidist_ppdb_assertion", "calidist_mnli_probe"]
TOTAL = 13 * 10 + 13 * 12  # documents x prompts x letters, per task


def metrics(results: dict) -> dict:
    return {task: {k: v for k, v in values.items() if isinstance(v, float)}
            for task, values in results["results"].items()}


def cached_rows(prefix: Path) -> int:
    path = Path(f"{prefix}_rank0.db")
    if not path.exists():
        return 0
    with sqlite3.connect(path) as db:
        try:
            return db.execute("SELECT COUNT(*) FROM unnamed").fetchone()[0]
        except sqlite3.OperationalError:  # the table is not created yet
            return 0


def run(metadata: dict, cache: Path | None) -> tuple[dict, int]:
    """An in-process run; returns its metrics and how many requests the model was sent."""
    before = FakeLM.requests_sent
    results = run_lm_eval(TASKS, Path("unused"), metadata, model="calidist-fake", model_args="",
                          use_cache=None if cache is None else str(cache), log_samples=False)
    return metrics(results), FakeLM.requests_sent - before


@pytest.fixture(scope="module")
def metadata(tmp_path_factory, ppdb_data_dir: Path, mnli_data_dir: Path) -> dict:
    root = tmp_path_factory.mktemp("resume_data")
    (root / "ppdb").symlink_to(ppdb_data_dir / "ppdb")
    (root / "mnli").symlink_to(mnli_data_dir / "mnli")
    return {"data_dir": str(root), "calib_size": 6, "eval_size": 7}


def kill_part_way(metadata: dict, cache: Path, counter: Path, after: int) -> int:
    """Start the run in a fresh process, SIGKILL it once ``after`` answers are cached; return
    how many requests it had sent."""
    spec = {"tasks": TASKS, "model": "calidist-fake", "metadata": metadata,
            "model_args": f"delay=0.03,count_file={counter}", "use_cache": str(cache),
            "out": str(cache.parent / "never_written.json")}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS),
                                                        os.environ.get("PYTHONPATH", "")])}
    process = subprocess.Popen([sys.executable, "-m", "reliability.runner", json.dumps(spec)],
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while cached_rows(cache) < after:
            assert process.poll() is None, "the run ended before it could be killed"
            assert time.monotonic() < deadline, "no answers were cached in time"
            time.sleep(0.1)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert not Path(spec["out"]).exists()  # it really died part-way
    return len(counter.read_text().split())


@pytest.mark.slow  # runs lm-eval in a subprocess (no tiny_model_dir fixture to mark it)
def test_killed_run_resumes_without_resending_and_ends_with_the_same_metrics(tmp_path, metadata):
    reference, sent = run(metadata, cache=None)
    assert sent == TOTAL

    cache = tmp_path / "cache"
    sent_before_kill = kill_part_way(metadata, cache, tmp_path / "count", after=40)
    answered = cached_rows(cache)
    print(f"killed after {sent_before_kill} sent, {answered} cached of {TOTAL}")
    # SIGKILL can lose the answer in flight (sent, not yet stored): it is re-sent, no more.
    assert 40 <= answered <= sent_before_kill < TOTAL

    resumed, sent = run(metadata, cache)
    assert sent == TOTAL - answered  # only what the killed run had not answered
    assert resumed == reference
    assert cached_rows(cache) == TOTAL

    again, sent = run(metadata, cache)  # a finished run started again costs nothing
    assert sent == 0 and again == reference
