"""API replies that parse but cannot be true, or are not JSON at all (issue 28, items 4 and 6): a
completions server's positive log-probabilities, and an HTML page sent with HTTP 200 (a proxy's
error page), each stop `calidist eval` with one message naming the backend and the endpoint,
through the scripted server (tests/openai_server.py) over HTTP, as
tests/reliability/test_api_replies.py drives it."""

from __future__ import annotations

import pytest
from openai_server import ModelServer

from slow.reliability.test_api_replies import CHAT_REPLY, calidist_eval


@pytest.fixture(scope="module")
def server(tiny_model_dir):
    srv = ModelServer(tiny_model_dir, idle_timeout=300, chat_reply=lambda body: CHAT_REPLY)
    srv.start()
    yield srv
    srv.stop()


def completions_args(server: ModelServer, tiny_model_dir, concurrent: int = 1) -> str:
    return (f"model=tiny,base_url={server.base_url}/completions,tokenizer={tiny_model_dir},"
            f"tokenizer_backend=huggingface,tokenized_requests=False,max_retries=1,"
            f"num_concurrent={concurrent}")


def test_positive_logprobs_are_refused(monkeypatch, server, tiny_model_dir, ppdb_data_dir):
    message = calidist_eval(monkeypatch, server, "positive-logprobs", "calidist_ppdb_assertion",
                            "local-completions", completions_args(server, tiny_model_dir),
                            ppdb_data_dir)
    assert "cannot parse: `logprobs.token_logprobs` holds positive values (found " in message
    assert "a log-probability is at most 0" in message


@pytest.mark.parametrize("concurrent", [1, 2], ids=["one-at-a-time", "concurrent"])
def test_an_html_page_from_a_completions_endpoint_is_named(monkeypatch, server, tiny_model_dir,
                                                          ppdb_data_dir, concurrent):
    message = calidist_eval(monkeypatch, server, "html", "calidist_ppdb_assertion",
                            "local-completions",
                            completions_args(server, tiny_model_dir, concurrent), ppdb_data_dir)
    assert f"local-completions (endpoint {server.base_url}/completions) sent a reply lm-eval " \
           "cannot parse: the reply is not JSON (" in message


def test_an_html_page_from_a_chat_endpoint_is_named(monkeypatch, server, ppdb_data_dir):
    args = f"model=tiny,base_url={server.base_url}/chat/completions,max_retries=1"
    message = calidist_eval(monkeypatch, server, "html", "calidist_ppdb_verbalized",
                            "local-chat-completions", args, ppdb_data_dir,
                            apply_chat_template=True)
    assert "sent a reply lm-eval cannot parse: the reply is not JSON (JSONDecodeError" in message
    assert "502 Bad Gateway" in message  # the start of the page
