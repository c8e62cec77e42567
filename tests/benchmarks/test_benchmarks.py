"""The benchmark harness's own arithmetic (the model runs themselves are not run in CI).

The analysis tests build what ``benchmarks/run.py`` leaves behind for a finished task (run.json,
lm-eval's results file and samples file) from tiny synthetic records made by the task's own
joining and aggregation, export them to committed records and render BENCHMARKS.md from those.
"""

from __future__ import annotations

import gzip
import json
import shlex
import warnings
from pathlib import Path

import numpy as np
import pytest

from benchmarks.analysis import default_run_estimate
from benchmarks.overhead import measure_overhead
from calidist_tasks.registry import DIAGNOSTICS, SCORES


def test_overhead_runs_our_calls_on_synthetic_documents():
    found = measure_overhead(300, calib_size=50, repeats=1)
    # calidist_ppdb_assertion: 2 labels, m=2 -> 1 original + 4 hinted prompts, 2 letters each;
    # acc, the record (calidist_record), every score of CaliDist and vanilla, the diagnostics
    # (26 before PRR, NLL, RMS CE)
    assert found["requests_per_doc"] == 10 and found["metrics"] == 2 + 2 * len(SCORES) + len(
        DIAGNOSTICS) == 35
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


def test_backend_speed_table_gives_ratios_to_hf_and_to_the_prefix_sharing_limit():
    from benchmarks.backend_speed import render

    rows = [{"model": "tiny", "benchmark": "ppdb", "workload": "scoring", "backend": "hf",
             "documents": 10, "seconds": 40.0, "tokens": 8000, "limit_tokens": 2000,
             "hf_seconds": 40.0, "agreement": "(reference)"},
            {"model": "tiny", "benchmark": "ppdb", "workload": "scoring", "backend": "vllm",
             "documents": 10, "seconds": 20.0, "tokens": 8000, "limit_tokens": 2000,
             "hf_seconds": 40.0, "agreement": "max abs letter log-likelihood difference 3.0e-05"},
            {"model": "tiny", "benchmark": "ppdb", "workload": "scoring",
             "backend": "vllm-server", "skipped": "not run (vllm is not importable)"}]
    section = render({"rows": rows, "command": "python benchmarks/backend_speed.py --models tiny",
                      "machine": "test machine", "load": "idle"})
    # 10 docs in 20 s: 0.5 docs/s, 400 tokens/s; 40/20 = 2x hf; the limit computes 2000 of
    # 8000 tokens: 4x hf, so the backend reaches half of it
    assert ("| tiny | PPDB | scoring | vllm | 10 | 20 | 0.500 | 400 | 2.00x | 4.00x | 0.50 | "
            "max abs letter log-likelihood difference 3.0e-05 |") in section
    assert "| tiny | PPDB | scoring | hf | 10 | 40 | 0.250 | 200 | 1.00x | 4.00x | 0.25 |" \
        in section
    assert "| vllm-server | - | - | - | - | - | - | - | not run (vllm is not importable) |" \
        in section
    assert "python benchmarks/backend_speed.py --models tiny" in section


def test_install_time_table_shows_each_way_and_how_it_was_measured():
    from benchmarks.install_time import STARTUP, WAYS, render

    def step(wall, cpu):
        return {"wall_s": wall, "cpu_s": cpu, "load_before": 0.5, "load_after": 1.25}

    shipped, compiled = WAYS
    section = render({"measured_by": "python benchmarks/install_time.py", "startup": STARTUP,
                      "cpus": 2, "machine": "x86_64", "python": "3.11.7", "date": "2026-11-28",
                      "ways": {shipped: {"install": step(100.0, 93.5),
                                         "first_start": step(9.0, 8.0),
                                         "later_start": step(8.5, 7.5)},
                               compiled: {"install": step(227.6, 219.0),
                                          "first_start": step(8.9, 7.9),
                                          "later_start": step(8.4, 7.4)}}})
    assert f"| {shipped} | 100.0 | 93.5 | 9.0 | 8.0 | 8.5 | 0.5 / 1.25 |" in section
    assert f"| {compiled} | 227.6 | 219.0 | 8.9 | 7.9 | 8.4 | 0.5 / 1.25 |" in section
    assert "`python benchmarks/install_time.py`" in section and STARTUP in section


def test_every_module_the_install_compiles_exists_in_this_environment():
    """scripts/setup.sh installs with --no-compile and then imports a list of modules so their
    bytecode is written once; a module renamed upstream would fail the install."""
    import importlib.util
    import re

    text = (Path(__file__).resolve().parents[2] / "scripts" / "setup.sh").read_text()
    assert text.count("pip install $compile") == 3
    names = re.search(r"modules=\(([^)]*)\)", text).group(1).split()
    assert "calidist_tasks.cli" in names and "lm_eval.evaluator" in names
    for name in names:
        top, *rest = name.split(".")
        spec = importlib.util.find_spec(top)  # finds the package without importing it
        assert spec is not None, name
        if rest:
            folder = Path(spec.submodule_search_locations[0]).joinpath(*rest)
            assert folder.with_suffix(".py").is_file() or (folder / "__init__.py").is_file(), \
                name


def test_prefix_sharing_limit_counts_each_documents_shared_prefix_once():
    from benchmarks.backend_speed import agreement, token_work

    tokenize = str.split  # one token per word
    # document 0: two prompts sharing "a b c" (P = 3), H = 1 and 2; document 1: one prompt
    docs = {0: {"prompts": ["a b c x", "a b c y z"], "answers": [-0.5, -1.0, -0.25, -2.0],
                "predictions": [0, 1]},
            1: {"prompts": ["q r"], "answers": ["one two three"], "predictions": [0]}}
    # without sharing 4 + 5 + 2 prompt tokens + 3 generated; the limit 3 + 1 + 2, 2, + 3
    assert token_work(docs, docs, tokenize) == (14, 11)
    shifted = {0: {**docs[0], "answers": [-0.5, -1.0, -0.25, -2.00004]}, 1: docs[1]}
    assert agreement({0: shifted[0]}, {0: docs[0]}) == (
        "max abs letter log-likelihood difference 4.0e-05; same predictions", True)
    far = {**docs[0], "answers": [-0.5, -1.0, -0.25, -2.01]}
    assert agreement({0: far}, {0: docs[0]})[1] is False  # beyond MATCH_TOLERANCE
    flipped = {**docs[0], "predictions": [1, 1]}
    assert agreement({0: flipped}, {0: docs[0]}) == (
        "max abs letter log-likelihood difference 0.0e+00; DIFFERENT predictions", False)
    assert agreement({1: {**docs[1], "answers": ["one two"]}}, {1: docs[1]}) == (
        "0 of 1 greedy replies identical", False)
    assert agreement({1: docs[1]}, {1: docs[1]}) == ("1 of 1 greedy replies identical", True)
    # two-stage replies: a stage-1 reply with another answer sent other hints in stage 2, so
    # the two runs hold different numbers of replies; the unmatched ones count as differing
    two_stage = {"prompts": ["q r"], "answers": ["(a) 60%", "hinted", "hinted again"]}
    assert agreement({1: {**two_stage, "answers": ["(b) 60%", "hinted"]}}, {1: two_stage}) == (
        "1 of 3 greedy replies identical", False)
    assert agreement({0: {**docs[0], "prompts": ["other"]}}, {0: docs[0]}) == (
        "other prompts than hf's", False)


