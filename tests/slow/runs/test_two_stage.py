"""Slow half of ``tests/runs/test_two_stage.py`` (builds the tiny model or runs lm-eval).

What the module tests: the fast half's docstring."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import calidist_tasks
from calidist_tasks.report import save_like_lm_eval
from calidist_tasks.report.loading import SAMPLES_NAME
from calidist_tasks.runs import two_stage
from calidist_tasks.scoring.records import hints_of, is_record

DATA = Path(__file__).parents[3] / "calidist_tasks" / "sample_data"


METADATA = {"data_dir": str(DATA), "calib_size": 3, "eval_size": 3}


N_DOCS = 6


LABELS = {"calidist_ppdb_assertion": 2, "calidist_aqua_assertion": 5,
          "calidist_ppdb_probe_verbalized": 2}


M = {"calidist_ppdb_assertion": 2, "calidist_aqua_assertion": 2,
     "calidist_ppdb_probe_verbalized": 1}


LOGIT = ["calidist_ppdb_assertion", "calidist_aqua_assertion"]


TASKS = [*LOGIT, "calidist_ppdb_probe_verbalized", "calidist_ppdb"]


COMPARED = ("prediction", "confidence", "correct", "mu", "delta", "lambda_raw", "flipped",
            "letter_logprobs", "label", "index", "split")


# batch size 1: no padding, so a prompt's log-likelihoods do not depend on the other prompts of
# its batch and both modes give the very same numbers; no exemplars, to keep the prompts short
RUN = {"device": "cpu", "batch_size": 1, "bootstrap_iters": 0, "num_fewshot": 0,
       "gen_kwargs": "max_gen_toks=4"}


def records(run: dict, task: str) -> dict[int, dict]:
    return {r["index"]: r for r in (next(v for v in s.values() if is_record(v))
                                    for s in run["samples"][task])}


def distinct_prompts(sample: dict) -> int:
    return len({argument[0] for argument in sample["arguments"]})


def assert_same_records_and_metrics(two: dict, one: dict, tasks: list[str],
                                    rel: float = 1e-6) -> None:
    """Same records and metrics (``rel``: float tolerance; an API server's own batches give
    log-likelihoods within 1e-4 of hf's, tests/test_api_backends.py)."""
    for task in tasks:
        got, want = records(two, task), records(one, task)
        assert got.keys() == want.keys() and len(got) == N_DOCS
        for index, record in want.items():
            for key in COMPARED:
                if isinstance(record.get(key), (float, list, tuple)):  # tuple: in memory
                    assert got[index][key] == pytest.approx(record[key], rel=rel, abs=rel), (
                        task, index, key)
                elif key in record:
                    assert got[index][key] == record[key], (task, index, key)
            prediction = record["prediction"]
            kept = [h for h in hints_of(record) if h.label != prediction]
            hints = hints_of(got[index])
            assert [h[:3] for h in hints] == [h[:3] for h in kept]
            assert [h.confidence is None for h in hints] == [h.confidence is None for h in kept]
            assert [h.confidence for h in hints if h.confidence is not None] == pytest.approx(
                [h.confidence for h in kept if h.confidence is not None], rel=rel, abs=rel)
        for name, value in one["results"][task].items():
            if name.startswith("requests_per_doc") or not isinstance(value, float):
                continue
            other = two["results"][task][name]
            assert (math.isnan(value) and math.isnan(other)) or other == pytest.approx(
                value, rel=10 * rel, abs=rel), (task, name)


@pytest.fixture(scope="module")
def runs(tiny_model_dir):
    args = f"pretrained={tiny_model_dir},dtype=float32"
    metadata = {**METADATA, "verbalized_prompt": "short"}
    one = calidist_tasks.evaluate("hf", TASKS, metadata, model_args=args, **RUN)
    two_stage.TALLIES.clear()
    two = calidist_tasks.evaluate("hf", TASKS, metadata, model_args=args, two_stage=True, **RUN)
    return one, two, dict(two_stage.TALLIES)


def test_two_stage_gives_the_single_stage_records_and_metrics(runs):
    one, two, _ = runs
    assert_same_records_and_metrics(two, one, TASKS)


def test_two_stage_sends_one_plus_c_minus_one_times_m_prompts(runs):
    one, two, tallies = runs
    for task in LOGIT:
        c, m = LABELS[task], M[task]
        first, second = tallies[(task, "original")], tallies[(task, "hints")]
        assert first.documents == second.documents == N_DOCS
        assert (first.sent, second.sent) == (N_DOCS, N_DOCS * (c - 1) * m), task
        assert second.single_stage == N_DOCS * (1 + c * m)
        for sample in two["samples"][task]:  # stage 2 sent the hints naming another label only
            assert distinct_prompts(sample) == (c - 1) * m
            assert len(sample["arguments"]) == (c - 1) * m * c
        assert {r["requests"] for r in records(two, task).values()} == {(1 + (c - 1) * m) * c}
        assert two["results"][task]["requests_per_doc,none"] == (1 + (c - 1) * m) * c
        assert one["results"][task]["requests_per_doc,none"] == (1 + c * m) * c
    # verbalized: the hints that count in a single-stage record are exactly those sent (all of
    # them where the original reply was unreadable: no label is its prediction)
    task = "calidist_ppdb_probe_verbalized"
    counted = {i: sum(h.label != r["prediction"] for h in hints_of(r))
               for i, r in records(one, task).items()}
    assert tallies[(task, "hints")].sent == sum(counted.values())
    for index, record in records(two, task).items():
        assert record["requests"] == record["generations"] == 1 + counted[index]
    # a task without hints runs whole in stage 2
    assert ("calidist_ppdb", "original") not in tallies
    assert records(two, "calidist_ppdb") == records(one, "calidist_ppdb")


def test_the_api_backend_gets_exactly_the_papers_prompts(runs, tiny_model_dir, tmp_path):
    from openai_server import ModelServer

    one, _, _ = runs
    server = ModelServer(tiny_model_dir, idle_timeout=300)
    prompts: list[str] = []
    completions = server.completions

    def counted(body):
        batch = body["prompt"]
        prompts.extend([batch] if isinstance(batch, str) or isinstance(batch[0], int) else batch)
        return completions(body)

    server.completions = counted
    server.start()
    try:
        args = (f"model=tiny,base_url={server.base_url}/completions,tokenizer={tiny_model_dir},"
                "tokenizer_backend=huggingface")
        two = calidist_tasks.evaluate("local-completions", LOGIT, METADATA, model_args=args,
                                      two_stage=True, stage1_dir=str(tmp_path), **RUN)
    finally:
        server.stop()
    assert_same_records_and_metrics(two, one, LOGIT, rel=1e-4)
    # each prompt is scored over its c letters: one API prompt per (prompt, letter)
    expected = sum(N_DOCS * (1 + (LABELS[t] - 1) * M[t]) * LABELS[t] for t in LOGIT)
    assert len(prompts) == expected
    # stage 1 saved as lm-eval's CLI saves a run: a results file and each task's samples
    kept = sorted(p.name for p in tmp_path.rglob("samples_*.jsonl"))
    assert [SAMPLES_NAME.match(name)["task"] for name in kept] == sorted(LOGIT)
    (results,) = tmp_path.rglob("results_*.json")
    assert sorted(json.loads(results.read_text(encoding="utf-8"))["results"]) == sorted(LOGIT)


def test_a_wrong_stage1_run_is_refused_before_model_time(runs, tmp_path):
    from conftest import load_task

    one, _, _ = runs
    folder = tmp_path / "stage1"
    task = "calidist_ppdb_assertion"
    save_like_lm_eval({**one, "samples": {task: one["samples"][task]}}, folder)
    (other,) = folder.rglob("samples_*.jsonl")
    metadata = {**METADATA, "stage": "hints"}
    with pytest.raises(ValueError, match="original_run"):
        load_task("calidist_ppdb_assertion", {**METADATA, "stage": "hints"})
    # another task's samples file
    with pytest.raises(ValueError, match="samples of calidist_ppdb_assertion"):
        load_task("calidist_aqua_assertion", {**metadata, "original_run": str(other)})
    # a folder without this task's samples
    with pytest.raises(FileNotFoundError, match="no samples_calidist_aqua_assertion"):
        load_task("calidist_aqua_assertion", {**metadata, "original_run": str(folder)})
    # other documents (another split_seed): named, with the fix
    with pytest.raises(ValueError, match="not this run's document"):
        load_task("calidist_ppdb_assertion", {**metadata, "original_run": str(folder),
                                              "split_seed": 7})
    # a document whose stage-1 answer was refused (a failed record, from a recovered folder)
    lines = other.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    first["calidist_record"] = {**{k: first["calidist_record"][k]
                                   for k in ("index", "split", "requests")},
                                "error": "calidist_ppdb_assertion document 0: NaN"}
    other.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 1: document 0 \(.*\) has no usable answer .*"
                                         r"\(calidist_ppdb_assertion document 0: NaN\)"):
        load_task("calidist_ppdb_assertion", {**metadata, "original_run": str(other)})
    # a document stage 1 did not log: refused while requests are built (no model call)
    other.write_text("\n".join(lines[:-1]) + "\n", encoding="utf-8")
    task = load_task("calidist_ppdb_assertion", {**metadata, "original_run": str(other)})
    missing = next(d for d in task.eval_docs if d["calidist_index"] == N_DOCS - 1)
    with pytest.raises(ValueError, match="has no sample in original_run"):
        task.construct_requests(missing, "prompt", metadata=("t", 0, 1))


