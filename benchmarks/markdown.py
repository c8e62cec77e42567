"""The full benchmark analysis (``benchmarks/run.py --full FOLDER``: FOLDER/ANALYSIS.md, not
committed), from the committed records: every number is computed, none typed in.

BENCHMARKS.md (``page.py``) shows a part of it: the sizes, the interval tables, Table 4 and the
backends. Here, in addition: the runs table, every method's scores with paired tests against
Vanilla and temperature scaling, the paper's Table 1 beside, the cost with m-subsets, the
reasoned reply beside the direct readout, overhead, calibrator variants, ablations and the exact
lm-eval commands.
"""

from __future__ import annotations

import datetime
import math
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import analysis as an
from benchmarks.commands import (
    DIRECT_READOUT,
    GENERATE,
    LOGIT,
    default_documents,
    portable,
    without_markdown,
)
from benchmarks.page import bench, command_blocks, made_by, table4_section
from benchmarks.records import SAME_DOCUMENTS, Stored, load
from calidist_tasks.registry import ECE_BINNING, SUMMARY, scores_shown
from calidist_tasks.report.tables import UNREADABLE
from calidist_tasks.scoring.aggregation import UNREADABLE_LIMIT
from calidist_tasks.scoring.records import CALIBRATION

FULL_SIZES = "PPDB 200 calibration + 1000 evaluation, AQuA dev (254) + test (254)"


@dataclass
class State:
    """What one invocation of ``benchmarks/run.py`` hands to ``render``."""

    args: Any
    machine: str
    stored: list[Stored] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # export and loading problems
    missing: set[str] = field(default_factory=set)  # wanted tasks that do not exist
    failed: list[str] = field(default_factory=list)  # runs under --out that did not finish
    overhead: dict | None = None
    multiprocess: dict | None = None


def table(columns: list[str], rows: list[list[Any]], numeric: set[int] | None = None) -> str:
    numeric = numeric if numeric is not None else set(range(2, len(columns)))
    lines = ["| " + " | ".join(columns) + " |",
             "|" + "|".join("---:" if j in numeric else "---" for j in range(len(columns))) + "|"]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _commands(state: State) -> list[str]:
    """The benchmarks/run.py invocations that made the committed records, oldest first, then
    this one."""
    this = without_markdown(portable(shlex.join(["python", "benchmarks/run.py",
                                                 *state.args.argv])))
    return list(dict.fromkeys([*made_by(state.stored), this]))


def _runs(state: State, result: an.Analysis) -> str:
    rows = []
    for stored in sorted(state.stored, key=lambda s: (s.model, s.task)):
        run = stored.run
        calibration = sum(r["split"] == CALIBRATION for r in run.records)
        evaluation = len(run.records) - calibration
        settings = an.settings_of(run)
        asked = stored.header.get("requested", {})
        problems = result.run_problems(stored)
        check = ("**" + "; ".join(problems)[:300] + "**") if problems else "yes"
        rows.append([stored.model, f"`{stored.task}`",
                     ", ".join(f"{k}={v}" for k, v in asked.items()),
                     str(calibration), an.size_cell(evaluation, stored.benchmark),
                     f"{stored.eval_seconds:.0f}", f"{float(stored.header['wall_s'] or 0):.0f}",
                     f"{settings.lambda_scale} / {settings.delta_mode} / {settings.fit}", check])
    return table(["model", "task", "requested", "calibration docs", "evaluation docs",
                  "lm-eval seconds", "process seconds", "lambda_scale / delta_mode / fit",
                  "rebuilt from the records (or the problem)"], rows, {3, 4, 5, 6})


SCORE_COLUMNS = ["task", "evaluation docs", "acc", "ECE", "adaptive ECE", "Brier", "AUROC"]


