"""Benchmark analysis: everything from lm-eval's logged samples, then BENCHMARKS.md.

Per task run (an lm-eval ``--output_path`` folder) the analysis reads the per-document records
that ``process_results`` logged (``samples_<task>_*.jsonl``) and the requests' arguments; every
calibrator is refitted on the calibration records and scored on the evaluation records, with
95% percentile-bootstrap intervals over documents. Ablations subsample what was logged: an
assertion run with m distractors per label holds the first 1..m templates of smaller runs too
(``distractors.choose_templates`` draws templates so that m=1 is a prefix of m=3).
"""

from __future__ import annotations

import json
import math
import shlex
import traceback
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from calidist_metrics import (
    BehaviourCalibrator,
    CaliDistCalibrator,
    auroc,
    bootstrap_interval,
    brier_score,
    confidence_instability,
    expected_calibration_error,
    paired_bootstrap_test,
    prediction_instability,
    reliability_score,
)
from calidist_tasks.aggregation import baseline_confidences, split_records

ECE = partial(expected_calibration_error, n_bins=10, strategy="uniform")
SCORES: dict[str, Callable] = {"ECE": ECE, "Brier": brier_score, "AUROC": auroc}
STYLE = {"_assertion": "As.", "_probe": "Pr.", "_corruption": "Sa."}
BENCH_NAMES = {"ppdb": "PPDB", "aqua": "AQuA"}
# The paper's Table 1 (logit confidence, x100), for orientation only: other models (8B).
PAPER_TABLE1 = {
    "Llama-3.1 8B": {
        "Temperature Scaling": {"ppdb": (5.12, 18.98), "aqua": (8.71, 17.11)},
        "Vanilla": {"ppdb": (13.50, 20.87), "aqua": (23.18, 22.82)},
        "Consistency": {"ppdb": (19.35, 23.34), "aqua": (4.88, 14.51)},
        "Entropy": {"ppdb": (26.68, 27.88), "aqua": (33.22, 28.20)},
        "FSD": {"ppdb": (23.26, 24.78), "aqua": (20.07, 19.63)},
        "CaliDist (As.)": {"ppdb": (7.02, 19.16), "aqua": (2.02, 17.65)},
        "CaliDist (Pr.)": {"ppdb": (3.75, 18.91), "aqua": (2.98, 17.45)},
        "CaliDist (Sa.)": {"ppdb": (5.42, 18.72), "aqua": (2.73, 17.25)},
    },
    "Qwen-3 8B": {
        "Temperature Scaling": {"ppdb": (38.80, 39.05), "aqua": (8.28, 10.63)},
        "Vanilla": {"ppdb": (39.46, 39.66), "aqua": (12.54, 12.70)},
        "Consistency": {"ppdb": (39.47, 39.46), "aqua": (9.15, 9.63)},
        "Entropy": {"ppdb": (38.96, 38.87), "aqua": (8.90, 10.86)},
        "FSD": {"ppdb": (39.10, 39.14), "aqua": (7.37, 9.48)},
        "CaliDist (As.)": {"ppdb": (5.87, 21.93), "aqua": (3.27, 11.17)},
        "CaliDist (Pr.)": {"ppdb": (4.57, 24.72), "aqua": (2.82, 11.21)},
        "CaliDist (Sa.)": {"ppdb": (2.39, 21.38), "aqua": (3.90, 11.16)},
    },
}


# ------------------------------------------------------------------------------ loading


@dataclass
class Run:
    """One finished task run: its per-document records, requests and lm-eval results."""

    task: str
    model: str
    benchmark: str
    suffix: str
    records: list[dict]
    # per document, per request: (prompt, letter scored or None when generating, generations)
    requests: list[list[tuple[str, str | None, list[str]]]]
    results: dict
    wall_s: float  # the whole `calidist eval` process, start-up and model load included

    @property
    def eval_seconds(self) -> float:
        return float(self.results.get("total_evaluation_time_seconds") or self.wall_s)