def test_backend_speed_workloads_are_two_stage_scoring_and_reasoned_hinted_replies(tmp_path):
    """Both workloads run as a reasoned CaliDist run does: two stages; the generation one the
    hinted Appendix F replies (m = --gen-m) through the chat template."""
    from benchmarks.backend_speed import parse_args, task_command

    args = parse_args(["--gen-m", "1", "--max-gen-toks", "96", "--ppdb-m", "3"])

    def sent(workload: str) -> tuple[str, dict, list[str]]:
        command = task_command(args, "hf", workload, "/model", "ppdb", tmp_path, None)
        metadata = json.loads(command[command.index("--metadata") + 1])
        return command[command.index("--tasks") + 1], metadata, command

    task, metadata, command = sent("generation")
    assert task == "calidist_ppdb_assertion_verbalized" and metadata["m"] == 1
    assert "--two-stage" in command and "--apply_chat_template" in command
    assert command[command.index("--gen_kwargs") + 1] == "max_gen_toks=96"
    task, metadata, command = sent("scoring")
    assert task == "calidist_ppdb_assertion" and metadata["m"] == 3
    assert "--two-stage" in command and "--apply_chat_template" not in command


def test_a_run_killed_at_exit_after_its_results_is_measured_and_says_so(tmp_path,
                                                                       monkeypatch):
    """vLLM's CPU build sometimes aborts in the interpreter's teardown (signal 6) after the run
    wrote everything: its timing stands, with a note; a run that died earlier is a failure."""
    from benchmarks import backend_speed

    args = backend_speed.parse_args([])
    bar = "Running loglikelihood requests: 100%|##| 36/36 [01:05<00:00]\n"

    def finish(code: int, log: str, files: bool):
        def run_task(command, out):
            out.mkdir(parents=True, exist_ok=True)
            (out / "lm_eval.log").write_text(log)
            if files:
                (out / "results_x.json").write_text("{}")
                (out / "samples_calidist_ppdb_assertion_x.jsonl").write_text("")
            return {"returncode": code, "wall_s": 80.0}
        monkeypatch.setattr(backend_speed.bench, "run_task", run_task)
        return backend_speed.run_one(args, "vllm", "scoring", "/m", "ppdb", tmp_path / "o", None)

    measured = finish(-6, bar, files=True)
    assert measured["seconds"] == 65.0 and "signal 6 at exit" in measured["note"]
    row = backend_speed.workload_rows("m", "ppdb", "scoring", {("vllm", "scoring"): measured},
                                      lambda text: ())[0]
    assert "signal 6" in backend_speed.render({"rows": [row], "command": "cmd", "machine": "m",
                                               "load": "idle"})
    assert "failed (return code -6" in finish(-6, bar, files=False)["skipped"]
    assert "failed (return code -6" in finish(-6, "no bar\n", files=True)["skipped"]
    assert "failed (return code 1" in finish(1, bar, files=True)["skipped"]
    assert "note" not in finish(0, bar, files=True)


def test_request_seconds_read_the_final_progress_bars():
    from benchmarks.backend_speed import request_seconds

    log = ("Tokenizing inputs: 100%|##| 825/825 [00:03<00:00]\n"
           "Running loglikelihood requests: 40%|#| 330/825 [01:02<01:30]\r"
           "Running loglikelihood requests: 100%|##| 825/825 [03:24<00:00,  4.03it/s]\n"
           "Running loglikelihood requests: 100%|##| 825/825 [03:24<00:00,  4.03it/s]\n"
           "Running generate_until requests (x): 100%|##| 60/60 [1:00:18<00:00]\n"
           "Running loglikelihood requests: 100%|##| 20/20 [00:10<00:00]\n"
           "Requesting API: 100%|##| 4/4 [00:07<00:00]\n")
    # the repeated final state counts once; a second stage's bar and the API's bar count
    assert request_seconds(log) == 204 + 3600 + 18 + 10 + 7
    with pytest.raises(ValueError, match="progress bar"):
        request_seconds("Tokenizing inputs: 100%|##| 825/825 [00:03<00:00]\n")


def test_generation_tasks_run_at_their_own_batch_size(tmp_path):
    from benchmarks import commands as run

    args = run.parse_args(["--batch-size", "8", "--gen-batch-size", "48"])
    batch = {suffix: (command := run.task_command(args, "tiny", "/model",
                                                  f"calidist_ppdb{suffix}", suffix,
                                                  "ppdb", tmp_path))[
                 command.index("--batch_size") + 1]
             for suffix in ("", "_assertion", "_verbalized", "_consistency")}
    assert batch == {"": "8", "_assertion": "8", "_verbalized": "48", "_consistency": "48"}
    command = run.task_command(run.parse_args(["--device", "cuda"]), "tiny", "/model",
                               "calidist_ppdb", "", "ppdb", tmp_path)
    assert command[command.index("--device") + 1] == "cuda"


def test_consistency_samples_get_the_reasoned_replys_budget(tmp_path):
    from benchmarks import commands as run

    args = run.parse_args(["--max-gen-toks", "32", "--reasoned-max-gen-toks", "300"])
    budget = {suffix: run.task_command(args, "tiny", "/model", f"calidist_ppdb{suffix}",
                                       suffix, "ppdb", tmp_path)[-2]
              for suffix in ("_verbalized", "_consistency", "_cot")}
    assert budget == {"_verbalized": "max_gen_toks=32", "_consistency": "max_gen_toks=300",
                      "_cot": "max_gen_toks=300"}


