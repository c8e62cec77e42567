"""Explaining API replies lm-eval cannot parse.

lm-eval's OpenAI-format backends (``local-completions``, ``local-chat-completions`` and their
``openai-*`` twins) read each JSON reply with the parsers ``parse_logprobs`` /
``parse_generations``, which assume the reply is well formed. When it is not, the run ends in a
traceback from lm-eval's internals that names neither the server nor what was wrong:

- empty ``choices`` (or fewer than the batch's prompts): ``ValueError: zip() argument 2 is
  shorter than argument 1`` (fewer answers than requests, found when lm-eval puts them back in
  order); no ``choices`` at all: ``KeyError: 'choices'`` from a completions endpoint, an empty
  reply with a logged warning from a chat endpoint (as for a message without ``content``), so
  every document unreadable and NaN scores;
- ``logprobs.token_logprobs`` as strings: ``TypeError: unsupported operand type(s) for +: 'int'
  and 'str'``; as ``null``: ``... 'int' and 'NoneType'``;
- no ``logprobs`` (an endpoint without prompt log-probabilities): ``KeyError: 'logprobs'``, or
  ``TypeError: 'NoneType' object is not subscriptable`` for ``"logprobs": null``;
- a completions endpoint that ignores ``echo``: no error at all, every log-likelihood summed over
  nothing, 0.0 (so every option ties);
- positive ``token_logprobs`` (impossible for a log-probability): used as they are;
- a body that is not JSON with HTTP 200 (a proxy's HTML error page): ``JSONDecodeError`` from
  lm-eval's ``model_call`` (``ContentTypeError`` on its concurrent path).

``checked_replies()`` wraps those parsers (through ``lm_eval_compat.reply_parsers_wrapped``) so
that every reply is checked as it arrives, before lm-eval parses it, and a reply lm-eval cannot
read raises ``APIReplyError`` naming the backend, the endpoint, the request (the end of its
prompt, where lm-eval passes it) and what was missing. ``calidist eval`` runs lm-eval inside it
and prints only that message. NaN log-probabilities parse (JSON allows them in Python's reader)
and are refused per document by the tasks (``joining.outcome_from_loglikelihoods``); a chat reply
whose ``content`` is ``null`` (a content filter, a reasoning model out of tokens) stays lm-eval's
empty placeholder (an empty reply where log-probabilities were asked for), which the verbalized
parser counts as unreadable (``parse_fail_rate``).

Chat generations also ask for token log-probabilities (``logprobs: true``, ``top_logprobs:
answer_logprobs.TOP_LOGPROBS``; ``--gen_kwargs logprobs=false`` asks for none) and each reply
comes back as an ``chat_logprobs.ScoredReply`` carrying its tokens, for CaliDist (log-prob). A
reply without them (``logprobs.content``) raises ``APIReplyError`` (``NO_CHAT_LOGPROBS``).
"""

from __future__ import annotations

import gc
import inspect
import json
import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from calidist_tasks.backends import lm_eval_compat as compat
from calidist_tasks.confidence.chat_logprobs import TOP_LOGPROBS, ScoredReply, Token

NO_LOGPROBS = ("the reply has no `logprobs`: the endpoint does not return prompt "
               "log-probabilities; logit tasks need `echo` + `logprobs` support, use the "
               "verbalized tasks or another server")
NO_ECHO = ("`logprobs.token_logprobs` has {n} value(s), none for the continuation after the "
           "{ctxlen} prompt tokens: the endpoint did not echo the prompt's log-probabilities; "
           "logit tasks need `echo` + `logprobs` support, use the verbalized tasks or another "
           "server")
NO_CHAT_LOGPROBS = (
    "the reply has no token log-probabilities (`logprobs.content`) although the request asked "
    "for them (`logprobs: true`): this server returns no logprobs for chat completions, and "
    "CaliDist (log-prob) reads the answer token's probability from them; use a server that "
    "returns them (vLLM does), or pass --gen_kwargs logprobs=false to read the verbalized "
    "confidence only")
EXCERPT = 100  # characters of the prompt's end shown
REPLY_EXCERPT = 400  # characters of the reply shown (its long values cut)


log = logging.getLogger(__name__)


class APIReplyError(RuntimeError):
    """A reply of an API backend that lm-eval cannot turn into answers."""


# ---------------------------------------------------------------------- what is wrong
Problem = tuple[int, str]  # (index of the request in its batch, what is wrong)
ASKED = "_calidist_logprobs_asked"  # set on a chat model: its last request asked for logprobs