def load_run(folder: Path, model: str, benchmark: str, suffix: str, task: str) -> Run | None:
    samples = sorted(folder.rglob(f"samples_{task}_*.jsonl"), key=lambda p: p.stat().st_mtime)
    results = sorted(folder.rglob("results_*.json"), key=lambda p: p.stat().st_mtime)
    info = folder / "run.json"
    if not samples or not results:
        return None
    records, requests = [], []
    for line in samples[-1].read_text(encoding="utf-8").splitlines():
        sample = json.loads(line)
        records.append(next(v for v in sample.values() if isinstance(v, dict) and "split" in v))
        resps = sample.get("resps") or []
        requests.append([
            (a["arg_0"], a.get("arg_1") if isinstance(a.get("arg_1"), str) else None,
             [r for r in (resps[i] if i < len(resps) else []) if isinstance(r, str)])
            for i, a in enumerate(sample["arguments"].values())
        ])
    wall = json.loads(info.read_text())["wall_s"] if info.exists() else math.nan
    return Run(task, model, benchmark, suffix, records, requests,
               json.loads(results[-1].read_text(encoding="utf-8")), wall)


# ------------------------------------------------------------------------------ recomputation


def column(records: Sequence[Mapping[str, Any]], key: str) -> np.ndarray:
    return np.asarray([r[key] for r in records], dtype=float)


def kept_hints(record: Mapping[str, Any], m: int | None) -> list[list]:
    """The record's hints naming a label other than the prediction, the first m per label."""
    seen: dict[int, int] = {}
    kept = []
    for hint in record["hints"]:
        seen[hint[0]] = seen.get(hint[0], 0) + 1
        if hint[0] != record["prediction"] and (m is None or seen[hint[0]] <= m):
            kept.append(hint)
    return kept


def behaviour(records: Sequence[Mapping[str, Any]], m: int | None = None,
              delta_mode: str = "mean") -> dict[str, np.ndarray]:
    """mu, delta and lambda_raw per record, recomputed from the logged hints (docs/method.md)."""
    mu, delta = [], []
    for record in records:
        hints = kept_hints(record, m)
        predictions, confidences = [h[2] for h in hints], [h[3] for h in hints]
        mu.append(prediction_instability(record["prediction"], predictions, confidences))
        delta.append(confidence_instability(record["confidence"], confidences, mode=delta_mode))
    mu, delta = np.asarray(mu), np.asarray(delta)
    raw = np.minimum(reliability_score(mu, delta), 1e10)
    return {"mu": mu, "delta": delta, "lambda_raw": raw}


