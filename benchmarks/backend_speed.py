"""``--model hf`` against ``--model hf-prefix-cache`` on the same documents, in the same run.

    python benchmarks/backend_speed.py                       # both models, PPDB and AQuA
    python benchmarks/backend_speed.py --models smollm2 --ppdb 10,20 --aqua 6,14

For each model and benchmark, the default run's logit work per document (the original task, the
assertion task with ``benchmarks/run.py``'s default m, probe, corruption) runs with each backend,
one after the other on the same documents: two lm-eval processes per backend (assertion alone,
because its m would otherwise reach probe and corruption, which allow only m = 1). Then
``benchmarks/run.py``'s self-consistency command runs with each backend on ``--consistency``
documents. It reports the seconds of the model's requests per document, their ratio, the largest
log-likelihood difference between the backends and whether every prediction agrees, the share of
identical self-consistency samples, and what the default sizes would take at the measured seconds
per document. The section it writes into BENCHMARKS.md (between
markers, kept when ``benchmarks/run.py`` rewrites the file) carries the exact command.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import shlex
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(ROOT))

from benchmarks import commands as bench  # noqa: E402
from calidist_tasks.records import hints_of, is_record  # noqa: E402
from calidist_tasks.run_files import read_jsonl  # noqa: E402

BACKENDS = ("hf", "hf-prefix-cache")
BEGIN, END = "<!-- backend-speed:begin -->", "<!-- backend-speed:end -->"


# the last state of lm-eval's progress bar over the model's requests: "... 100%|...| n/n [mm:ss<"
REQUEST_BAR = re.compile(r"(Running \w+ requests[^:\n]*): 100%\|[^|\n]*\| (\d+)/\2 "
                         r"\[(?:(\d+):)?(\d+):(\d+)<")


def request_seconds(log: str) -> float:
    """Seconds lm-eval spent in the model's requests, from the progress bars of its log."""
    bars: dict[str, int] = {}
    for name, _, hours, minutes, seconds in REQUEST_BAR.findall(log.replace("\r", "\n")):
        elapsed = 3600 * int(hours or 0) + 60 * int(minutes) + int(seconds)
        bars[name] = max(bars.get(name, 0), elapsed)
    if not bars:
        raise ValueError("no finished 'Running ... requests' progress bar in the lm-eval log")
    return float(sum(bars.values()))


def finished(target: Path, tasks: list[str]) -> tuple[float, float, dict[str, list[dict]]]:
    """Request seconds and lm-eval's whole evaluation seconds of the run in ``target`` (model and
    data loading included), and each task's logged samples."""
    results = sorted(target.rglob("results_*.json"), key=lambda p: p.stat().st_mtime)[-1]
    total = float(json.loads(results.read_text())["total_evaluation_time_seconds"])
    seconds = request_seconds((target / "lm_eval.log").read_text(encoding="utf-8"))
    samples = {}
    for task in tasks:
        samples[task] = read_jsonl(sorted(target.rglob(f"samples_{task}_*.jsonl"))[-1])
    return seconds, total - seconds, samples


