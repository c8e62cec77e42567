"""How far ``hf-prefix-cache``'s bfloat16 letter log-likelihoods drift from lm-eval's ``hf``.

bfloat16 keeps 8 bits of mantissa, so any change in how a forward pass is split (another batch
shape, a prefix run once and its key/value cache reused) changes the letter log-likelihoods a
little. This script measures that on the PPDB direct readout (``calidist_ppdb_assertion``, the
bundled sample) with a random-weight Llama of a real shape, built in memory from
``torch.manual_seed(0)``: ``--shape small`` (hidden ``--hidden``, 4 layers, heads of 64; the
tiny model's tokenizer) or ``--shape llama3-8b`` (Llama-3-8B's: hidden 4096, 32 layers, 32 heads
and 8 key/value heads, output layer of 128256; with ``--tokenizer``, e.g. SmolLM2's), on
``--device`` (cpu or cuda). Runs, each timed:

- ``hf`` batch size 1 against ``hf`` batch size ``--batch_size``: lm-eval's own bf16 noise;
- ``hf-prefix-cache`` at ``--batch_size`` against both: the prefix cache's drift;
- the same with ``softmax_dtype=float32`` (both backends take it): the log-softmax in float32;
- ``hf`` and ``hf-prefix-cache`` in float32, the control (they should agree to about 1e-5), and
  ``hf``'s float32 run as the reference each bfloat16 run's error is measured against.

Per request, the absolute difference of the letter log-likelihoods (max and mean) and, per
prompt, whether the preferred letter differs. Prints a JSON summary (``--out`` writes it too)::

    python benchmarks/bf16_drift.py --eval_size 60 --out benchmarks/results/bf16_drift.json
    python benchmarks/bf16_drift.py --shape llama3-8b --device cuda --tokenizer TOKENIZER_DIR \
        --calib_size 10 --eval_size 90 --out bf16_drift_gpu.json
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

TASK = "calidist_ppdb_assertion"
SAMPLE_DATA = Path(__file__).resolve().parents[1] / "calidist_tasks" / "sample_data"
LLAMA3_8B = {"hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
             "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
             "rope_theta": 500000.0}


def build_model(shape: str, hidden: int, tokenizer_dir: Path | None, device: str,
                scratch: Path, attention: str = "sdpa") -> tuple[Any, Any]:
    """(float32 model on ``device``, tokenizer): a random Llama of ``shape``; weights from
    ``torch.manual_seed(0)``."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from calidist_tasks.backends.offline_models import build_tiny_model

    tiny = build_tiny_model(scratch / "tiny", head_dim=64)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir or tiny)
    config = LlamaConfig.from_pretrained(tiny)
    if shape == "llama3-8b":
        for key, value in LLAMA3_8B.items():
            setattr(config, key, value)
    else:  # a quarter of the heads as key/value heads, as Llama-3's
        config.hidden_size, config.intermediate_size = hidden, hidden * 7 // 2
        config.num_hidden_layers, config.num_attention_heads = 4, hidden // 64
        config.num_key_value_heads = max(1, hidden // 256)
        config.vocab_size = max(config.vocab_size, len(tokenizer))
    config.max_position_embeddings = 4096
    config._attn_implementation = attention
    for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
        setattr(config, key, getattr(tokenizer, key))
    torch.manual_seed(0)
    with torch.device(device):
        model = LlamaForCausalLM(config).to(torch.float32).eval()
    return model, tokenizer


def letter_loglikelihoods(lm: Any, metadata: dict[str, Any], num_fewshot: int | None
                          ) -> tuple[dict[int, list[list[float]]], float]:
    """Per document, per prompt, the letters' log-likelihoods lm-eval logged; wall seconds."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    from calidist_tasks import task_folder

    manager = TaskManager(include_path=task_folder(), include_defaults=False, metadata=metadata)
    start = time.perf_counter()
    results = lm_eval.simple_evaluate(model=lm, tasks=[TASK], task_manager=manager,
                                      log_samples=True, bootstrap_iters=0,
                                      num_fewshot=num_fewshot)
    seconds = time.perf_counter() - start
    found = {}
    for sample in results["samples"][TASK]:
        # one request per (prompt, letter); arguments are (prompt, " (a)") pairs in that order
        prompts: dict[str, list[float]] = {}
        for arguments, resp in zip(sample["arguments"], sample["resps"], strict=True):
            prompts.setdefault(arguments[0], []).append(float(resp[0][0]))
        found[sample["doc_id"]] = list(prompts.values())
    return found, seconds


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


# (name, backend, dtype, batch size: 1 or --batch_size, softmax_dtype)
RUNS = (("hf float32", "hf", "float32", None, None),  # the reference first
        ("hf batch 1", "hf", "bfloat16", 1, None),
        ("hf batch N", "hf", "bfloat16", None, None),
        ("hf-prefix-cache", "hf-prefix-cache", "bfloat16", None, None),
        ("hf batch 1 (softmax float32)", "hf", "bfloat16", 1, "float32"),
        ("hf batch N (softmax float32)", "hf", "bfloat16", None, "float32"),
        ("hf-prefix-cache (softmax float32)", "hf-prefix-cache", "bfloat16", None, "float32"),
        ("hf-prefix-cache float32", "hf-prefix-cache", "float32", None, None))
PAIRS = ((("hf batch 1", "hf batch N"), "bfloat16: hf's own noise"),
         (("hf batch 1", "hf-prefix-cache"), "bfloat16: the prefix cache's drift"),
         (("hf batch N", "hf-prefix-cache"), "bfloat16: the prefix cache's drift"),
         (("hf batch 1 (softmax float32)", "hf batch N (softmax float32)"),
          "bfloat16, softmax float32: hf's own noise"),
         (("hf batch 1 (softmax float32)", "hf-prefix-cache (softmax float32)"),
          "bfloat16, softmax float32: the prefix cache's drift"),
         (("hf float32", "hf-prefix-cache float32"), "float32: the control"))


def make_lm(backend: str, model: Any, tokenizer: Any, batch_size: int,
            softmax_dtype: str | None) -> Any:
    from lm_eval.models.huggingface import HFLM

    from calidist_tasks.backends.prefix_cache import PrefixCacheHFLM

    kind = PrefixCacheHFLM if backend == "hf-prefix-cache" else HFLM
    return kind(pretrained=model, tokenizer=tokenizer, batch_size=batch_size,
                softmax_dtype=softmax_dtype)


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calib_size", type=int, default=20)
    parser.add_argument("--eval_size", type=int, default=60)
    parser.add_argument("--shape", choices=("small", "llama3-8b"), default="small")
    parser.add_argument("--hidden", type=int, default=512, help="--shape small's hidden size")
    parser.add_argument("--tokenizer", type=Path, help="a tokenizer folder (default: the tiny "
                        "model's byte-level one, which cuts text into many short tokens)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--attention", default="sdpa", help="transformers' attn_implementation "
                        "(sdpa, eager)")
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--runs", default=",".join(r[0] for r in RUNS),
                        help="which of the runs (names as in the output), comma-separated")
    parser.add_argument("--num_fewshot", type=int, help="exemplars per label (default: the "
                        "task's); 0 makes the prompts about a third as long")
    parser.add_argument("--out", help="also write the summary to this JSON file")
    args = parser.parse_args()
    metadata = {"data_dir": str(SAMPLE_DATA), "calib_size": args.calib_size,
                "eval_size": args.eval_size, "m": 1}
    wanted = set(args.runs.split(","))
    summary: dict[str, Any] = {
        "task": TASK, "shape": args.shape, "device": args.device,
        "attention": args.attention,
        "device_name": torch.cuda.get_device_name() if args.device.startswith("cuda")
        else "cpu", "torch": torch.__version__,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "batch_size": args.batch_size,
        **{k: metadata[k] for k in ("calib_size", "eval_size", "m")},
        "num_fewshot": args.num_fewshot}
    found: dict[str, dict[int, list[list[float]]]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        model, tokenizer = build_model(args.shape, args.hidden, args.tokenizer, args.device,
                                       Path(scratch), args.attention)
        summary["model"] = {k: getattr(model.config, k) for k in (
            "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
            "num_key_value_heads", "vocab_size")}
        summary["tokenizer_vocabulary"] = len(tokenizer)
        summary["attention"] = model.config._attn_implementation  # what transformers took
        summary["seconds"], summary["documents_per_second"] = {}, {}
        copies = {"float32": model}
        for name, backend, dtype, batch_size, softmax_dtype in RUNS:
            if name not in wanted:
                continue
            if dtype not in copies:  # cast once; the float32 weights are the source
                copies[dtype] = copy.deepcopy(model).to(getattr(torch, dtype))
            lm = make_lm(backend, copies[dtype], tokenizer, batch_size or args.batch_size,
                         softmax_dtype)
            found[name], seconds = letter_loglikelihoods(lm, metadata, args.num_fewshot)
            summary["seconds"][name] = round(seconds, 2)
            summary["documents_per_second"][name] = round(len(found[name]) / seconds, 2)
            print(f"[bf16_drift] {name}: {seconds:.1f}s", flush=True)
            text = summarize(summary, found)  # after each run: a run cut short keeps the rest
            if args.out:
                Path(args.out).write_text(text + "\n")
    print(text)


def summarize(summary: dict[str, Any], found: dict[str, dict[int, list[list[float]]]]) -> str:
    """``summary`` with the pairs and errors of the runs so far, as JSON."""
    summary["pairs"] = {f"{a} vs {b}": {"what": what, **compare(found[a], found[b])}
                        for (a, b), what in PAIRS if a in found and b in found}
    if "hf float32" in found:  # each run's error against hf's float32 log-likelihoods
        summary["against hf float32"] = {name: compare(found["hf float32"], values)
                                         for name, values in found.items()
                                         if name != "hf float32"}
    return json.dumps(summary, indent=1)


if __name__ == "__main__":
    main()
