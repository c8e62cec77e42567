"""Benchmarks: calibration quality and cost of every calidist method on real models, offline.

    python benchmarks/run.py            # the issue's sizes (PPDB 200 + 1000, AQuA dev + test)
    python benchmarks/run.py --quick    # a smoke run (about ten minutes): runs/bench-quick/
    python benchmarks/run.py --help     # sizes, models and steps are flags

Every task runs once per model through ``calidist eval`` (lm-eval's own CLI with our include
path) with ``--log_samples``; the analysis then works from the logged per-document records only,
so ablations and calibrator variants need no second model run. Finished runs are kept under
``--out`` and skipped on a rerun (delete a folder to redo it); BENCHMARKS.md is rewritten after
every finished task, so a later failure never loses an earlier model's numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(ROOT))

from benchmarks import analysis, overhead  # noqa: E402

CALIDIST = [sys.executable, "-m", "calidist_tasks.cli"]
MODELS = {"smollm2": "SmolLM2-135M-Instruct", "qwen-coder": "Qwen2.5-Coder-0.5B-Instruct"}
BENCHMARKS = ("ppdb", "aqua")
# Task suffix -> step. Logit tasks cost one forward pass per prompt and run first; generation
# (verbalized, consistency) is much slower on a CPU and runs after every model's logit tasks.
LOGIT = ("", "_assertion", "_probe", "_corruption")
GENERATE = ("_verbalized", "_assertion_verbalized", "_probe_verbalized",
            "_corruption_verbalized", "_consistency")


def available_tasks() -> set[str]:
    out = subprocess.run([*CALIDIST, "tasks"], capture_output=True, text=True, check=True)
    return {line.split("\t")[0] for line in out.stdout.splitlines() if line.endswith("\ttask")}


def model_folder(name: str) -> str:
    out = subprocess.run([*CALIDIST, "model", name], capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def sizes_for(args: argparse.Namespace, benchmark: str, suffix: str) -> dict[str, int | str]:
    calib, evaluation = {"ppdb": (args.ppdb_calib, args.ppdb_eval),
                         "aqua": (args.aqua_calib, args.aqua_eval)}[benchmark]
    if suffix in GENERATE:
        calib, evaluation = args.gen_calib, args.gen_eval
    if suffix == "_consistency":
        calib, evaluation = args.consistency_calib, args.consistency_eval
    return {"calib_size": calib, "eval_size": evaluation}


def task_command(args: argparse.Namespace, model_dir: str, task: str, suffix: str,
                 benchmark: str, out: Path) -> list[str]:
    metadata = {"data_dir": str(args.data_dir), **sizes_for(args, benchmark, suffix),
                "seed": 0, "split_seed": 0}
    if suffix == "_assertion":
        # m=3 lets the analysis subsample m = 1, 2, 3 from the same prompts
        metadata["m"] = {"ppdb": args.ppdb_m, "aqua": args.aqua_m}[benchmark]
    command = [
        "calidist", "eval", "--model", args.backend,
        "--model_args", f"pretrained={model_dir},dtype=float32",
        "--tasks", task, "--device", args.device,
        "--batch_size", str(args.gen_batch_size if suffix in GENERATE else args.batch_size),
        "--metadata", json.dumps(metadata), "--output_path", str(out), "--log_samples",
        # one answer cache per model: a killed run resumes, and the original prompts that every
        # task of a benchmark sends are computed once
        "--use_cache", str(out.parent / "lm_cache"),
    ]
    if suffix in GENERATE:
        command += ["--gen_kwargs", f"max_gen_toks={args.max_gen_toks}"]
        if args.chat_template:  # instruct models answer in the asked format only in their template
            command.append("--apply_chat_template")
    return command


def run_task(command: list[str], out: Path) -> dict:
    """Run one task (niced: the machine is shared); record the command and wall time."""
    done = out / "run.json"
    if done.exists() and json.loads(done.read_text())["returncode"] == 0:
        return json.loads(done.read_text())
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    start = time.perf_counter()
    with open(out / "lm_eval.log", "w") as log:
        code = subprocess.run(["nice", "-n", str(os.environ.get("BENCH_NICE", 19)),
                               *CALIDIST, *command[1:]], stdout=log, stderr=subprocess.STDOUT,
                              env=env, check=False).returncode
    info = {"command": shlex.join(command), "returncode": code,
            "wall_s": time.perf_counter() - start,
            "benchmark_command": shlex.join(["python", "benchmarks/run.py", *sys.argv[1:]]),
            "finished": time.time()}
    done.write_text(json.dumps(info, indent=1))
    print(f"[bench] {command[command.index('--tasks') + 1]}: rc={code} "
          f"{info['wall_s']:.0f}s -> {out}", flush=True)
    return info


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="SmolLM2 only, original + assertion (m=1), PPDB 20 + 30 and AQuA "
                             "15 + 20 documents, 20,000 overhead documents")
    parser.add_argument("--models", default="smollm2,qwen-coder",
                        help=f"comma-separated, from {sorted(MODELS)}")
    parser.add_argument("--benchmarks", default=",".join(BENCHMARKS))
    parser.add_argument("--steps", default="logit,generate,analysis,overhead,multiprocess",
                        help="which of logit, generate, analysis, overhead, multiprocess to run")
    parser.add_argument("--variants", default="original,assertion,probe,corruption,verbalized,"
                        "assertion_verbalized,probe_verbalized,corruption_verbalized,consistency",
                        help="which task variants to run (original = calidist_<benchmark>)")
    parser.add_argument("--ppdb-calib", type=int, default=200)
    parser.add_argument("--ppdb-eval", type=int, default=1000)
    parser.add_argument("--aqua-calib", type=int, default=254, help="AQuA dev has 254 rows")
    parser.add_argument("--aqua-eval", type=int, default=254, help="AQuA test has 254 rows")
    parser.add_argument("--gen-calib", type=int, default=100,
                        help="calibration documents of the verbalized tasks")
    parser.add_argument("--gen-eval", type=int, default=200,
                        help="evaluation documents of the verbalized tasks")
    parser.add_argument("--consistency-calib", type=int, default=50)
    parser.add_argument("--consistency-eval", type=int, default=100)
    parser.add_argument("--max-gen-toks", type=int, default=32,
                        help="generation cap (the consistency YAML samples 32 tokens)")
    parser.add_argument("--chat-template", action=argparse.BooleanOptionalAction, default=True,
                        help="generation tasks (verbalized, consistency) through the model's "
                             "chat template (lm-eval's --apply_chat_template)")
    parser.add_argument("--ppdb-m", type=int, default=3,
                        help="assertion distractors per label on PPDB (the analysis subsamples "
                             "m = 1..this from the logged prompts)")
    parser.add_argument("--aqua-m", type=int, default=2,
                        help="assertion distractors per label on AQuA (5 labels: m costs 5x)")
    parser.add_argument("--batch-size", type=int, default=8, help="batch of the logit tasks")
    parser.add_argument("--gen-batch-size", type=int, default=64,
                        help="batch of the generation tasks: each decoding step reads every "
                             "weight, so on a CPU a step of 64 rows costs little more than one "
                             "of 8 (benchmarks/backend_speed.py measures both)")
    parser.add_argument("--backend", default="hf-prefix-cache", choices=("hf", "hf-prefix-cache"),
                        help="lm-eval model backend; hf-prefix-cache gives hf's log-likelihoods "
                             "and runs each document's shared prompt prefix once "
                             "(benchmarks/backend_speed.py measures both)")
    parser.add_argument("--device", default="cpu",
                        help="lm-eval's --device (cuda on a GPU machine)")
    parser.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples")
    parser.add_argument("--overhead-docs", type=int, default=100_000)
    parser.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "bench",
                        help="lm-eval output folders (kept; finished tasks are skipped)")
    parser.add_argument("--markdown", type=Path, default=ROOT / "BENCHMARKS.md")
    args = parser.parse_args(argv)
    if args.quick:  # about ten minutes on an idle 2-core CPU
        args.models, args.variants = "smollm2", "original,assertion"
        args.steps = args.steps.replace("generate,", "")
        args.ppdb_calib, args.ppdb_eval, args.aqua_calib, args.aqua_eval = 20, 30, 15, 20
        args.ppdb_m, args.aqua_m, args.overhead_docs = 1, 1, 20_000
        if args.out == ROOT / "runs" / "bench":
            args.out = ROOT / "runs" / "bench-quick"
        if args.markdown == ROOT / "BENCHMARKS.md":  # a smoke run never replaces the report
            args.markdown = args.out / "BENCHMARKS.md"
    args.argv = sys.argv[1:] if argv is None else argv
    return args


def machine() -> str:
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    return (f"{cpu}, {os.cpu_count()} logical CPUs, {gpu}; Python {platform.python_version()}, "
            f"torch {torch.__version__}, {platform.system()} {platform.release()}")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    steps = set(args.steps.split(","))
    models = [m for m in args.models.split(",") if m]
    tasks = available_tasks()
    state = analysis.State(args=args, machine=machine(), models=models)
    for step, suffixes in (("logit", LOGIT), ("generate", GENERATE)):
        if step not in steps:
            continue
        for model in models:
            folder = state.model_dirs.setdefault(model, model_folder(model))
            for benchmark in args.benchmarks.split(","):
                for suffix in suffixes:
                    if (suffix.lstrip("_") or "original") not in args.variants.split(","):
                        continue
                    task = f"calidist_{benchmark}{suffix}"
                    if task not in tasks:
                        state.missing.add(task)
                        continue
                    out = args.out / model / task
                    info = run_task(task_command(args, folder, task, suffix, benchmark, out), out)
                    state.add_run(model, benchmark, suffix, task, out, info)
                    analysis.write(state)
    state.load_existing(LOGIT + GENERATE)
    for model in {key[0] for key in state.runs}:
        state.model_dirs.setdefault(model, model_folder(model))
    saved = args.out / "overhead.json"  # kept, so that an analysis-only rerun still shows it
    if "overhead" in steps:
        state.overhead = overhead.measure_overhead(args.overhead_docs)
        saved.parent.mkdir(parents=True, exist_ok=True)
        saved.write_text(json.dumps(state.overhead, indent=1))
    elif saved.exists():
        state.overhead = json.loads(saved.read_text())
    if "multiprocess" in steps or (args.out / "multiprocess" / "one").exists():
        state.multiprocess = overhead.check_multiprocess(args.out / "multiprocess")
    analysis.write(state)
    print(f"[bench] wrote {args.markdown}")


if __name__ == "__main__":
    main()