def run_backend(args: argparse.Namespace, folder: str, benchmark: str, backend: str,
                sizes: tuple[int, int], out: Path) -> dict[str, object]:
    """The four logit tasks of ``benchmark`` with ``backend``: seconds, log-likelihoods, answers."""
    m = {"ppdb": args.ppdb_m, "aqua": args.aqua_m}[benchmark]
    base = f"calidist_{benchmark}"
    seconds, fixed, loglikelihoods, predictions = 0.0, [], {}, {}
    for tasks, extra in (([base, f"{base}_probe", f"{base}_corruption"], {}),
                         ([f"{base}_assertion"], {"m": m})):
        metadata = {"data_dir": str(args.data_dir), "calib_size": sizes[0],
                    "eval_size": sizes[1], "seed": 0, "split_seed": 0, **extra}
        target = out / tasks[0]
        command = ["calidist", "eval", "--model", backend, "--model_args",
                   f"pretrained={folder},dtype=float32", "--tasks", ",".join(tasks),
                   "--batch_size", str(args.batch_size), "--device", args.device,
                   "--metadata", json.dumps(metadata), "--output_path", str(target),
                   "--log_samples"]
        if bench.run_task(command, target)["returncode"]:
            raise SystemExit(f"{backend} failed on {tasks}: see {target / 'lm_eval.log'}")
        run_seconds, outside, samples = finished(target, tasks)
        seconds += run_seconds
        fixed.append(outside)
        for task in tasks:
            for sample in samples[task]:
                key = (task, sample["doc_id"])
                loglikelihoods[key] = [float(r[0][0]) for r in sample["resps"]]
                record = next(v for v in sample.values() if is_record(v))
                hints = [hint.prediction for hint in hints_of(record)]
                predictions[key] = (record["prediction"], hints)
    return {"seconds": seconds, "fixed": fixed, "loglikelihoods": loglikelihoods,
            "predictions": predictions}


def run_consistency(args: argparse.Namespace, folder: str, benchmark: str, backend: str,
                    batch_size: int, out: Path) -> dict[str, object]:
    """``benchmarks/run.py``'s self-consistency command with ``backend``: seconds and samples."""
    options = bench.parse_args(["--backend", backend, "--gen-batch-size", str(batch_size),
                                "--device", args.device,
                                "--data-dir", str(args.data_dir), "--consistency-calib", "1",
                                "--consistency-eval", str(args.consistency)])
    task = f"calidist_{benchmark}_consistency"
    target = out / f"consistency-batch{batch_size}"
    command = bench.task_command(options, folder, task, "_consistency", benchmark, target)
    if bench.run_task(command, target)["returncode"]:
        raise SystemExit(f"{backend} failed on {task}: see {target / 'lm_eval.log'}")
    seconds, outside, samples = finished(target, [task])
    return {"seconds": seconds, "fixed": [outside],
            "samples": {s["doc_id"]: s["resps"][0] for s in samples[task]}}


def compare(args: argparse.Namespace) -> list[dict[str, object]]:
    rows = []
    for model in args.models.split(","):
        folder = bench.model_folder(model)
        for benchmark in args.benchmarks.split(","):
            sizes = {"ppdb": args.ppdb, "aqua": args.aqua}[benchmark]
            measured = {backend: run_backend(args, folder, benchmark, backend, sizes,
                                             args.out / model / benchmark / backend)
                        for backend in BACKENDS}
            hf, cached = measured["hf"], measured["hf-prefix-cache"]
            difference = max(abs(a - b) for key, values in hf["loglikelihoods"].items()
                             for a, b in zip(values, cached["loglikelihoods"][key], strict=True))
            docs = sum(sizes)
            sampled = {(backend, size): run_consistency(args, folder, benchmark, backend, size,
                                                        args.out / model / benchmark / backend)
                       for backend, size in (("hf", args.batch_size),
                                             ("hf", args.gen_batch_size),
                                             ("hf-prefix-cache", args.gen_batch_size))}
            hf_small = sampled["hf", args.batch_size]
            hf_gen, cached_gen = (sampled[b, args.gen_batch_size] for b in BACKENDS)
            pairs = [(a, b) for doc, texts in hf_gen["samples"].items()
                     for a, b in zip(texts, cached_gen["samples"][doc], strict=True)]
            rows.append({
                "model": model, "benchmark": benchmark, "documents": docs,
                "hf_s_per_doc": hf["seconds"] / docs,
                "cached_s_per_doc": cached["seconds"] / docs,
                "max_loglikelihood_difference": difference,
                "same_predictions": hf["predictions"] == cached["predictions"],
                "consistency_documents": args.consistency,
                "batch_sizes": (args.batch_size, args.gen_batch_size),
                "consistency_hf_small_batch_s_per_doc": hf_small["seconds"] / args.consistency,
                "consistency_hf_s_per_doc": hf_gen["seconds"] / args.consistency,
                "consistency_cached_s_per_doc": cached_gen["seconds"] / args.consistency,
                "same_samples": sum(a == b for a, b in pairs) / len(pairs),
                "fixed_s": [f for run in (*measured.values(), *sampled.values())
                            for f in run["fixed"]],
            })
            print(f"[backend-speed] {rows[-1]}", flush=True)
    return rows