def test_generation_tasks_can_run_on_vllm(tmp_path):
    from benchmarks import commands as run

    args = run.parse_args(["--backend", "hf-prefix-cache", "--gen-backend", "vllm"])
    logit = run.task_command(args, "tiny", "/model", "calidist_ppdb", "", "ppdb", tmp_path)
    generation = run.task_command(args, "tiny", "/model", "calidist_ppdb_verbalized",
                                  "_verbalized", "ppdb", tmp_path)
    assert logit[logit.index("--model") + 1] == "hf-prefix-cache"
    assert generation[generation.index("--model") + 1] == "vllm"
    assert generation[generation.index("--model_args") + 1] == (
        "pretrained=/model,dtype=float32," + run.VLLM_MODEL_ARGS)
    assert generation[generation.index("--batch_size") + 1] == "auto"
    assert run.backend_for(run.parse_args(["--backend", "hf"]), "tiny", generates=True) == "hf"


def write_backend_table(path, speedups):
    """A backend_speed.json holding ``speedups``: (model, workload, backend) -> (x, matches)."""
    rows = [{"model": model, "benchmark": "ppdb", "workload": workload, "backend": backend,
             "speedup": speedup, "matches_hf": matches}
            for (model, workload, backend), (speedup, matches) in speedups.items()]
    rows.append({"model": "tiny", "benchmark": "ppdb", "workload": "scoring",
                 "backend": "vllm-server", "skipped": "not run"})
    path.write_text(json.dumps({"rows": rows}))


def test_default_backends_follow_the_backend_table_per_model_and_workload(tmp_path,
                                                                          monkeypatch):
    """Without --backend, each model's scoring and generation run on the fastest backend of
    benchmarks/backend_speed.py's last table that runs here and matched hf's numbers."""
    from benchmarks import commands as run

    table = tmp_path / "backend_speed.json"
    write_backend_table(table, {
        ("tiny", "scoring", "hf"): (1.0, True),
        ("tiny", "scoring", "hf-prefix-cache"): (8.1, True),
        ("tiny", "scoring", "vllm"): (0.8, True),
        ("tiny", "generation", "hf"): (1.0, True),
        ("tiny", "generation", "hf-prefix-cache"): (30.0, False),  # fast, but not hf's replies
        ("tiny", "generation", "vllm"): (4.3, True),
        ("small", "scoring", "vllm"): (4.5, True),
        ("small", "scoring", "hf-prefix-cache"): (3.6, True)})
    monkeypatch.setattr(run, "BACKEND_TABLE", table)
    monkeypatch.setattr(run, "vllm_runs", lambda: True)
    assert run.measured_backend("tiny", "scoring", run.LOCAL_BACKENDS, table) == \
        "hf-prefix-cache"
    assert run.measured_backend("tiny", "generation", run.LOCAL_BACKENDS, table) == "vllm"
    assert run.measured_backend("small", "scoring", run.LOCAL_BACKENDS, table) == "vllm"
    assert run.measured_backend("small", "scoring", ["hf", "hf-prefix-cache"], table) == \
        "hf-prefix-cache"  # vLLM not importable here
    assert run.measured_backend("other", "scoring", run.LOCAL_BACKENDS, table) is None
    assert run.measured_backend("tiny", "scoring", run.LOCAL_BACKENDS,
                                tmp_path / "missing.json") is None
    args = run.parse_args([])
    chosen = {(model, generates): run.backend_for(args, model, generates)
              for model in ("tiny", "small", "other") for generates in (False, True)}
    assert chosen == {("tiny", False): "hf-prefix-cache", ("tiny", True): "vllm",
                      ("small", False): "vllm", ("small", True): "vllm",  # unmeasured: vllm
                      ("other", False): "hf-prefix-cache", ("other", True): "vllm"}
    monkeypatch.setattr(run, "vllm_runs", lambda: False)
    assert {run.backend_for(args, "small", generates) for generates in (False, True)} == \
        {"hf-prefix-cache"}
    # a flag wins over the table
    assert run.backend_for(run.parse_args(["--backend", "hf"]), "tiny", False) == "hf"

    # a reasoned task whose replies and scoring run on different backends: two runs, as
    # calidist eval runs them in one (the replies into <out>/replies, then the scoring)
    monkeypatch.setattr(run, "vllm_runs", lambda: True)
    out = tmp_path / "out" / "tiny" / "calidist_ppdb_cot"
    (replies, at), (scoring, scored_at) = run.task_commands(
        args, "tiny", "/model", "calidist_ppdb_cot", "_cot", "ppdb", out)
    assert (at, scored_at) == (out / "replies", out)
    assert replies[replies.index("--model") + 1] == "vllm"
    assert replies[replies.index("--tasks") + 1] == "calidist_ppdb_verbalized"
    assert replies[replies.index("--output_path") + 1] == str(out / "replies")
    assert scoring[scoring.index("--model") + 1] == "hf-prefix-cache"
    assert scoring[scoring.index("--model_args") + 1] == "pretrained=/model,dtype=float32"
    assert scoring[scoring.index("--batch_size") + 1] == str(args.batch_size)
    assert scoring[scoring.index("--tasks") + 1] == "calidist_ppdb_cot"
    assert json.loads(scoring[len(scoring) - 1 - scoring[::-1].index("--metadata") + 1]) == {
        "replies": str(out / "replies")}
    # --two-stage: the reply run is two-stage, and the scoring reads it as such
    commands = run.task_commands(run.parse_args(["--two-stage"]), "tiny", "/model",
                                 "calidist_ppdb_assertion_cot", "_assertion_cot", "ppdb", out)
    assert len(commands) == 2 and all("--two-stage" in command for command, _ in commands)
    # the same backend for both: one run (calidist eval runs the replies itself)
    (single, _), = run.task_commands(run.parse_args(["--backend", "vllm"]), "tiny", "/model",
                                     "calidist_ppdb_cot", "_cot", "ppdb", out)
    assert single[single.index("--tasks") + 1] == "calidist_ppdb_cot"
    # a task without replies is one run whatever the backends
    assert len(run.task_commands(args, "tiny", "/model", "calidist_ppdb_consistency",
                                 "_consistency", "ppdb", out)) == 1


def test_reasoned_tasks_direct_readout_runs_on_their_documents():
    """The reasoned step's direct readouts: each reasoned style's logit task, with the reasoned
    task's documents and hints per label."""
    from benchmarks import commands as run

    assert run.DIRECT_READOUT == {"_cot": "", "_assertion_cot": "_assertion",
                                  "_probe_cot": "_probe", "_corruption_cot": "_corruption"}
    args = run.parse_args(["--gen-calib", "20", "--gen-eval", "40", "--reasoned-m", "1",
                           "--ppdb-m", "3"])
    direct = run.same_documents_metadata(args, "ppdb", "_assertion_cot")
    reasoned = run.task_metadata(args, "ppdb", "_assertion_cot")
    assert run.requested(direct) == run.requested(reasoned) == {
        "calib_size": 20, "eval_size": 40, "m": 1, "seed": 0, "split_seed": 0}
    assert run.task_metadata(args, "ppdb", "_assertion")["m"] == 3  # the logit step's own


