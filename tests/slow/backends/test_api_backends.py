"""Slow half of ``tests/backends/test_api_backends.py`` (builds the tiny model or runs lm-eval).

What the module tests: the fast half's docstring."""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from conftest import run_lm_eval, write_mnli
from family_data import write_all
from openai_server import Faults, ModelServer

from calidist_tasks import task_folder
from calidist_tasks.prompting.distractors import HINT_NOTE

LOGIT_TASKS = ["calidist_ppdb", "calidist_ppdb_assertion"]


METADATA = {"calib_size": 6, "eval_size": 6}


@pytest.fixture(scope="module")
def server(tiny_model_dir: Path):
    srv = ModelServer(tiny_model_dir, idle_timeout=900)
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture
def clean(server: ModelServer):
    """The shared server as a test leaves it: no faults, the model's own chat replies."""
    yield server
    server.faults, server.chat_reply = Faults(), None


@pytest.fixture(scope="module")
def hf_run(tiny_model_dir: Path, ppdb_data_dir: Path) -> dict:
    # no exemplars: the backends are compared, and exemplar prompts outgrow the tiny model
    return run_lm_eval(LOGIT_TASKS, tiny_model_dir, {**METADATA, "data_dir": str(ppdb_data_dir)},
                       num_fewshot=0)


def completions_args(server: ModelServer, model_dir: Path, **extra: object) -> str:
    args = {"model": "tiny", "base_url": f"{server.base_url}/completions",
            "tokenizer": str(model_dir), "tokenizer_backend": "huggingface", **extra}
    return ",".join(f"{k}={v}" for k, v in args.items())


def chat_args(server: ModelServer, **extra: object) -> str:
    args = {"model": "tiny", "base_url": f"{server.base_url}/chat/completions", **extra}
    return ",".join(f"{k}={v}" for k, v in args.items())


def loglikelihoods(run: dict, task: str) -> list[list[float]]:
    return [[resp[0][0] for resp in sample["resps"]] for sample in run["samples"][task]]


def assert_same_run(run: dict, reference: dict, tol: float = 1e-4) -> None:
    """Same per-document log-likelihoods and the same metrics (float tolerance)."""
    for task in LOGIT_TASKS:
        got, want = loglikelihoods(run, task), loglikelihoods(reference, task)
        assert len(got) == len(want) == 12
        for row, ref in zip(got, want, strict=True):
            assert row == pytest.approx(ref, abs=tol)
        metrics = {k: v for k, v in reference["results"][task].items()
                   if isinstance(v, float) and not k.endswith("stderr,none")}
        assert {"ece,none", "auroc_vanilla,none"} & set(metrics)
        for name, value in metrics.items():
            # relative too: lambda bounds are (1 - mu) / delta with delta near 0
            assert run["results"][task][name] == pytest.approx(value, rel=1e-3, abs=tol), (
                task, name)


def test_local_completions_gives_hf_loglikelihoods(server, hf_run, tiny_model_dir, ppdb_data_dir):
    run = run_lm_eval(LOGIT_TASKS, tiny_model_dir, {**METADATA, "data_dir": str(ppdb_data_dir)},
                      model="local-completions", num_fewshot=0,
                      model_args=completions_args(server, tiny_model_dir), batch_size=8)
    assert_same_run(run, hf_run)


def test_concurrent_requests_and_retries(clean, hf_run, tiny_model_dir, ppdb_data_dir):
    """num_concurrent=4, with the first three request bodies failing once (HTTP 500): lm-eval
    retries them and the numbers are those of hf."""
    clean.faults = Faults(bodies=3, times=1)
    clean.max_in_flight = 0
    run = run_lm_eval(LOGIT_TASKS, tiny_model_dir, {**METADATA, "data_dir": str(ppdb_data_dir)},
                      model="local-completions", batch_size=4, num_fewshot=0,
                      model_args=completions_args(clean, tiny_model_dir, num_concurrent=4))
    assert_same_run(run, hf_run)
    assert clean.max_in_flight > 1
    assert sorted(clean.faults.hits.values()) == [1, 1, 1]


@pytest.mark.parametrize(("concurrent", "stall"), [(1, 0.0), (2, 0.0), (1, 4.0)])
def test_a_failing_server_is_a_clear_error(clean, tiny_model_dir, ppdb_data_dir, concurrent,
                                           stall):
    """A request that keeps failing (HTTP 500) or stalling past the timeout is retried, then the
    run stops with the HTTP error; it never turns into numbers."""
    clean.faults = Faults(bodies=1, times=None, stall_seconds=stall)
    args = completions_args(clean, tiny_model_dir, num_concurrent=concurrent, max_retries=2,
                            timeout=1)
    with pytest.raises(Exception) as raised:  # noqa: B017 - requests', aiohttp's or asyncio's
        run_lm_eval(["calidist_ppdb"], tiny_model_dir,
                    {"data_dir": str(ppdb_data_dir), "calib_size": 2, "eval_size": 2},
                    model="local-completions", model_args=args, batch_size=4)
    assert list(clean.faults.hits.values()) == [2]  # tried, retried, given up
    text = f"{type(raised.value).__name__} {raised.value}"
    assert re.search(r"500|Timeout", text), text