def render(rows: list[dict[str, object]], command: str) -> str:
    default = bench.parse_args([])
    default_docs = {"ppdb": default.ppdb_calib + default.ppdb_eval,
                    "aqua": default.aqua_calib + default.aqua_eval}
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        BEGIN,
        "## Backends: `hf` against `hf-prefix-cache` (same documents, same run)\n",
        f"Written by `benchmarks/backend_speed.py` on {now}; machine: {bench.machine()}. "
        f"Rerun with:\n\n```\n{command}\n```\n",
        "Per document: the default run's logit work (original, assertion with "
        f"m = {default.ppdb_m} on PPDB and {default.aqua_m} on AQuA, probe, corruption; "
        "calibration and evaluation documents both scored) in seconds of the model's requests "
        "(the final state of lm-eval's request progress bars: model and data loading, prompt "
        "building and metrics excluded; see below), `hf` first, then `hf-prefix-cache` on the "
        "same documents. `hf-prefix-cache` (`calidist_tasks/prefix_cache.py`) runs a document's "
        "shared prompt prefix once and the output layer only where a letter is scored. "
        "Default-size hours: the default run's documents times the measured seconds per document "
        "(logit tasks here; self-consistency below; the verbalized tasks come on top).\n",
        "| model | dataset | documents | hf s/doc | hf-prefix-cache s/doc | speed-up | max abs "
        "log-likelihood difference | same predictions | default-size logit hours, hf -> "
        "hf-prefix-cache |",
        "|---|---|---:|---:|---:|---:|---:|---|---|",
    ]
    totals: dict[str, list[float]] = {}
    for r in rows:
        hours = default_hours(totals, str(r["model"]), default_docs[str(r["benchmark"])],
                              float(r["hf_s_per_doc"]), float(r["cached_s_per_doc"]))
        lines.append(
            f"| {r['model']} | {bench_name(str(r['benchmark']))} | {r['documents']} | "
            f"{float(r['hf_s_per_doc']):.2f} | {float(r['cached_s_per_doc']):.2f} | "
            f"{float(r['hf_s_per_doc']) / float(r['cached_s_per_doc']):.2f}x | "
            f"{float(r['max_loglikelihood_difference']):.1e} | "
            f"{'yes' if r['same_predictions'] else 'NO'} | {hours} |")
    lines += [
        "",
        "Self-consistency (15 samples per document, `benchmarks/run.py`'s command: chat "
        "template, sampled), three ways: `hf` at the logit tasks' batch, `hf` at the generation "
        "batch (`--gen-batch-size`: a decoding step reads every weight, so on a CPU a wider step "
        "costs little more), and `hf-prefix-cache` at the generation batch, which also runs a "
        "batch's repeated prompt once and copies its key/value cache to every sample (decoding "
        "is `hf`'s). Identical samples: the share of sampled answers that are the same text "
        "under both backends at the generation batch (same seed). Default-size hours: first "
        "way -> last way.\n",
        "| model | dataset | evaluation documents | hf s/doc (batch) | hf s/doc (batch) | "
        "hf-prefix-cache s/doc (batch) | speed-up, first -> last | identical samples | "
        "default-size hours |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        small, wide = r["batch_sizes"]
        first, cached_s = (float(r["consistency_hf_small_batch_s_per_doc"]),
                           float(r["consistency_cached_s_per_doc"]))
        hours = default_hours(totals, str(r["model"]), default.consistency_eval, first, cached_s)
        lines.append(
            f"| {r['model']} | {bench_name(str(r['benchmark']))} | "
            f"{r['consistency_documents']} | {first:.2f} ({small}) | "
            f"{float(r['consistency_hf_s_per_doc']):.2f} ({wide}) | {cached_s:.2f} ({wide}) | "
            f"{first / cached_s:.2f}x | {100 * float(r['same_samples']):.0f}% | {hours} |")
    lines.append("")
    if totals:
        lines.append("Default-size logit tasks and self-consistency per model: " + "; ".join(
            f"{model} {h[0]:.1f} h -> {h[1]:.1f} h" for model, h in totals.items())
            + f" (all models: {sum(h[0] for h in totals.values()):.1f} h -> "
            f"{sum(h[1] for h in totals.values()):.1f} h; the target for the whole "
            "default run is 2 h).\n")
        fixed = [f for r in rows for f in r.get("fixed_s", [])]
        if fixed:
            lines.append(
                f"Outside the requests, each lm-eval process of these runs spent {min(fixed):.0f} "
                f"to {max(fixed):.0f} s (median {statistics.median(fixed):.0f} s) loading the "
                "model and data, building prompts and computing metrics; `benchmarks/run.py` "
                "starts one process per task (nine per model and dataset).\n")
    lines.append(END)
    return "\n".join(lines)


def default_hours(totals: dict[str, list[float]], model: str, docs: int, before_s: float,
                  after_s: float) -> str:
    """'N docs: a h -> b h' at the two measured seconds per document, added to ``totals``."""
    hours = (docs * before_s / 3600, docs * after_s / 3600)
    total = totals.setdefault(model, [0.0, 0.0])
    total[0] += hours[0]
    total[1] += hours[1]
    return f"{docs} docs: {hours[0]:.1f} h -> {hours[1]:.1f} h"


def bench_name(benchmark: str) -> str:
    return {"ppdb": "PPDB", "aqua": "AQuA"}[benchmark]


def write_section(markdown: Path, section: str) -> None:
    """Put ``section`` into ``markdown`` in place of an earlier one (or at the end)."""
    text = markdown.read_text(encoding="utf-8") if markdown.exists() else ""
    pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.DOTALL)
    text = (pattern.sub(lambda _: section, text) if pattern.search(text)
            else text.rstrip("\n") + "\n\n" + section)
    markdown.write_text(text.rstrip("\n") + "\n", encoding="utf-8")


