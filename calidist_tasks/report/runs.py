"""A task run as the report reads it (``TaskRun``), shared by the modules that read runs
(``loading``, ``stored``) and the one that groups them (``identity``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from calidist_tasks.scoring.records import Record


@dataclass
class TaskRun:
    """One task of one model in one results file, with its logged documents when usable."""

    task: str
    model: str
    stamp: str
    results_file: Path
    metrics: dict[str, float]  # metric name -> value as lm-eval saved it (a fraction)
    config: dict[str, Any]  # the task's entry in the results file's "configs"
    expected_docs: int | None = None  # lm-eval's n-samples "effective"
    filter_name: str = "none"  # the lm-eval filter whose numbers and samples are reported
    samples_file: Path | None = None
    records: list[Record] | None = None  # per-document records; None when not usable
    prompts: list[list[tuple[str, int]]] | None = None  # per document: (prompt, times sent)
    # per document (same order as records): the texts the model generated (empty for scored
    # tasks), and the document's origin (its SOURCE_FIELD: file and line) when logged
    generations: list[list[str]] | None = None
    sources: list[str | None] | None = None
    # the settings that decide what the numbers mean (``identity.run_identity``); runs of one
    # model with different identities are different groups and never compared
    identity: dict[str, Any] = field(default_factory=dict)
    # a two-stage run (``calidist eval --two-stage``): the stage-1 samples whose original
    # prompts were prepended to ``prompts``, so that the cost counts both stages
    stage1_samples: Path | None = None
    # committed benchmark records (``report.stored``): per document, (tokens, times sent) per
    # prompt instead of the prompts' texts, and how the tokens were counted
    prompt_tokens: list[list[tuple[float, int]]] | None = None
    token_count: str | None = None

    @property
    def name(self) -> str:
        return f"{self.task} [{self.model}]"

    @property
    def group(self) -> str:
        """The block of comparable runs: the model, and its identity when one was read."""
        if not self.identity:
            return self.model
        return f"{self.model} {json.dumps(self.identity, sort_keys=True)}"