def _kinds(values: Sequence[Any], accept: Callable[[Any], bool]) -> tuple[str, str] | None:
    """The JSON kinds of the values ``accept`` refuses ("strings", "null", ...) and the first of
    them, or None."""
    names = {str: "strings", type(None): "null", list: "lists", dict: "objects",
             bool: "booleans"}
    bad = [v for v in values if not accept(v)]
    if not bad:
        return None
    kinds = sorted({names.get(type(v), type(v).__name__) for v in bad})
    return " and ".join(kinds), json.dumps(bad[0])[:40]


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _choices(reply: Any, expected: int | None) -> tuple[list, Problem | None]:
    """A reply's ``choices``, or what is wrong with them (too few for ``expected`` requests)."""
    if not isinstance(reply, dict):
        return [], (0, f"the reply is not a JSON object but {type(reply).__name__}")
    choices = reply.get("choices")
    if not isinstance(choices, list) or not choices:
        what = ("the reply has no `choices`" if choices is None or "choices" not in reply
                else "the reply has no `choices` (an empty list)" if choices == []
                else f"the reply's `choices` is {json.dumps(choices)[:40]}, not a list")
        error = reply.get("error")
        if error:
            message = error.get("message", error) if isinstance(error, dict) else error
            what += f" but an error: {str(message)[:200]}"
        return [], (0, what)
    if expected is not None and len(choices) < expected:
        return [], (len(choices), f"the reply has {len(choices)} `choices` for {expected} "
                                  "requests")
    for position, choice in enumerate(choices):
        if not isinstance(choice, dict) or not isinstance(choice.get("index"), int):
            return [], (position, f"choice {position} has no `index`")
        if not 0 <= choice["index"] < len(choices):
            return [], (position, f"choice {position} has `index` {choice['index']}, "
                                  f"out of range for {len(choices)} choices")
    return sorted(choices, key=lambda c: c["index"]), None


def logprobs_problem(reply: Any, ctxlens: Sequence[int]) -> Problem | None:
    """What keeps lm-eval's ``LocalCompletionsAPI.parse_logprobs`` from reading ``reply`` (one
    completions reply to a batch of prompts with these context lengths), or None."""
    choices, problem = _choices(reply, len(ctxlens))
    if problem:
        return problem
    for position, (choice, ctxlen) in enumerate(zip(choices, ctxlens, strict=False)):
        logprobs = choice.get("logprobs")
        if logprobs is None:
            return position, NO_LOGPROBS
        if not isinstance(logprobs, dict):
            return position, f"the reply's `logprobs` is {json.dumps(logprobs)[:40]}, not an object"
        for key in ("token_logprobs", "top_logprobs"):
            if not isinstance(logprobs.get(key), list):
                return position, (f"the reply's `logprobs` has no `{key}` list (the completions "
                                  "format: `tokens`, `token_logprobs`, `top_logprobs`)")
        values = logprobs["token_logprobs"]
        span = values[ctxlen:-1]  # what lm-eval sums: the continuation's tokens
        if not span:
            return position, NO_ECHO.format(n=len(values), ctxlen=ctxlen)
        bad = _kinds(span, _is_number)
        if bad:
            return position, (f"`logprobs.token_logprobs` holds {bad[0]}, expected numbers (the "
                              f"continuation's log-probabilities; found {bad[1]})")
        positive = [value for value in span if value > 0]
        if positive:
            return position, (f"`logprobs.token_logprobs` holds positive values (found "
                              f"{positive[0]!r}); a log-probability is at most 0")
        tops = logprobs["top_logprobs"][ctxlen:-1]
        bad = _kinds(tops, lambda top: isinstance(top, dict) and bool(top)
                     and all(_is_number(v) for v in top.values()))
        if bad:
            return position, (f"`logprobs.top_logprobs` holds {bad[0]}, expected objects of "
                              f"token: log-probability (found {bad[1]})")
    return None


def generations_problem(reply: Any, requests: int | None, *, chat: bool) -> Problem | None:
    """What keeps lm-eval's ``parse_generations`` from reading ``reply`` (a completions or, with
    ``chat``, a chat-completions reply to ``requests`` prompts, None: not known), or None."""
    choices, problem = _choices(reply, requests)
    if problem:
        return problem
    for position, choice in enumerate(choices):
        if chat:
            if choice.get("finish_reason") == "content_filter":
                continue  # lm-eval's own rule: an empty reply
            message = choice.get("message")
            if not isinstance(message, dict) or "content" not in message:
                return position, "the reply's choice has no `message.content`"
            text, where = message["content"], "`message.content`"
        else:
            if "text" not in choice:
                return position, "the reply's choice has no `text`"
            text, where = choice["text"], "`text`"
        if text is not None and not isinstance(text, str):
            return position, f"{where} is {json.dumps(text)[:40]}, not a string"
    return None


