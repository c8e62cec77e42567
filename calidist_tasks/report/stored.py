"""Committed per-document records (``benchmarks/results/<model>/<task>.jsonl.gz``) as report runs.

The benchmark keeps, per finished task, a header (the task, the model's short name, the
commands, lm-eval's numbers and the task's config with the run's metadata) and one line per
document: the calidist record, the document's origin, and per prompt sent its token count and
how many requests sent it, the generated tokens, and a reasoned task's reply run's tokens (no
prompt text; benchmarks/records.py writes them). ``calidist
report benchmarks/results`` reads them as it reads lm-eval output folders.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from calidist_tasks.report.runs import TaskRun
from calidist_tasks.runs.files import read_jsonl

FORMAT = "calidist-benchmark-records/1"
SUFFIX = ".jsonl.gz"


def read_header(path: str | Path) -> dict[str, Any] | None:
    """The header of a records file, or None when there is no usable one."""
    try:
        with gzip.open(path, "rt", encoding="utf-8", newline="\n") as file:
            header = json.loads(file.readline())
    except (OSError, EOFError, ValueError):
        return None
    return header if isinstance(header, dict) and header.get("format") == FORMAT else None


def read_stored(path: str | Path) -> tuple[dict[str, Any], TaskRun, list[dict[str, Any]]]:
    """(header, run, per-document costs) of one records file; ``run.prompt_tokens`` holds each
    document's (tokens, times sent) per prompt. Raises OSError / EOFError / ValueError."""
    from calidist_tasks.report.identity import run_identity  # it imports loading

    path = Path(path)
    lines = read_jsonl(path)
    header = lines[0] if lines else {}
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ValueError(f"{path}: no {FORMAT} header")
    docs = lines[1:]
    lm = header["lm_eval"]
    task = header["task"]
    run = TaskRun(task, header["model"], str(header.get("finished")), path,
                  dict(lm["metrics"]), dict(lm["config"]), len(docs), lm.get("filter", "none"),
                  path, records=[d["record"] for d in docs],
                  sources=[d.get("source") for d in docs],
                  identity=run_identity({"configs": {task: lm["config"]}}, task))
    costs = [{"prompts": d["prompts"], "generated": d.get("generated", 0),
              "replies": d.get("replies")} for d in docs]
    run.prompt_tokens = [[(float(tokens), int(times)) for tokens, times in c["prompts"]]
                         for c in costs]
    run.token_count = header.get("tokens")
    return header, run, costs