# --------------------------------------------------------------------------- analysis fixture
STAMP = "2026-01-01T10-00-00.000001"
CALIB, EVAL, M = 60, 80, 2


def _records(task: str, seed: int = 0) -> list[dict]:
    """Records as calidist_ppdb / calidist_ppdb_assertion log them, from the task's joining."""
    from calidist_tasks.scoring.joining import (
        PromptPlan,
        join_document,
        outcome_from_loglikelihoods,
    )

    rng = np.random.default_rng(seed)
    hinted = task.endswith("_assertion")
    plans = [PromptPlan()] + ([PromptPlan(label, template) for label in (0, 1)
                               for template in range(M)] if hinted else [])
    records = []
    for index in range(CALIB + EVAL):
        label = int(rng.integers(2))
        margin = rng.normal(0.8 if rng.random() < 0.7 else -0.8, 1.0)
        original = [margin, 0.0] if label == 0 else [0.0, margin]
        outcomes = [outcome_from_loglikelihoods(original, "fixture")]
        for plan in plans[1:]:  # a hint pulls towards its label, more so when the model is unsure
            pull = rng.normal(1.5 - abs(margin), 0.5)
            values = list(original)
            values[plan.hint_label] += pull
            outcomes.append(outcome_from_loglikelihoods(values, "fixture"))
        record = join_document(plans, outcomes, label)
        record.update(index=index, split="calibration" if index < CALIB else "evaluation",
                      requests=2 * len(plans))
        records.append(record)
    return records, plans


def model_folder(out: Path) -> str:
    """The tiny model's folder of the fixture (absolute, outside the repository)."""
    return str(out.parent / "home" / ".cache" / "calidist" / "tiny-model")


def write_finished_task(out: Path, model: str, task: str, text: str = "question",
                        two_stage: bool = False) -> Path:
    """runs/<out>/<model>/<task>/: run.json, results file and samples file of one finished task.
    ``two_stage``: as ``calidist eval --two-stage`` leaves it: stage 2's samples hold only the
    hints naming another label than the prediction, stage 1's (the original prompt) are in
    ``stage1/``."""
    from calidist_tasks.scoring.aggregation import summarize_baselines, summarize_calidist
    from calidist_tasks.settings import RunSettings

    folder = out / model / task
    (folder / "model").mkdir(parents=True)
    records, plans = _records(task)
    if two_stage:  # the same mu, delta, lambda_raw: hints naming the prediction never counted
        for record in records:
            record["hints"] = [h for h in record["hints"] if h[0] != record["prediction"]]
    # absolute paths, as on a real machine: beside the run folder, wherever the test runs
    model_dir, data_dir = model_folder(out), str(out.parent / "shared" / "data")
    for record in records:  # each record names its model's folder, as a real run's do
        record["model"] = model_dir
    metadata = {"data_dir": data_dir, "calib_size": CALIB, "eval_size": EVAL, "seed": 0,
                "split_seed": 0, **({"m": M} if task.endswith("_assertion") else {})}
    settings = RunSettings.from_metadata(metadata)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        summary = (summarize_calidist if task.endswith("_assertion") else summarize_baselines)(
            records, settings, {"task": task, "labels": ["no", "yes"], "model": model_dir})
    command = ["calidist", "eval", "--model", "hf-prefix-cache", "--model_args",
               f"pretrained={model_dir},dtype=float32", "--tasks", task, "--device", "cpu",
               "--batch_size", "8", "--metadata", json.dumps(metadata), "--output_path",
               str(folder), "--log_samples", "--use_cache", str(out / model / "lm_cache")]
    results = {
        "results": {task: {"alias": task, **{f"{k},none": v for k, v in summary.items()}}},
        "group_subtasks": {}, "n-samples": {task: {"original": 500, "effective": len(records)}},
        "configs": {task: {"task": task, "output_type": "loglikelihood",
                           "doc_to_choice": ["no", "yes"],
                           "metadata": {**metadata, "pretrained": model_dir}}},
        "config": {"model": "hf-prefix-cache", "model_args": f"pretrained={model_dir}"},
        "total_evaluation_time_seconds": "120.5"}
    (folder / "model" / f"results_{STAMP}.json").write_text(json.dumps(results))
    stages = [(folder / "model", records, 0 if two_stage else None)]
    if two_stage:
        (folder / "stage1" / "model").mkdir(parents=True)
        (folder / "stage1" / "model" / f"results_{STAMP}.json").write_text(json.dumps(results))
        stages = [(folder / "model", records, 1), (folder / "stage1" / "model", records, 0)]
    for place, logged, only in stages:
        with open(place / f"samples_{task}_{STAMP}.jsonl", "w", encoding="utf-8") as f:
            for record in logged:
                doc = {"sentence1": f"{text} {record['index']}",
                       "calidist_index": record["index"], "calidist_split": record["split"],
                       "calidist_source": f"test.tsv:{record['index'] + 2}"}
                prompts = [f"{text} {record['index']}" + " hint" * i
                           for i in range(1 + len(record.get("hints", [])))]
                prompts = prompts if only is None else prompts[only:] if only else prompts[:1]
                line = {"doc_id": record["index"], "doc": doc, "target": str(record["label"]),
                        "arguments": {f"gen_args_{i * 2 + j}": {"arg_0": p,
                                                                 "arg_1": f" {letter}"}
                                      for i, p in enumerate(prompts)
                                      for j, letter in enumerate("AB")},
                        "resps": [[["-0.5", "False"]] for _ in range(2 * len(prompts))],
                        "filter": "none", "metrics": ["acc", "ece"], "acc": record,
                        "ece": record}
                f.write(json.dumps(line, ensure_ascii=False) + "\n")  # as lm-eval writes them
    info = {"command": shlex.join(command), "returncode": 0, "wall_s": 130.0,
            "benchmark_command": f"python benchmarks/run.py --out {out} "
                                 f"--markdown {out.parent / 'BENCHMARKS.md'} --ppdb-calib 60",
            "finished": 1.0e9 + len(task)}
    (folder / "run.json").write_text(json.dumps(info))
    return folder


