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


def test_backend_speed_section_projects_hours_and_survives_a_rewrite(tmp_path):
    from benchmarks.backend_speed import BEGIN, END, kept_section, render, write_section

    rows = [{"model": "tiny", "benchmark": "ppdb", "documents": 24, "hf_s_per_doc": 3.0,
             "cached_s_per_doc": 1.5, "max_loglikelihood_difference": 2e-5,
             "same_predictions": True, "consistency_documents": 4, "batch_sizes": (8, 64),
             "consistency_hf_small_batch_s_per_doc": 36.0, "consistency_hf_s_per_doc": 20.0,
             "consistency_cached_s_per_doc": 12.0, "same_samples": 0.9, "fixed_s": [20.0, 26.0]},
            {"model": "tiny", "benchmark": "aqua", "documents": 15, "hf_s_per_doc": 7.2,
             "cached_s_per_doc": 3.6, "max_loglikelihood_difference": 3e-5,
             "same_predictions": False, "consistency_documents": 4, "batch_sizes": (8, 64),
             "consistency_hf_small_batch_s_per_doc": 18.0, "consistency_hf_s_per_doc": 18.0,
             "consistency_cached_s_per_doc": 18.0, "same_samples": 1.0}]
    section = render(rows, "python benchmarks/backend_speed.py --models tiny")
    # PPDB default 1200 documents: 3.0 s -> 1.0 h, 1.5 s -> 0.5 h; AQuA 508: 7.2 s -> 1.0 h
    assert "| tiny | PPDB | 24 | 3.00 | 1.50 | 2.00x | 2.0e-05 | yes | 1200 docs: 1.0 h -> 0.5 h |"\
        in section
    assert "| tiny | AQuA | 15 | 7.20 | 3.60 | 2.00x | 3.0e-05 | NO | 508 docs: 1.0 h -> 0.5 h |"\
        in section
    # consistency: 100 default evaluation documents: 36 s -> 1.0 h, 12 s -> 0.33 h
    assert ("| tiny | PPDB | 4 | 36.00 (8) | 20.00 (64) | 12.00 (64) | 3.00x | 90% | "
            "100 docs: 1.0 h -> 0.3 h |") in section
    assert ("| tiny | AQuA | 4 | 18.00 (8) | 18.00 (64) | 18.00 (64) | 1.00x | 100% | "
            "100 docs: 0.5 h -> 0.5 h |") in section
    # logit 1.0 + 1.0 and consistency 1.0 + 0.5 h with hf; 0.5 + 0.5 + 0.33 + 0.5 h cached
    assert "tiny 3.5 h -> 1.8 h" in section
    assert "spent 20 to 26 s (median 23 s)" in section
    markdown = tmp_path / "BENCHMARKS.md"
    markdown.write_text("# Benchmarks\n\nother sections\n")
    write_section(markdown, section)
    write_section(markdown, section.replace("2.00x", "9.99x"))  # replaced, not appended twice
    text = markdown.read_text()
    assert text.startswith("# Benchmarks\n\nother sections\n") and text.count(BEGIN) == 1
    assert "9.99x" in kept_section(markdown) and kept_section(markdown).endswith(END)
    assert kept_section(tmp_path / "missing.md") == ""


def test_request_seconds_read_the_final_progress_bars():
    from benchmarks.backend_speed import request_seconds

    log = ("Tokenizing inputs: 100%|##| 825/825 [00:03<00:00]\n"
           "Running loglikelihood requests: 40%|#| 330/825 [01:02<01:30]\r"
           "Running loglikelihood requests: 100%|##| 825/825 [03:24<00:00,  4.03it/s]\n"
           "Running generate_until requests (x): 100%|##| 60/60 [1:00:18<00:00]\n")
    assert request_seconds(log) == 204 + 3600 + 18
    with pytest.raises(ValueError, match="progress bar"):
        request_seconds("Tokenizing inputs: 100%|##| 825/825 [00:03<00:00]\n")


def test_generation_tasks_run_at_their_own_batch_size(tmp_path):
    from benchmarks import run

    args = run.parse_args(["--batch-size", "8", "--gen-batch-size", "48"])
    batch = {suffix: (command := run.task_command(args, "/model", f"calidist_ppdb{suffix}",
                                                  suffix, "ppdb", tmp_path))[
                 command.index("--batch_size") + 1]
             for suffix in ("", "_assertion", "_verbalized", "_consistency")}
    assert batch == {"": "8", "_assertion": "8", "_verbalized": "48", "_consistency": "48"}
    command = run.task_command(run.parse_args(["--device", "cuda"]), "/model", "calidist_ppdb",
                               "", "ppdb", tmp_path)
    assert command[command.index("--device") + 1] == "cuda"
