"""Our own code's cost: process_results + aggregation on synthetic documents, and multi-process.

The model is replaced by random log-likelihoods, so only calidist's Python runs: the task's
``process_results`` once per document and the aggregation once per metric, as lm-eval calls them.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
import warnings
from pathlib import Path

import numpy as np

from benchmarks.commands import ROOT, portable
from calidist_tasks.scoring.records import CALIBRATION, EVALUATION, INDEX_FIELD, SPLIT_FIELD

SAMPLE = ROOT / "calidist_tasks" / "sample_data" / "twitter_url_corpus" / "test.tsv"


def _task(metadata: dict):
    from lm_eval.tasks import TaskManager

    from calidist_tasks import task_folder

    manager = TaskManager(include_path=task_folder(), include_defaults=False, metadata=metadata)
    return manager.load(["calidist_ppdb_assertion"])["tasks"]["calidist_ppdb_assertion"]


def _pass(task, docs: list[dict], results: list[list]) -> tuple[float, float]:
    """(CPU seconds in process_results, CPU seconds in the aggregations) for one evaluation.

    CPU seconds of this thread (``time.thread_time``), not wall time: on a machine shared with
    other jobs the wall clock also counts the time the CPU ran them. Only our calls are timed:
    lm-eval's own work around them (collecting each metric's values, as it does right after
    each call) happens between the timed calls.
    """
    process = 0.0
    items: dict[str, list] = {}
    clock = time.thread_time
    for doc, doc_results in zip(docs, results, strict=True):
        start = clock()
        metrics = task.process_results(doc, doc_results)
        process += clock() - start
        for name, value in metrics.items():
            items.setdefault(name, []).append(value)
    start = time.thread_time()
    aggregations = task.aggregation()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, values in items.items():
            aggregations[name](values)
    return process, time.thread_time() - start


def measure_overhead(n_docs: int, calib_size: int = 200, repeats: int = 5) -> dict:
    """CPU seconds and peak Python memory of process_results + aggregation for ``n_docs``
    documents. The seconds are the median of ``repeats`` passes (this machine is shared and
    noisy); ``load_average``: the machine's 1-minute load before and after them."""
    data = Path(tempfile.mkdtemp(prefix="calidist-overhead-"))
    try:
        (data / "ppdb").mkdir()
        shutil.copy(SAMPLE, data / "ppdb" / "test.tsv")
        task = _task({"data_dir": str(data), "calib_size": 20, "eval_size": 20})
        template = list(task.eval_docs)
        docs = [{**template[i % len(template)], INDEX_FIELD: i,
                 SPLIT_FIELD: CALIBRATION if i < calib_size else EVALUATION}
                for i in range(n_docs)]
        # construct_requests builds (and caches) each document's prompt plan; timed apart
        start = time.thread_time()
        plans_per_doc = max(len(task.prompt_plans(doc)) for doc in docs)
        plans = time.thread_time() - start
        per_doc = plans_per_doc * len(task.doc_to_choice(docs[0]))
        results = np.log(np.random.default_rng(0).dirichlet([1, 1], size=n_docs * per_doc // 2))
        # as lm-eval hands them over: one (log-likelihood, is_greedy) pair per request
        results = [[(float(v), False) for v in row] for row in results.reshape(n_docs, per_doc)]
        # The synthetic fixture (documents, log-likelihoods) stands in for lm-eval's own objects:
        # frozen, the garbage collector's passes scan only what our code keeps alive.
        gc.collect()
        gc.freeze()
        load = os.getloadavg()[0]  # CPU seconds too grow on a loaded machine (shared caches)
        passes = []
        for _ in range(repeats):
            task._summary = None  # a fresh aggregation each time, as in a new run
            passes.append(_pass(task, docs, results))
        process, aggregate = sorted(passes, key=sum)[len(passes) // 2]
        task._summary = None  # measure the memory of a fresh aggregation too
        tracemalloc.start()
        _pass(task, docs, results)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    finally:
        gc.unfreeze()
        shutil.rmtree(data, ignore_errors=True)
    return {"documents": n_docs, "calibration": calib_size, "requests_per_doc": per_doc,
            "prompt_plans_s": plans, "process_results_s": process, "aggregation_s": aggregate,
            "seconds_per_100k": (process + aggregate) * 100_000 / n_docs,
            "peak_mib": peak / 2**20, "metrics": len(task.aggregation()),
            "passes_s": [round(sum(p), 3) for p in passes],
            "load_average": [round(load, 2), round(os.getloadavg()[0], 2)]}


# our hooks lm-eval calls (prompt building, requests, joining, fitting and scoring) and the
# model's calls, timed on one run (``own_share``)
OWN_HOOKS = ("fewshot_context", "construct_requests", "process_results", "_aggregate")
MODEL_CALLS = ("loglikelihood", "generate_until")


def own_share(out: Path, metadata: dict | None = None) -> dict:
    """calidist's own CPU seconds against the model's on one lm-eval run of the tiny model.

    ``calidist_ppdb_assertion`` on ``SAMPLE`` through ``lm_eval.simple_evaluate`` with ``hf``;
    our hooks (``OWN_HOOKS``: the prompts with their exemplars and hints, the requests, each
    document's record, the aggregation's fits and scores) and the model's calls (``MODEL_CALLS``)
    are timed in process CPU seconds (``time.process_time``: every thread, so the model's
    intra-op threads count), a hook called inside another counted once. lm-eval's own work
    (task loading, batching, logging) is in neither.
    """
    import lm_eval
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    from calidist_tasks import task_folder
    from calidist_tasks.backends.offline_models import build_tiny_model
    from calidist_tasks.tasks.base import CaliDistTask

    model = out / "tiny_model"
    if not (model / "config.json").exists():
        build_tiny_model(model)
    (out / "data" / "ppdb").mkdir(parents=True, exist_ok=True)
    shutil.copy(SAMPLE, out / "data" / "ppdb" / "test.tsv")
    metadata = {"data_dir": str(out / "data"), "calib_size": 20, "eval_size": 40,
                **(metadata or {})}
    seconds = {"calidist": 0.0, "model": 0.0}
    depth = [0]

    def timed(function, key: str):
        def wrapper(*args, **kwargs):
            depth[0] += 1
            start = time.process_time()
            try:
                return function(*args, **kwargs)
            finally:
                depth[0] -= 1
                if depth[0] == 0:
                    seconds[key] += time.process_time() - start
        return wrapper

    patched = [(CaliDistTask, name, "calidist") for name in OWN_HOOKS] + \
              [(HFLM, name, "model") for name in MODEL_CALLS]
    originals = [(owner, name, owner.__dict__[name]) for owner, name, _ in patched]
    for owner, name, key in patched:
        setattr(owner, name, timed(owner.__dict__[name], key))
    try:
        manager = TaskManager(include_path=task_folder(), include_defaults=False,
                              metadata=metadata)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lm_eval.simple_evaluate(model="hf", model_args=f"pretrained={model},dtype=float32",
                                    tasks=["calidist_ppdb_assertion"], task_manager=manager,
                                    batch_size=8, device="cpu", bootstrap_iters=0)
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)
    return {"documents": metadata["calib_size"] + metadata["eval_size"],
            "calidist_s": seconds["calidist"], "model_s": seconds["model"],
            "share": seconds["calidist"] / seconds["model"]}


def _metrics(output: Path) -> dict:
    found = sorted(output.rglob("results_*.json"))
    results = json.loads(found[-1].read_text())["results"]
    return {task: {k: v for k, v in values.items()
                   if k.endswith(",none") and isinstance(v, (int, float))}
            for task, values in results.items()}


def check_multiprocess(out: Path, processes: int = 2) -> dict:
    """The same tasks on a tiny model in one process and in ``processes``: same metrics?

    Two launchers: ``torchrun`` with ``cpu_data_parallel.py`` (lm-eval shards the documents over
    gloo ranks and gathers them before our aggregation) and lm-eval's documented ``accelerate launch
    --cpu --num_processes N -m lm_eval`` with plain ``hf`` (which on a CPU does not shard).
    """
    from calidist_tasks import task_folder
    from calidist_tasks.backends.offline_models import build_tiny_model

    out.mkdir(parents=True, exist_ok=True)
    model = out / "tiny_model"
    if not (model / "config.json").exists():
        build_tiny_model(model)
    data = out / "data" / "ppdb"
    data.mkdir(parents=True, exist_ok=True)
    shutil.copy(SAMPLE, data / "test.tsv")
    common = ["-m", "lm_eval", "--model", "MODEL", "--model_args",
              f"pretrained={model},dtype=float32", "--tasks",
              "calidist_ppdb,calidist_ppdb_assertion", "--include_path", task_folder(),
              "--device", "cpu", "--batch_size", "8", "--metadata",
              json.dumps({"data_dir": str(out / "data"), "calib_size": 20, "eval_size": 40})]
    hf = [a.replace("MODEL", "hf") for a in common]
    common = [a.replace("MODEL", "hf-cpu-dp") for a in common]
    launchers = {
        "one": [sys.executable, *hf],
        # lm-eval's hf backend shards over processes only with > 1 GPU: hf-cpu-dp does on a CPU
        "torchrun": [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node",
                     str(processes), str(Path(__file__).with_name("cpu_data_parallel.py")),
                     *common[2:]],
        "accelerate": [sys.executable, "-m", "accelerate.commands.launch", "--cpu",
                       "--num_processes", str(processes), "--num_machines", "1",
                       "--mixed_precision", "no", "--dynamo_backend", "no", *hf],
    }
    env = {**os.environ, "ACCELERATE_USE_CPU": "true", "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    found = {}
    for name, command in launchers.items():
        log = out / f"{name}.log"
        if not list((out / name).rglob("results_*.json")):
            run = subprocess.run([*command, "--output_path", str(out / name)],
                                 capture_output=True, text=True, check=False, env=env)
            log.write_text(run.stdout + run.stderr)
        text = log.read_text() if log.exists() else ""
        ranks = sum(f"on rank {r}..." in text for r in range(processes))
        metrics = _metrics(out / name) if list((out / name).rglob("results_*.json")) else None
        found[name] = {"ranks": ranks, "metrics": metrics,
                       "command": "python " + portable(" ".join(command[1:])
                                                       .replace(str(out), "OUT"))}
    single = found["one"]["metrics"]
    lines = [f"Tiny random model, `calidist_ppdb` and `calidist_ppdb_assertion`, 20 "
             f"calibration + 40 evaluation documents, one process vs {processes}:\n"]
    for name in ("torchrun", "accelerate"):
        entry = found[name]
        if entry["metrics"] is None:
            lines.append(f"- `{name}`: failed (see {portable(str(out / (name + '.log')))}).")
            continue
        pairs = [(f"{task}/{k}", v, entry["metrics"].get(task, {}).get(k, np.nan))
                 for task, values in single.items() for k, v in values.items()]
        gaps = [abs(a - b) for _, a, b in pairs]
        differences = [metric for (metric, _, _), gap in zip(pairs, gaps, strict=True)
                       if not gap <= 1e-5]
        sharding = ("documents sharded" if entry["ranks"] > 1
                    else "every process evaluated every document")
        lines.append(
            f"- `{entry['command']}`: {entry['ranks']} distinct rank(s) built requests "
            f"({sharding}); "
            + (f"all {len(pairs)} metrics equal to the single process within 1e-5 (largest "
               f"difference {max(gaps):.1e}: float32 logits of differently composed batches)."
               if not differences else f"{len(differences)} of {len(pairs)} metrics differ "
               "by more than 1e-5: " + ", ".join(differences[:8])))
    return {"summary": "\n".join(lines), "launchers": found}