@pytest.fixture(autouse=True, scope="module")
def _machine_without_torch():
    """Records and the full analysis name the machine, its GPU through torch: a torch import
    (seconds) that no test here reads."""
    from benchmarks import records, run

    with pytest.MonkeyPatch.context() as patch:
        for module in (records, run):
            patch.setattr(module, "machine", lambda: "test machine")
        yield


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory):
    """Two finished tasks of one model, exported to committed records (a consistency estimate
    cannot be built: the data folder does not exist here, which is reported)."""
    from benchmarks import records

    root = tmp_path_factory.mktemp("bench")
    write_finished_task(root / "runs", "tiny", "calidist_ppdb", "Is it\u2028the same\u0085?")
    write_finished_task(root / "runs", "tiny", "calidist_ppdb_assertion", "Is it\u2028the same?")
    problems: list[str] = []
    written = records.export_finished(root / "runs", root / "results", problems)
    return root, written, problems


def _state(root: Path, **extra):
    from benchmarks.commands import parse_args
    from benchmarks.markdown import State

    args = parse_args(["--steps", "analysis", "--bootstrap", "30", "--models", "tiny",
                       "--benchmarks", "ppdb", "--out", str(root / "runs"), "--results",
                       str(root / "results"), "--markdown", str(root / "BENCHMARKS.md"),
                       *extra.pop("argv", [])])
    return State(args=args, machine="test machine", **extra)


def test_export_keeps_what_the_analysis_needs_and_no_absolute_path(exported):
    from benchmarks import records
    from benchmarks.commands import ABSOLUTE_PATH

    root, written, problems = exported
    assert sorted(p.name for p in written) == ["calidist_ppdb.jsonl.gz",
                                               "calidist_ppdb_assertion.jsonl.gz"]
    assert any("consistency's prompt tokens not estimated" in p for p in problems), problems
    text = gzip.decompress(written[1].read_bytes()).decode()
    assert ABSOLUTE_PATH.findall(text) == [] and model_folder(root / "runs") not in text
    assert "Is it" not in text  # no document or prompt text is kept
    header = json.loads(text.split("\n")[0])
    assert header["requested"] == {"calib_size": CALIB, "eval_size": EVAL, "m": M, "seed": 0,
                                   "split_seed": 0}
    assert "pretrained=$(calidist model tiny),dtype=float32" in header["command"]
    assert '"data_dir": "../' in header["command"]  # relative to the repository root
    assert header["lm_eval"]["config"]["metadata"]["pretrained"] == "$(calidist model tiny)"
    loaded = records.load(root / "results", problems)
    assertion = next(s for s in loaded if s.task == "calidist_ppdb_assertion")
    assert len(assertion.run.records) == CALIB + EVAL  # U+2028 / U+0085 in the text kept
    assert assertion.run.sources[0] == "test.tsv:2"
    # per prompt sent: its tokens (characters / 4: no tokenizer here) and its two letters
    doc = assertion.costs[0]
    assert [n for _, n in doc["prompts"]] == [2] * (1 + 2 * M)
    # the same sizes are not run again; other sizes are
    metadata = {"data_dir": "elsewhere", "calib_size": CALIB, "eval_size": EVAL, "seed": 0,
                "split_seed": 0, "m": M}
    assert records.matches(root / "results", "tiny", "calidist_ppdb_assertion", metadata)
    assert not records.matches(root / "results", "tiny", "calidist_ppdb_assertion",
                               {**metadata, "eval_size": 1000})
    # a second export of the same finished runs writes nothing (same run, same bytes)
    assert records.export_finished(root / "runs", root / "results", []) == []


def test_instability_reproduces_the_joining_and_subsamples_m():
    from calidist_tasks.report.cells import first_m, instability, with_instability
    from calidist_tasks.scoring.records import hints_of

    records, _ = _records("calidist_ppdb_assertion", seed=3)
    for record in records:
        assert instability(record) == pytest.approx(
            (record["mu"], record["delta"], record["lambda_raw"]), rel=1e-12)
    record = records[0]
    hints = hints_of(record)
    assert [h.label for h in hints] == [0, 0, 1, 1] and first_m(hints, 1) == [0, 2]
    other = [h for h in hints if h.label != record["prediction"]]
    mu, delta, _ = instability(record, m=1, delta_mode="worst_case")
    assert mu == pytest.approx(other[0].confidence * (other[0].prediction
                                                      != record["prediction"]))
    assert delta == pytest.approx(max(0.0, record["confidence"] - other[0].confidence))
    assert with_instability([record], m=1)[0]["mu"] == pytest.approx(mu)
    assert "mu" in record and record is not with_instability([record])[0]


def test_analysis_renders_from_committed_records_alone(exported, tmp_path):
    import shutil

    from benchmarks import records
    from benchmarks.commands import ABSOLUTE_PATH
    from benchmarks.markdown import render

    root, _, _ = exported
    alone = tmp_path / "copy"  # the records without the lm-eval folders they came from
    shutil.copytree(root / "results", alone / "results")
    problems: list[str] = []
    state = _state(alone, stored=records.load(alone / "results", problems), problems=problems)
    text = render(state)
    assert ABSOLUTE_PATH.findall(text) == [], ABSOLUTE_PATH.findall(text)
    assert "$(calidist model tiny)" in text and "../" in text
    # every method of the two tasks, with intervals, sizes flagged below 300 documents
    for method in ("Vanilla", "Temperature scaling", "Platt", "Isotonic", "Vector scaling",
                   "CaliDist (As.)"):
        assert f"| {method} | `calidist_ppdb" in text, method
    assert "| 80 ⚠ |" in text
    # both tasks' runs are named with their model arguments
    assert text.count("dtype=float32") >= 2
    # verdicts from paired intervals, variants with a recommendation line, every ablation
    assert "vs Vanilla: ECE " in text and "vs TS: ECE " in text
    assert "**Recommendation.**" in text
    for setting in ("as run: m=2, delta_mode=mean, fit=grid", "m=1 (first 1 hint(s)",
                    "delta_mode=worst_case", "fit=default_sigmoid (alpha=0, beta=1: no fit)",
                    "calibration size 50 (20 random subsets"):
        assert setting in text, setting
    assert "mu, delta, lambda_raw recomputed from the hints equal the logged ones (140)" in text
    # cost: the m=1 subset of the logged m=2 prompts
    assert "| tiny | PPDB | assertion m=1 (subset of the same prompts) | 140 | 6.0 | 3.0 |" in text
    # two-stage: 1 + (c - 1)·m prompts per document, each scored over the c = 2 letters
    assert "| tiny | PPDB | assertion m=2, two-stage | 140 | 6.0 | 3.0 |" in text
    assert "| tiny | PPDB | assertion m=1 (subset), two-stage | 140 | 4.0 | 2.0 |" in text


def test_the_size_flag_asks_300_documents_or_aquas_whole_test_split():
    from benchmarks.analysis import size_cell

    assert (size_cell(299, "ppdb"), size_cell(300, "ppdb")) == ("299 ⚠", "300")
    assert (size_cell(253, "aqua"), size_cell(254, "aqua")) == ("253 ⚠", "254")


