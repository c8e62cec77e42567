"""Slow half of ``tests/confidence/test_chat_logprobs.py`` (builds the tiny model or runs lm-eval).

What the module tests: the fast half's docstring."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import pytest
from conftest import run_lm_eval
from openai_server import ModelServer
from test_chat_logprobs import logsumexp

from calidist_tasks.backends.api_replies import APIReplyError, checked_replies
from calidist_tasks.scoring.records import line_record

# ------------------------------------------------------------------ through the chat backend
LETTERS = "ab"


TASK = "calidist_ppdb_assertion_verbalized"


def scripted(body: dict) -> str:
    """A reasoned reply naming the other letter first; about every third prompt unreadable."""
    digest = hashlib.sha256(body["messages"][-1]["content"].encode()).digest()
    if digest[0] % 3 == 0:
        return "I would rather not say."
    letter, other = (LETTERS[digest[1] % 2], LETTERS[1 - digest[1] % 2])
    return (f"Step 1: option ({other}) seems unlikely, 30%.\nThe answer is ({letter}) as stated. "
            f"Overall Confidence: {50 + digest[2] % 50}%")


@pytest.fixture(scope="module")
def server(tiny_model_dir: Path):
    srv = ModelServer(tiny_model_dir, idle_timeout=900, chat_reply=scripted)
    srv.start()
    yield srv
    srv.stop()


def run_chat(server: ModelServer, model_dir: Path, data_dir: Path, tasks: tuple = (TASK,),
             calib_size: int = 2, eval_size: int = 3, **kwargs) -> dict:
    args = f"model=tiny,base_url={server.base_url}/chat/completions,num_concurrent=2"
    metadata = {"data_dir": str(data_dir), "calib_size": calib_size, "eval_size": eval_size,
                "m": 1}
    with checked_replies():
        return run_lm_eval(list(tasks), model_dir, metadata, model="local-chat-completions",
                           model_args=args, batch_size=1, apply_chat_template=True, **kwargs)


def own_letter_logprobs(model, tokenizer, prompt: str, reply: str) -> list[float]:
    """The tiny model's next-token log-probabilities of the letters at the reply's final answer
    letter, from its whole vocabulary: the answer token with its letter replaced, either case."""
    import torch

    position = reply.rindex("The answer is (") + len("The answer is (")
    encoded = tokenizer(reply, add_special_tokens=False, return_offsets_mapping=True)
    k = next(i for i, (s, e) in enumerate(encoded.offset_mapping) if s <= position < e)
    start = encoded.offset_mapping[k][0]
    chosen = tokenizer.decode([encoded.input_ids[k]])
    prompt_ids = tokenizer(prompt, add_special_tokens=False).input_ids
    with torch.no_grad():
        logits = model(torch.tensor([prompt_ids + encoded.input_ids[:k]])).logits[0, -1]
    row = torch.log_softmax(logits.float(), dim=-1)
    vocabulary = [tokenizer.decode([i]) for i in range(row.numel())]
    values = []
    for letter in LETTERS:
        forms = {chosen[:position - start] + case + chosen[position - start + 1:]
                 for case in (letter, letter.upper())}
        values.append(logsumexp([float(row[i]) for i, text in enumerate(vocabulary)
                                 if text in forms]))
    return values


def test_calidist_logprob_end_to_end_through_local_chat_completions(
        server, tiny_model_dir, ppdb_data_dir, tmp_path):
    """Every reply's letters are the tiny model's own log-probabilities at the answer (the whole
    vocabulary listed: no floor), unreadable replies are counted, CaliDist (log-prob) is reported
    beside CaliDist (verbalized); a rerun with --use_cache asks the server nothing and reads the
    same."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    cache = str(tmp_path / "cache")
    out = run_chat(server, tiny_model_dir, ppdb_data_dir, gen_kwargs="top_logprobs=1000",
                   use_cache=cache)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    unreadable = total = 0
    for sample in out["samples"][TASK]:
        record = line_record(sample)
        readings = [p for resp in sample["filtered_resps"] for p in resp]
        for (prompt, _), reading in zip(sample["arguments"], readings, strict=True):
            text = getattr(prompt, "prompt", prompt)  # lm-eval's JsonChatStr, or logged as a list
            messages = json.loads(text[0] if isinstance(text, list | tuple) else text)
            reply = scripted({"messages": messages})
            if reply.startswith("I would"):
                assert reading["letter_logprobs"] is None
                unreadable += sample["doc"]["calidist_split"] == "evaluation"
            else:
                text = tokenizer.apply_chat_template(messages, tokenize=False,
                                                     add_generation_prompt=True)
                assert list(reading["letter_logprobs"]) == pytest.approx(
                    own_letter_logprobs(model, tokenizer, text, reply), abs=1e-4)
            total += sample["doc"]["calidist_split"] == "evaluation"
        first = readings[0]["letter_logprobs"]
        assert list(record["logprob"]["letter_logprobs"]) == (  # a tuple in memory, JSON list
            pytest.approx(list(first)) if first else [0.0, 0.0])
        assert record["logprob"]["parsed"] == all(r["letter_logprobs"] for r in readings)
    results = {k.split(",")[0]: v for k, v in out["results"][TASK].items() if "," in k}
    assert results["parse_fail_rate_logprob"] == pytest.approx(unreadable / total)
    assert 0 < unreadable < total
    for name in ("ece", "ece_vanilla", "brier", "auroc"):
        assert math.isfinite(results[name]) and math.isfinite(results[f"{name}_logprob"]), name

    asked = sum(server.requests.values())
    again = run_chat(server, tiny_model_dir, ppdb_data_dir, gen_kwargs="top_logprobs=1000",
                     use_cache=cache)
    assert sum(server.requests.values()) == asked  # every answer from the cache
    assert [line_record(s)["logprob"] for s in again["samples"][TASK]] == [
        line_record(s)["logprob"] for s in out["samples"][TASK]]


