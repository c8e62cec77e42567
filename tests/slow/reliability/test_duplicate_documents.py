"""Slow half of ``tests/reliability/test_duplicate_documents.py`` (runs a model or lm-eval).

What the module tests: the fast half's docstring."""

from __future__ import annotations

from pathlib import Path

from conftest import run_lm_eval
from reliability.support import write
from reliability.test_duplicate_documents import MNLI, _twice

from calidist_tasks.scoring.records import (
    SOURCE_FIELD,
)


def test_no_prompt_sent_through_lm_eval_shows_its_own_document(tiny_model_dir: Path,
                                                               tmp_path: Path) -> None:
    """The same through lm-eval with --num_fewshot 1 and the tiny model: every prompt sent (the
    samples' request arguments) holds its document's premise once."""
    path = write(tmp_path / "data.jsonl", "\n".join(_twice(9)) + "\n")
    out = run_lm_eval([MNLI], tiny_model_dir, {"data_files": str(path), "calib_size": 6,
                                               "eval_size": "all"}, num_fewshot=1)
    samples = out["samples"][MNLI]
    for sample in samples:
        for argument in sample["arguments"]:
            assert argument[0].count(sample["doc"]["premise"]) == 1, sample["doc"][SOURCE_FIELD]
    assert len(samples) == 9  # every document is logged: 9 once the copies are dropped