def test_stage2_failure_keeps_stage1_and_resumes_from_the_cache(tiny_model_dir, tmp_path,
                                                               monkeypatch, capsys):
    from lm_eval.models.huggingface import HFLM

    from calidist_tasks.cli import main

    calls: list[int] = []
    original = HFLM.loglikelihood

    def failing_second_call(self, requests, *args, **kwargs):
        calls.append(len(requests))
        if len(calls) == 2:
            raise RuntimeError("injected stage-2 failure")
        return original(self, requests, *args, **kwargs)

    monkeypatch.setattr(HFLM, "loglikelihood", failing_second_call)
    out, cache = tmp_path / "out", tmp_path / "cache" / "lm"
    argv = ["eval", "--two-stage", "--model", "hf", "--model_args",
            f"pretrained={tiny_model_dir},dtype=float32", "--device", "cpu", "--batch_size", "8",
            "--tasks", "calidist_ppdb_assertion", "--output_path", str(out), "--num_fewshot", "0",
            "--use_cache", str(cache), "--metadata",
            json.dumps({**METADATA, "calib_size": 2, "eval_size": 2})]
    with pytest.raises(SystemExit) as stopped:  # calidist eval: one line, exit status 1
        main(argv)
    err = capsys.readouterr().err
    assert stopped.value.code == 1 and "stage 1's samples are kept in" in err
    assert "calidist: RuntimeError: injected stage-2 failure (rerun with --debug" in err
    assert list((out / "stage1").rglob("samples_calidist_ppdb_assertion_*.jsonl"))
    assert not list(out.glob("*/results_*.json"))
    assert calls == [4 * 2, 4 * 2 * 2]  # stage 1: 4 documents x 2 letters; stage 2 failed
    main(argv)  # resume: stage 1 from the cache, stage 2 sent
    assert calls[2:] == [4 * 2 * 2]  # stage 2 only: 4 documents x (c - 1)·m = 2 hints x 2 letters
    printed = capsys.readouterr().out
    assert "stage 1 sent 4 prompts (4 documents), stage 2 8 (4): 3 per document; " \
           "single-stage: 5" in printed
    assert list(out.glob("*/results_*.json"))