def chat_tokens(choice: dict[str, Any]) -> tuple[list[Token], str | None]:
    """A chat choice's generated tokens (``logprobs.content``), or what is wrong with them."""
    logprobs = choice.get("logprobs")
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not isinstance(content, list):
        return [], NO_CHAT_LOGPROBS
    tokens = []
    for position, entry in enumerate(content):
        try:
            listed = tuple((str(t["token"]), float(t["logprob"]))
                           for t in entry.get("top_logprobs") or ())
            tokens.append((str(entry["token"]), float(entry["logprob"]), listed))
        except (AttributeError, KeyError, TypeError, ValueError):
            return [], (f"`logprobs.content[{position}]` is {json.dumps(entry)[:60]}, not "
                        "{token, logprob, top_logprobs: [{token, logprob}]}")
    return tokens, None


# ---------------------------------------------------------------------- the message
def _tail(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= EXCERPT else "…" + text[-EXCERPT:]


def _prompt(lm: Any, kwargs: dict[str, Any], position: int) -> str | None:
    """The end of the prompt of request ``position`` of the batch, where lm-eval passed it."""
    try:
        tokens = kwargs.get("tokens")
        if tokens is not None:
            request = tokens[position]
            text = request if isinstance(request, str) else lm.decode_batch([list(request)])[0]
            return _tail(text)
        contexts = kwargs.get("contexts")
        if contexts is not None:
            context = contexts[position]
            prompt = getattr(context, "prompt", context)  # lm-eval's JsonChatStr: the messages
            if isinstance(prompt, str) and prompt.startswith("["):
                with_messages = json.loads(prompt)
                prompt = str(with_messages[-1].get("content", "")) if with_messages else ""
            return _tail(str(prompt))
    except (IndexError, KeyError, TypeError, ValueError, AttributeError):
        pass
    return None


def _shorten(value: Any) -> Any:
    """``value`` with long strings and lists cut (the reply's shape, not its whole text)."""
    if isinstance(value, str) and len(value) > 24:
        return value[:20] + "…"
    if isinstance(value, list):
        head = [_shorten(v) for v in value[:4]]
        return head + [f"… {len(value) - 4} more"] if len(value) > 4 else head
    if isinstance(value, dict):
        return {key: _shorten(v) for key, v in value.items()}
    return value


def _reply(reply: Any) -> str:
    try:
        text = json.dumps(_shorten(reply), ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(reply)
    return text if len(text) <= REPLY_EXCERPT else text[:REPLY_EXCERPT] + "…"


def explain(lm: Any, problem: str, reply: Any, prompt: str | None = None) -> APIReplyError:
    """The error for a reply of ``lm`` lm-eval cannot parse: backend, endpoint, what was wrong,
    the request (the end of its prompt) when known, the start of the reply."""
    request = f" Request: the prompt ending {prompt!r}." if prompt else ""
    return APIReplyError(
        f"{compat.api_backend(lm)} (endpoint {compat.api_endpoint(lm)}) sent a reply lm-eval "
        f"cannot parse: {problem}.{request} Reply: {_reply(reply)}")


# ---------------------------------------------------------------------- the checks
def _checked(name: str, original: compat.Parser) -> compat.Parser:
    """``original`` (one of lm-eval's reply parsers), checking each reply first."""
    logprobs = name.endswith("parse_logprobs")
    chat = name.startswith("LocalChatCompletion.")

    def parse(lm: Any, outputs: Any, **kwargs: Any) -> Any:
        replies = outputs if isinstance(outputs, list) else [outputs]
        for reply in replies:
            if isinstance(reply, list | str | int | float | type(None)):  # JSON, not an object
                raise explain(lm, "the reply is not a JSON object", reply)
            if not isinstance(reply, dict):  # not JSON at all (LiteLLM's objects): theirs
                return original(lm, outputs, **kwargs)
        for reply in replies:
            if logprobs:
                found = logprobs_problem(reply, list(kwargs.get("ctxlens") or [1]))
            else:
                contexts = kwargs.get("contexts")
                found = generations_problem(
                    reply, len(contexts) if contexts is not None else None, chat=chat)
            if found:
                position, problem = found
                raise explain(lm, problem, reply, _prompt(lm, kwargs, position))
        try:
            answers = original(lm, outputs, **kwargs)
        except (KeyError, IndexError, TypeError) as error:  # a shape the checks do not know
            raise explain(lm, f"lm-eval's {name} failed with {type(error).__name__}: {error}",
                          replies[0], _prompt(lm, kwargs, 0)) from error
        return _scored(lm, replies, answers, kwargs) if chat and getattr(lm, ASKED, False) \
            else answers

    parse.__name__ = name.rsplit(".", 1)[1]
    parse.__doc__ = f"lm-eval's {name}, each reply checked first (backends.api_replies)."
    return parse


def _scored(lm: Any, replies: list[dict], answers: list, kwargs: dict[str, Any]) -> list:
    """lm-eval's chat ``answers`` (one per choice of ``replies``, in order) as ``ScoredReply``
    strings carrying their tokens; a choice without them raises ``APIReplyError``."""
    choices = [(reply, choice) for reply in replies
               for choice in sorted(reply["choices"], key=lambda c: c["index"])]
    if len(choices) != len(answers):  # lm-eval's own fallback (a blocked reply): left as it is
        return answers
    scored = []
    for position, ((reply, choice), answer) in enumerate(zip(choices, answers, strict=True)):
        if answer is None or choice.get("finish_reason") == "content_filter":
            if answer is None:  # lm-eval's warning, which an answer that is not None skips
                log.warning("API returned null content (a content filter, or a reasoning model "
                            "out of max_gen_toks): the reply is empty, unreadable")
            scored.append(ScoredReply(answer or "", ()))  # no text: unreadable, both readings
            continue
        tokens, problem = chat_tokens(choice)
        if problem:
            raise explain(lm, problem, reply, _prompt(lm, kwargs, position))
        scored.append(ScoredReply(answer, tokens))
    return scored


def _asking_logprobs(name: str, create_payload: Any) -> Any:
    """A chat model's ``_create_payload`` (``name``: both classes' are wrapped alike) that also
    asks for token log-probabilities, unless the generation kwargs set ``logprobs``
    (``--gen_kwargs logprobs=false``)."""

    def payload(lm: Any, *args: Any, **kwargs: Any) -> dict:
        body = create_payload(lm, *args, **kwargs)
        body.setdefault("logprobs", True)
        if body["logprobs"]:
            body.setdefault("top_logprobs", TOP_LOGPROBS)
        setattr(lm, ASKED, bool(body["logprobs"]))
        return body

    return payload


def _not_json(lm: Any, error: Exception) -> APIReplyError:
    """The error for an HTTP reply that is not JSON (an HTML error page sent with status 200)."""
    body = getattr(error, "doc", None)  # json's error holds the text; aiohttp's does not
    start = f"; it starts {' '.join(body.split())[:EXCERPT]!r}" if isinstance(body, str) else ""
    return explain(lm, f"the reply is not JSON ({type(error).__name__}: {error}){start}", body)


def _decoding_checked(name: str, original: Any) -> Any:
    """lm-eval's ``TemplateAPI.<name>`` (``model_call`` or the coroutine ``amodel_call``), whose
    JSON decoding error becomes an ``APIReplyError`` naming the backend and endpoint."""
    from aiohttp import ContentTypeError  # lm-eval's API backends need it

    not_json = (json.JSONDecodeError, ContentTypeError)
    if inspect.iscoroutinefunction(original):
        async def call_async(lm: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return await original(lm, *args, **kwargs)
            except not_json as error:
                raise _not_json(lm, error) from error

        return call_async

    def call(lm: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return original(lm, *args, **kwargs)
        except not_json as error:
            raise _not_json(lm, error) from error

    return call


@contextmanager
def checked_replies() -> Iterator[None]:
    """While the block runs, every reply of lm-eval's OpenAI-format backends is checked before
    lm-eval parses it; one it cannot parse, or one that is not JSON at all, raises
    ``APIReplyError``; chat generations ask for token log-probabilities and carry them (see the
    module)."""
    with compat.reply_parsers_wrapped(_checked), \
            compat.methods_wrapped(compat.API_CALLS, _decoding_checked), \
            compat.methods_wrapped(tuple(compat.CHAT_PAYLOADS), _asking_logprobs):
        yield


def discard_unfinished_requests() -> None:
    """Collect what a run stopped by ``APIReplyError`` left behind, quietly: on lm-eval's
    concurrent path (``num_concurrent`` > 1) the other requests' asyncio tasks fail when the run
    stops, and asyncio would print "Task exception was never retrieved" and a traceback for each
    whenever they are collected (at exit: after the one message that matters)."""
    log = logging.getLogger("asyncio")
    disabled, log.disabled = log.disabled, True
    try:
        gc.collect()
    finally:
        log.disabled = disabled