# ------------------------------------------------------------------ stop sequences
def post(url: str, body: dict) -> int:
    request = urllib.request.Request(url, json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def test_the_server_answers_an_empty_stop_list_with_500(server):
    """As transformers serve does (its generate() fails on stop_strings=[]): a task that sends
    `"stop": []` fails the API tests here instead of in a user's run."""
    chat = {"model": "tiny", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}
    completion = {"model": "tiny", "prompt": "Hi", "max_tokens": 2}
    for endpoint, body in (("chat/completions", chat), ("completions", completion)):
        url = f"{server.base_url}/{endpoint}"
        assert post(url, {**body, "stop": []}) == 500
        assert post(url, {**body, "stop": ["</s>"]}) == post(url, body) == 200


# ------------------------------------------------------------------ chat: every family
LETTERS = "abcdefghij"


OPTION = re.compile(r"^([a-j])\. ", re.M)


HINTED = re.compile(r"^Hint: .*?\(([a-j])\).*$", re.M)


def scripted_plan(content: str, seed: object) -> tuple[int | None, int, int, str | None]:
    """What the scripted model answers: (option or None for an unreadable reply, percent,
    reply format, hint line). It follows a hint a third of the time."""
    letters = list(dict.fromkeys(OPTION.findall(content)))
    hints = list(HINTED.finditer(content))
    hint = hints[-1] if hints else None  # the prompt's own, after any few-shot exemplar's
    question = HINTED.sub("", content).replace(HINT_NOTE, "").replace(" \n", "\n").rstrip()
    digest = hashlib.sha256(f"{question}|{seed}".encode()).digest()  # the model's own view
    answer, percent = digest[0] % len(letters), 40 + digest[1] % 60
    follows = hashlib.sha256(content.encode()).digest()[0] % 3 == 0  # swayed by this hint
    if hint and follows:
        answer, percent = LETTERS.index(hint.group(1)), percent - 30
    return (answer if digest[3] % 8 else None), percent, digest[4] % 4, (
        hint.group(0) if hint else None)


def scripted_reply(body: dict) -> str:
    answer, percent, style, hint = scripted_plan(body["messages"][-1]["content"],
                                                 body.get("seed"))
    if answer is None:
        return "I would rather not say."
    letter = LETTERS[answer]
    return [f"The answer is ({letter}). Confidence: {percent}%",
            f"Answer: {letter.upper()}\nConfidence: {percent} %",
            f"{hint or 'Well.'}\nI still think ({letter}) is right, {percent}% confident.",
            f"({letter})\nconfidence: {percent}%"][style]  # "0.62": unreadable (test_verbalized)


def expected_parse(arguments: list) -> list[dict]:
    """The scripted model's intended readings of a document's requests."""
    out = []
    for prompt, gen_kwargs in arguments:
        text = getattr(prompt, "prompt", prompt)  # lm-eval's JsonChatStr, or logged as a list
        messages = json.loads(text[0] if isinstance(text, (list, tuple)) else text)
        answer, percent, _, _ = scripted_plan(messages[-1]["content"],
                                              gen_kwargs.get("seed", 1234))
        out.append({"answer": answer, "confidence": None if answer is None else percent / 100})
    return out


@pytest.fixture(scope="module")
def every_family_data(tmp_path_factory: pytest.TempPathFactory, ppdb_data_dir: Path) -> Path:
    root = write_all(tmp_path_factory.mktemp("every_family"))
    write_mnli(root / "mnli", n_matched=8, n_mismatched=6)
    shutil.copytree(ppdb_data_dir / "ppdb", root / "ppdb")
    return root


def families() -> list[str]:
    # GSM8K's stage 2 needs stage 1's samples (tag calidist_stage2): test_gsm8k_verbalized.py
    found = [p.parent / f"calidist_{p.parent.name}_assertion_verbalized.yaml"
             for p in Path(task_folder()).glob("*/_template_yaml")]
    return sorted(p.parent.name for p in found
                  if p.exists() and "calidist_stage2" not in p.read_text(encoding="utf-8"))


def test_chat_api_runs_every_family(clean, tiny_model_dir, every_family_data):
    """The verbalized CaliDist variant of every family, plus the consistency and SPUQ baselines,
    through local-chat-completions --apply_chat_template: replies read as the model meant them
    (hint echoes included), unreadable ones counted, calibrated and vanilla metrics reported."""
    clean.chat_reply = scripted_reply
    tasks = [f"calidist_{b}_assertion_verbalized" for b in families()]
    assert {"calidist_mnli_assertion_verbalized", "calidist_ppdb_assertion_verbalized"} <= set(
        tasks)
    tasks += ["calidist_csqa_consistency", "calidist_csqa_spuq"]
    metadata = {"data_dir": str(every_family_data), "calib_size": 3, "eval_size": 4, "m": 1,
                "base_url": clean.base_url}
    out = run_lm_eval(tasks, tiny_model_dir, metadata, model="local-chat-completions",
                      model_args=chat_args(clean, num_concurrent=2), batch_size=1,
                      apply_chat_template=True)
    for task in tasks:
        results = {k.split(",")[0]: v for k, v in out["results"][task].items() if "," in k}
        samples = out["samples"][task]
        failures = total = 0
        for sample in samples:
            got = [{k: v for k, v in p.items() if k != "shape"}  # the reply's shape: its own test
                   for resp in sample["filtered_resps"] for p in resp]
            want = expected_parse(sample["arguments"])
            assert got == want, task
            if sample["doc"]["calidist_split"] == "evaluation":
                failures += sum(p["answer"] is None or p["confidence"] is None for p in want)
                total += len(want)
        assert results["parse_fail_rate"] == pytest.approx(failures / total), task
        scores = ["ece_consistency", "ece_entropy", "ece_fsd"] if task.endswith("consistency") \
            else ["ece_spuq", "brier_spuq"] if task.endswith("spuq") \
            else ["ece", "ece_vanilla", "brier", "brier_vanilla", "auroc", "auroc_vanilla"]
        for name in scores:
            assert math.isfinite(results[name]) and 0.0 <= results[name] <= 1.0, (task, name)
    consistency = out["samples"]["calidist_csqa_consistency"][0]
    seeds = [args[1]["seed"] for args in consistency["arguments"]]
    assert seeds == list(range(15))  # an API fixes the seed: one request per sample
    record = consistency["calidist_record"]
    assert record["answers"] == [p["answer"] for p in expected_parse(consistency["arguments"])]


# ------------------------------------------------------------------ the lm_eval command
def lm_eval_cli(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "lm_eval", "--include_path", task_folder(), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})


