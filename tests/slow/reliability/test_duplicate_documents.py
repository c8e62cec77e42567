"""Slow half of ``tests/reliability/test_duplicate_documents.py`` (runs a model or lm-eval).

Duplicated data: rows repeated in a file, one split in two formats in one folder, a file listed
twice, two ``data_files`` keys for one split, a copy shown as its own few-shot exemplar.

"The same document" is the same values (surrounding spaces stripped) in every field the prompt
shows (the question template's fields and the options): a copy with the same label is dropped
with one warning naming every copy; a copy with another label is refused naming both rows.
"""

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
