"""Slow half of ``tests/reliability/test_parser_inputs.py`` (builds the tiny model or runs lm-eval).

What the module tests: the fast half's docstring."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_lm_eval
from reliability.test_parser_inputs import HUGE, _metadata

from calidist_tasks.scoring.records import line_record
from calidist_tasks.tasks.gsm8k import same_number


def test_a_huge_number_through_lm_eval_and_a_chat_api(tiny_model_dir: Path, tmp_path: Path) -> None:
    """End to end (local-chat-completions, scripted replies): one reply with a 5,000-digit number
    among right ones; the run finishes and counts it as the one unreadable reply."""
    from openai_server import ModelServer

    def reply(body: dict) -> str:
        content = body["messages"][-1]["content"]
        number = HUGE if "buys 1 more" in content else "7"
        return f"The answer is {number}. Confidence: 80%"

    server = ModelServer(tiny_model_dir, idle_timeout=300, chat_reply=reply)
    server.start()
    try:
        out = run_lm_eval(["calidist_gsm8k_verbalized"], tiny_model_dir, _metadata(tmp_path),
                          model="local-chat-completions", batch_size=1, apply_chat_template=True,
                          model_args=f"model=tiny,base_url={server.base_url}/chat/completions")
    finally:
        server.stop()
    samples = out["samples"]["calidist_gsm8k_verbalized"]
    unread = [s for s in samples if line_record(s)["prediction"] is None]
    assert [s["resps"][0][0][:20] for s in unread] == ["The answer is 999999"]
    assert all(same_number(line_record(s)["prediction"], "7") for s in samples if s not in unread)
    results = out["results"]["calidist_gsm8k_verbalized"]
    evaluation = [s for s in samples if line_record(s)["split"] == "evaluation"]
    assert results["parse_fail_rate,none"] == pytest.approx(
        sum(s in unread for s in evaluation) / len(evaluation))