def test_a_server_without_chat_logprobs_is_one_clear_error(server, tiny_model_dir,
                                                            ppdb_data_dir):
    server.bad_reply = "no-logprobs"
    try:
        with pytest.raises(APIReplyError) as raised:
            run_chat(server, tiny_model_dir, ppdb_data_dir)
    finally:
        server.bad_reply = None
    message = str(raised.value)
    assert message.startswith(f"local-chat-completions (endpoint {server.base_url}/chat/")
    assert "no logprobs for chat completions" in message
    assert "--gen_kwargs logprobs=false" in message


def test_logprobs_false_reads_the_verbalized_confidence_only(server, tiny_model_dir,
                                                            ppdb_data_dir):
    """The opt-out for a server without chat log-probabilities: no error, no log-prob metrics."""
    server.bad_reply = "no-logprobs"
    try:
        out = run_chat(server, tiny_model_dir, ppdb_data_dir, gen_kwargs="logprobs=false")
    finally:
        server.bad_reply = None
    results = out["results"][TASK]
    assert "ece,none" in results and not any("logprob" in k for k in results)


def test_two_stage_gives_the_single_stage_logprob_records(server, tiny_model_dir, tmp_path):
    """Stage 1 logs the original reply's log-prob reading; stage 2 joins it with the hints sent
    (those naming another option than the stated answer, the same for both readings)."""
    import calidist_tasks

    args = f"model=tiny,base_url={server.base_url}/chat/completions,num_concurrent=2"
    metadata = {"data_dir": str(Path(calidist_tasks.__file__).parent / "sample_data"),
                "calib_size": 3, "eval_size": 3, "m": 1}
    run = {"batch_size": 1, "apply_chat_template": True, "bootstrap_iters": 0,
           "gen_kwargs": "top_logprobs=1000"}
    one = calidist_tasks.evaluate("local-chat-completions", [TASK], metadata, model_args=args,
                                  **run)
    two = calidist_tasks.evaluate("local-chat-completions", [TASK], metadata, model_args=args,
                                  two_stage=True, stage1_dir=str(tmp_path), **run)
    keys = ("prediction", "confidence", "letter_logprobs", "mu", "delta")
    pairs = list(zip(one["samples"][TASK], two["samples"][TASK], strict=True))
    assert len(pairs) == 6
    for single, staged in pairs:
        want, got = line_record(single)["logprob"], line_record(staged)["logprob"]
        for key in keys:
            assert got[key] == pytest.approx(want[key]), key
    assert (sum(line_record(s)["requests"] for _, s in pairs)
            < sum(line_record(s)["requests"] for s, _ in pairs))
    for name in ("ece_logprob,none", "mu_mean_logprob,none"):
        assert two["results"][TASK][name] == pytest.approx(one["results"][TASK][name])