def _score_cells(row: an.Scored, benchmark: str) -> list[str]:
    """A method row's ``SCORE_COLUMNS``: x100 with bootstrap intervals; results-file numbers
    (†) where it was not rebuilt."""
    scores = tuple(scores_shown(SUMMARY))
    if row.confidence is None:
        return [f"`{row.task}`", "-", "-", *(f"{100 * row.values[s]:.2f} †" if s in row.values
                                             else "-" for s in scores)]
    return [f"`{row.task}`", an.size_cell(row.n, benchmark),
            an.interval(row.intervals["acc"], 1), *(an.interval(row.intervals[s])
                                                    for s in scores)]


def _calibration(state: State, result: an.Analysis) -> list[str]:
    parts = []
    for model, benchmark in sorted(result.methods):
        rows, paired = [], []
        for row in result.rows(model, benchmark):
            rows.append([row.shown, *_score_cells(row, benchmark)])
            if row.confidence is None:
                continue
            tests = result.paired.get((model, benchmark, row.label), {})
            cells = []
            for reference in ("Vanilla", "TS"):
                by_score = tests.get(reference)
                if by_score is None:
                    cells += ["-", "-", "-"]
                    continue
                n = next((t["n"] for t in by_score.values() if t), 0)
                cells += [an.size_cell(n, benchmark) if n else "-", an.diff(by_score.get("ece")),
                          an.diff(by_score.get("brier"))]
            paired.append([row.shown, *cells, an.verdict_line(tests)])
        parts += [f"### {model} / {bench(benchmark)}\n",
                  table(["method", *SCORE_COLUMNS], rows, {2, 3, 4, 5, 6, 7}) + "\n",
                  "Paired differences (method − reference on the documents both scored, "
                  "x100, 95% paired bootstrap interval) and the verdict they support; a "
                  "reasoned row's Vanilla and TS are the reasoned ones (the same replies), a "
                  "log-prob row's the log-prob ones:\n",
                  table(["method", "docs paired with Vanilla", "ΔECE vs Vanilla",
                         "ΔBrier vs Vanilla", "docs paired with TS", "ΔECE vs TS",
                         "ΔBrier vs TS", "verdict"], paired, {1, 2, 3, 4, 5, 6}) + "\n"]
    return parts


def _paper_table() -> str:
    """The paper's Table 1 for PPDB and AQuA (``paper_numbers.json``)."""
    rows = [[model, method, *(f"{values[b][s]:.2f}" for b in ("ppdb", "aqua")
                              for s in ("ece", "brier"))]
            for model, methods in an.paper_numbers()["table1"]["models"].items()
            for method, values in methods.items()]
    return table(["paper model", "method", "PPDB ECE", "PPDB Brier", "AQuA ECE", "AQuA Brier"],
                 rows)


def _cost(costs: dict) -> str:
    rows = []
    for (model, benchmark), names in _grouped(costs).items():
        base = next((costs[(model, benchmark, n)] for n in names if n.startswith("Vanilla")),
                    None)
        for name in names:
            row = costs[(model, benchmark, name)]
            total = row["prompt_tokens"] + _zero(row["generated_tokens"])
            ratio = (f"{total / (base['prompt_tokens'] + base['generated_tokens']):.2f}x"
                     if base else "-")
            wall = (f"{row['seconds'] / base['seconds']:.2f}x"
                    if base and math.isfinite(row["seconds"]) and base["seconds"] else "-")
            seconds = ("-" if not math.isfinite(row["seconds"]) else
                       f"{row['seconds']:.2f}" + (" (est.)" if row["estimated"] else ""))
            generated = ("not run" if not math.isfinite(row["generated_tokens"])
                         else f"{row['generated_tokens']:.0f}")
            rows.append([model, bench(benchmark), name, str(row.get("documents", "-")),
                         f"{row['requests']:.1f}", f"{row['passes']:.1f}",
                         f"{row['prompt_tokens']:.0f}", generated, seconds, ratio, wall])
    return table(["model", "dataset", "method", "documents", "requests/doc", "forward passes/doc",
                  "prompt tokens/doc", "generated tokens/doc", "wall s/doc",
                  "tokens (prompt+gen) vs Vanilla", "wall vs Vanilla"], rows, set(range(3, 11)))


