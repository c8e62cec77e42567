"""Slow half of ``tests/reliability/test_jsonl_inputs.py`` (builds the tiny model or runs lm-eval).

What the module tests: the fast half's docstring."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

from conftest import run_lm_eval
from reliability.support import mnli_lines, write


def test_a_document_longer_than_the_context_is_named_and_cut_from_the_left(
        tmp_path: Path, tiny_model_dir: Path, caplog) -> None:
    """Documented fallback: lm-eval's hf backend cuts a prompt that does not fit from the left and
    still scores it; calidist names the documents concerned before any model time (it counts
    tokens with the model's local tokenizer) so that a truncated run is never taken for a clean
    one. Prompts here are ~500 tokens (tiny tokenizer), the long document's ~1500."""
    rows = [json.loads(x) for x in mnli_lines(6)]
    rows[2]["premise"] = " ".join(["The old river carried leaves past the garden wall."] * 40)
    path = write(tmp_path / "data.jsonl", "\n".join(json.dumps(r) for r in rows))
    metadata = {"data_files": str(path), "calib_size": 2, "eval_size": 4,
                "pretrained": str(tiny_model_dir), "max_length": 1024}  # as lm-eval's CLI merges
    with caplog.at_level(logging.WARNING):
        # zero-shot: with exemplars, a long calibration document would lengthen every prompt
        out = run_lm_eval(["calidist_mnli_probe"], tiny_model_dir, metadata, log_samples=False,
                          model_args=f"pretrained={tiny_model_dir},dtype=float32,max_length=1024",
                          num_fewshot=0)
    ours = [r.getMessage() for r in caplog.records
            if r.name == "calidist_tasks.tasks.context_length"]
    assert len(ours) == 1 and "1 document(s)" in ours[0] and "data.jsonl:3 (" in ours[0], ours
    assert "context of 1024 tokens" in ours[0]
    assert any("exceeds model's maximum length" in r.getMessage() for r in caplog.records)
    results = out["results"]["calidist_mnli_probe"]
    assert all(math.isfinite(results[k]) for k in ("ece,none", "brier,none", "acc,none"))
