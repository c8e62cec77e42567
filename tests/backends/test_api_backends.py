"""lm-eval's API backends against a real HTTP server (tests/openai_server.py, the tiny model):
logit variants through local-completions (same log-likelihoods and metrics as hf), verbalized,
consistency and SPUQ variants through local-chat-completions --apply_chat_template (every
family), concurrency, retries, and clear errors from a failing or stalling server."""

from __future__ import annotations

from pathlib import Path

from calidist_tasks import task_folder


def generation_configs() -> dict[str, dict]:
    from lm_eval.tasks._yaml_loader import load_yaml

    configs = {path.stem: load_yaml(path, resolve_func=False)
               for path in sorted(Path(task_folder()).glob("*/calidist_*.yaml"))}
    return {name: c["generation_kwargs"] for name, c in configs.items()
            if c.get("output_type") == "generate_until"}


def test_no_generation_task_sends_an_empty_stop_list(monkeypatch):
    """What lm-eval 0.4.13 puts in "stop" for every generation task's `until`, on the backends
    that know no EOS string (no tokenizer): never an empty list, never an empty string."""
    from lm_eval.models.openai_completions import (
        LocalChatCompletion,
        LocalCompletionsAPI,
        OpenAIChatCompletion,
    )

    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    url = "http://127.0.0.1:9/v1"
    backends = [LocalChatCompletion(model="m", base_url=f"{url}/chat/completions"),
                LocalCompletionsAPI(model="m", base_url=f"{url}/completions",
                                    tokenizer_backend=None),
                OpenAIChatCompletion(model="gpt-4o-mini")]
    configs = generation_configs()
    assert {"calidist_ppdb_verbalized", "calidist_ppdb_consistency", "calidist_ppdb_spuq",
            "calidist_gsm8k"} <= set(configs)
    messages = [{"role": "user", "content": "Hi"}]
    for name, gen_kwargs in configs.items():
        for lm in backends:
            prompt = messages if isinstance(lm, LocalChatCompletion) else "Hi"
            stop = lm._create_payload(prompt, generate=True, gen_kwargs=dict(gen_kwargs),
                                      eos=lm.eos_string)["stop"]
            assert stop and all(stop), (name, type(lm).__name__, stop)