def test_lm_eval_cli_chat_prints_verbalized_calibration(server, tiny_model_dir, ppdb_data_dir,
                                                         tmp_path):
    """The issue's command, on the real tiny model behind a chat API (without exemplars: 80
    prompts that each fill the tiny model's context cost a minute and show nothing more)."""
    metadata = json.dumps({"data_dir": str(ppdb_data_dir), "calib_size": 4, "eval_size": 4})
    done = lm_eval_cli(
        "--tasks", "calidist_ppdb_assertion_verbalized,calidist_ppdb_consistency",
        "--model", "local-chat-completions", "--model_args",
        chat_args(server, num_concurrent=2), "--apply_chat_template", "--metadata", metadata,
        "--gen_kwargs", "max_gen_toks=4", "--num_fewshot", "0", "--output_path", str(tmp_path),
        "--log_samples")
    assert done.returncode == 0, done.stderr[-3000:]
    table = done.stdout
    for metric in ("ece", "ece_vanilla", "brier", "brier_vanilla", "auroc", "auroc_vanilla",
                   "parse_fail_rate", "ece_consistency", "ece_entropy", "ece_fsd"):
        assert re.search(rf"\|\s*{metric}\s*\|", table), (metric, table)
    results = json.loads(next(tmp_path.rglob("results_*.json")).read_text())["results"]
    verbalized = results["calidist_ppdb_assertion_verbalized"]
    # the random tiny model writes no readable answer: every reply falls under the rule
    assert verbalized["parse_fail_rate,none"] == 1.0
    assert verbalized["requests_per_doc,none"] == 5.0
    assert results["calidist_ppdb_consistency"]["requests_per_doc,none"] == 15.0


# ------------------------------------------------------------------ identical samples
def test_a_server_that_ignores_temperature_is_reported(clean, tiny_model_dir, ppdb_data_dir,
                                                       caplog):
    """transformers serve samples only if the model's generation config does: the 15 seeded
    requests at temperature 1.5 then come back as one reply. The run says so, loudly and once,
    and reports the share of such documents."""
    clean.chat_reply = lambda body: "The answer is (a)."  # whatever the seed and temperature
    metadata = {"data_dir": str(ppdb_data_dir), "calib_size": 2, "eval_size": 3,
                "base_url": clean.base_url}  # as lm-eval's CLI adds --model_args to --metadata
    with caplog.at_level(logging.WARNING):
        out = run_lm_eval(["calidist_ppdb_consistency"], tiny_model_dir, metadata,
                          model="local-chat-completions", model_args=chat_args(clean),
                          batch_size=1, apply_chat_template=True)
    same = [r.getMessage() for r in caplog.records
            if "the samples all gave the same answer" in r.getMessage()]
    assert len(same) == 1, same
    assert same[0].startswith("calidist_ppdb_consistency: on 100% of 3 evaluation documents")
    for cause in ("ignores temperature", "greedy decoding", "sampling=temperature"):
        assert cause in same[0]
    results = out["results"]["calidist_ppdb_consistency"]
    assert results["identical_samples_rate,none"] == 1.0
    assert results["ece_consistency,none"] >= 0.0
    seeds = {args[1]["seed"] for s in out["samples"]["calidist_ppdb_consistency"]
             for args in s["arguments"]}
    assert seeds == set(range(15))  # distinct seeds were asked for: the server ignored them