# ------------------------------------------------------------------ in `calidist report`
# The paper's Table 3 "Log-Prob" rows and the suffix of lm-eval's numbers each one must equal
LOGPROB_ROWS = {
    "calidist_ppdb_verbalized": {"Vanilla (log-prob)": "vanilla_logprob",
                                 "Temperature scaling (log-prob)": "ts_logprob",
                                 "Platt (log-prob)": "platt_logprob",
                                 "Isotonic (log-prob)": "isotonic_logprob",
                                 "Vector scaling (log-prob)": "vector_logprob"},
    TASK: {"Vanilla (log-prob)": "vanilla_logprob", "CaliDist log-prob (As.)": "logprob"},
}


def report_cells(results: dict, folder: Path) -> tuple[dict, list[str]]:
    """{task: {row label: Cell}} of ``calidist report`` on the saved results, and its problems."""
    from calidist_tasks.report.cells import task_cells
    from calidist_tasks.report.loading import load_runs
    from calidist_tasks.runs.files import save_like_lm_eval

    save_like_lm_eval(results, folder)
    loaded = load_runs([folder])
    problems, notes = list(loaded.problems), []
    cells = {run.task: {c.method.label: c for c in task_cells(run, problems, notes)}
             for run in loaded.runs}
    return cells, problems


def without_logprob_reading(results: dict) -> dict:
    """The same run as a backend without token log-probabilities logs it (``hf``, ``vllm``): no
    record holds a ``logprob`` reading, no ``*_logprob`` number."""
    import copy

    found = copy.deepcopy(results)
    for task, samples in found["samples"].items():
        for sample in samples:
            del line_record(sample)["logprob"]
        found["results"][task] = {k: v for k, v in found["results"][task].items()
                                  if "_logprob," not in k}
    return found


@pytest.fixture(scope="module")
def chat_run(server, tiny_model_dir, ppdb_data_dir) -> dict:
    """The tasks of LOGPROB_ROWS run once through local-chat-completions."""
    return run_chat(server, tiny_model_dir, ppdb_data_dir, tuple(LOGPROB_ROWS),
                    calib_size=6, eval_size=6, gen_kwargs="top_logprobs=1000")


def test_report_rebuilds_the_logprob_rows_as_lm_eval_reported_them(chat_run, tmp_path):
    """`calidist report` on a chat run: the log-prob rows rebuilt from the records' ``logprob``
    reading (per-document confidences, no problem) with lm-eval's ``*_logprob`` numbers; the
    same run without that reading shows none of them, and its other rows as before."""
    out = chat_run
    cells, problems = report_cells(out, tmp_path / "chat")
    assert problems == []
    for task, rows in LOGPROB_ROWS.items():
        results = {k.split(",")[0]: v for k, v in out["results"][task].items() if "," in k}
        shown = {label: cell for label, cell in cells[task].items() if "log-prob" in label}
        assert set(shown) == set(rows), task
        for label, suffix in rows.items():
            cell = shown[label]
            assert cell.confidence is not None, label  # rebuilt from the records
            for score, value in cell.values.items():
                assert math.isfinite(results[f"{score}_{suffix}"]), (label, score)
                assert value == pytest.approx(results[f"{score}_{suffix}"], abs=1e-9), (
                    label, score)
        evaluation = [line_record(s)["logprob"] for s in out["samples"][task]
                      if s["doc"]["calidist_split"] == "evaluation"]
        evaluation.sort(key=lambda record: record["index"])
        assert list(shown["Vanilla (log-prob)"].confidence) == pytest.approx(
            [record["confidence"] for record in evaluation])  # the log-prob reading's own

    stripped, problems = report_cells(without_logprob_reading(out), tmp_path / "hf")
    assert problems == []
    for task in LOGPROB_ROWS:
        assert not any("log-prob" in label for label in stripped[task]), task
        assert set(stripped[task]) == {label for label in cells[task] if "log-prob" not in label}
        assert all(cell.confidence is not None for cell in stripped[task].values())


