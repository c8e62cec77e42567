"""Helpers shared by the reliability tests: write a data file, build a task, check an error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import load_task

MNLI_ROW = {"premise": "The cat sat near the river.", "hypothesis": "A cat was near water.",
            "label": 1, "idx": 0}


def mnli_lines(n: int = 4) -> list[str]:
    """n valid MNLI rows as JSON lines, labels cycling over the label space; each row a document
    of its own (the same premise and hypothesis twice would be a duplicate)."""
    return [json.dumps({**MNLI_ROW, "premise": f"{MNLI_ROW['premise']} (story {i})", "idx": i,
                        "label": i % 3}) for i in range(n)]


def write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, str):
        content = content.encode("utf-8")
    path.write_bytes(content)
    return path


def refused(task: str, metadata: dict[str, Any], *words: str,
            error: type[Exception] = ValueError) -> str:
    """Build ``task`` and assert it fails with ``error`` whose message names every word."""
    with pytest.raises(error) as caught:
        load_task(task, metadata)
    message = str(caught.value)
    for word in words:
        assert word in message, (word, message)
    return message
