"""Slow half of ``tests/tasks/test_gsm8k.py`` (builds the tiny model or runs lm-eval).

What the module tests: the fast half's docstring."""

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
from conftest import assert_report_rebuilds_results, run_lm_eval
from family_data import write_all
from test_gsm8k import _save_samples

from calidist_tasks.registry import metric_names
from calidist_tasks.runs.files import save_like_lm_eval
from calidist_tasks.scoring.records import hints_of, line_record
from calidist_tasks.tasks.gsm8k import (
    HINT_NUMBERS,
    READOUT,
    answer_span,
    parse_number,
    same_number,
)


def _results(out: dict, task: str) -> dict:
    return {k.split(",")[0]: v for k, v in out["results"][task].items() if "," in k}


def test_three_stages_end_to_end(tiny_model_dir: Path, tmp_path: Path) -> None:
    data = write_all(tmp_path / "data", n_eval=6, n_calib=4)
    metadata = {"data_dir": str(data), "calib_size": 4, "eval_size": 6, "m": 1}
    # stage 1: worked answers (the tiny model writes random text: mostly no number at all)
    first = run_lm_eval(["calidist_gsm8k"], tiny_model_dir, metadata,
                        gen_kwargs="max_gen_toks=16")
    samples = first["samples"]["calidist_gsm8k"]
    results = _results(first, "calidist_gsm8k")
    assert [line_record(s)["chain"] for s in samples] == [s["resps"][0][0] for s in samples]
    evaluation = [s for s in samples if line_record(s)["split"] == "evaluation"]
    answers = [parse_number(s["resps"][0][0]) for s in evaluation]
    assert results["parse_fail_rate"] == pytest.approx(sum(a is None for a in answers) / 6)
    assert results["acc"] == pytest.approx(
        sum(same_number(a, s["doc"]["target"]) for a, s in zip(answers, evaluation,
                                                                strict=True)) / 6)
    assert results["n_calibration"] == 4 and results["n_evaluation"] == 6

    # a model that answers: give documents a worked answer (right, off by one, or none) and save
    # them as the CLI would
    prompts = {}
    for i, sample in enumerate(samples):
        target = int(sample["doc"]["target"])
        chain = [f" {target} in all.\nThe answer is {target}.",
                 f" Then {target + 1}", " I cannot tell."][i % 3]
        line_record(sample).update(chain=chain, prediction=parse_number(chain))
        prompts[sample["doc"]["question"]] = sample["arguments"][0][0]
    _save_samples(tmp_path / "stage1", "calidist_gsm8k", samples)

    # stage 2: the model reasons again under each hint
    stage2 = {**metadata, "original_samples": str(tmp_path / "stage1")}
    second = run_lm_eval(["calidist_gsm8k_assertion_chains"], tiny_model_dir, stage2,
                         gen_kwargs="max_gen_toks=16")
    samples = second["samples"]["calidist_gsm8k_assertion_chains"]
    results = _results(second, "calidist_gsm8k_assertion_chains")
    assert set(results) >= {"acc", "parse_fail_rate", "requests_per_doc", "n_evaluation"}
    hinted = {}
    for sample in samples:
        record = line_record(sample)
        if record["prediction"] is None:
            assert record["requests"] == 1 and sample["arguments"][0][1]["max_gen_toks"] == 1
            continue
        contexts = [args[0] for args in sample["arguments"]]
        assert len(set(contexts)) == record["requests"] == HINT_NUMBERS  # m = 1
        for context, number in zip(contexts, record["candidates"][1:], strict=True):
            assert context.startswith(prompts[sample["doc"]["question"]].removesuffix("Answer:"))
            assert f" {number}.\n" in context.split("\nHint: ")[1] and context.endswith("Answer:")
        assert record["chains"] == [r[0] for r in sample["resps"]]
        assert record["answers"] == [parse_number(c) for c in record["chains"]]
        hinted[sample["doc"]["question"]] = contexts
        # make two chains readable: one follows its hint, one keeps ŷ
        candidates = record["candidates"]
        record["chains"][:2] = [f" The answer is {candidates[1]}.", f" So {candidates[0]}."]
    evaluation = [line_record(s) for s in samples if line_record(s)["split"] == "evaluation"]
    assert results["parse_fail_rate"] == pytest.approx(
        sum(r["parse_failures"] for r in evaluation) / sum(r["generations"] for r in evaluation))
    _save_samples(tmp_path / "stage2", "calidist_gsm8k_assertion_chains", samples)

    # stage 3: every chain's answer scored after its reasoning
    third = run_lm_eval(["calidist_gsm8k_assertion"], tiny_model_dir,
                        {**metadata, "original_samples": str(tmp_path / "stage2")})
    save_like_lm_eval(third, tmp_path / "stage3")
    assert assert_report_rebuilds_results(tmp_path / "stage3") == ["calidist_gsm8k_assertion"]
    results = _results(third, "calidist_gsm8k_assertion")
    for name in [*metric_names(distracted=True), "parse_fail_rate"]:
        assert math.isfinite(results[name]), name
        if name.split("_")[0] in ("acc", "ece", "brier", "auroc"):
            assert 0.0 <= results[name] <= 1.0, name
    records = []
    for sample in third["samples"]["calidist_gsm8k_assertion"]:
        record, question = line_record(sample), sample["doc"]["question"]
        records.append(record)
        if record["prediction"] is None:  # no number: wrong, confidence 0, one placeholder
            assert record["requests"] == 1 and record["confidence"] == 0.0
            assert record["lambda_raw"] == 0.0 and not record["correct"]
            continue
        assert record["correct"] == int(record["prediction"] == sample["doc"]["target"])
        chains = [sample["doc"]["original_chain"], *sample["doc"]["hinted_chains"]]
        groups = {}  # context -> [(candidate, loglikelihood)], in request order
        for args, resp in zip(sample["arguments"], sample["resps"], strict=True):
            groups.setdefault(args[0], []).append((args[1], resp[0][0]))
        assert len(groups) == len(chains) == 1 + HINT_NUMBERS
        probabilities = []
        for (context, scored), prompt, chain in zip(groups.items(), [prompts[question],
                                                    *hinted[question]], chains, strict=True):
            number = parse_number(chain)  # the chain is cut where its number starts
            cut = chain[:answer_span(chain)[0]] if number else chain.rstrip() + READOUT
            assert context == prompt + cut
            numbers = [n for n, _ in scored]
            values = np.exp([ll for _, ll in scored])
            own = numbers.index(number) if number else int(np.argmax(values))
            probabilities.append(values[own] / values.sum())
        assert record["confidence"] == pytest.approx(probabilities[0])
        # an unreadable hinted chain (no number) is left out of mu and delta: no confidence
        numbers = [parse_number(chain) for chain in chains[1:]]
        assert [h.confidence for h in hints_of(record)] == [
            pytest.approx(p) if n else None for p, n in zip(probabilities[1:], numbers,
                                                             strict=True)]
        readable = [(p, a) for p, a, n in zip(probabilities[1:], record["answers"], numbers,
                                                strict=True) if n]
        flips = [p for p, a in readable if a != record["prediction"]]
        # mu over the readable hinted chains; none readable: mu = 1 (docs/paper_fidelity.md)
        assert record["mu"] == pytest.approx(sum(flips) / len(readable) if readable else 1.0)
        assert record["flipped"] == 1  # the first hinted chain follows its hint
    evaluation = [r for r in records if r["split"] == "evaluation"]
    assert results["acc"] == pytest.approx(np.mean([r["correct"] for r in evaluation]))
    assert results["mu_mean"] == pytest.approx(np.mean([r["mu"] for r in evaluation]))
    assert results["parse_fail_rate"] == pytest.approx(
        sum(r["parse_failures"] for r in evaluation) / sum(r["generations"] for r in evaluation))


