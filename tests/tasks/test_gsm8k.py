"""GSM8K, the open-ended three-stage flow (docs/gsm8k.md): the number parser, the hint numbers,
the chains and their scoring checked by hand, and all stages end to end through lm-eval with the
tiny model."""

from __future__ import annotations

import json
import math
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pytest
from conftest import doc_requests, load_task
from family_data import write_all
from hypothesis import given
from hypothesis import strategies as st

from calidist_tasks.runs.files import samples_file_of
from calidist_tasks.scoring.records import hints_of, line_record
from calidist_tasks.tasks.gsm8k import (
    HINT_NUMBERS,
    READOUT,
    Scoring,
    answer_span,
    canonical_number,
    chain_scoring,
    near_numbers,
    parse_number,
    same_number,
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
    # one grammar (docs/gsm8k.md): a token that is not one number is unreadable, never a part
    ("1.2.3", None), ("192.168.1.1", None), ("1.000.000", None),  # dotted groups, quads
    ("1 000 000", None), ("The answer is 1,000 000", None),  # thousands: commas only
    ("The answer is 5 1/2", None),  # a mixed fraction, as "1/2"
    ("The answer is 1e5", None), ("0x12", None),  # exponent and hex forms
    ("The answer is 18 or 19", None), ("18 or 19", None), ("18-19", None),  # two offered
    ("from 3 to 5 apples, 7 in all", "7"),  # a range before the answer does not matter
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


def _jsonl(path: Path, samples: list[dict], tail: str = "") -> Path:
    path.write_text("".join(json.dumps(s) + "\n" for s in samples) + tail, encoding="utf-8")
    return path


def _logprobs(probs: list[float]) -> list[tuple[float, bool]]:
    """Scripted loglikelihood results whose softmax is ``probs`` (a shift changes nothing)."""
    return [(math.log(p) - 3.0, False) for p in probs]


@pytest.mark.parametrize("chain, cut, number", [
    (" 9 * 2 = 18.\nThe answer is $18.\nThe answer is 1", " 9 * 2 = 18.\nThe answer is $", "18"),
    (" so 16 - 7 = 9 eggs", " so 16 - 7 = ", "9"),  # no stated answer: the last number
    ("#### -1,234.5", "#### ", "-1234.5"),
])
def test_chain_is_cut_where_its_answer_starts(chain: str, cut: str, number: str) -> None:
    assert answer_span(chain) == (len(cut), number) and parse_number(chain) == number
    # scored over [ŷ, h_1, ...] and its own number when that is none of them
    assert chain_scoring(chain, ["1", "2"]) == Scoring(cut, ["1", "2", number], 2)
    assert chain_scoring(chain, ["1", number]) == Scoring(cut, ["1", number], 1)
    assert chain_scoring("no idea  ", ["1", "2"]) == Scoring("no idea" + READOUT, ["1", "2"], None)


def test_gsm8k_hinted_stage_reasons_again(tmp_path: Path) -> None:
    """Stage 2 makes the model generate under each hint (no bare readout); stage 3 scores each
    chain's own number after that chain, and p and every p'_j are the softmax over the candidates
    taken at the chain's own number (docs/gsm8k.md), checked by hand on scripted log-likelihoods."""
    data = write_all(tmp_path / "data", n_eval=4, n_calib=3)
    metadata = {"data_dir": str(data), "calib_size": 3, "eval_size": 4, "m": 1}
    stage1 = load_task("calidist_gsm8k", metadata)
    samples = []
    for i, doc in enumerate(stage1.eval_docs):  # ŷ = the gold number, except one unreadable
        chain = " I cannot tell." if i == 4 else f" 2 + 2 = 4.\nThe answer is {doc['target']}."
        record = stage1.process_results(doc, [chain])["calidist_record"]
        samples.append({"doc": dict(doc), "acc": record})
    first = _jsonl(tmp_path / "s1.jsonl", samples)
    stage2 = load_task("calidist_gsm8k_assertion_chains",
                       {**metadata, "original_samples": str(first)})
    doc = stage2.eval_docs[3]  # the first evaluation document
    candidates = stage2.candidates(doc)
    requests = doc_requests(stage2, doc)
    assert [r.request_type for r in requests] == ["generate_until"] * HINT_NUMBERS
    for request, number in zip(requests, candidates[1:], strict=True):
        prompt, generation = request.arguments
        assert "\nHint: " in prompt and f" {number}.\n" in prompt
        assert prompt.endswith("\nAnswer:")  # the model writes a worked answer, no readout
        assert generation == stage1.config.generation_kwargs  # greedy, as stage 1
    unreadable = stage2.eval_docs[4]
    (placeholder,) = doc_requests(stage2, unreadable)
    assert placeholder.arguments[1]["max_gen_toks"] == 1

    y, h1 = candidates[0], candidates[1]
    chains = [f" I follow the hint: {h1}. The answer is {h1}.", " hmm",
              f" The answer is {int(y) + 100}.", f" Still {y}.\nThe answer is {y}."]
    samples = []
    for d in stage2.eval_docs:
        n = len(stage2.prompt_plans(d)) - 1
        record = stage2.process_results(d, chains if n else ["x"])["calidist_record"]
        samples.append({"doc": dict(d), "acc": record})
    record = line_record(samples[3])
    assert record["chains"] == chains and record["candidates"] == candidates
    assert record["answers"] == [h1, None, str(int(y) + 100), y]
    assert (record["generations"], record["parse_failures"]) == (5, 1)

    second = _jsonl(tmp_path / "s2.jsonl", samples)
    stage3 = load_task("calidist_gsm8k_assertion", {**metadata, "original_samples": str(second)})
    doc = stage3.eval_docs[3]
    requests = doc_requests(stage3, doc)
    assert {r.request_type for r in requests} == {"loglikelihood"}
    original = doc_requests(stage1, stage1.eval_docs[3])[0].arguments[0]
    hinted = [r.arguments[0] for r in doc_requests(stage2, stage2.eval_docs[3])]
    cut = [" 2 + 2 = 4.\nThe answer is ", f" I follow the hint: {h1}. The answer is ",
           " hmm" + READOUT, " The answer is ", f" Still {y}.\nThe answer is "]
    contexts = [original + cut[0], *(p + c for p, c in zip(hinted, cut[1:], strict=True))]
    other = [*candidates, str(int(y) + 100)]
    want = [(c, n) for c, ns in zip(contexts, [candidates, candidates, candidates, other,
                                               candidates], strict=True) for n in ns]
    assert [tuple(r.arguments) for r in requests] == want

    # scripted probabilities over each chain's candidates; the last one's own number (ŷ) is not
    # its most likely candidate: p'_4 is still taken at ŷ
    probs = [[0.6, 0.1, 0.1, 0.1, 0.1], [0.2, 0.5, 0.1, 0.1, 0.1], [0.7, 0.1, 0.1, 0.05, 0.05],
             [0.1, 0.1, 0.1, 0.1, 0.1, 0.5], [0.3, 0.4, 0.1, 0.1, 0.1]]
    results = [ll for p in probs for ll in _logprobs(p)]
    record = stage3.process_results(doc, results)["calidist_record"]
    assert record["prediction"] == y and record["correct"] == 1
    assert record["confidence"] == pytest.approx(0.6)  # p: C0's softmax at ŷ
    hints = hints_of(record)
    assert [h.prediction for h in hints] == [1, -1, 5, 0]  # h1, no number, other, ŷ
    # issue #34: the chain with no number is an unreadable hinted reply, logged with
    # confidence None and left out of mu and delta (before: a flip at its readout's 0.7)
    assert [h.confidence for h in hints] == [pytest.approx(0.5), None, pytest.approx(0.5),
                                             pytest.approx(0.3)]
    assert record["answers"] == [h1, None, str(int(y) + 100), y]
    assert record["mu"] == pytest.approx((0.5 + 0.5) / 3)  # two flips, by confidence
    assert record["delta"] == pytest.approx(abs(0.6 - (0.5 + 0.5 + 0.3) / 3))
    assert record["flipped"] == 1 and record["requests"] == 26
    assert (record["generations"], record["parse_failures"], record["parsed"]) == (5, 1, False)
    record = stage3.process_results(stage3.eval_docs[4], [(-1.0, False)])["calidist_record"]
    assert (record["confidence"], record["mu"], record["delta"], record["lambda_raw"],
            record["correct"], record["parse_failures"]) == (0.0, 1.0, 1.0, 0.0, 0, 1)


def test_later_stages_need_the_earlier_ones(tmp_path: Path) -> None:
    data = write_all(tmp_path / "data")
    metadata = {"data_dir": str(data), "calib_size": 3, "eval_size": 4}
    for task, earlier in (("calidist_gsm8k_assertion_chains", "calidist_gsm8k"),
                          ("calidist_gsm8k_assertion", "calidist_gsm8k_assertion_chains")):
        with pytest.raises(ValueError, match=f"reads the samples of {earlier}: .*original_samples"):
            load_task(task, metadata)
        with pytest.raises(FileNotFoundError, match=f"samples_{earlier}_"):
            load_task(task, {**metadata, "original_samples": str(tmp_path)})
    stage1 = load_task("calidist_gsm8k", metadata)
    samples = [{"doc": dict(d), "acc": stage1.process_results(d, [f"The answer is {d['target']}"])
                ["calidist_record"]} for d in stage1.eval_docs]

    def chains_reading(file: Path) -> None:
        load_task("calidist_gsm8k_assertion_chains", {**metadata, "original_samples": str(file)})

    with pytest.raises(ValueError, match="6 document\\(s\\) have no answer in .*partial.jsonl "
                                         r"\(first: test.jsonl:\d+"):
        chains_reading(_jsonl(tmp_path / "partial.jsonl", samples[:1]))
    with pytest.raises(ValueError, match="broken.jsonl line 1: not a sample of calidist_gsm8k run "
                                         "with --log_samples"):
        chains_reading(_jsonl(tmp_path / "broken.jsonl", [{"doc": {"question": "What?"}}]))
    failed = [*samples[:1], {**samples[1], "acc": {
        "index": 1, "split": "evaluation", "requests": 1,
        "error": "calidist_gsm8k document 1: boom"}}, *samples[2:]]
    with pytest.raises(ValueError, match=r"failed.jsonl line 2: document 1 \(test.jsonl:\d+\) "
                                         r"has no usable answer .*\(calidist_gsm8k document 1: "
                                         r"boom\)"):
        chains_reading(_jsonl(tmp_path / "failed.jsonl", failed))
    with pytest.raises(ValueError, match=r"cut.jsonl:2: not valid JSON"):
        chains_reading(_jsonl(tmp_path / "cut.jsonl", samples[:1], tail='{"doc'))

    # stage 2's records read by a stage 3 of another m, or with a hand-edited answer
    first = _jsonl(tmp_path / "s1.jsonl", samples)
    stage2 = load_task("calidist_gsm8k_assertion_chains",
                       {**metadata, "m": 1, "original_samples": str(first)})
    # GSM8K's stages are its own: --metadata stage (two-stage runs) does not split them
    assert not stage2.splits_in_stages() and stage2.run_stage.stage == "all"
    samples = [{"doc": dict(d),
                "acc": stage2.process_results(d, ["x"] * HINT_NUMBERS)["calidist_record"]}
               for d in stage2.eval_docs]
    second = _jsonl(tmp_path / "s2.jsonl", samples)
    with pytest.raises(ValueError, match=r"calidist_gsm8k_assertion: original_samples .*s2.jsonl "
                                         r"line \d+: document \d+ \(test.jsonl:\d+\): 4 hinted "
                                         "chains, this run has 8 .* same m"):
        load_task("calidist_gsm8k_assertion", {**metadata, "m": 2, "original_samples": str(second)})
    with pytest.raises(ValueError, match="hinted numbers .* same seed as stage 2"):
        load_task("calidist_gsm8k_assertion",
                  {**metadata, "m": 1, "seed": 7, "original_samples": str(second)})
    line_record(samples[0])["prediction"] = "123456"
    with pytest.raises(ValueError, match=r"line 1: document 0 \(test.jsonl:\d+\): the answer "
                                         "'123456' is not the number of its logged worked answer"):
        load_task("calidist_gsm8k_assertion",
                  {**metadata, "m": 1, "original_samples": str(_jsonl(second, samples))})


def test_samples_file_takes_the_newest_first_stage_file(tmp_path: Path) -> None:
    def find(path: Path) -> Path:
        return samples_file_of(path, "calidist_gsm8k", "original_samples", "--log_samples")

    older = _save_samples(tmp_path, "calidist_gsm8k", [])
    stage2 = tmp_path / "tiny" / "samples_calidist_gsm8k_assertion_2099-01-01T00-00-00.jsonl"
    stage2.write_text("", encoding="utf-8")
    assert find(tmp_path) == older
    newer = tmp_path / "tiny" / "samples_calidist_gsm8k_2098-01-01T00-00-00.jsonl"
    newer.write_text("", encoding="utf-8")
    assert find(tmp_path) == newer
    assert find(older) == older
    with pytest.raises(ValueError, match="original_samples .* is the samples of "
                                         "calidist_gsm8k_assertion"):
        find(stage2)


def test_gsm8k_local_data_and_gold_numbers() -> None:
    """The shared GSM8K test file parses (every gold answer is a number after '####')."""
    path = Path(__file__).parents[3] / "shared/data/gsm8k/test.jsonl"
    if not path.is_file():
        pytest.skip("the shared GSM8K file is not on this machine")
    task = load_task("calidist_gsm8k", {"data_files": {"test": str(path)}, "eval_size": 50})
    assert len(task.eval_docs) == 250
    assert all(canonical_number(d["target"]) == d["target"] for d in task.eval_docs)
