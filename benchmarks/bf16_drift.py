"""How far ``hf-prefix-cache``'s bfloat16 letter log-likelihoods drift from lm-eval's ``hf``.

bfloat16 keeps 8 bits of mantissa, so any change in how a forward pass is split (another batch
shape, a prefix run once and its key/value cache reused) changes the letter log-likelihoods a
little. This script measures that on the PPDB direct readout (``calidist_ppdb_assertion``, the
bundled sample) with a random-weight Llama of a real shape (hidden 512 by default, 4 layers,
heads of 64), all on the CPU in bfloat16:

- ``hf`` batch size 1 against ``hf`` batch size 64: lm-eval's own bf16 noise;
- ``hf-prefix-cache`` batch size 64 against ``hf`` batch size 1: the prefix cache's drift;
- the same two in float32, as the control (both should agree to about 1e-5);
- each bfloat16 run against ``hf``'s float32 run: its error.

Per request, the absolute difference of the letter log-likelihoods (max and mean) and, per
prompt, whether the preferred letter differs. Prints a JSON summary (``--out`` writes it too)::

    python benchmarks/bf16_drift.py --eval_size 60 --out benchmarks/results/bf16_drift.json
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

TASK = "calidist_ppdb_assertion"
SAMPLE_DATA = Path(__file__).resolve().parents[1] / "calidist_tasks" / "sample_data"


def build_model(dest: Path, hidden: int) -> Path:
    """A random Llama of ``hidden`` size, 4 layers, heads of 64 (a quarter of them key/value
    heads, as Llama-3's), with the tiny model's tokenizer; weights from
    ``torch.manual_seed(0)``."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from calidist_tasks.backends.offline_models import build_tiny_model

    build_tiny_model(dest, head_dim=64)
    config = LlamaConfig.from_pretrained(dest)
    config.hidden_size, config.intermediate_size = hidden, hidden * 7 // 2
    config.num_hidden_layers, config.num_attention_heads = 4, hidden // 64
    config.num_key_value_heads = max(1, hidden // 256)
    torch.manual_seed(0)
    LlamaForCausalLM(config).eval().save_pretrained(dest)
    return dest


def letter_loglikelihoods(model: str, model_dir: Path, dtype: str, batch_size: int,
                          metadata: dict[str, Any], num_fewshot: int | None
                          ) -> dict[int, list[list[float]]]:
    """Per document, per prompt, the letters' log-likelihoods lm-eval logged."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    import calidist_tasks.backends.prefix_cache  # noqa: F401  registers hf-prefix-cache
    from calidist_tasks import task_folder

    manager = TaskManager(include_path=task_folder(), include_defaults=False, metadata=metadata)
    results = lm_eval.simple_evaluate(
        model=model, model_args=f"pretrained={model_dir},dtype={dtype}", tasks=[TASK],
        task_manager=manager, batch_size=batch_size, device="cpu", log_samples=True,
        bootstrap_iters=0, num_fewshot=num_fewshot)
    found = {}
    for sample in results["samples"][TASK]:
        # one request per (prompt, letter); arguments are (prompt, " (a)") pairs in that order
        prompts: dict[str, list[float]] = {}
        for arguments, resp in zip(sample["arguments"], sample["resps"], strict=True):
            prompts.setdefault(arguments[0], []).append(float(resp[0][0]))
        found[sample["doc_id"]] = list(prompts.values())
    return found


def compare(a: dict[int, list[list[float]]], b: dict[int, list[list[float]]]) -> dict[str, Any]:
    diffs, flips, prompts = [], 0, 0
    for doc, rows in a.items():
        for x, y in zip(rows, b[doc], strict=True):
            diffs += [abs(u - v) for u, v in zip(x, y, strict=True)]
            flips += x.index(max(x)) != y.index(max(y))
            prompts += 1
    return {"requests": len(diffs), "max_abs_diff": max(diffs),
            "mean_abs_diff": sum(diffs) / len(diffs), "prompts": prompts,
            "preferred_letter_differs": flips}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calib_size", type=int, default=20)
    parser.add_argument("--eval_size", type=int, default=60)
    parser.add_argument("--dtypes", default="bfloat16,float32")
    parser.add_argument("--hidden", type=int, default=512, help="hidden size (heads of 64)")
    parser.add_argument("--num_fewshot", type=int, help="exemplars per label (default: the "
                        "task's); 0 makes the prompts about a third as long")
    parser.add_argument("--out", help="also write the summary to this JSON file")
    args = parser.parse_args()
    metadata = {"data_dir": str(SAMPLE_DATA), "calib_size": args.calib_size,
                "eval_size": args.eval_size, "m": 1}
    summary: dict[str, Any] = {"task": TASK, "model": f"random Llama, hidden {args.hidden}, "
                               "4 layers, heads of 64",
                               **{k: metadata[k] for k in ("calib_size", "eval_size", "m")},
                               "num_fewshot": args.num_fewshot}
    with tempfile.TemporaryDirectory() as scratch:
        model_dir = build_model(Path(scratch) / "model", args.hidden)
        runs = {}
        for dtype in args.dtypes.split(","):
            def run(model: str, batch_size: int, dtype: str = dtype) -> Any:
                return letter_loglikelihoods(model, model_dir, dtype, batch_size, metadata,
                                             args.num_fewshot)

            hf_1, hf_64, cached = runs[dtype] = (run("hf", 1), run("hf", 64),
                                                 run("hf-prefix-cache", 64))
            summary[dtype] = {"hf batch 1 vs hf batch 64": compare(hf_1, hf_64),
                              "hf-prefix-cache vs hf batch 1": compare(hf_1, cached),
                              "hf-prefix-cache vs hf batch 64": compare(hf_64, cached)}
        if {"bfloat16", "float32"} <= set(runs):  # each bf16 run's error against float32's
            reference = runs["float32"][0]
            summary["bfloat16 vs float32 hf batch 1"] = {
                name: compare(reference, found) for name, found in zip(
                    ("hf batch 1", "hf batch 64", "hf-prefix-cache"), runs["bfloat16"],
                    strict=True)}
    text = json.dumps(summary, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