def _cli(args: list[str], cwd: Path) -> None:
    found = Path(sys.executable).parent / "calidist"
    calidist = str(found) if found.exists() else shutil.which("calidist") or pytest.skip("calidist")
    done = subprocess.run([calidist, "eval", *args], cwd=cwd, capture_output=True, text=True,
                          env=dict(os.environ))
    assert done.returncode == 0, f"{args}:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"


def test_stage2_reads_a_cli_output_folder(tiny_model_dir: Path, tmp_path: Path) -> None:
    """Stage 1 through the real CLI (docs/gsm8k.md's first command); stage 2, given that
    --output_path folder, finds the samples file by lm-eval's own naming and carries every
    document's answer and worked answer on (in-process: a second CLI start-up would add nothing
    but time)."""
    data = write_all(tmp_path / "data", n_eval=3, n_calib=2)
    metadata = {"data_dir": str(data), "calib_size": 2, "eval_size": 3}
    _cli(["--tasks", "calidist_gsm8k", "--gen_kwargs", "max_gen_toks=8", "--model", "hf",
          "--model_args", f"pretrained={tiny_model_dir},dtype=float32", "--device", "cpu",
          "--log_samples", "--metadata", json.dumps(metadata), "--output_path", "stage1"],
         cwd=tmp_path)
    (first,) = (tmp_path / "stage1").rglob("samples_calidist_gsm8k_2*.jsonl")
    answers = {json.loads(line)["doc"]["question"]: line_record(json.loads(line))
               for line in first.read_text(encoding="utf-8").splitlines()}
    out = run_lm_eval(["calidist_gsm8k_assertion_chains"], tiny_model_dir,
                      {**metadata, "original_samples": str(tmp_path / "stage1")},
                      gen_kwargs="max_gen_toks=8")
    samples = out["samples"]["calidist_gsm8k_assertion_chains"]
    assert len(samples) == len(answers) == 5
    for sample in samples:
        stage1 = answers[sample["doc"]["question"]]
        assert line_record(sample)["prediction"] == stage1["prediction"]
        assert line_record(sample)["chain"] == stage1["chain"]