SAME_DOCUMENTS_TITLE = "The reasoned reply beside the direct readout, on the same documents"


def _same_documents(result: an.Analysis, direct: an.Analysis) -> list[str]:
    """Per model and dataset with reasoned records: their rows beside the direct readout's on
    the same documents (``direct``: the runs of ``records.SAME_DOCUMENTS``), the document
    check, and the paired differences; "not measured yet" where the direct readout did not run
    on the reasoned runs' documents."""
    found = an.same_documents(result, direct)
    pairs = ", ".join(f"`calidist_<b>{reasoned}` → `calidist_<b>{suffix}`"
                      for reasoned, suffix in DIRECT_READOUT.items())
    parts = [
        f"## {SAME_DOCUMENTS_TITLE}\n",
        "The direct-readout runs above (the option letters scored right after the options, no "
        "reasoning) ran on more documents than the reasoned runs. Here each reasoned task's "
        f"direct-readout counterpart, the task of the same style ({pairs}), ran at the reasoned "
        "run's sizes by the reasoned step of `benchmarks/run.py` (records in "
        f"`benchmarks/results/{SAME_DOCUMENTS}/<model>/`), is set beside the reasoned replies' "
        "rows (the replies' letter log-probabilities and, where present, their stated "
        "confidence). Before anything is compared, each reasoned run's evaluation documents are "
        "compared by origin (file and line) with its counterpart's. Every calibrator is fitted "
        "on its own run's calibration documents and scored on its evaluation documents; x100, "
        f"95% bootstrap intervals ({result.n_boot} resamples). Δ: the reasoned row − the "
        "direct-readout row of the same confidence (`benchmarks/analysis.py` "
        "`direct_counterpart`: Vanilla, the logit baselines, CaliDist per style) on the documents "
        "both scored, 95% paired bootstrap interval; the stated-confidence rows have no "
        f"direct-readout counterpart. {an.SMALL_NOTE}\n",
    ]
    reasoned = an.reasoned_runs(result.stored)
    if not reasoned:
        parts.append("Not measured yet: no committed records of a reasoned task (the reasoned "
                     "step of `benchmarks/run.py`, `--steps reasoned`, runs them and their "
                     "direct readouts).\n")
    for (model, benchmark), runs in sorted(reasoned.items()):
        same = found.get((model, benchmark))
        if same is None:
            parts += [f"**{model} / {bench(benchmark)}**: not measured yet (no direct-readout "
                      f"records in `benchmarks/results/{SAME_DOCUMENTS}/{model}/`). The reasoned "
                      "step of `benchmarks/run.py` runs each reasoned task's direct readout at "
                      "its sizes; these reasoned runs came from:\n", *command_blocks(runs)]
            continue
        rows = [[protocol, row.shown, *_score_cells(row, benchmark)]
                for protocol, shown in (("direct readout", same.direct),
                                        ("reasoned reply", same.reasoned)) for row in shown]
        paired = [[reasoned_row.shown, direct_row.shown,
                   next((an.size_cell(t["n"], benchmark) for t in tests.values() if t), "-"),
                   an.diff(tests["ece"]), an.diff(tests["brier"]),
                   an.verdict_line({"the direct readout": tests})]
                  for reasoned_row, direct_row, tests in same.paired]
        direct_runs = [s for s in direct.stored if (s.model, s.benchmark) == (model, benchmark)]
        parts += [f"**{model} / {bench(benchmark)}**\n",
                  "\n".join(f"- {check.line()}" for check in same.checks) + "\n",
                  table(["protocol", "method", *SCORE_COLUMNS], rows, {3, 4, 5, 6, 7, 8}) + "\n",
                  table(["reasoned row", "direct-readout row", "docs paired",
                         "ΔECE reasoned − direct", "ΔBrier reasoned − direct", "verdict"],
                        paired, {2, 3, 4}) + "\n",
                  "The direct-readout runs on these documents came from:\n",
                  *command_blocks(direct_runs)]
    return parts