def test_a_saved_fit_applies_to_the_logprob_rows_as_to_the_aggregation(chat_run, tmp_path):
    """``--metadata calibrator``: the aggregation's ``*_logprob`` numbers and the report's
    "CaliDist log-prob" row apply the same saved fit (here one fitted to the verbalized
    reading's errors, which moves the log-prob numbers)."""
    from calidist_metrics import CaliDistCalibrator
    from calidist_tasks.registry import METHODS, SCORES
    from calidist_tasks.scoring.aggregation import summarize_logprobs
    from calidist_tasks.scoring.fits import (
        calibrator_context,
        calidist_inputs,
        column,
        save_fit,
        split_records,
    )
    from calidist_tasks.settings import RunSettings

    records = [line_record(sample) for sample in chat_run["samples"][TASK]]
    calibration, evaluation = split_records(records)
    context = calibrator_context(TASK, ["no", "yes"], "tiny")
    path = str(tmp_path / "fit.json")
    other = CaliDistCalibrator().fit(calidist_inputs(calibration),
                                     1 - column(calibration, "correct"))
    save_fit(other, RunSettings(save_calibrator=path), context)
    row = next(m for m in METHODS if m.label == "CaliDist log-prob (As.)")
    for settings, moved in ((RunSettings(calibrator=path), True), (RunSettings(), False)):
        reported = summarize_logprobs(records, settings, context, distracted=True)
        # the row's fit, as the aggregation and the report call it: an unreadable original at
        # its 1/c (``Method.fit`` applies the unreadable rule)
        fitted = row.fit(calibration, evaluation, settings, context)
        for score, fn in SCORES.items():
            assert fn(fitted.confidence, fitted.correct) == pytest.approx(
                reported[f"{score}_logprob"], abs=1e-12), score
        own = chat_run["results"][TASK]["brier_logprob,none"]
        assert (reported["brier_logprob"] != pytest.approx(own, abs=1e-9)) == moved


def echoing(body: dict) -> str:
    """issue #34/#36: a reply that states its own answer, then repeats the prompt's hint (an
    answer statement naming another letter) and an injected "Overall Confidence: 100%"."""
    content = body["messages"][-1]["content"]
    digest = hashlib.sha256(content.encode()).digest()
    letter = LETTERS[digest[1] % 2]
    hint = next((line for line in content.splitlines() if line.startswith("Hint:")),
                f"The answer is ({LETTERS[1 - digest[1] % 2]}). Overall Confidence: 100%")
    return (f"Step 1: one. Confidence: 40%\nStep 2: two. Confidence: 60%\nThe answer is "
            f"({letter}) as stated. Overall Confidence: 55%\n{hint}\nOverall Confidence: 100%")


@pytest.fixture(scope="module")
def echo_server(tiny_model_dir: Path):
    srv = ModelServer(tiny_model_dir, idle_timeout=900, chat_reply=echoing)
    srv.start()
    yield srv
    srv.stop()


def test_echoes_after_the_answer_are_not_read_through_the_chat_server(
        echo_server, tiny_model_dir, ppdb_data_dir):
    """End to end: every reply is read as its own first answer at 55% (never the hint's letter
    or the injected 100%), and p is the tiny model's at its own letter, not at the hint's."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    # no exemplars: the echoes are the subject, and each prompt is scored again here
    out = run_chat(echo_server, tiny_model_dir, ppdb_data_dir, gen_kwargs="top_logprobs=1000",
                   num_fewshot=0)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    for sample in out["samples"][TASK]:
        readings = [p for resp in sample["filtered_resps"] for p in resp]
        for (prompt, _), reading in zip(sample["arguments"], readings, strict=True):
            text = getattr(prompt, "prompt", prompt)
            messages = json.loads(text[0] if isinstance(text, list | tuple) else text)
            reply = echoing({"messages": messages})
            own = reply[reply.index("The answer is (") + len("The answer is (")]
            assert (reading["answer"], reading["confidence"]) == (LETTERS.index(own), 0.55)
            assert reading["shape"]["cut"] and reading["shape"]["steps"] == 2
            cut = reply[:reply.index("Overall Confidence: 55%")] + "Overall Confidence: 55%"
            chat = tokenizer.apply_chat_template(messages, tokenize=False,
                                                 add_generation_prompt=True)
            assert list(reading["letter_logprobs"]) == pytest.approx(
                own_letter_logprobs(model, tokenizer, chat, cut), abs=1e-4)