def test_a_two_stage_run_is_exported_and_costed_as_run(tmp_path):
    """`benchmarks/run.py --two-stage`: the records carry stage 1's original prompt, and the cost
    table shows 1 + (c - 1)·m prompts per document as run, with no single-stage rows."""
    from benchmarks import analysis, commands, records

    args = commands.parse_args(["--two-stage"])
    for suffix, sent in (("_assertion", True), ("_probe", True), ("_corruption", False),
                         ("", False), ("_assertion_cot", True), ("_probe_cot", True),
                         ("_corruption_cot", True), ("_cot", False), ("_consistency", False)):
        command = commands.task_command(args, "tiny", "/model", f"calidist_ppdb{suffix}",
                                        suffix, "ppdb", tmp_path)
        assert ("--two-stage" in command) is sent, suffix
    write_finished_task(tmp_path / "runs", "tiny", "calidist_ppdb_assertion", two_stage=True)
    problems: list[str] = []
    (path,) = records.export_finished(tmp_path / "runs", tmp_path / "results", problems)
    (stored,) = records.load(tmp_path / "results", problems)
    assert stored.two_stage and records.read_header(path)["two_stage"] is True
    # per document: the original prompt (stage 1) and the m = 2 hints naming the other label
    assert all([times for _, times in doc["prompts"]] == [2, 2, 2] for doc in stored.costs)
    costs = analysis.cost_rows(analysis.Analysis([stored], n_boot=10))
    names = sorted(name for (_, _, name) in costs)
    assert names == ["Vanilla (the assertion run's original prompts)",
                     "assertion m=1 (subset), two-stage", "assertion m=2, two-stage (as run)"]
    as_run = costs[("tiny", "ppdb", "assertion m=2, two-stage (as run)")]
    subset = costs[("tiny", "ppdb", "assertion m=1 (subset), two-stage")]
    assert (as_run["passes"], as_run["requests"], subset["passes"]) == (3.0, 6.0, 2.0)
    assert not as_run["estimated"] and subset["estimated"]


def test_verdicts_follow_the_paired_interval():
    from calidist_tasks.report.tables import paired_difference, verdict

    assert verdict({"low": -0.2, "high": -0.1}) == "better"
    assert verdict({"low": 0.1, "high": 0.2}) == "worse"
    assert verdict({"low": -0.1, "high": 0.2}) == "not distinguishable"
    assert verdict({"low": 0.1, "high": 0.2}, higher_is_better=True) == "better"
    rng = np.random.default_rng(0)
    correct = (rng.random(400) < 0.7).astype(float)
    good = np.clip(0.7 + rng.normal(0, 0.02, 400), 0.5, 1)  # calibrated: 70% are correct
    bad = np.full(400, 0.99)
    from calidist_tasks.scoring.aggregation import SCORES

    test = paired_difference(SCORES["ece"], good, correct, bad, correct, 200)
    assert verdict(test) == "better" and test["n"] == 400
    # two methods with their own correctness (different predictions): resampled jointly
    flipped = correct.copy()
    flipped[:20] = 1 - flipped[:20]
    mixed = paired_difference(SCORES["ece"], good, correct, bad, flipped, 200)
    assert mixed["difference"] == pytest.approx(SCORES["ece"](good, correct)
                                                - SCORES["ece"](bad, flipped))
    assert verdict(mixed) == "better"


def test_portable_commands(tmp_path):
    from benchmarks.commands import ABSOLUTE_PATH, portable

    root, model = tmp_path / "repo", str(tmp_path / "home" / ".cache" / "calidist" / "smollm2")
    command = (f"calidist eval --model_args pretrained={model},"
               f"dtype=float32 --metadata '{{\"data_dir\": \"{tmp_path / 'shared' / 'data'}\"}}' "
               f"--output_path {root / 'runs/bench/smollm2/calidist_ppdb'}")
    shown = portable(command, {"smollm2": model}, root)
    assert shown == ("calidist eval --model_args pretrained=$(calidist model smollm2),"
                     "dtype=float32 --metadata '{\"data_dir\": \"../shared/data\"}' "
                     "--output_path runs/bench/smollm2/calidist_ppdb")
    assert not ABSOLUTE_PATH.search(shown)
    # prose with slashes is left alone
    assert portable("tokens/doc, 1/3, (prompt+gen)/doc, https://example.org/a/b") == \
        "tokens/doc, 1/3, (prompt+gen)/doc, https://example.org/a/b"


def test_benchmark_modules_import_in_one_direction():
    import ast

    folder = Path(__file__).resolve().parents[2] / "benchmarks"
    order = ["commands", "records", "analysis", "backend_speed", "install_time", "overhead",
             "page", "markdown", "run"]
    for position, name in enumerate(order):
        tree = ast.parse((folder / f"{name}.py").read_text())
        imported = {alias.name.split(".")[-1] if node.module == "benchmarks" else
                    node.module.split(".")[-1]
                    for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                    and node.module and node.module.startswith("benchmarks")
                    for alias in node.names}
        assert imported <= set(order[:position]), (name, imported - set(order[:position]))


def test_analysis_step_runs_no_model_and_writes_the_markdown(exported, tmp_path):
    from benchmarks import run
    from benchmarks.commands import ABSOLUTE_PATH

    root, _, _ = exported
    markdown = tmp_path / "BENCHMARKS.md"
    run.main(["--steps", "analysis", "--out", str(root / "runs"), "--results",
              str(root / "results"), "--markdown", str(markdown), "--bootstrap", "20",
              "--models", "tiny", "--benchmarks", "ppdb"])
    text = markdown.read_text(encoding="utf-8")
    assert "### tiny / PPDB" in text and not ABSOLUTE_PATH.findall(text)
    assert "python benchmarks/run.py --steps analysis" in text


def test_a_variant_is_recommended_only_for_a_clear_gain():
    """Lower ECE with the paired interval below 0 by at least half a point, Brier not worse: a
    gain of 0.004 with a tight interval (rounds to -0.00 in the table) is no recommendation."""
    from benchmarks.analysis import MIN_ECE_GAIN, recommended

    def test(difference: float, low: float, high: float) -> dict[str, float]:
        return {"difference": difference, "low": low, "high": high}

    flat = test(0.0, -0.01, 0.01)
    assert MIN_ECE_GAIN == 0.005
    assert recommended({"ece": test(-0.02, -0.03, -0.01), "brier": flat})
    assert not recommended({"ece": test(-0.004, -0.0041, -0.0039), "brier": flat})
    assert not recommended({"ece": test(-0.02, -0.05, 0.01), "brier": flat})  # interval spans 0
    assert not recommended({"ece": test(-0.02, -0.03, -0.01),
                            "brier": test(0.01, 0.005, 0.02)})  # Brier worse
    assert not recommended({"ece": None, "brier": flat})