def _grouped(costs: dict) -> dict[tuple[str, str], list[str]]:
    grouped: dict[tuple[str, str], list[str]] = {}
    for model, benchmark, name in costs:
        grouped.setdefault((model, benchmark), []).append(name)
    return grouped


def _zero(value: float) -> float:
    return 0.0 if not math.isfinite(value) else value


def slow_note(o: dict) -> str:
    """Where our overhead goes when it misses the 2 s per 100,000 documents target."""
    if o["seconds_per_100k"] < 2:
        return ""
    if o["process_results_s"] > o["aggregation_s"]:
        where = ("`process_results` (per document: a softmax per prompt, the record, mu and "
                 "delta in plain Python, and the garbage collector's passes over the records)")
    else:
        where = "the aggregation"
    return (f"- most of it is {where}. Beside the model (seconds per document on this CPU) it "
            "is small, but it is not a rounding error.\n")


def _overhead(o: dict) -> list[str]:
    return [
        "## Overhead of our own code\n",
        f"{o['documents']:,} synthetic documents of `calidist_ppdb_assertion` "
        f"({o['requests_per_doc']} log-likelihoods each, random values, "
        f"{o['calibration']} calibration documents) through the task's `process_results` and "
        f"the {o['metrics']} metric aggregations exactly as lm-eval calls them "
        "(`python benchmarks/run.py --steps overhead`):\n",
        f"- process_results: {o['process_results_s']:.2f} s; aggregation: "
        f"{o['aggregation_s']:.2f} s; **{o['seconds_per_100k']:.1f} s per 100,000 "
        f"documents** (target: under 2 s: {'met' if o['seconds_per_100k'] < 2 else 'NOT met'}).",
        f"- seconds are CPU seconds of the measuring thread (`time.thread_time`: the machine "
        "is shared, and its wall clock also counts other jobs), the median of "
        f"{len(o.get('passes_s', [0]))} passes "
        f"({', '.join(f'{v:.2f}' for v in o.get('passes_s', []))} s); lm-eval's own work "
        "between our calls is not timed, and the synthetic fixture is frozen out of the "
        "garbage collector. Not in the target: building each document's prompt plan (in "
        f"`construct_requests`, once per document): {o.get('prompt_plans_s', math.nan):.2f} "
        "s for the same documents.",
        f"- peak Python memory (tracemalloc) of one such pass: {o['peak_mib']:.0f} MiB.",
        *own_share_line(o.get("own_share")),
        slow_note(o),
    ]


def own_share_line(share: dict | None) -> list[str]:
    """Our hooks' CPU seconds against the model's on one tiny-model run (``own_share``)."""
    if not share:
        return []
    return [f"- against the model, on one run of the tiny test model (`calidist_ppdb_assertion`, "
            f"{share['documents']} documents, `hf`): calidist's own work (prompts with exemplars "
            f"and hints, requests, records, fits and scores) {share['calidist_s']:.2f} CPU s, "
            f"the model's calls {share['model_s']:.1f} CPU s: **{100 * share['share']:.1f}%** "
            f"(target: at most 1%: {'met' if share['share'] <= 0.01 else 'NOT met'}); with a "
            "real model the model's share only grows."]


def _per_style_run(state: State, result: an.Analysis, what: str, rows_of) -> Iterator:
    """``rows_of(result, stored)`` for every CaliDist-style run with records, in table order; a
    run whose rows fail is named in the problems and skipped, the rest is written."""
    for stored in sorted(state.stored, key=lambda s: (s.model, s.benchmark, s.suffix)):
        if stored.suffix not in an.STYLES or stored.run.records is None:
            continue
        try:
            yield rows_of(result, stored)
        except (ValueError, KeyError, TypeError) as error:
            result.problems.append(f"{what} of {stored.run.name}: {type(error).__name__}: "
                                   f"{error}")


