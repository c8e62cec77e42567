"""Run lm-eval in a fresh process and write what determinism and resume tests compare.

``python -m reliability.runner RUN_JSON`` (with ``tests/`` on ``PYTHONPATH``); RUN_JSON holds tasks,
model, model_args, metadata, out (a JSON file to write), and optionally use_cache. Under
``accelerate launch`` only rank 0 writes.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import reliability.models  # noqa: F401  (registers the test backends)


def summarize(results: dict[str, Any]) -> dict[str, Any]:
    """Per task: the metrics, and per document its prompt hash and a hash of every request."""
    summary = {}
    for task, metrics in results["results"].items():
        docs = sorted(
            (s["doc_id"], s["prompt_hash"],
             hashlib.sha256(json.dumps(s["arguments"], sort_keys=True).encode()).hexdigest(),
             s["doc"]["calidist_split"], s["doc"]["calidist_source"])
            for s in results["samples"][task]
        )
        values = {k: v for k, v in metrics.items() if isinstance(v, float)}
        summary[task] = {"metrics": values, "docs": docs}
    return summary


def main(spec: dict[str, Any]) -> None:
    import lm_eval
    from lm_eval.tasks import TaskManager

    from calidist_tasks import task_folder

    manager = TaskManager(include_path=task_folder(), include_defaults=False,
                          metadata=spec["metadata"])
    results = lm_eval.simple_evaluate(
        model=spec["model"], model_args=spec["model_args"], tasks=spec["tasks"],
        task_manager=manager, batch_size=spec.get("batch_size", 1), device="cpu",
        log_samples=True, bootstrap_iters=0, use_cache=spec.get("use_cache"),
    )
    if "RANK" in os.environ:  # what this process evaluated, to show the documents were sharded
        seen = reliability.models.CpuDataParallelHFLM.requests_seen
        Path(f"{spec['out']}.rank{os.environ['RANK']}").write_text(str(seen), encoding="utf-8")
    if results is not None:  # None on ranks other than 0
        with open(spec["out"], "w", encoding="utf-8") as handle:
            json.dump(summarize(results), handle, indent=1, sort_keys=True)
    leave_process_group()


def leave_process_group() -> None:
    """Wait for every rank, then close gloo. Rank 1 is done long before rank 0 has aggregated;
    exiting with the group still open can abort it (SIGABRT in gloo's teardown, seen in CI)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