def kept_section(markdown: Path) -> str:
    """The section this script wrote into ``markdown``, or "" (for ``benchmarks/run.py``)."""
    if not markdown.exists():
        return ""
    found = re.search(re.escape(BEGIN) + ".*?" + re.escape(END),
                      markdown.read_text(encoding="utf-8"), re.DOTALL)
    return found.group(0) if found else ""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sizes = lambda text: tuple(int(v) for v in text.split(","))  # noqa: E731
    parser.add_argument("--models", default="smollm2,qwen-coder")
    parser.add_argument("--benchmarks", default="ppdb,aqua")
    parser.add_argument("--ppdb", type=sizes, default=(10, 20),
                        help="calibration,evaluation documents")
    parser.add_argument("--aqua", type=sizes, default=(6, 14),
                        help="calibration,evaluation documents")
    default = bench.parse_args([])
    parser.add_argument("--consistency", type=int, default=4,
                        help="evaluation documents of the self-consistency comparison")
    parser.add_argument("--ppdb-m", type=int, default=default.ppdb_m)
    parser.add_argument("--aqua-m", type=int, default=default.aqua_m)
    parser.add_argument("--batch-size", type=int, default=default.batch_size)
    parser.add_argument("--gen-batch-size", type=int, default=default.gen_batch_size)
    parser.add_argument("--device", default=default.device)
    parser.add_argument("--data-dir", type=Path, default=default.data_dir)
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "backend-speed")
    parser.add_argument("--markdown", type=Path, default=ROOT / "BENCHMARKS.md")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    started = time.perf_counter()
    rows = compare(args)
    command = shlex.join(["python", "benchmarks/backend_speed.py",
                          *(sys.argv[1:] if argv is None else argv)])
    write_section(args.markdown, render(rows, command))
    print(f"[backend-speed] wrote {args.markdown} after {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