def _variants(state: State, result: an.Analysis) -> list[str]:
    rows, wins = [], []
    for found, won in _per_style_run(state, result, "variants", an.variant_rows):
        rows += found
        wins += won
    if not rows:
        return []
    return [
        "## Calibrator variants (beyond the paper: docs/method.md)\n",
        "Each CaliDist style's run, refitted on its calibration documents with each "
        "`lambda_scale` (how lambda_raw is mapped to [0, 10]) and each `fit` (how alpha and beta "
        "are chosen: the paper's grid search, `refine` = grid then bounded L-BFGS-B, "
        "`default_sigmoid` = alpha 0, beta 1), and `calidist_metrics.BehaviourCalibrator` (a "
        "logistic regression of correctness on logit(p), mu and delta), all scored on the same "
        "held-out evaluation documents. Δ vs default: the variant − the paper's default "
        "(lambda_scale=minmax, fit=grid) on the same documents, 95% paired bootstrap interval; "
        "Δ vs TS likewise against temperature scaling (the original task's, documents paired "
        "by origin). `fit`: alpha, beta, EDGE when the grid search ended on a grid edge, and "
        "the share of evaluation documents with scaled lambda below 1 of 10. "
        f"{an.SMALL_NOTE}\n",
        table(["model", "dataset", "style", "setting", "evaluation docs", "ECE", "Brier", "AUROC",
               "ΔECE vs default", "ΔBrier vs default", "ΔECE vs TS", "verdict vs default",
               "fit"], rows, {4, 5, 6, 7, 8, 9, 10}) + "\n",
        "**Recommendation.** " + (
            "A setting is recommended over the paper's default only where its ECE is lower "
            "with a paired interval excluding 0, by at least "
            f"{100 * an.MIN_ECE_GAIN:.1f} points, and its Brier score is not worse: "
            + "; ".join(wins) + ". Everywhere else the paper's default stays. (Several "
            "variants were compared on the same documents: treat a single win as a lead to "
            "confirm on other data, not as a new default.)"
            if wins else
            "No variant beat the paper's default (lambda_scale=minmax, fit=grid) on ECE with a "
            f"paired interval excluding 0 and by at least {100 * an.MIN_ECE_GAIN:.1f} points "
            "(and Brier not worse) on any model / dataset / style "
            "of this run, so none is recommended: the paper's default stays, and the variants "
            "remain available (`--metadata lambda_scale=... fit=...`) for users to compare on "
            "their own held-out data.") + "\n",
    ]


def _ablations(state: State, result: an.Analysis) -> list[str]:
    parts = []
    for rows, caption in _per_style_run(state, result, "ablations", an.ablation_rows):
        parts += [caption + "\n",
                  table(["setting", "calibration docs", "evaluation docs", "ECE", "Brier",
                         "AUROC", "ΔECE vs as run", "verdict"], rows, {1, 2, 3, 4, 5, 6}) + "\n"]
    if not parts:
        return []
    return [
        "## Ablations (from the logged records, no second model run)\n",
        "x100 on the evaluation documents, 95% bootstrap intervals; Δ: paired difference "
        "against the run as logged, on the same documents. m: the first m hints per label of "
        "the logged prompts (a run with fewer distractors sends exactly those), mu, delta and "
        "lambda_raw recomputed by `calidist_tasks.report.cells.instability` (the "
        "calidist_metrics functions the task's joining uses). delta_mode: the other "
        "`confidence_instability` mode recomputed from the same hints. fit=default_sigmoid: "
        "alpha 0, beta 1 (the paper's Default Sigmoid). Calibration size: random subsets of "
        "the calibration documents, fitted with the run's settings and scored on the same "
        "evaluation documents (sizes at or above the run's calibration set cannot be shown). "
        f"{an.SMALL_NOTE}\n",
        *parts,
    ]


