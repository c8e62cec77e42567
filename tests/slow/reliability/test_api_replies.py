"""Slow half of ``tests/reliability/test_api_replies.py`` (builds the tiny model or runs lm-eval).

What the module tests: the fast half's docstring."""

from __future__ import annotations

from pathlib import Path

import lm_eval.__main__
import pytest
from conftest import run_lm_eval
from openai_server import ModelServer

from calidist_tasks import cli
from calidist_tasks.backends.api_replies import (
    NO_LOGPROBS,
    checked_replies,
)

METADATA = {"calib_size": 2, "eval_size": 2, "m": 1}


CHAT_REPLY = "Step by step: (a). The answer is (a) yes. Overall Confidence: 80%"


@pytest.fixture(scope="module")
def server(tiny_model_dir: Path):
    """The scripted server; chat replies are a fixed text (no generation to wait for)."""
    srv = ModelServer(tiny_model_dir, idle_timeout=300, chat_reply=lambda body: CHAT_REPLY)
    srv.start()
    yield srv
    srv.stop()


def calidist_eval(monkeypatch, server: ModelServer, kind: str, task: str, model: str,
                  model_args: str, data_dir: Path, **kwargs) -> str:
    """`calidist eval` against the server sending ``kind`` replies: the message it exits with."""
    monkeypatch.setattr(server, "bad_reply", kind)
    metadata = {**METADATA, "data_dir": str(data_dir)}
    monkeypatch.setattr(lm_eval.__main__, "cli_evaluate", lambda: run_lm_eval(
        [task], Path("unused"), metadata, model=model, model_args=model_args, batch_size=1,
        log_samples=False, **kwargs))
    with pytest.raises(SystemExit) as stopped:
        cli.main(["eval", "--model", model, "--tasks", task])
    message = str(stopped.value.code)
    assert message.startswith(f"calidist: {model} (endpoint {server.base_url}/"), message
    return message


@pytest.mark.parametrize(("kind", "missing"), [
    ("empty-choices", "the reply has no `choices` (an empty list)"),
    ("string-logprobs", "`logprobs.token_logprobs` holds strings, expected numbers"),
    ("no-logprobs", NO_LOGPROBS),
    ("no-echo", "`logprobs.token_logprobs` has 1 value(s), none for the continuation after the "),
], ids=["empty-choices", "string-logprobs", "no-logprobs", "no-echo"])
def test_local_completions_replies_lm_eval_cannot_parse(monkeypatch, server, tiny_model_dir,
                                                        ppdb_data_dir, kind, missing):
    args = (f"model=tiny,base_url={server.base_url}/completions,tokenizer={tiny_model_dir},"
            "tokenizer_backend=huggingface,tokenized_requests=False,max_retries=1")
    if kind == "no-logprobs":  # the concurrent path too: the same message
        args += ",num_concurrent=2"
    message = calidist_eval(monkeypatch, server, kind, "calidist_ppdb_assertion",
                            "local-completions", args, ppdb_data_dir)
    assert f"local-completions (endpoint {server.base_url}/completions) sent a reply lm-eval " \
           f"cannot parse: {missing}" in message
    assert "Request: the prompt ending '…" in message and "The answer is (" in message
    assert "Reply: {" in message


@pytest.mark.parametrize(("kind", "missing"), [
    ("empty-choices", "the reply has no `choices` (an empty list)"),
    ("no-content", "the reply's choice has no `message.content`"),
], ids=["empty-choices", "no-content"])
def test_chat_replies_lm_eval_cannot_parse(monkeypatch, server, ppdb_data_dir, kind, missing):
    """Empty `choices` crash lm-eval (fewer answers than requests); a message without `content`
    became an empty reply, every document unreadable, NaN metrics: both now stop the run."""
    args = f"model=tiny,base_url={server.base_url}/chat/completions,max_retries=1"
    message = calidist_eval(monkeypatch, server, kind, "calidist_ppdb_verbalized",
                            "local-chat-completions", args, ppdb_data_dir,
                            apply_chat_template=True)
    assert f"sent a reply lm-eval cannot parse: {missing}. Request: the prompt ending" in message


def test_good_replies_pass_the_checks(server, tiny_model_dir, ppdb_data_dir):
    """Batches of 4 prompts, 2 at once: every reply passes, and lm-eval's own parsers are back
    afterwards."""
    from lm_eval.models.openai_completions import LocalChatCompletion, LocalCompletionsAPI

    server.bad_reply = None
    parsers = [vars(LocalCompletionsAPI)["parse_logprobs"],
               vars(LocalChatCompletion)["parse_generations"]]
    args = (f"model=tiny,base_url={server.base_url}/completions,tokenizer={tiny_model_dir},"
            "tokenizer_backend=huggingface,num_concurrent=2")
    metadata = {**METADATA, "calib_size": 1, "eval_size": 1, "data_dir": str(ppdb_data_dir)}
    with checked_replies():
        assert vars(LocalCompletionsAPI)["parse_logprobs"] is not parsers[0]
        run = run_lm_eval(["calidist_ppdb_assertion"], tiny_model_dir, metadata,
                          model="local-completions", model_args=args, batch_size=4)
    assert run["results"]["calidist_ppdb_assertion"]["n_evaluation,none"] == 1
    assert [vars(LocalCompletionsAPI)["parse_logprobs"],
            vars(LocalChatCompletion)["parse_generations"]] == parsers
