"""A small OpenAI-compatible server for the API-backend tests (test infrastructure only).

Serves a local Hugging Face causal LM (the tiny test model) on 127.0.0.1 with

- ``POST /v1/completions``: ``prompt`` as text, token ids, or a batch of either; ``echo`` with
  ``logprobs`` returns the prompt tokens' log-probabilities (what lm-eval's ``local-completions``
  scores multiple choice with), otherwise a generation;
- ``POST /v1/chat/completions``: ``messages`` rendered with the tokenizer's chat template; with
  ``logprobs: true`` each reply token's log-probability and its ``top_logprobs`` most likely
  alternatives (at most the vocabulary) under the model, as ``logprobs.content`` (OpenAI's form;
  the reply's text re-tokenized and scored after the prompt, so scripted replies get them too);
- ``GET /v1/models``.

Generation honours ``max_tokens`` / ``max_completion_tokens``, ``temperature``, ``top_p``,
``top_k``, ``seed`` (same seed, same sample) and ``stop``; like ``transformers serve`` it answers
``"stop": []`` with HTTP 500 (so a task that sends an empty stop list fails here too). It
listens on loopback only, refuses bodies over 1 MiB and generations over 512 tokens, serves at
most ``max_requests`` requests and stops by itself after ``idle_timeout`` seconds without a
request. For the error-handling tests it can fail or stall some requests (``Faults``), a test
may replace the model's chat replies with a function of the request body (``chat_reply``), and
``bad_reply`` makes every reply malformed in one of the ways of ``BAD_REPLIES`` (what a server
lm-eval cannot parse sends; tests/reliability/test_api_replies.py).

    python tests/openai_server.py MODEL_DIR [--port 0] [--idle-timeout 600] [--bad-reply KIND]

prints ``READY http://127.0.0.1:PORT/v1`` once it listens.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

LOOPBACK = ("127.0.0.1", "localhost", "::1")
MAX_BODY = 1 << 20
MAX_TOKENS = 512

# Malformed replies (``ModelServer.bad_reply``): kind -> what the server then sends.
BAD_REPLIES = {
    "empty-choices": "`choices` is an empty list (both endpoints)",
    "string-logprobs": "completions: `logprobs.token_logprobs` as strings (\"-1.25\")",
    "no-logprobs": "no `logprobs` key in a choice (an endpoint without them; both endpoints)",
    "no-echo": "completions: `logprobs` of the generated token only (`echo` ignored)",
    "no-content": "chat: a `message` without `content`; completions: a choice without `text`",
    "positive-logprobs": "completions: `logprobs.token_logprobs` made positive (|value|)",
    "html": "an HTML page (`text/html`) with HTTP 200 instead of JSON (a proxy's error page)",
}
HTML_PAGE = b"<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"


@dataclass
class Faults:
    """Misbehaviour for the error tests: the first ``bodies`` distinct request bodies to arrive
    get HTTP 500 (or, with ``stall_seconds``, a reply that late) ``times`` times each before they
    are served normally (``times=None``: every time)."""

    bodies: int = 0
    times: int | None = None
    stall_seconds: float = 0.0
    hits: Counter = field(default_factory=Counter)  # body -> times it misbehaved

    def strike(self, body: str) -> bool:
        """Whether this arrival of ``body`` misbehaves (call under a lock)."""
        if body not in self.hits and len(self.hits) < self.bodies:
            self.hits[body] = 0
        if body not in self.hits or (self.times is not None and self.hits[body] >= self.times):
            return False
        self.hits[body] += 1
        return True


class ModelServer:
    """The server object: ``start()`` returns the base URL (``.../v1``), ``stop()`` ends it."""

    def __init__(
        self,
        model_dir: str | Path,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        idle_timeout: float = 600.0,
        max_requests: int = 100_000,
        faults: Faults | None = None,
        chat_reply: Callable[[dict[str, Any]], str] | None = None,
        bad_reply: str | None = None,
    ) -> None:
        if host not in LOOPBACK:
            raise ValueError(f"the test server listens on loopback only, not {host!r}")
        if bad_reply is not None and bad_reply not in BAD_REPLIES:
            raise ValueError(f"bad_reply must be one of {sorted(BAD_REPLIES)}, not {bad_reply!r}")
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.torch = torch
        self.name = Path(model_dir).name
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
        self.faults = faults or Faults()
        self.chat_reply = chat_reply
        self.bad_reply = bad_reply
        self.idle_timeout = idle_timeout
        self.max_requests = max_requests
        self.requests: Counter = Counter()  # per path, for the tests' assertions
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()  # one forward pass at a time
        self._count_lock = threading.Lock()
        self._last = time.monotonic()
        self._http = ThreadingHTTPServer((host, port), _handler(self))
        self._http.daemon_threads = True
        self._threads: list[threading.Thread] = []

    @property
    def base_url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> str:
        for target in (self._http.serve_forever, self._watch):
            thread = threading.Thread(target=target, daemon=True)
            thread.start()
            self._threads.append(thread)
        return self.base_url

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()

    def _watch(self) -> None:
        while time.monotonic() - self._last < self.idle_timeout:
            time.sleep(min(1.0, self.idle_timeout))
        self.stop()

    # ---------------------------------------------------------------- requests
    def handle(self, path: str, body: dict[str, Any] | None) -> tuple[int, dict[str, Any]]:
        self._last = time.monotonic()
        with self._count_lock:
            self.requests[path] += 1
            if sum(self.requests.values()) > self.max_requests:
                return 503, _error("this test server's request budget is spent")
        if path == "/v1/models":
            return 200, {"object": "list", "data": [{"id": self.name, "object": "model"}]}
        if path not in ("/v1/completions", "/v1/chat/completions") or body is None:
            return 404, _error(f"no such endpoint: {path}")
        if body.get("stop") == []:  # transformers serve: stop_strings=[] fails in generate()
            return 500, _error("Internal Server Error (an empty stop list, as transformers "
                               "serve answers it)")
        with self._count_lock:
            strike = self.faults.strike(json.dumps(body, sort_keys=True))
        if strike and not self.faults.stall_seconds:
            return 500, _error("injected failure")
        if strike:
            time.sleep(self.faults.stall_seconds)
        try:
            if path == "/v1/completions":
                return 200, self._spoil(self.completions(body))
            return 200, self._spoil(self.chat(body))
        except (KeyError, TypeError, ValueError) as error:
            return 400, _error(f"bad request: {error}")

    def completions(self, body: dict[str, Any]) -> dict[str, Any]:
        prompts = body["prompt"]
        if isinstance(prompts, str) or (prompts and isinstance(prompts[0], int)):
            prompts = [prompts]
        choices = []
        for index, prompt in enumerate(prompts):
            ids = (self.tokenizer(prompt, add_special_tokens=False).input_ids
                   if isinstance(prompt, str) else [int(t) for t in prompt])
            new_ids, finish = self._generate(ids, body)
            text = self.tokenizer.decode(_until_eos(new_ids, self.tokenizer.eos_token_id))
            choice = {"index": index, "text": text, "finish_reason": finish, "logprobs": None}
            if body.get("echo"):
                choice["text"] = self.tokenizer.decode(ids) + text
                if body.get("logprobs") is not None:  # prompt tokens + the generated token(s)
                    choice["logprobs"] = self._logprobs(ids + new_ids, int(body["logprobs"]))
            choices.append(choice)
        return {"id": "cmpl-test", "object": "text_completion", "model": self.name,
                "choices": choices}

    def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        prompt = self.tokenizer.apply_chat_template(
            body["messages"], tokenize=False, add_generation_prompt=True)
        ids = self.tokenizer(prompt, add_special_tokens=False).input_ids
        if self.chat_reply is not None:
            text, finish = self.chat_reply(body), "stop"
        else:
            new_ids, finish = self._generate(ids, body)
            text = self.tokenizer.decode(_until_eos(new_ids, self.tokenizer.eos_token_id),
                                         skip_special_tokens=True)
        text, stopped = _cut(text, body.get("stop"))
        choice = {"index": 0, "message": {"role": "assistant", "content": text},
                  "finish_reason": "stop" if stopped else finish}
        if body.get("logprobs"):
            choice["logprobs"] = {"content": self._reply_logprobs(
                ids, text, int(body.get("top_logprobs") or 0))}
        return {"id": "chatcmpl-test", "object": "chat.completion", "model": self.name,
                "choices": [choice]}

    def _spoil(self, reply: dict[str, Any]) -> dict[str, Any]:
        """``reply`` made malformed as ``bad_reply`` says (unchanged when it is None)."""
        kind = self.bad_reply
        if kind == "empty-choices":
            reply["choices"] = []
        for choice in reply["choices"]:
            logprobs = choice.get("logprobs")
            if logprobs and "token_logprobs" not in logprobs:  # chat's: only no-logprobs applies
                logprobs = None
            if kind == "string-logprobs" and logprobs:
                logprobs["token_logprobs"] = [None if v is None else str(v)
                                              for v in logprobs["token_logprobs"]]
            elif kind == "no-logprobs":
                choice.pop("logprobs", None)
            elif kind == "positive-logprobs" and logprobs:
                logprobs["token_logprobs"] = [None if v is None else abs(v)
                                              for v in logprobs["token_logprobs"]]
            elif kind == "no-echo" and logprobs:
                for key in ("tokens", "token_logprobs", "top_logprobs", "text_offset"):
                    logprobs[key] = logprobs[key][-1:]
            elif kind == "no-content":
                choice.get("message", {}).pop("content", None)
                choice.pop("text", None)
        return reply

    # ---------------------------------------------------------------- model
    def _generate(self, ids: list[int], body: dict[str, Any]) -> tuple[list[int], str]:
        """The generated token ids (an end-of-sequence token included) and the finish reason."""
        torch = self.torch
        limit = body.get("max_tokens", body.get("max_completion_tokens", 16))
        limit = int(limit if limit is not None else 16)
        if not 0 <= limit <= MAX_TOKENS:
            raise ValueError(f"max_tokens must be between 0 and {MAX_TOKENS}")
        if limit == 0:
            return [], "length"
        temperature = float(body.get("temperature") or 0.0)
        sample = temperature > 0
        options: dict[str, Any] = {"do_sample": sample, "max_new_tokens": limit}
        if sample:
            options.update(temperature=temperature, top_p=float(body.get("top_p") or 1.0),
                           top_k=int(body.get("top_k") or 0))
        eos = self.tokenizer.eos_token_id
        with self._track(), self._lock, torch.no_grad():
            if sample:
                seed = body.get("seed")
                torch.manual_seed(int(seed) if seed is not None else time.time_ns() % 2**31)
            output = self.model.generate(
                torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                pad_token_id=self.tokenizer.pad_token_id, eos_token_id=eos, **options)
        new = output[0, len(ids):].tolist()
        return new, "stop" if eos in new else "length"

    def _logprobs(self, ids: list[int], top: int) -> dict[str, Any]:
        torch = self.torch
        with self._track(), self._lock, torch.no_grad():
            logits = self.model(torch.tensor([ids])).logits[0].float()
        logprobs = torch.log_softmax(logits, dim=-1)
        tokens = [self.tokenizer.decode([t]) for t in ids]
        token_logprobs: list[float | None] = [None]
        top_logprobs: list[dict[str, float] | None] = [None]
        for position in range(1, len(ids)):
            row = logprobs[position - 1]
            token_logprobs.append(float(row[ids[position]]))
            values, indices = row.topk(max(top, 1))
            top_logprobs.append({self.tokenizer.decode([int(i)]): float(v)
                                 for v, i in zip(values, indices, strict=True)})
        offsets, at = [], 0
        for token in tokens:
            offsets.append(at)
            at += len(token)
        return {"tokens": tokens, "token_logprobs": token_logprobs,
                "top_logprobs": top_logprobs, "text_offset": offsets}

    def _reply_logprobs(self, prompt_ids: list[int], text: str, top: int) -> list[dict[str, Any]]:
        """``logprobs.content`` of a chat reply: each of its tokens after the prompt, with its
        log-probability and the ``top`` most likely tokens at its place."""
        torch = self.torch
        reply_ids = self.tokenizer(text, add_special_tokens=False).input_ids
        with self._track(), self._lock, torch.no_grad():
            logits = self.model(torch.tensor([prompt_ids + reply_ids])).logits[0].float()
        logprobs = torch.log_softmax(logits, dim=-1)
        content = []
        for i, token in enumerate(reply_ids):
            row = logprobs[len(prompt_ids) + i - 1]
            values, indices = row.topk(min(max(top, 0), row.numel()))
            content.append({"token": self.tokenizer.decode([token]), "logprob": float(row[token]),
                            "top_logprobs": [{"token": self.tokenizer.decode([int(t)]),
                                              "logprob": float(v)}
                                             for v, t in zip(values, indices, strict=True)]})
        return content

    def _track(self) -> _InFlight:
        return _InFlight(self)


class _InFlight:
    """Counts requests that are waiting for or using the model (to observe concurrency)."""

    def __init__(self, server: ModelServer) -> None:
        self.server = server

    def __enter__(self) -> None:
        with self.server._count_lock:
            self.server.in_flight += 1
            self.server.max_in_flight = max(self.server.max_in_flight, self.server.in_flight)

    def __exit__(self, *exc: object) -> None:
        with self.server._count_lock:
            self.server.in_flight -= 1


def _error(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "test_server_error"}}


def _until_eos(ids: list[int], eos: int | None) -> list[int]:
    return ids[: ids.index(eos)] if eos in ids else ids


def _cut(text: str, stop: Any) -> tuple[str, bool]:
    stops = [stop] if isinstance(stop, str) else [s for s in (stop or []) if s]
    cuts = [text.index(s) for s in stops if s in text]
    return (text[: min(cuts)], True) if cuts else (text, False)


def _handler(server: ModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            self._reply(*server.handle(self.path.split("?")[0], None))

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                self._reply(413, _error("request body too large"))
                self.close_connection = True
                return
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except json.JSONDecodeError:
                self._reply(400, _error("body is not JSON"))
                return
            self._reply(*server.handle(self.path.split("?")[0], body))

        def _reply(self, status: int, payload: dict[str, Any]) -> None:
            data, kind = json.dumps(payload).encode(), "application/json"
            if status == 200 and server.bad_reply == "html":
                data, kind = HTML_PAGE, "text/html"
            try:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                self.close_connection = True

        def log_message(self, *args: Any) -> None:  # quiet: tests read the counters instead
            pass

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--idle-timeout", type=float, default=600.0)
    parser.add_argument("--max-requests", type=int, default=100_000)
    parser.add_argument("--bad-reply", choices=sorted(BAD_REPLIES),
                        help="make every reply malformed this way")
    args = parser.parse_args()
    server = ModelServer(args.model_dir, port=args.port, idle_timeout=args.idle_timeout,
                         max_requests=args.max_requests, bad_reply=args.bad_reply)
    print(f"READY {server.start()}", flush=True)
    server._threads[-1].join()  # the idle watcher ends the server


if __name__ == "__main__":
    main()