def render(state: State) -> str:
    args = state.args
    n_boot = args.bootstrap
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    result = an.Analysis(state.stored, n_boot)
    machines = sorted({s.header.get("exported_on") for s in state.stored} - {None}) \
        or [state.machine]
    backends = sorted({word for s in state.stored for word in
                       [shlex.split(s.header["command"])[shlex.split(
                           s.header["command"]).index("--model") + 1]]
                       if "--model" in s.header["command"]})
    parts: list[Any] = [
        "# Benchmarks: the full analysis\n",
        f"Written by `benchmarks/run.py --full` on {now} from the committed per-document records "
        "in `benchmarks/results/` (no model runs for this step). The model runs, and this "
        "analysis:\n\n```\n" + "".join(f"{c}\n" for c in _commands(state)) + "```\n",
        f"Machine of the model runs: {'; '.join(machines)}. The machine was shared with other "
        "jobs while this ran, and model jobs ran at a lowered priority (`nice`), so wall times are "
        "upper bounds for an idle machine; request and token counts are exact.\n",
        "Models: SmolLM2-135M-Instruct and Qwen2.5-Coder-0.5B-Instruct (docs/method.md), "
        f"converted offline, `--model {', '.join(backends) or args.backend}`, float32. **These "
        "are tiny models (135M and 0.5B), not the paper's 8B models**: they are weak at both "
        "tasks (compare their accuracy with the majority class, and their AUROC with 50), so "
        "their numbers show what the pipeline and the calibrators do on such models, not what "
        "the paper's models would give.\n",
    ]
    costs = an.cost_rows(result) if state.stored else {}
    documents = default_documents()
    reduced = args.quick or any(len(s.run.records) < documents.get(s.benchmark, 0)
                                for s in state.stored if s.suffix in LOGIT)
    if reduced:
        parts.append(
            f"**Reduced sizes.** The default run ({FULL_SIZES}, two models, every method) "
            "did not fit the time of the sessions that ran it, so the runs below used smaller "
            "document counts (per task in the table below); the default command, "
            "`python benchmarks/run.py`, runs the full sizes. Small evaluation sets give wide "
            "bootstrap intervals: read the intervals, not the points. At the lowest seconds per "
            "prompt token measured for each model (its least loaded task), the default run's "
            "logit tasks alone (every task repeats the original prompt) would take "
            f"{an.default_run_estimate(costs) or 'unknown (no logit run)'}, before the "
            "generation tasks.\n")
    parts += ["## Runs and sizes\n",
              "One row per committed records file (`benchmarks/results/<model>/<task>.jsonl.gz`). "
              "The last column: every score of the task that `calidist_tasks.report` rebuilds "
              "from the records (with the run's own lambda_scale / delta_mode / fit) equals the "
              "number lm-eval saved for that run. "
              f"{an.SMALL_NOTE}\n",
              _runs(state, result) + "\n" if state.stored else "No committed records yet.\n"]
    models = sorted({s.model for s in state.stored} | set(args.models.split(",")) - {""})
    absent = []
    for model in models:
        for benchmark in args.benchmarks.split(","):
            names = [suffix.lstrip("_") or "original" for suffix in (*LOGIT, *GENERATE)
                     if (model, benchmark, suffix) not in result.runs]
            if names:
                absent.append(f"{model} / {bench(benchmark)}: "
                              + ("every task" if len(names) == len(LOGIT) + len(GENERATE)
                                 else ", ".join(names)))
    if absent:
        parts.append("**Not measured** (no committed records; the default command runs them): "
                     + "; ".join(absent) + ".\n")
    if state.missing:
        parts.append("Tasks this run wanted that do not exist in the tree (not run): "
                     + ", ".join(f"`{t}`" for t in sorted(state.missing)) + ".\n")
    if state.failed:
        parts.append("Runs that failed or were stopped (return code != 0; a run stopped for "
                     "time ends with -15, SIGTERM; see its lm_eval.log): "
                     + ", ".join(state.failed) + ".\n")
    if state.stored:
        parts += [
            "## Calibration (held-out evaluation documents)\n",
            "Per model and dataset, every method `calidist report` rebuilds from the records "
            "(`calidist_tasks.report`): each calibrator fitted on the calibration documents of "
            "its run and scored on that run's evaluation documents; CaliDist with the run's own "
            f"settings and m. x100. {ECE_BINNING}; Brier: binary top-label; AUROC: "
            "confidence as a detector of "
            f"correctness; acc: accuracy. Brackets: 95% percentile bootstrap over documents "
            f"({n_boot} resamples; for a biased statistic such as ECE the percentile interval need "
            "not contain the estimate). † = results-file number only (not rebuilt, no "
            f"interval). {UNREADABLE} after a method: more than {UNREADABLE_LIMIT:.0%} of the "
            "replies it reads were unreadable, so lm-eval reports its scores as NaN; the numbers "
            "shown are the rebuilt ones, for inspection only. "
            f"{an.SMALL_NOTE} A verdict is `better` / `worse` "
            "when the paired 95% interval of the difference excludes 0 (lower ECE / Brier is "
            "better), `not distinguishable` otherwise; documents are paired across tasks by "
            "their origin (file and line), and each method is scored on its own correctness "
            "(vector scaling, verbalized and sampled answers can change the prediction). These "
            "are many comparisons on the same documents: a single `better` is evidence, not "
            "proof.\n",
            *_calibration(state, result),
            "The paper's Table 1 (logit confidence) for the same datasets, **other models "
            "(8B)**, for orientation only:\n",
            _paper_table() + "\n",
            "## Cost per document (same runs)\n",
            "Requests: lm-eval requests (one per option letter per prompt, one per sample). "
            "Forward passes: prompts scored (all letters of a prompt in one pass) or samples "
            "generated. Prompt tokens: the model tokenizer's count over those passes' prompts "
            "(no prefix cache). Wall s/doc: lm-eval's evaluation time / documents (calibration "
            "and evaluation documents both run through the model). An m-subset row counts the "
            "prompts of the logged run that a run with the first m hints per label sends "
            "(exact counts; its wall time is estimated in proportion to prompt tokens). On a "
            "shared machine the wall times of different tasks ran under different loads: the "
            "token ratios are the comparable cost, the wall ratios are not.\n",
            _cost(costs) + "\n",
        ]
    wanted = sorted({(s.model, s.benchmark) for s in state.stored}
                    | {(model, benchmark) for model in args.models.split(",") if model
                       for benchmark in args.benchmarks.split(",") if benchmark})
    parts += table4_section(result, wanted)
    same_problems: list[str] = []
    direct = an.Analysis(load(Path(args.results) / SAME_DOCUMENTS, same_problems), n_boot)
    parts += _same_documents(result, direct)
    if state.overhead:
        parts += _overhead(state.overhead)
    if state.stored:
        parts += _variants(state, result)
        parts += _ablations(state, result)
    if state.multiprocess:
        parts += ["## Multi-process evaluation\n", state.multiprocess["summary"] + "\n"]
    commands = [f"- `{s.header['command']}`"
                for s in sorted(state.stored, key=lambda s: (s.model, s.task))]
    if commands:
        parts += ["## Exact lm-eval commands of the model runs\n",
                  "As a user types them: the model folder is `$(calidist model NAME)`, paths "
                  "are relative to the repository root.\n", "\n".join(commands) + "\n"]
    problems = state.problems + result.problems + [
        f"{SAME_DOCUMENTS}: {problem}" for problem in same_problems + direct.problems]
    if problems or result.notes:
        parts += ["## Problems and warnings of this analysis\n"]
        parts += [f"- {p}" for p in dict.fromkeys(problems)]
        if result.notes:
            notes = list(dict.fromkeys(note.split(":  ")[0][:160] for note in result.notes))
            parts.append(f"- {len(notes)} distinct calibration warnings of the refits and "
                         "bootstraps (grid-edge fits, resamples holding one class), e.g.: "
                         + "; ".join(notes[:3]))
        parts.append("")
    return portable("\n".join(str(p) for p in parts)).rstrip("\n") + "\n"