def quiet(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """Run a fit with its CalibrationWarnings collected (they are reported, not printed)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = fn(*args, **kwargs)
    return value, [str(w.message).split(";")[0] for w in caught]


def calidist_scores(calibration: list, evaluation: list, *, m: int | None = None,
                    delta_mode: str = "mean", variant: str = "minmax",
                    fixed: bool = False) -> tuple[np.ndarray, dict]:
    """Calibrated evaluation confidences of one CaliDist variant fitted on the calibration set.

    ``variant``: a ``lambda_scale`` (minmax = the paper, log, rank) or ``behaviour``
    (BehaviourCalibrator on logit p, mu, delta). ``fixed``: alpha = 0, beta = 1 (no fit).
    """
    cal, ev = behaviour(calibration, m, delta_mode), behaviour(evaluation, m, delta_mode)
    p_cal, p_ev = column(calibration, "confidence"), column(evaluation, "confidence")
    y_cal = column(calibration, "correct")
    if variant == "behaviour":
        fit, notes = quiet(BehaviourCalibrator().fit, p_cal, cal["mu"], cal["delta"], y_cal)
        return fit.predict(p_ev, ev["mu"], ev["delta"]), {"notes": notes}
    grids = {"method": "default_sigmoid"} if fixed else {}
    fit, notes = quiet(CaliDistCalibrator(lambda_scale=variant, **grids).fit,
                       cal["lambda_raw"], p_cal, y_cal)
    info = {"alpha": fit.alpha_, "beta": fit.beta_, "grid_edge": fit.grid_edge_,
            "share_lambda_below_1": float(np.mean(fit.scaled_reliability(ev["lambda_raw"]) < 1)),
            "notes": notes}
    return fit.predict(ev["lambda_raw"], p_ev), info


def with_intervals(confidence: np.ndarray, correct: np.ndarray, n_boot: int) -> dict:
    out = {}
    for name, metric in SCORES.items():
        (point, low, high), _ = quiet(bootstrap_interval, metric, confidence, correct,
                                      n_resamples=n_boot, seed=0)
        out[name] = (point, low, high)
    out["acc"] = float(np.mean(correct))
    return out


# ------------------------------------------------------------------------------ tables


def cell(value: tuple | float | None, interval: bool = True) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, tuple):
        point, low, high = value
        return f"{100 * point:.2f} [{100 * low:.1f}, {100 * high:.1f}]" if interval \
            else f"{100 * point:.2f}"
    return f"{100 * value:.1f}"


def method_confidences(runs: Mapping[tuple, Run], model: str, benchmark: str
                       ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Every method's evaluation confidences (and correctness) for one model and dataset."""
    methods: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    original = runs.get((model, benchmark, ""))
    # The distractor tasks log the original prompt's letter log-probabilities too, so the logit
    # baselines can come from them when the original task did not run.
    source = original or next((runs[(model, benchmark, s)] for s in STYLE
                               if (model, benchmark, s) in runs), None)
    if source is not None and "letter_logprobs" in source.records[0]:
        cal, ev = split_records(source.records)
        methods["Vanilla"] = (column(ev, "confidence"), column(ev, "correct"))
        (baselines, _), _ = quiet(baseline_confidences, cal, ev)
        names = {"ts": "Temperature Scaling", "platt": "Platt", "isotonic": "Isotonic",
                 "vector": "Vector scaling"}
        methods.update({names[k]: v for k, v in baselines.items()})
    for suffix, short in STYLE.items():
        run = runs.get((model, benchmark, suffix))
        if run is not None:
            cal, ev = split_records(run.records)
            methods[f"CaliDist ({short})"] = (calidist_scores(cal, ev)[0], column(ev, "correct"))
    for (run_model, run_benchmark, suffix), run in sorted(runs.items()):
        if (run_model, run_benchmark) == (model, benchmark) and suffix not in ("", *STYLE):
            methods.update(generation_methods(run))
    return methods


def generation_methods(run: Run) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Verbalized / consistency tasks: the confidences their records hold (as lm-eval scored)."""
    cal, ev = split_records(run.records)
    correct = column(ev, "correct")
    if run.suffix == "_verbalized":
        return {"Verbalized": (column(ev, "confidence"), correct)}
    if run.suffix.endswith("_verbalized"):
        style = STYLE["_" + run.suffix.split("_")[1]]
        return {f"CaliDist-verbalized ({style})": (calidist_scores(cal, ev)[0], correct)}
    if run.suffix == "_consistency":
        names = {"consistency": "Consistency", "entropy": "Entropy", "fsd": "FSD"}
        return {name: (np.asarray([r["confidences"][key] for r in ev]), correct)
                for key, name in names.items()}
    return {}


def calibration_table(runs: Mapping[tuple, Run], models: Sequence[str], n_boot: int) -> str:
    benchmarks = [b for b in BENCH_NAMES if any(k[1] == b for k in runs)]
    lines = []
    header = "| model | method | " + " | ".join(
        f"{BENCH_NAMES[b]} acc | {BENCH_NAMES[b]} ECE | {BENCH_NAMES[b]} Brier | "
        f"{BENCH_NAMES[b]} AUROC" for b in benchmarks) + " |"
    lines += [header, "|---|---|" + "---:|" * (4 * len(benchmarks))]
    for model in models:
        per_bench = {b: method_confidences(runs, model, b) for b in benchmarks}
        order = ["Temperature Scaling", "Platt", "Isotonic", "Vector scaling", "Vanilla",
                 "Verbalized", "Consistency", "Entropy", "FSD",
                 *[f"CaliDist ({s})" for s in STYLE.values()],
                 *[f"CaliDist-verbalized ({s})" for s in STYLE.values()]]
        for method in order:
            if not any(method in per_bench[b] for b in benchmarks):
                continue
            cells = []
            for b in benchmarks:
                if method not in per_bench[b]:
                    cells += ["-"] * 4
                    continue
                scores = with_intervals(*per_bench[b][method], n_boot)
                cells += [cell(scores["acc"]), cell(scores["ECE"]), cell(scores["Brier"]),
                          cell(scores["AUROC"])]
            lines.append(f"| {model} | {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def paper_table() -> str:
    lines = ["| paper model | method | PPDB ECE | PPDB Brier | AQuA ECE | AQuA Brier |",
             "|---|---|---:|---:|---:|---:|"]
    for model, methods in PAPER_TABLE1.items():
        for method, values in methods.items():
            (pe, pb), (ae, ab) = values["ppdb"], values["aqua"]
            lines.append(f"| {model} | {method} | {pe:.2f} | {pb:.2f} | {ae:.2f} | {ab:.2f} |")
    return "\n".join(lines)


def variants_table(runs: Mapping[tuple, Run], n_boot: int) -> tuple[str, list[str]]:
    """Item 4: lambda_scale variants and the behaviour calibrator vs the paper's formula and TS."""
    lines = ["| model | dataset | style | method | ECE | Brier | AUROC | ECE - TS [95%] | "
             "ECE - paper [95%] | fit |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---|"]
    wins = []
    for (model, benchmark, suffix), run in sorted(runs.items()):
        if suffix not in STYLE:
            continue
        cal, ev = split_records(run.records)
        correct = column(ev, "correct")
        (baselines, _), _ = quiet(baseline_confidences, cal, ev)
        ts = baselines["ts"][0]
        paper, _ = calidist_scores(cal, ev)
        rows = [("Vanilla", column(ev, "confidence"), ""), ("TS", ts, "")]
        for variant in ("minmax", "log", "rank", "behaviour"):
            conf, info = calidist_scores(cal, ev, variant=variant)
            label = "CaliDist (paper, minmax)" if variant == "minmax" else (
                "behaviour (LR on logit p, mu, delta)" if variant == "behaviour"
                else f"CaliDist lambda_scale={variant}")
            fit = "" if variant == "behaviour" else (
                f"alpha={info['alpha']:.2f} beta={info['beta']:.2f}"
                + (" EDGE" if info["grid_edge"] else "")
                + f"; {100 * info['share_lambda_below_1']:.0f}% lambda<1")
            rows.append((label, conf, fit))
        for label, conf, fit in rows:
            scores = with_intervals(conf, correct, n_boot)
            vs_ts, vs_paper = (paired_bootstrap_test(ECE, conf, other, correct,
                                                     n_resamples=n_boot) for other in (ts, paper))
            lines.append(
                f"| {model} | {BENCH_NAMES[benchmark]} | {STYLE[suffix]} | {label} | "
                f"{cell(scores['ECE'])} | {cell(scores['Brier'])} | {cell(scores['AUROC'])} | "
                f"{diff(vs_ts)} | {diff(vs_paper)} | {fit} |")
            if label not in ("Vanilla", "TS", "CaliDist (paper, minmax)") and \
                    vs_ts["high"] < 0 and vs_paper["high"] < 0:
                wins.append(f"{label} on {model} / {BENCH_NAMES[benchmark]} / {STYLE[suffix]}")
    return "\n".join(lines), wins


def diff(test: Mapping[str, float]) -> str:
    return (f"{100 * test['difference']:+.2f} [{100 * test['low']:+.1f}, "
            f"{100 * test['high']:+.1f}]")


def ablation_tables(runs: Mapping[tuple, Run], n_boot: int, seed: int = 0) -> str:
    """Item 5 from logged assertion samples: m, delta mode, fitted sigmoid, calibration size."""
    out = []
    for (model, benchmark, suffix), run in sorted(runs.items()):
        if suffix != "_assertion":
            continue
        cal, ev = split_records(run.records)
        correct = column(ev, "correct")
        m_run = max(sum(1 for h in run.records[0]["hints"] if h[0] == label)
                    for label in {h[0] for h in run.records[0]["hints"]})
        rows = ["| setting | ECE | Brier | AUROC |", "|---|---:|---:|---:|"]
        settings = [(f"m={m}", {"m": m}) for m in range(1, m_run + 1)]
        settings += [("delta = worst case max(0, p - min p')", {"delta_mode": "worst_case"}),
                     ("alpha=0, beta=1 (no fit)", {"fixed": True}),
                     ("fitted alpha, beta (default)", {})]
        for label, kwargs in settings:
            scores = with_intervals(calidist_scores(cal, ev, **kwargs)[0], correct, n_boot)
            rows.append(f"| {label} | {cell(scores['ECE'])} | {cell(scores['Brier'])} | "
                        f"{cell(scores['AUROC'])} |")
        rng = np.random.default_rng(seed)
        sizes = sorted({s for s in (10, 20, 50, 100, 200, 400) if s < len(cal)} | {len(cal)})
        for size in sizes:
            draws = [rng.choice(len(cal), size, replace=False) for _ in range(20 if size < len(cal)
                                                                           else 1)]
            eces = [ECE(calidist_scores([cal[i] for i in d], ev)[0], correct) for d in draws]
            spread = f" (mean of {len(draws)} random subsets, sd {100 * np.std(eces):.2f})" \
                if len(draws) > 1 else ""
            rows.append(f"| calibration size {size}{spread} | {100 * np.mean(eces):.2f} | | |")
        out.append(f"**{model} / {BENCH_NAMES[benchmark]} / assertion** (logged with m={m_run}; "
                   f"{len(cal)} calibration + {len(ev)} evaluation documents)\n\n"
                   + "\n".join(rows))
    return "\n\n".join(out)


# ------------------------------------------------------------------------------ cost


def cost_rows(run: Run, tokens: Callable[[str], int], m: int | None = None) -> dict[str, Any]:
    """Per document: requests, forward passes, prompt tokens and generated tokens.

    A scored prompt (log-likelihood) is one forward pass however many letters it scores (lm-eval
    caches the prompt's logits); a generation request is one pass per sample it returns, each
    reading its prompt again. ``m``: count only the prompts an assertion run with the first m
    templates per label would send (the logged run's prompts are ordered original, then m_run
    per label).
    """
    requests, passes, prompt_tokens, generated, all_tokens = [], [], [], [], []
    for doc in run.requests:
        scored = doc[0][1] is not None
        if scored:
            prompts = list(dict.fromkeys(prompt for prompt, _, _ in doc))
            letters = len(doc) // len(prompts)
            kept = prompts
            if m is not None:
                m_run = (len(prompts) - 1) // letters
                kept = [p for i, p in enumerate(prompts) if i == 0 or (i - 1) % m_run < m]
            requests.append(len(kept) * letters)
            passes.append(len(kept))
            prompt_tokens.append(sum(tokens(p) for p in kept))
            all_tokens.append(sum(tokens(p) for p in prompts))
            generated.append(0)
        else:
            samples = [max(len(outs), 1) for _, _, outs in doc]
            requests.append(len(doc))
            passes.append(sum(samples))
            prompt_tokens.append(sum(tokens(p) * n for (p, _, _), n in zip(doc, samples,
                                                                            strict=True)))
            all_tokens.append(prompt_tokens[-1])
            generated.append(sum(tokens(o) for _, _, outs in doc for o in outs))
    share = sum(prompt_tokens) / max(sum(all_tokens), 1)  # m < m_run: time ~ prompt tokens
    return {"requests": np.mean(requests), "passes": np.mean(passes),
            "prompt_tokens": np.mean(prompt_tokens), "generated_tokens": np.mean(generated),
            "seconds": run.eval_seconds * share / len(run.requests), "estimated": m is not None}


def consistency_prompt_cost(benchmark: str, metadata: Mapping[str, Any],
                            tokens: Callable[[str], int]) -> dict[str, Any]:
    """15-sample consistency's requests and prompt tokens per document, from its own requests.

    Built by lm-eval from ``calidist_<benchmark>_consistency`` with the given ``--metadata``
    (no model runs): a lower bound of its cost, since its generated tokens only add to it.
    """
    from lm_eval.tasks import TaskManager

    from calidist_tasks import task_folder

    name = f"calidist_{benchmark}_consistency"
    manager = TaskManager(include_path=task_folder(), include_defaults=False,
                          metadata=dict(metadata))
    task = manager.load([name])["tasks"][name]
    task.build_all_requests(rank=0, world_size=1)
    per_doc: dict[int, list] = {}
    for instance in task.instances:
        per_doc.setdefault(instance.doc_id, []).append(instance)
    docs = list(per_doc.values())
    return {"requests": np.mean([len(d) for d in docs]),
            "passes": np.mean([sum(i.repeats for i in d) for d in docs]),
            "prompt_tokens": np.mean([sum(tokens(i.args[0]) * i.repeats for i in d)
                                      for d in docs]),
            "generated_tokens": math.nan, "seconds": math.nan, "estimated": True}


def run_metadata(info: Mapping[str, Any]) -> dict[str, Any]:
    """The --metadata of a run's lm-eval command (run.json)."""
    words = shlex.split(info["command"])
    return json.loads(words[words.index("--metadata") + 1])


def cost_table(runs: Mapping[tuple, Run], model_dirs: Mapping[str, str],
               infos: Mapping[tuple, Mapping[str, Any]] | None = None
               ) -> tuple[str, dict[tuple[str, str, str], dict]]:
    """The cost table, and its rows keyed by (model, benchmark, row name)."""
    from transformers import AutoTokenizer

    lines = ["| model | dataset | method | requests/doc | forward passes/doc | prompt tokens/doc "
             "| generated tokens/doc | wall s/doc | tokens (prompt+gen) vs Vanilla | "
             "wall vs Vanilla |", "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    costs: dict[tuple[str, str, str], dict] = {}
    for model in sorted({k[0] for k in runs}):
        tokenizer = AutoTokenizer.from_pretrained(model_dirs[model])
        cache: dict[str, int] = {}

        def tokens(text: str, tokenizer: Any = tokenizer, cache: dict = cache) -> int:
            if text not in cache:
                cache[text] = len(tokenizer(text, add_special_tokens=False)["input_ids"])
            return cache[text]
        for benchmark in BENCH_NAMES:
            rows = []
            for suffix in ("", *STYLE, "_verbalized", "_assertion_verbalized",
                           "_probe_verbalized", "_corruption_verbalized", "_consistency"):
                run = runs.get((model, benchmark, suffix))
                if run is None:
                    continue
                name = {"": "Vanilla (calidist_{b})"}.get(suffix, suffix.lstrip("_"))
                if suffix == "_assertion":
                    m_run = max(sum(1 for h in run.records[0]["hints"] if h[0] == label)
                                for label in {h[0] for h in run.records[0]["hints"]})
                    rows.append((f"assertion m={m_run} (as run)", cost_rows(run, tokens)))
                    if m_run > 1:
                        rows.append(("assertion m=1 (subset of the same prompts)",
                                     cost_rows(run, tokens, m=1)))
                else:
                    rows.append((name.format(b=benchmark), cost_rows(run, tokens)))
            if not rows:
                continue
            assertion = runs.get((model, benchmark, "_assertion"))
            if not rows[0][0].startswith("Vanilla") and assertion is not None:
                # no original-prompt run: its prompts are the assertion run's first prompts
                rows.insert(0, ("Vanilla (the assertion run's original prompts)",
                                cost_rows(assertion, tokens, m=0)))
            if assertion is not None and (model, benchmark, "_consistency") not in runs \
                    and infos and (model, benchmark, "_assertion") in infos:
                # not run: its prompt tokens from its own requests on the same documents
                metadata = run_metadata(infos[(model, benchmark, "_assertion")])
                metadata.pop("m", None)
                rows.append(("consistency, 15 samples (NOT run: prompt tokens of its requests "
                             "on the same documents, a lower bound)",
                             consistency_prompt_cost(benchmark, metadata, tokens)))
            base = rows[0][1] if rows[0][0].startswith("Vanilla") else None
            for name, row in rows:
                costs[(model, benchmark, name)] = row
                total = row["prompt_tokens"] + np.nan_to_num(row["generated_tokens"])
                ratio = (f"{total / (base['prompt_tokens'] + base['generated_tokens']):.2f}x"
                         if base else "-")
                wall = (f"{row['seconds'] / base['seconds']:.2f}x"
                        if base and math.isfinite(row["seconds"]) else "-")
                seconds = ("-" if not math.isfinite(row["seconds"]) else
                           f"{row['seconds']:.2f}" + (" (est.)" if row["estimated"] else ""))
                generated = ("not run" if not math.isfinite(row["generated_tokens"])
                             else f"{row['generated_tokens']:.0f}")
                lines.append(f"| {model} | {BENCH_NAMES[benchmark]} | {name} | "
                             f"{row['requests']:.1f} | {row['passes']:.1f} | "
                             f"{row['prompt_tokens']:.0f} | {generated} | "
                             f"{seconds} | {ratio} | {wall} |")
    return "\n".join(lines), costs


# ------------------------------------------------------------------------------ state / write


@dataclass
class State:
    args: Any
    machine: str
    models: list[str]
    runs: dict = field(default_factory=dict)  # (model, benchmark, suffix) -> Run
    infos: dict = field(default_factory=dict)  # (model, benchmark, suffix) -> run.json content
    model_dirs: dict = field(default_factory=dict)
    missing: set = field(default_factory=set)
    overhead: dict | None = None
    multiprocess: dict | None = None

    def add_run(self, model: str, benchmark: str, suffix: str, task: str, out: Path,
                info: dict) -> None:
        self.infos[(model, benchmark, suffix)] = info
        if info["returncode"] == 0:
            run = load_run(out, model, benchmark, suffix, task)
            if run is not None:
                self.runs[(model, benchmark, suffix)] = run

    def load_existing(self, suffixes: Sequence[str]) -> None:
        """Pick up every finished run under --out (from this or an earlier invocation)."""
        for info in sorted(Path(self.args.out).glob("*/*/run.json")):
            model, task = info.parent.parent.name, info.parent.name
            for benchmark in BENCH_NAMES:
                suffix = task.removeprefix(f"calidist_{benchmark}")
                if suffix != task and suffix in suffixes:
                    self.add_run(model, benchmark, suffix, task, info.parent,
                                 json.loads(info.read_text()))


def write(state: State) -> None:
    try:
        from benchmarks.markdown import render

        Path(state.args.markdown).write_text(render(state), encoding="utf-8")
    except Exception:  # a report bug must never stop the model runs
        traceback.print_exc()