def test_a_method_with_mostly_unreadable_replies_is_flagged_in_the_leaderboard(exported, tmp_path):
    """lm-eval reports NaN scores for a reading whose replies were mostly unreadable; the
    leaderboard shows the rebuilt numbers only flagged, never as if they were lm-eval's."""
    from benchmarks import analysis, records
    from benchmarks.markdown import render
    from calidist_tasks.report.tables import UNREADABLE
    from calidist_tasks.scoring.aggregation import UNREADABLE_LIMIT

    root, _, _ = exported
    problems: list[str] = []
    stored = records.load(root / "results", problems)
    assertion = next(s for s in stored if s.task == "calidist_ppdb_assertion")
    assertion.run.metrics["parse_fail_rate"] = UNREADABLE_LIMIT + 0.1
    text = render(_state(root, stored=stored, problems=problems))
    assert f"| CaliDist (As.) {UNREADABLE} | `calidist_ppdb_assertion` |" in text
    assert f"| Vanilla {UNREADABLE} |" not in text and "| Vanilla | `calidist_ppdb` |" in text
    rows = analysis.Analysis(stored, n_boot=10).rows("tiny", "ppdb")
    assert [row.label for row in rows if row.unreadable] == ["CaliDist (As.)"]


def test_the_runner_reads_the_backend_table_that_backend_speed_writes(tmp_path):
    """backend_speed's rows, saved as JSON, are what commands.measured_backend chooses from:
    the fastest backend whose answers matched hf's."""
    from benchmarks import commands
    from benchmarks.backend_speed import workload_rows

    hf = {0: {"prompts": ["a b c x"], "answers": [-0.5, -1.0], "predictions": [0]}}
    measured = {("hf", "scoring"): {"seconds": 60.0, "wall_s": 70.0, "docs": hf},
                ("vllm", "scoring"): {"seconds": 10.0, "wall_s": 20.0, "docs": {
                    0: {**hf[0], "predictions": [1]}}},  # faster, but another prediction
                ("hf-prefix-cache", "scoring"): {"seconds": 20.0, "wall_s": 25.0, "docs": hf},
                ("vllm-server", "scoring"): {"skipped": "not run"}}
    rows = workload_rows("tiny", "ppdb", "scoring", measured, str.split)
    by_backend = {row["backend"]: row for row in rows}
    assert by_backend["hf-prefix-cache"]["speedup"] == 3.0
    assert by_backend["vllm"]["matches_hf"] is False and by_backend["hf"]["matches_hf"] is True
    table = tmp_path / "backend_speed.json"
    table.write_text(json.dumps({"rows": rows}))
    assert commands.measured_backend("tiny", "scoring", commands.LOCAL_BACKENDS, table) == \
        "hf-prefix-cache"


def test_the_page_is_the_reports_interval_tables_table4_and_the_backend_table(exported,
                                                                             tmp_path):
    """BENCHMARKS.md: per model and benchmark `calidist report`'s interval rows, the backends
    from backend_speed.json, the commands from the records' headers, no target prose."""
    import shutil

    from benchmarks import page, records
    from benchmarks.commands import ABSOLUTE_PATH
    from calidist_tasks.report.cells import leaderboard_cells
    from calidist_tasks.report.identity import group_names
    from calidist_tasks.report.tables import escape, intervals

    root, _, _ = exported
    shutil.copytree(root / "results", tmp_path / "results")
    (tmp_path / "results" / "backend_speed.json").write_text(json.dumps({
        "command": "python benchmarks/backend_speed.py --models tiny", "machine": "test machine",
        "load": "idle", "rows": [{"model": "tiny", "benchmark": "ppdb", "workload": "scoring",
                                  "backend": "hf", "documents": 10, "seconds": 40.0,
                                  "tokens": 8000, "limit_tokens": 2000, "hf_seconds": 40.0,
                                  "agreement": "(reference)"}]}))
    problems: list[str] = []
    stored = records.load(tmp_path / "results", problems)
    args = _state(tmp_path).args
    text = page.render(stored, args, problems)
    runs = [s.run for s in records.load(tmp_path / "results", [])]
    wide, _ = intervals(leaderboard_cells(runs, [], []), group_names(runs), args.bootstrap)
    block = text.split("### tiny / PPDB")[1].split("\n## ")[0]
    for row in wide.rows:  # every row of the report's table, as the report prints it
        assert row[:2] == ["tiny", "PPDB"]
        line = next(line for line in block.splitlines()
                    if line.startswith(f"| {escape(row[2])} | {row[3]} | "))
        shown = " | ".join(wide.shown(v, escape) for v in row[4:]) + " |"
        assert shown in line.replace("**", ""), row  # bold: a significant difference
    assert len(wide.rows) >= 6 and "CaliDist (As.)" in block
    assert "| tiny | PPDB | scoring | hf | 10 | 40 | 0.250 | 200 | 1.00x | 4.00x | 0.25 |" in text
    header = stored[0].header["benchmark_command"]
    assert header.split(" --markdown")[0] in text and "--markdown" not in text
    assert "## The paper's Table 4" in text and "Target" not in text
    assert "python benchmarks/run.py --steps analysis" in text
    assert len(text.splitlines()) < 250 and not ABSOLUTE_PATH.findall(text)
    # the caveat: the direct readout's accuracy against the majority label, from the records
    own = next(s for s in stored if s.run.task == "calidist_ppdb").run.records
    evaluation = [r for r in own if r["split"] == "evaluation"]
    labels = [r["label"] for r in evaluation]
    share = max(map(labels.count, set(labels))) / len(labels)
    accuracy = sum(r["correct"] for r in evaluation) / len(evaluation)
    assert f"tiny / PPDB {100 * accuracy:.1f}% against {100 * share:.1f}%" in text
    verdict = ("only tiny / PPDB beats" if accuracy > share
               else "no model beats the majority label")
    assert verdict in text.split("## Caveats")[1].split("\n")[2]
    # no reasoned run: Table 4 says why where the direct readout does not beat the majority
    why = ("not measured yet" if accuracy > share else
           f"not run: its direct readout is right on {100 * accuracy:.1f}% of calidist_ppdb's "
           f"{len(evaluation)} evaluation documents, not above the majority label's "
           f"{100 * share:.1f}%")
    assert f"**tiny / PPDB**: {why}" in text.split("## The paper's Table 4")[1]


