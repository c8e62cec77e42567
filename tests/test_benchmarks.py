"""The benchmark harness's own arithmetic (the model runs themselves are not run in CI)."""

from __future__ import annotations

import pytest

from benchmarks.markdown import default_run_estimate
from benchmarks.overhead import measure_overhead


def test_overhead_runs_our_calls_on_synthetic_documents():
    found = measure_overhead(300, calib_size=50, repeats=1)
    # calidist_ppdb_assertion: 2 labels, m=2 -> 1 original + 4 hinted prompts, 2 letters each
    assert found["requests_per_doc"] == 10 and found["metrics"] == 19
    assert found["process_results_s"] > 0 and found["aggregation_s"] > 0
    seconds = found["process_results_s"] + found["aggregation_s"]
    assert found["seconds_per_100k"] == pytest.approx(seconds * 100_000 / 300)


def test_default_run_estimate_scales_measured_seconds_per_token():
    row = {"seconds": 1.0, "prompt_tokens": 100.0, "passes": 1.0, "generated_tokens": 0.0,
           "estimated": False}
    costs = {("tiny", "ppdb", "Vanilla"): row,
             ("tiny", "ppdb", "probe (under load)"): {**row, "seconds": 3.0},
             ("tiny", "ppdb", "assertion m=1 (subset)"): {**row, "estimated": True,
                                                          "seconds": 99.0},
             ("tiny", "ppdb", "verbalized"): {**row, "generated_tokens": 5.0, "seconds": 50.0}}
    # 0.01 s per token (the least loaded row), 100 tokens per prompt; PPDB default: 1200
    # documents x (1 original + 7 assertion (m=3, 2 labels) + 3 probe + 3 corruption) = 14
    # prompts -> 4.67 h
    assert default_run_estimate(costs) == "tiny: 4.7 h (PPDB 1200 docs x 14 prompts: 4.7 h)"
    assert default_run_estimate({}) == ""
