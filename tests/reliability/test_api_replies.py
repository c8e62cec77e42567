"""API replies lm-eval cannot parse (empty `choices`, log-probabilities as strings, no `logprobs`,
a chat message without `content`): through `calidist eval` each stops the run with one message
naming the backend, the endpoint, the request and what was missing, not a traceback from lm-eval's
internals (backends.api_replies). The scripted server (tests/openai_server.py, `bad_reply`)
sends them; lm-eval runs in this process with its command line parsing replaced by the same
`simple_evaluate` call (its real command line indexes every lm-eval task, ~15 s a run), so the
backend, the HTTP round trip, the parsers and `calidist eval`'s handling are the real ones."""

from __future__ import annotations

import pytest

from calidist_tasks.backends.api_replies import (
    NO_LOGPROBS,
    generations_problem,
    logprobs_problem,
)

GOOD = {"token_logprobs": [None, -1.0, -2.0, -0.5], "top_logprobs": [None, {"a": -1.0},
                                                                     {"b": -1.5}, {"c": -0.5}]}


def reply(*logprobs) -> dict:
    return {"choices": [{"index": i, "text": "", "logprobs": lp} for i, lp in enumerate(logprobs)]}


@pytest.mark.parametrize(("answer", "ctxlens", "found"), [
    (reply(GOOD), [1], None),
    (reply(GOOD, GOOD), [1, 2], None),
    (reply(GOOD), [1, 2], (1, "the reply has 1 `choices` for 2 requests")),
    ({"error": {"message": "model not loaded"}}, [1],
     (0, "the reply has no `choices` but an error: model not loaded")),
    (reply(None), [1], (0, NO_LOGPROBS)),
    (reply({**GOOD, "token_logprobs": [None, -1.0]}), [1],
     (0, "`logprobs.token_logprobs` has 2 value(s), none for the continuation after the 1 prompt "
         "tokens: the endpoint did not echo")),
    (reply({**GOOD, "token_logprobs": [None, None, -2.0, -0.5]}), [1],
     (0, "`logprobs.token_logprobs` holds null, expected numbers")),
    (reply({"content": [{"token": "a", "logprob": -1.0}]}), [1],
     (0, "the reply's `logprobs` has no `token_logprobs` list")),
    (reply({**GOOD, "top_logprobs": [None, {}, None, {}]}), [1],
     (0, "`logprobs.top_logprobs` holds null and objects, expected objects")),
])
def test_logprobs_problem(answer, ctxlens, found) -> None:
    got = logprobs_problem(answer, ctxlens)
    assert got == found or (got and found and got[0] == found[0] and got[1].startswith(found[1]))


def test_generations_problem() -> None:
    chat = {"choices": [{"index": 0, "message": {"role": "assistant", "content": None}}]}
    assert generations_problem(chat, 1, chat=True) is None  # lm-eval's empty placeholder
    filtered = {"choices": [{"index": 0, "finish_reason": "content_filter"}]}
    assert generations_problem(filtered, 1, chat=True) is None  # lm-eval's own rule
    assert generations_problem({"choices": [{"index": 0}]}, None, chat=False) == (
        0, "the reply's choice has no `text`")
    assert generations_problem({"choices": [{"index": 3, "text": "x"}]}, 1, chat=False) == (
        0, "choice 0 has `index` 3, out of range for 1 choices")