def test_the_full_analysis_is_written_on_demand_beside_the_page(exported, tmp_path):
    from benchmarks import run

    root, _, _ = exported
    markdown, full = tmp_path / "BENCHMARKS.md", tmp_path / "runs" / "bench-analysis"
    run.main(["--steps", "analysis", "--out", str(root / "runs"), "--results",
              str(root / "results"), "--markdown", str(markdown), "--bootstrap", "20",
              "--models", "tiny", "--benchmarks", "ppdb", "--full", str(full)])
    analysis = (full / "ANALYSIS.md").read_text(encoding="utf-8")
    short = markdown.read_text(encoding="utf-8")
    for section in ("## Calibrator variants", "## Ablations", "## Cost per document"):
        assert section in analysis and section not in short
    assert "## The paper's Table 4" in analysis and "## The paper's Table 4" in short
    assert "Targets" not in analysis


def test_the_committed_page_is_short_and_names_its_command():
    from benchmarks.commands import ROOT
    from benchmarks.page import COMMAND

    text = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    # short: three models' blocks (the third's direct readout only), Table 4, the backends
    assert len(text.splitlines()) < 300
    assert COMMAND in text.split("\n## ")[0] and "Target" not in text
    for section in ("## Caveats", "## Models and sizes", "## Calibration",
                    "## The paper's Table 4", "## Backend speed"):
        assert section in text, section


def test_the_papers_numbers_are_data():
    from benchmarks.analysis import TABLE4, paper_numbers

    numbers = paper_numbers()
    assert {m.label for m in TABLE4} == set(numbers["table4"]["rows"])
    assert numbers["table4"]["rows"]["CaliDist As. (m=1)"] == {
        "passes": "3", "output_tokens": "3 × 98", "input_tokens": "3 × 1402", "ece": 8.02}
    assert numbers["table1"]["models"]["Qwen-3 8B"]["CaliDist (Sa.)"]["ppdb"] == {
        "ece": 2.39, "brier": 21.38}


def test_the_runner_finds_the_reasoned_tasks_it_runs():
    """The runner skips a task `calidist tasks --full` does not list: every task of its steps
    must be listed (a change of the listing's format once made it skip every task)."""
    from benchmarks.commands import GENERATE, LOGIT, REASONED, available_tasks

    listed = available_tasks()
    wanted = {f"calidist_{b}{s}" for b in ("ppdb", "aqua") for s in (*LOGIT, *GENERATE, *REASONED)}
    assert wanted <= listed, sorted(wanted - listed)


def test_table4_keeps_the_one_line_exemplars_numbers_beside_a_rerun_row():
    """issue #34 item 7: a rerun row shows the one-line exemplars' output tokens and ECE beside
    it; a row whose run was not rerun says so and repeats no 'before' numbers."""
    from benchmarks import analysis as an
    from benchmarks.page import ONE_LINE_EXEMPLARS, table4_table

    paper = an.paper_numbers()["table4"]["rows"]
    cost = {"passes": 1.0, "input_tokens": 700.0, "output_tokens": 160.0,
            "scoring_passes": 1.0, "scoring_tokens": 800.0}
    rows = [an.Table4Row(an.TABLE4[0], "calidist_ppdb_cot", 60, cost, 0.122),
            an.Table4Row(an.TABLE4[2], "calidist_ppdb_assertion_cot", 60, cost, 0.2)]
    before = {"Vanilla (reasoned)": {"output_tokens": 108.7, "ece": 46.64},
              "CaliDist As. (m=1)": {"output_tokens": 437.7, "ece": None}}
    table = table4_table(rows, paper, before, frozenset({"calidist_ppdb_assertion_cot"}))
    rerun, stale = table.rows
    assert rerun[1] == "calidist_ppdb_cot" and rerun[-2:] == ["109", "46.64"]
    assert stale[1].endswith("(one-line exemplars: not rerun yet)") and stale[-2:] == ["-", "-"]
    saved = json.loads(ONE_LINE_EXEMPLARS.read_text(encoding="utf-8"))
    assert saved["rows"]["smollm2/ppdb"]["Vanilla (reasoned)"]["ece"] == 46.64


def test_the_wrapped_task_row_shows_each_methods_interval_and_the_plain_runs_rebuild(exported,
                                                                                    tmp_path):
    """BENCHMARKS.md's wrapped-task row: the report's ECE interval per method, and the largest
    difference between `calidist report` on the plain run and the wrapped task's own numbers."""
    import shutil

    from benchmarks import analysis as an
    from benchmarks import page, records
    from calidist_tasks.report.identity import group_names
    from calidist_tasks.report.tables import intervals

    root, _, _ = exported
    shutil.copytree(root / "results", tmp_path / page.WRAPPED_RECORDS)
    problems: list[str] = []
    (row,) = page_rows = [line for line in page.wrapped_section(tmp_path, 30, problems)[-1]
                          .splitlines() if line.startswith("| tiny |")]
    assert page_rows and row.endswith("| not run |")
    stored = records.load(tmp_path / page.WRAPPED_RECORDS, [])
    runs = [s.run for s in stored]
    wide, _ = intervals(an.Analysis(stored, n_boot=0).cells, group_names(runs), 30)
    ece = {r[2]: r[4] for r in wide.rows}
    assert f"| {ece['Vanilla']} | {ece['Temperature scaling']} | {ece['CaliDist (As.)']} | – |" \
        in row  # no probe task among these records
    (tmp_path / page.WRAPPED_SUMMARY).write_text(json.dumps({"models": {"tiny": {
        "plain_report_max_abs_difference": {"Vanilla": 2e-5, "Platt": 4e-5}}}}))
    row = page.wrapped_section(tmp_path, 30, problems)[-1].splitlines()[2]
    assert row.endswith("| 4e-05 over 2 methods |")


def test_the_plain_runs_report_is_compared_with_the_wrapped_tasks_own_numbers():
    from benchmarks.wrapped import rebuilt_differences

    metrics = {"acc": 0.25, "acc_vector": 0.2, **{f"{score}_{suffix}": 0.1 * i for i, score in
                                                  enumerate(("ece", "brier", "auroc"), 1)
                                                  for suffix in ("vanilla", "vector")}}
    row = {"aqua_mc_acc": "25.0", "aqua_mc_ece": "10.0", "aqua_mc_brier": "20.0",
           "aqua_mc_auroc": "30.0"}
    found = rebuilt_differences(metrics, {"Vanilla": row, "Vector scaling": row})
    assert found["Vanilla"] == pytest.approx(0, abs=1e-9)
    assert found["Vector scaling"] == pytest.approx(5.0)  # its own accuracy: 20, not 25
