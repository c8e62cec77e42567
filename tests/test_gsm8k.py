"""GSM8K, the open-ended two-stage flow (docs/gsm8k.md): the number parser, the hint numbers,
and both stages end to end through lm-eval with the tiny model."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pytest
from conftest import load_task, run_lm_eval
from family_data import write_all
from hypothesis import given
from hypothesis import strategies as st

from calidist_tasks.aggregation import metric_names
from calidist_tasks.open_ended import (
    HINT_NUMBERS,
    canonical_number,
    near_numbers,
    parse_number,
    read_original_answers,
    same_number,
    samples_file,
)


@pytest.mark.parametrize("text, number", [
    ("She makes 9 * 2 = $18 every day.\nThe answer is 18.", "18"),
    ("The answer is: $2,000 in all", "2000"),
    ("The answer is $1,234.50", "1234.5"),
    ("Answer: 7 apples, then 8 more", "7"),  # a stated answer wins over later numbers
    ("The answer is 10.\n\nThe answer is 10.\n\nThe answer is 1", "10"),  # cut off when repeating
    ("To answer 3 questions she needs 5 hours", "5"),  # "answer 3" states no answer
    ("16 - 3 - 4 = <<16-3-4=9>>9 eggs\n#### 9", "9"),
    ("It drops to -3 degrees", "-3"),
    ("pages 5-6 of 10", "10"),  # a range is not a negative number
    ("3, 4 and 5", "5"),  # "3, 4" is two numbers, not 34
    ("about 2.50 dollars.", "2.5"),
    ("::::::::", None),
    ("no digits here", None),
    ("", None),
])
def test_parse_number(text: str, number: str | None) -> None:
    assert parse_number(text) == number


@given(st.decimals(min_value=-10**9, max_value=10**9, places=2, allow_nan=False),
       st.sampled_from(["The answer is {}.", "So it is {} in total", "#### {}", "{}"]),
       st.booleans())
def test_parse_number_reads_any_stated_number(value: Decimal, form: str, commas: bool) -> None:
    written = f"{value:,.2f}" if commas else f"{value:.2f}"
    assert same_number(parse_number("Step 1: 12 + 3 = 15.\n" + form.format(written)),
                       canonical_number(str(value)))


@given(st.decimals(min_value=-10**7, max_value=10**7, places=2, allow_nan=False),
       st.integers(0, 5))
def test_near_numbers(value: Decimal, seed: int) -> None:
    answer = canonical_number(str(value))
    hints = near_numbers(answer, HINT_NUMBERS, "doc", seed)
    assert len(set(hints)) == HINT_NUMBERS
    assert all(not same_number(h, answer) for h in hints)
    assert all(canonical_number(h) == h for h in hints)
    if value >= 0:
        assert all(Decimal(h) >= 0 for h in hints)
    step = Decimal(10) ** min(Decimal(answer).as_tuple().exponent, 0)  # the answer's precision
    width = max(HINT_NUMBERS * step, abs(value) / 4 + step)  # within ±25%, at least ±n steps
    assert all(abs(Decimal(h) - Decimal(answer)) <= width for h in hints)
    assert hints == near_numbers(answer, HINT_NUMBERS, "doc", seed)  # deterministic


def _save_samples(folder: Path, task: str, samples: list[dict]) -> Path:
    """Write samples exactly as the lm_eval CLI does (--output_path --log_samples)."""
    from lm_eval.loggers import EvaluationTracker

    tracker = EvaluationTracker(output_path=str(folder))
    tracker.general_config_tracker.model_name_sanitized = "tiny"
    tracker.date_id = datetime.now().isoformat().replace(":", "-")
    tracker.save_results_samples(task_name=task, samples=samples)
    return next((folder / "tiny").glob(f"samples_{task}_*.jsonl"))


def test_two_stages_end_to_end(tiny_model_dir: Path, tmp_path: Path) -> None:
    data = write_all(tmp_path / "data", n_eval=6, n_calib=4)
    metadata = {"data_dir": str(data), "calib_size": 4, "eval_size": 6}
    # stage 1: worked answers (the tiny model writes random text: mostly no number at all)
    first = run_lm_eval(["calidist_gsm8k"], tiny_model_dir, metadata,
                        gen_kwargs="max_gen_toks=16")
    samples = first["samples"]["calidist_gsm8k"]
    results = {k.split(",")[0]: v for k, v in first["results"]["calidist_gsm8k"].items()}
    evaluation = [s for s in samples if s["acc"]["split"] == "evaluation"]
    answers = [parse_number(s["resps"][0][0]) for s in evaluation]
    assert results["parse_fail_rate"] == pytest.approx(sum(a is None for a in answers) / 6)
    assert results["acc"] == pytest.approx(
        sum(same_number(a, s["doc"]["target"]) for a, s in zip(answers, evaluation,
                                                                strict=True)) / 6)
    assert results["n_calibration"] == 4 and results["n_evaluation"] == 6

    # a model that answers: give every other document a number (right or off by one), keep the
    # tiny model's unreadable answers for the others, and save as the CLI would
    for i, sample in enumerate(samples):
        target = int(sample["doc"]["target"])
        sample["acc"]["prediction"] = [str(target), str(target + 1), None][i % 3]
    _save_samples(tmp_path / "stage1", "calidist_gsm8k", samples)

    second = run_lm_eval(["calidist_gsm8k_assertion"], tiny_model_dir,
                         {**metadata, "m": 1, "original_samples": str(tmp_path / "stage1")})
    results = {k.split(",")[0]: v for k, v in second["results"]["calidist_gsm8k_assertion"].items()
               if "," in k}
    for name in [*metric_names(distracted=True), "parse_fail_rate"]:
        assert math.isfinite(results[name]), name
        if name.split("_")[0] in ("acc", "ece", "brier", "auroc"):
            assert 0.0 <= results[name] <= 1.0, name
    records = [s["acc"] for s in second["samples"]["calidist_gsm8k_assertion"]]
    evaluation = [r for r in records if r["split"] == "evaluation"]
    assert results["parse_fail_rate"] == pytest.approx(
        sum(not r["parsed"] for r in evaluation) / 6)
    assert results["acc"] == pytest.approx(sum(r["correct"] for r in evaluation) / 6)
    n_prompts = 1 + HINT_NUMBERS  # m=1 template per hinted number
    for sample in second["samples"]["calidist_gsm8k_assertion"]:
        record, doc = sample["acc"], sample["doc"]
        if record["prediction"] is None:  # no number: wrong, confidence 0, one placeholder
            assert record["requests"] == 1 and record["confidence"] == 0.0
            assert record["lambda_raw"] == 0.0 and not record["correct"]
            continue
        candidates = record["candidates"]
        assert record["requests"] == n_prompts * len(candidates) == len(sample["arguments"])
        assert candidates[0] == record["prediction"] and len(set(candidates)) == 5
        assert record["correct"] == int(record["prediction"] == doc["target"])
        prompts = list(dict.fromkeys(args[0] for args in sample["arguments"]))
        assert [p.endswith("Answer: The answer is") for p in prompts] == [True] * n_prompts
        hinted = sorted(int(p.split("Hint: ")[1].split("\n")[0].split()[-1].rstrip("."))
                        for p in prompts[1:])
        assert hinted == sorted(int(c) for c in candidates[1:])
        # agreement is numeric equality: a hinted prompt flips when its argmax is not ŷ
        flips = [conf for _, _, prediction, conf in record["hints"] if prediction != 0]
        assert record["mu"] == pytest.approx(sum(flips) / HINT_NUMBERS)
        assert record["flipped"] == int(bool(flips))
        assert 0.0 < record["confidence"] < 1.0


def test_stage2_needs_the_first_stage(tmp_path: Path) -> None:
    data = write_all(tmp_path / "data")
    metadata = {"data_dir": str(data), "calib_size": 3, "eval_size": 4}
    with pytest.raises(ValueError, match="original_samples"):
        load_task("calidist_gsm8k_assertion", metadata)
    with pytest.raises(FileNotFoundError, match="samples_calidist_gsm8k_"):
        load_task("calidist_gsm8k_assertion", {**metadata, "original_samples": str(tmp_path)})
    partial = tmp_path / "partial.jsonl"
    partial.write_text(json.dumps({"doc": {"question": "What?"}, "acc": {"prediction": "1"}})
                       + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="7 document\\(s\\) have no answer in .*partial.jsonl"):
        load_task("calidist_gsm8k_assertion", {**metadata, "original_samples": str(partial)})
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"doc": {"question": "What?"}}\n', encoding="utf-8")
    with pytest.raises(ValueError, match="broken.jsonl:1: not a sample of the first stage"):
        read_original_answers(broken)


def test_samples_file_takes_the_newest_first_stage_file(tmp_path: Path) -> None:
    older = _save_samples(tmp_path, "calidist_gsm8k", [])
    stage2 = tmp_path / "tiny" / "samples_calidist_gsm8k_assertion_2099-01-01T00-00-00.jsonl"
    stage2.write_text("", encoding="utf-8")
    assert samples_file(tmp_path, "calidist_gsm8k") == older
    newer = tmp_path / "tiny" / "samples_calidist_gsm8k_2098-01-01T00-00-00.jsonl"
    newer.write_text("", encoding="utf-8")
    assert samples_file(tmp_path, "calidist_gsm8k") == newer
    assert samples_file(older, "calidist_gsm8k") == older


def test_gsm8k_local_data_and_gold_numbers() -> None:
    """The shared GSM8K test file parses (every gold answer is a number after '####')."""
    path = Path(__file__).parents[2] / "shared/data/gsm8k/test.jsonl"
    if not path.is_file():
        pytest.skip("the shared GSM8K file is not on this machine")
    task = load_task("calidist_gsm8k", {"data_files": {"test": str(path)}, "eval_size": 50})
    assert len(task.eval_docs) == 250
    assert all(canonical_number(d["target"]) == d["target"] for d in task.eval_docs)


def _cli(args: list[str], cwd: Path) -> None:
    found = Path(sys.executable).parent / "calidist"
    calidist = str(found) if found.exists() else shutil.which("calidist") or pytest.skip("calidist")
    done = subprocess.run([calidist, "eval", *args], cwd=cwd, capture_output=True, text=True,
                          env=dict(os.environ))
    assert done.returncode == 0, f"{args}:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"


def test_stage2_reads_a_cli_output_folder(tiny_model_dir: Path, tmp_path: Path) -> None:
    """Stage 1 through the real CLI (docs/gsm8k.md's first command); stage 2, given that
    --output_path folder, finds the samples file by lm-eval's own naming and reads every
    document's answer (in-process: a second CLI start-up would add nothing but time)."""
    data = write_all(tmp_path / "data", n_eval=3, n_calib=2)
    metadata = {"data_dir": str(data), "calib_size": 2, "eval_size": 3}
    _cli(["--tasks", "calidist_gsm8k", "--gen_kwargs", "max_gen_toks=8", "--model", "hf",
          "--model_args", f"pretrained={tiny_model_dir},dtype=float32", "--device", "cpu",
          "--log_samples", "--metadata", json.dumps(metadata), "--output_path", "stage1"],
         cwd=tmp_path)
    (first,) = (tmp_path / "stage1").rglob("samples_calidist_gsm8k_2*.jsonl")
    answers = {json.loads(line)["doc"]["question"]: json.loads(line)["acc"]["prediction"]
               for line in first.read_text(encoding="utf-8").splitlines()}
    out = run_lm_eval(["calidist_gsm8k_assertion"], tiny_model_dir,
                      {**metadata, "original_samples": str(tmp_path / "stage1")})
    records = [s["acc"] for s in out["samples"]["calidist_gsm8k_assertion"]]
    assert len(records) == len(answers) == 5
    for sample in out["samples"]["calidist_gsm8k_assertion"]:
        assert sample["acc"]["prediction"] == answers[sample["doc"]["question"]]
    evaluation = [r for r in records if r["split"] == "evaluation"]
    assert out["results"]["calidist_gsm8k_assertion"]["parse_fail_rate,none"] == pytest.approx(
        sum(not r["parsed"] for r in evaluation) / 3)
