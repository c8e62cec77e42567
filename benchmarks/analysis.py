"""Benchmark analysis on the committed records: the report's numbers plus what is the benchmark's.

Everything ``calidist report`` computes comes from ``calidist_tasks.report``: the per-method
confidences (``report.cells.leaderboard_cells``: vanilla, the logit baselines, CaliDist per style
refitted with the run's own logged settings, verbalized, consistency), the CaliDist refit
(``cells.calidist_confidences``), mu / delta / lambda_raw of a record for another m or delta
mode (``cells.instability``, the same calidist_metrics functions the task's joining uses),
bootstrap intervals and paired differences (``tables.score_intervals`` /
``tables.paired_difference``) and the per-document prompt counts (``cost``). Added here, and only
here: the paired comparisons against Vanilla and temperature scaling across tasks (documents
paired by their origin), the calibrator variants, the ablations, the cost rows of the benchmark's
tasks with their m-subsets, the default-run estimates, the paper's Table 4, and the reasoned
rows beside the direct readout's on the same documents.
"""

from __future__ import annotations

import json
import math
import shlex
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.commands import (
    BENCH_NAMES,
    DIRECT_READOUT,
    GENERATE,
    default_documents,
    parse_args,
)
from benchmarks.commands import LOGIT as LOGIT_SUFFIXES
from benchmarks.records import Stored
from calidist_metrics import CalibrationWarning
from calidist_tasks.registry import (
    LOGIT,
    METHODS,
    REASONED,
    SCORES,
    VARIANTS,
    Method,
    direct_readout,
    paired_references,
    task_variant,
    variant_named,
)
from calidist_tasks.report.cells import (
    Cell,
    calidist_confidences,
    first_m,
    hints_per_label,
    instability,
    leaderboard_cells,
    run_context,
    settings_of,
    with_instability,
)
from calidist_tasks.report.cost import generation_cost
from calidist_tasks.report.tables import (
    UNREADABLE,
    accuracy,
    paired_difference,
    score_intervals,
    verdict,
)
from calidist_tasks.scoring.fits import behaviour_calibrated, column, split_records
from calidist_tasks.scoring.records import EVALUATION, Hint, hints_of

# Rows with fewer evaluation documents are flagged: 300, or a benchmark's whole test split when
# it is smaller (AQuA's has 254 rows).
SMALL = 300
WHOLE_TEST_SPLIT = {"aqua": 254}
SMALL_NOTE = (f"⚠: fewer than {SMALL} evaluation documents, or than the whole test split where "
              f"that is smaller (AQuA: {WHOLE_TEST_SPLIT['aqua']}).")
INTERVAL_SCORES: dict[str, Callable] = {"acc": accuracy, **SCORES}
# the hinted logit variants' suffixes -> their abbreviation (the registry's)
STYLES = {v.suffix: v.short for v in VARIANTS if v.distracted and v.source == LOGIT}
CALIBRATION_SIZES = (50, 100, 200)
SIZE_DRAWS = 20
# The paper's Table 1 and Table 4, for orientation beside ours (other models: 8B)
PAPER_NUMBERS = Path(__file__).with_name("paper_numbers.json")


def paper_numbers(path: Path = PAPER_NUMBERS) -> dict[str, Any]:
    """The paper's numbers (``benchmarks/paper_numbers.json``: ``table1`` and ``table4``)."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


# ------------------------------------------------------------------------------ scored methods


@dataclass
class Scored:
    """One method's confidence on the evaluation documents of one run."""

    label: str
    task: str
    confidence: np.ndarray | None  # None: results-file numbers only
    correct: np.ndarray | None
    sources: list[str] = field(default_factory=list)  # per evaluation document: its origin
    values: dict[str, float] = field(default_factory=dict)  # score -> fraction
    intervals: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    unreadable: bool = False  # most of the replies it reads unreadable: lm-eval's scores NaN

    @property
    def shown(self) -> str:
        """The row's label as printed: flagged when its replies were mostly unreadable."""
        return f"{self.label} {UNREADABLE}" if self.unreadable else self.label

    @property
    def n(self) -> int:
        return 0 if self.correct is None else int(self.correct.size)


def evaluation_sources(stored_run: Any) -> list[str]:
    """Origins of a TaskRun's evaluation documents, in ``split_records`` order."""
    records = stored_run.records
    sources = stored_run.sources or [None] * len(records)
    ordered = sorted(zip(records, sources, strict=True), key=lambda pair: pair[0]["index"])
    return [source if source is not None else f"{stored_run.task}#{record['index']}"
            for record, source in ordered if record["split"] == EVALUATION]


def aligned(a: Scored, b: Scored) -> tuple[np.ndarray, np.ndarray]:
    """Positions in a and b of the evaluation documents both scored (paired by origin)."""
    where = {source: i for i, source in enumerate(b.sources)}
    pairs = [(i, where[source]) for i, source in enumerate(a.sources) if source in where]
    if not pairs:
        return np.zeros(0, int), np.zeros(0, int)
    first, second = zip(*pairs, strict=True)
    return np.asarray(first), np.asarray(second)


def compare(a: Scored, b: Scored, score: str, n_boot: int) -> dict[str, float] | None:
    """Paired difference a - b of one score on the documents both scored (None: none shared)."""
    if a.confidence is None or b.confidence is None:
        return None
    ia, ib = aligned(a, b)
    if ia.size == 0:
        return None
    return paired_difference(SCORES[score], a.confidence[ia], a.correct[ia],
                             b.confidence[ib], b.correct[ib], n_boot, seed=0)


def quietly(fn: Callable, notes: list[str], where: str) -> Callable:
    """``fn`` with its CalibrationWarnings collected into ``notes`` (reported, not printed)."""
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", CalibrationWarning)
            value = fn(*args, **kwargs)
        notes.extend(dict.fromkeys(f"{where}: {str(w.message).split(';')[0]}" for w in caught
                                   if issubclass(w.category, CalibrationWarning)))
        return value
    return wrapped


@dataclass
class Analysis:
    """Everything the full analysis shows, computed once from the committed records
    (``n_boot=0``: the refits alone, no intervals or paired tests)."""

    stored: list[Stored]
    n_boot: int
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # (model, benchmark) -> methods in METHODS order
    methods: dict[tuple[str, str], list[Scored]] = field(default_factory=dict)
    # (model, benchmark, label) -> {"Vanilla"/"TS": {score: test}}
    paired: dict[tuple[str, str, str], dict[str, dict[str, dict]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.runs = {(s.model, s.benchmark, s.suffix): s for s in self.stored}
        # every fit once; the page's interval table and the full analysis both read these
        self.cells = quietly(leaderboard_cells, self.notes, "refits")(
            [s.run for s in self.stored], self.problems, self.notes)
        order = {m.label: i for i, m in enumerate(METHODS)}
        by_method = {m.label: m for m in METHODS}
        for cell in sorted(self.cells,
                           key=lambda c: (c.model, c.benchmark, order[c.method.label])):
            self.methods.setdefault((cell.model, cell.benchmark), []).append(self._scored(cell))
        if not self.n_boot:  # the refits alone (the page's Table 4)
            return
        for (model, benchmark), rows in self.methods.items():
            print(f"[bench] analysis: paired tests of {model} / {benchmark}", file=sys.stderr,
                  flush=True)
            by_label = {row.label: row for row in rows}
            for row in rows:
                tests = {}
                for name, label in paired_references(by_method[row.label]).items():
                    other = by_label.get(label)
                    if other is None or other is row:
                        continue
                    tests[name] = {score: compare(row, other, score, self.n_boot)
                                   for score in ("ece", "brier")}
                self.paired[(model, benchmark, row.label)] = tests

    def _scored(self, cell: Cell) -> Scored:
        row = Scored(cell.method.label, cell.run.task, cell.confidence, cell.correct,
                     values=dict(cell.values), unreadable=cell.unreadable)
        if cell.confidence is not None:
            row.sources = evaluation_sources(cell.run)
        if cell.confidence is not None and self.n_boot:
            row.intervals = quietly(score_intervals, self.notes, "bootstrap")(
                cell.confidence, cell.correct, self.n_boot, 0, INTERVAL_SCORES)
        return row

    def rows(self, model: str, benchmark: str) -> list[Scored]:
        return self.methods.get((model, benchmark), [])

    def run_problems(self, stored: Stored) -> list[str]:
        return [p for p in self.problems if stored.run.name in p]


def verdict_line(tests: Mapping[str, Mapping[str, dict | None]]) -> str:
    """'vs Vanilla: ECE better, Brier not distinguishable; vs TS: ...' from paired intervals."""
    parts = []
    for reference, by_score in tests.items():
        said = [f"{name} {verdict(test) if test else 'no shared documents'}"
                for name, test in (("ECE", by_score.get("ece")), ("Brier", by_score.get("brier")))]
        parts.append(f"vs {reference}: " + ", ".join(said))
    return "; ".join(parts) if parts else "(reference)"


def diff(test: Mapping[str, float] | None) -> str:
    if not test:
        return "-"
    return (f"{100 * test['difference']:+.2f} [{100 * test['low']:+.2f}, "
            f"{100 * test['high']:+.2f}]")


def interval(value: tuple[float, float, float] | None, digits: int = 2) -> str:
    if value is None:
        return "-"
    point, low, high = value
    return f"{100 * point:.{digits}f} [{100 * low:.1f}, {100 * high:.1f}]"


# ------------------------------------------------------------------------------ variants


@dataclass
class CalibratorChoice:
    """One way of calibrating a run's records (a CaliDist lambda_scale and fit, or the behaviour
    calibrator), not a task variant (``registry.Variant``)."""

    label: str
    confidence: np.ndarray
    fit: str = ""
    as_run: bool = False


def variants(stored: Stored, notes: list[str]
             ) -> tuple[list[CalibratorChoice], np.ndarray, list[str]]:
    """CaliDist with each lambda_scale and fit, and the behaviour calibrator, on one run's
    documents; the first is the paper's default (lambda_scale=minmax, fit=grid)."""
    run = stored.run
    settings = replace(settings_of(run), calibrator=None)
    context = run_context(run, settings)
    calibration, evaluation = split_records(run.records)
    fit = quietly(calidist_confidences, notes, f"{run.name} variants")
    default = replace(settings, lambda_scale="minmax", fit="grid")
    found = []
    for label, chosen in (
        ("paper default: lambda_scale=minmax, fit=grid", default),
        ("lambda_scale=log", replace(default, lambda_scale="log")),
        ("lambda_scale=rank", replace(default, lambda_scale="rank")),
        ("fit=refine", replace(default, fit="refine")),
        ("fit=default_sigmoid (alpha=0, beta=1)", replace(default, fit="default_sigmoid")),
    ):
        confidence, calibrator = fit(calibration, evaluation, chosen, context)
        scaled = calibrator.scaled_reliability(column(evaluation, "lambda_raw"))
        shown = (f"alpha={calibrator.alpha_:.2f} beta={calibrator.beta_:.2f}"
                 + (" EDGE" if getattr(calibrator, "grid_edge_", False) else "")
                 + f"; {100 * np.mean(scaled < 1):.0f}% lambda<1")
        as_run = (chosen.lambda_scale, chosen.fit) == (settings.lambda_scale, settings.fit)
        found.append(CalibratorChoice(label, confidence, shown, as_run))
    behaviour = quietly(behaviour_calibrated, notes, f"{run.name} behaviour")(
        calibration, evaluation, settings, context)
    found.append(CalibratorChoice("behaviour calibrator (LR on logit p, mu, delta)",
                                  behaviour.confidence))
    return found, column(evaluation, "correct"), evaluation_sources(run)


# A variant replaces the paper's default only for a gain a reader would notice: 0.5 ECE points.
MIN_ECE_GAIN = 0.005


def recommended(vs_default: Mapping[str, Mapping[str, float] | None]) -> bool:
    """ECE lower (paired interval excluding 0, by at least ``MIN_ECE_GAIN``), Brier not worse."""
    ece, brier = vs_default["ece"], vs_default["brier"]
    return (ece is not None and verdict(ece) == "better" and -ece["difference"] >= MIN_ECE_GAIN
            and verdict(brier) != "worse")


def variant_rows(analysis: Analysis, stored: Stored) -> tuple[list[list[str]], list[str]]:
    """Table rows of one run's variants, and the variants recommended over the default."""
    found, correct, sources = variants(stored, analysis.notes)
    n_boot = analysis.n_boot
    ts = next((r for r in analysis.rows(stored.model, stored.benchmark)
               if r.label == "Temperature scaling" and r.confidence is not None), None)
    default = Scored("default", stored.task, found[0].confidence, correct, sources)
    rows, wins = [], []
    for variant in found:
        this = Scored(variant.label, stored.task, variant.confidence, correct, sources)
        scores = quietly(score_intervals, analysis.notes, "bootstrap")(
            variant.confidence, correct, n_boot, 0,
            {k: SCORES[k] for k in ("ece", "brier", "auroc")})
        vs_default = None if variant is found[0] else {
            score: compare(this, default, score, n_boot) for score in ("ece", "brier")}
        vs_ts = compare(this, ts, "ece", n_boot) if ts is not None else None
        if vs_default is None:
            said = "(reference)"
        else:
            said = (f"ECE {verdict(vs_default['ece'])}, Brier {verdict(vs_default['brier'])}")
            if recommended(vs_default):
                wins.append(f"{variant.label} on {stored.model} / "
                            f"{BENCH_NAMES.get(stored.benchmark, stored.benchmark)} / "
                            f"{STYLES.get(stored.suffix, stored.suffix)} (ΔECE "
                            f"{diff(vs_default['ece'])})")
        rows.append([
            stored.model, BENCH_NAMES.get(stored.benchmark, stored.benchmark),
            STYLES.get(stored.suffix, stored.suffix),
            variant.label + (" (as run)" if variant.as_run else ""),
            size_cell(len(correct), stored.benchmark),
            interval(scores["ece"]), interval(scores["brier"]), interval(scores["auroc"]),
            diff(vs_default["ece"]) if vs_default else "-",
            diff(vs_default["brier"]) if vs_default else "-",
            diff(vs_ts), said, variant.fit])
    return rows, wins


def size_cell(n: int, benchmark: str) -> str:
    """``n`` evaluation documents, flagged when fewer than the bar (``SMALL``)."""
    return f"{n} ⚠" if n < min(SMALL, WHOLE_TEST_SPLIT.get(benchmark, SMALL)) else str(n)


# ------------------------------------------------------------------------------ ablations


def ablation_rows(analysis: Analysis, stored: Stored, seed: int = 0) -> tuple[list[list[str]],
                                                                             str]:
    """m, delta mode, default sigmoid and calibration size, from one run's logged records."""
    run = stored.run
    settings = replace(settings_of(run), calibrator=None)
    context = run_context(run, settings)
    fit = quietly(calidist_confidences, analysis.notes, f"{run.name} ablations")
    n_boot = analysis.n_boot
    calibration, evaluation = split_records(run.records)
    correct = column(evaluation, "correct")
    sources = evaluation_sources(run)
    m_run = hints_per_label(run.records[0])
    reference_conf, _ = fit(calibration, evaluation, settings, context)
    reference = Scored("as run", stored.task, reference_conf, correct, sources)
    check = consistency_check(run.records, settings.delta_mode)
    settings_rows: list[tuple[str, list, list, Any]] = [
        (f"as run: m={m_run}, delta_mode={settings.delta_mode}, fit={settings.fit}",
         calibration, evaluation, settings)]
    for m in range(1, m_run):
        settings_rows.append((f"m={m} (first {m} hint(s) per label of the logged prompts)",
                              with_instability(calibration, m, settings.delta_mode),
                              with_instability(evaluation, m, settings.delta_mode), settings))
    other = "worst_case" if settings.delta_mode == "mean" else "mean"
    settings_rows.append((f"delta_mode={other}", with_instability(calibration, None, other),
                          with_instability(evaluation, None, other), settings))
    if settings.fit != "default_sigmoid":
        settings_rows.append(("fit=default_sigmoid (alpha=0, beta=1: no fit)", calibration,
                              evaluation, replace(settings, fit="default_sigmoid")))
    rows = []
    for label, cal, ev, chosen in settings_rows:
        confidence = reference_conf if cal is calibration and ev is evaluation and \
            chosen is settings else fit(cal, ev, chosen, context)[0]
        this = Scored(label, stored.task, confidence, correct, sources)
        scores = quietly(score_intervals, analysis.notes, "bootstrap")(
            confidence, correct, n_boot, 0, {k: SCORES[k] for k in ("ece", "brier", "auroc")})
        test = None if confidence is reference_conf else compare(this, reference, "ece", n_boot)
        rows.append([label, str(len(cal)), size_cell(len(ev), stored.benchmark),
                     interval(scores["ece"]),
                     interval(scores["brier"]), interval(scores["auroc"]), diff(test),
                     verdict(test) if test else "(reference)"])
    rng = np.random.default_rng(seed)
    full_ece = SCORES["ece"](reference_conf, correct)
    for size in CALIBRATION_SIZES:
        if size >= len(calibration):
            rows.append([f"calibration size {size}: "
                         + ("the whole calibration set, the 'as run' row" if size ==
                            len(calibration) else "more than the run's calibration set"),
                         str(min(size, len(calibration))),
                         size_cell(len(evaluation), stored.benchmark),
                         *(["see 'as run'"] * 3 if size == len(calibration) else ["-"] * 3),
                         "-", "-"])
            continue
        eces, briers, aurocs = [], [], []
        for _ in range(SIZE_DRAWS):
            chosen = sorted(rng.choice(len(calibration), size, replace=False))
            confidence, _ = fit([calibration[i] for i in chosen], evaluation, settings, context)
            eces.append(SCORES["ece"](confidence, correct))
            briers.append(SCORES["brier"](confidence, correct))
            aurocs.append(quietly(SCORES["auroc"], analysis.notes, "auroc")(confidence, correct))
        gaps = np.asarray(eces) - full_ece
        rows.append([f"calibration size {size} ({SIZE_DRAWS} random subsets; brackets: 2.5-97.5% "
                     "of the subsets, not a bootstrap)", str(size),
                     size_cell(len(evaluation), stored.benchmark),
                     spread(eces), spread(briers), spread(aurocs), spread(gaps, signed=True),
                     f"worse than the full set in {np.mean(gaps > 0) * 100:.0f}% of subsets"])
    caption = (f"**{stored.model} / {BENCH_NAMES.get(stored.benchmark, stored.benchmark)} / "
               f"{STYLES.get(stored.suffix, stored.suffix)}** ({len(calibration)} calibration + "
               f"{len(evaluation)} evaluation documents; logged with m={m_run}; {check})")
    return rows, caption


def spread(values: Sequence[float], signed: bool = False) -> str:
    values = np.asarray(values, dtype=float)
    low, high = np.quantile(values, [0.025, 0.975])
    sign = "+" if signed else ""
    return (f"{100 * values.mean():{sign}.2f} [{100 * low:{sign}.1f}, {100 * high:{sign}.1f}]")


def consistency_check(records: Sequence[Mapping[str, Any]], delta_mode: str) -> str:
    """Whether ``instability`` reproduces the logged mu, delta and lambda_raw of every record."""
    differ = 0
    checked = 0
    for record in records:
        if not record.get("hints"):
            continue
        checked += 1
        mu, delta, lam = instability(record, None, delta_mode)
        if not (math.isclose(mu, record["mu"], abs_tol=1e-12)
                and math.isclose(delta, record["delta"], abs_tol=1e-12)
                and math.isclose(lam, record["lambda_raw"], rel_tol=1e-9)):
            differ += 1
    if differ:
        return (f"**{differ} of {checked} records' logged mu / delta / lambda_raw differ from "
                "their recomputation**")
    return f"mu, delta, lambda_raw recomputed from the hints equal the logged ones ({checked})"


# ------------------------------------------------------------------------------ cost


TWO_STAGE = ", two-stage"  # the suffix of a cost row's name in the two-stage mode


def cost_row(stored: Stored, m: int | None = None, two_stage: bool = False) -> dict[str, Any]:
    """Per document: requests, forward passes, prompt tokens (each forward pass's prompt once)
    and generated tokens; ``m``: only the prompts a run with the first m hints per label sends
    (m=0: the original prompt alone); ``two_stage``: only those a two-stage run sends (the
    original and the hints naming a label other than the record's prediction: 1 + (c - 1)·m;
    ``calidist eval --two-stage``). Wall seconds per document: lm-eval's evaluation time, in
    proportion to the prompt tokens kept when ``m`` or ``two_stage`` is given."""
    requests, passes, prompt_tokens, generated, kept_tokens, all_tokens = ([] for _ in range(6))
    for record, doc in zip(stored.run.records, stored.costs, strict=True):
        prompts = doc["prompts"]
        if m is not None or two_stage:
            hints = hints_of(record)
            if len(prompts) != 1 + len(hints):
                raise ValueError(f"{stored.run.name}: {len(prompts)} prompts for "
                                 f"{len(hints)} hints; cannot take an m-subset")
            kept = range(len(hints)) if m is None else first_m(hints, m) if m else []
            if two_stage:
                kept = [i for i in kept if hints[i].label != record["prediction"]]
            prompts = [prompts[0]] + [prompts[1 + i] for i in kept]
        if stored.scored:
            tokens = sum(t for t, _ in prompts)
            passes.append(len(prompts))
            all_tokens.append(sum(t for t, _ in doc["prompts"]))
        else:
            tokens = sum(t * n for t, n in prompts)
            passes.append(sum(n for _, n in prompts))
            all_tokens.append(sum(t * n for t, n in doc["prompts"]))
        requests.append(sum(n for _, n in prompts))
        prompt_tokens.append(tokens)
        kept_tokens.append(tokens)
        generated.append(doc["generated"])
    share = sum(kept_tokens) / max(sum(all_tokens), 1)
    return {"documents": len(requests), "requests": float(np.mean(requests)),
            "passes": float(np.mean(passes)), "prompt_tokens": float(np.mean(prompt_tokens)),
            "generated_tokens": float(np.mean(generated)),
            "seconds": stored.eval_seconds * share / len(requests),
            "estimated": m is not None or two_stage, "tokens": stored.header.get("tokens", "")}


def two_stage_cost_rows(stored: Stored, suffix: str) -> list[tuple[str, dict[str, Any]]]:
    """The cost rows of a run made with --two-stage: as run, and for assertion the subsets of
    fewer hints per label (a single-stage run's hints naming the prediction were not sent)."""
    if suffix != "_assertion":
        return [(f"{suffix.lstrip('_')}{TWO_STAGE} (as run)", cost_row(stored))]
    m_run = hints_per_label(stored.run.records[0])
    return [(f"assertion m={m_run}{TWO_STAGE} (as run)", cost_row(stored)),
            *((f"assertion m={m} (subset){TWO_STAGE}", cost_row(stored, m, two_stage=True))
              for m in range(1, m_run))]


def cost_rows(analysis: Analysis) -> dict[tuple[str, str, str], dict[str, Any]]:
    """The cost rows of every model and benchmark, keyed (model, benchmark, row name)."""
    costs: dict[tuple[str, str, str], dict[str, Any]] = {}
    order = (*LOGIT_SUFFIXES, *GENERATE)
    for model, benchmark in sorted({(s.model, s.benchmark) for s in analysis.stored}):
        rows: list[tuple[str, dict]] = []
        assertion = analysis.runs.get((model, benchmark, "_assertion"))
        for suffix in order:
            stored = analysis.runs.get((model, benchmark, suffix))
            if stored is None:
                continue
            try:
                if stored.two_stage:
                    rows += two_stage_cost_rows(stored, suffix)
                elif suffix == "_assertion":
                    m_run = hints_per_label(stored.run.records[0])
                    rows.append((f"assertion m={m_run} (as run)", cost_row(stored)))
                    rows.append((f"assertion m={m_run}{TWO_STAGE}",
                                 cost_row(stored, two_stage=True)))
                    for m in range(1, m_run):
                        rows.append((f"assertion m={m} (subset of the same prompts)",
                                     cost_row(stored, m)))
                        rows.append((f"assertion m={m} (subset){TWO_STAGE}",
                                     cost_row(stored, m, two_stage=True)))
                else:
                    rows.append((f"Vanilla ({stored.task})" if not suffix else
                                 suffix.lstrip("_"), cost_row(stored)))
                    if suffix in STYLES:  # the other hinted logit tasks (probe, corruption)
                        rows.append((suffix.lstrip("_") + TWO_STAGE,
                                     cost_row(stored, two_stage=True)))
            except ValueError as error:
                analysis.problems.append(f"cost: {error}")
        if assertion is not None and (not rows or not rows[0][0].startswith("Vanilla")):
            rows.insert(0, ("Vanilla (the assertion run's original prompts)",
                            cost_row(assertion, m=0)))
        estimate = assertion.header.get("consistency_estimate") if assertion else None
        if (model, benchmark, "_consistency") not in analysis.runs and estimate:
            rows.append(("consistency, 15 samples (NOT run: prompt tokens of its requests on the "
                         "same documents, a lower bound)",
                         {**estimate, "generated_tokens": math.nan, "seconds": math.nan,
                          "estimated": True, "tokens": assertion.header.get("tokens", "")}))
        for name, row in rows:
            costs[(model, benchmark, name)] = row
    return costs


def default_run_estimate(costs: Mapping[tuple[str, str, str], Mapping[str, Any]]) -> str:
    """Hours the default sizes' logit tasks would take, at the lowest seconds per prompt token
    measured for the model in this run, for each model with a measured logit row."""
    default = parse_args([])
    documents = default_documents()
    sizes = {"ppdb": (documents["ppdb"], default.ppdb_m, 2),
             "aqua": (documents["aqua"], default.aqua_m, 5)}
    found = []
    for model in sorted({key[0] for key in costs}):
        rows: dict[str, list] = {key[1]: [] for key in costs}
        for (name, benchmark, _), row in costs.items():
            if name == model and row["generated_tokens"] == 0 and not row["estimated"]:
                rows[benchmark].append(row)
        measured = [row for benchmark_rows in rows.values() for row in benchmark_rows]
        if not measured:
            continue
        # the least loaded run is the best guess for an idle machine (others shared the CPU)
        per_token = min(r["seconds"] / r["prompt_tokens"] for r in measured)
        hours, parts = 0.0, []
        for benchmark, (docs, m, labels) in sizes.items():
            if not rows.get(benchmark):
                continue
            per_pass = (sum(r["prompt_tokens"] for r in rows[benchmark])
                        / sum(r["passes"] for r in rows[benchmark]))
            passes = 1 + (1 + labels * m) + 2 * (1 + labels)  # original, As., Pr., Sa.
            part = docs * passes * per_pass * per_token / 3600
            hours += part
            parts.append(f"{BENCH_NAMES[benchmark]} {docs} docs x {passes} prompts: {part:.1f} h")
        found.append(f"{model}: {hours:.1f} h ({'; '.join(parts)})")
    return "; ".join(found)


# ------------------------------------------------------------------------------ Table 4


@dataclass(frozen=True)
class Table4Method:
    """One row of the paper's Table 4: the run it is counted from and the confidence scored;
    the paper's own numbers of the row are ``paper_numbers()["table4"]["rows"][label]``."""

    label: str
    suffix: str  # the task variant whose records hold it
    scored: str  # the leaderboard row (``registry.METHODS``) whose ECE it shows
    m: int | None = None  # hints per label kept (None: as logged)


TABLE4 = (
    Table4Method("Vanilla (reasoned)", "_cot", "Vanilla (reasoned)"),
    Table4Method("Self-consistency (entropy), 15 samples", "_consistency", "Entropy"),
    Table4Method("CaliDist As. (m=1)", "_assertion_cot", "CaliDist reasoned (As.)", m=1),
    Table4Method("CaliDist Sa.", "_corruption_cot", "CaliDist reasoned (Sa.)"),
)


@dataclass
class Table4Row:
    """One method's mean cost per document and its ECE on one model and benchmark; ``cost``
    None: not measured (``why``)."""

    method: Table4Method
    task: str = ""
    documents: int = 0
    cost: dict[str, float] | None = None
    ece: float | None = None
    why: str = ""  # why it is not measured, or what makes it differ from the paper's row


def max_gen_toks(stored: Stored) -> int | None:
    """The generation budget a run's command set (``--gen_kwargs max_gen_toks=N``)."""
    words = shlex.split(stored.header.get("command", ""))
    kwargs = words[words.index("--gen_kwargs") + 1] if "--gen_kwargs" in words else ""
    found = dict(part.split("=", 1) for part in kwargs.split(",") if "=" in part)
    return int(found["max_gen_toks"]) if "max_gen_toks" in found else None


def kept_replies(replies: Sequence[Mapping[str, Any]], m: int | None) -> list[int]:
    """Positions of the replies a CaliDist run with the first ``m`` hints per label reads (all
    when ``m`` is None): the original and the counted hinted ones (naming another label than
    the original reply's answer: the paper's k = (c - 1)·m)."""
    labels = [Hint(r["hint_label"], r["template"], r["answer"], 0.0) for r in replies]
    return [j for j in first_m(labels, m) if replies[j]["counted"]]


def reasoned_document_cost(record: Mapping[str, Any], doc: Mapping[str, Any],
                           m: int | None = None) -> dict[str, float]:
    """``generation_cost`` of one reasoned (``_cot``) document: the replies it reads (their
    prompts and tokens from the reply run, ``records.reply_tokens``) and their letter scoring
    (the run's own prompts: one context per counted reply with a located answer, in order; a
    document with none sends lm-eval one placeholder request, counted as sent)."""
    replies, logged = record["replies"], doc.get("replies")
    where = f"document {record['index']}"
    if logged is None:
        raise ValueError(f"{where}: its reply run's tokens were not kept (records exported "
                         "before they were, or without the run's replies folder)")
    if len(logged) != len(replies):
        raise ValueError(f"{where}: {len(logged)} replies' tokens for {len(replies)} replies")
    kept = kept_replies(replies, m)
    scored = [j for j, reply in enumerate(replies) if reply["letter_logprobs"] is not None]
    contexts = [(float(tokens), int(times)) for tokens, times in doc["prompts"]]
    if scored and len(contexts) != len(scored):
        raise ValueError(f"{where}: {len(contexts)} scored contexts for {len(scored)} scored "
                         "replies")
    scorings = [c for c, j in zip(contexts, scored, strict=True) if j in kept] if scored \
        else contexts
    return generation_cost([(float(logged[j][0]), 1) for j in kept],
                           sum(float(logged[j][1]) for j in kept), scorings)


def sampled_document_cost(doc: Mapping[str, Any]) -> dict[str, float]:
    """``generation_cost`` of one sampling document (consistency): every sample of its prompt,
    the tokens they generated, no scoring."""
    return generation_cost([(float(t), int(n)) for t, n in doc["prompts"]],
                           float(doc["generated"]), [])


def table4_ece(analysis: Analysis, stored: Stored, method: Table4Method) -> float:
    """The ECE of ``method.scored`` on the run's evaluation documents: the leaderboard's when
    the run is the row's and m is as logged; CaliDist refitted with the first m hints per label
    otherwise (as the ablations do). NaN, as the aggregation reports it, when the row's replies
    were mostly unreadable (``Scored.unreadable``): a score of the parser's fallback."""
    run = stored.run
    row = next((r for r in analysis.rows(stored.model, stored.benchmark)
                if r.label == method.scored and r.task == stored.task), None)
    if row is None:
        raise ValueError(f"{method.scored} not rebuilt from {run.name}")
    if row.unreadable:
        return math.nan
    if method.m is None or method.m == hints_per_label(run.records[0]):
        return row.values["ece"]
    settings = settings_of(run)
    calibration, evaluation = split_records(run.records)
    confidence, _ = quietly(calidist_confidences, analysis.notes, f"{run.name} m={method.m}")(
        with_instability(calibration, method.m, settings.delta_mode),
        with_instability(evaluation, method.m, settings.delta_mode), settings,
        run_context(run, settings))
    return float(SCORES["ece"](confidence, column(evaluation, "correct")))


def table4_rows(analysis: Analysis) -> dict[tuple[str, str], list[Table4Row]]:
    """The paper's Table 4 per model and benchmark with a reasoned (``_cot``) run: one row per
    ``TABLE4`` method, "not measured" where its records are missing or unusable; consistency
    sampled at another budget than the Vanilla reply's is shown with that said."""
    reasoned = {method.suffix for method in TABLE4} - {"_consistency"}
    found: dict[tuple[str, str], list[Table4Row]] = {}
    for model, benchmark in sorted({(s.model, s.benchmark) for s in analysis.stored
                                    if s.suffix in reasoned}):
        vanilla = analysis.runs.get((model, benchmark, "_cot"))
        rows = []
        for method in TABLE4:
            stored = analysis.runs.get((model, benchmark, method.suffix))
            row = Table4Row(method)
            if stored is None:
                row.why = f"not measured: no committed records of `calidist_{benchmark}" \
                          f"{method.suffix}`"
                rows.append(row)
                continue
            row.task, row.documents = stored.task, len(stored.run.records)
            try:
                costs = [sampled_document_cost(doc) if method.suffix == "_consistency"
                         else reasoned_document_cost(record, doc, method.m)
                         for record, doc in zip(stored.run.records, stored.costs, strict=True)]
                row.cost = {key: float(np.mean([c[key] for c in costs])) for key in costs[0]}
                row.ece = table4_ece(analysis, stored, method)
                budget = max_gen_toks(stored)
                reply = max_gen_toks(vanilla) if vanilla else None
                if method.suffix == "_consistency" and budget != reply:
                    row.why = (f"sampled at max_gen_toks={budget}, the Vanilla reply at "
                               f"{reply}: not the paper's 15 × the Vanilla reply")
            except (ValueError, KeyError, TypeError) as error:
                row.cost, row.why = None, f"not measured: {stored.run.name}: {error}"
                analysis.problems.append(f"Table 4: {row.why}")
            rows.append(row)
        found[(model, benchmark)] = rows
    return found


# ------------------------------------------------------------------------------ same documents


def is_reasoned(method: Method) -> bool:
    """Whether a leaderboard row reads reasoned replies (the paper's protocol)."""
    return any(variant_named(name).source == REASONED for name in method.variants)


def direct_counterpart(method: Method) -> Method | None:
    """The direct-readout row a reasoned row is set beside: the row of the same confidence that
    the direct-readout variant of its preferred variant reports (Vanilla (reasoned) -> Vanilla,
    CaliDist reasoned (As.) -> CaliDist (As.)); None for the stated-confidence readings (the
    direct readout states none)."""
    direct = direct_readout(method.variants[0]).name
    return next((m for m in METHODS if not m.reading and m.suffix == method.suffix
                 and direct in m.variants), None)


def reasoned_runs(stored: Sequence[Stored]) -> dict[tuple[str, str], list[Stored]]:
    """The runs of reasoned tasks, per model and benchmark."""
    found: dict[tuple[str, str], list[Stored]] = {}
    for run in sorted(stored, key=lambda s: s.task):
        variant = task_variant(run.task, run.run.config)[1]
        if variant is not None and variant.source == REASONED:
            found.setdefault((run.model, run.benchmark), []).append(run)
    return found


@dataclass(frozen=True)
class DocumentCheck:
    """Whether a reasoned run and its direct-readout run scored the same evaluation documents
    (compared by origin: file and line)."""

    reasoned: str  # the reasoned task
    direct: str  # its direct-readout task
    documents: int  # the reasoned run's evaluation documents
    direct_documents: int | None  # the direct-readout run's; None: it has no records
    only_reasoned: int = 0  # evaluation documents of the reasoned run the other lacks
    only_direct: int = 0

    @property
    def same(self) -> bool:
        return self.direct_documents == self.documents and not (self.only_reasoned
                                                                or self.only_direct)

    def line(self) -> str:
        pair = f"`{self.reasoned}` and its direct readout `{self.direct}`"
        if self.direct_documents is None:
            return (f"`{self.reasoned}`: no direct-readout records of `{self.direct}` on its "
                    "documents (not measured yet)")
        if self.same:
            return f"{pair}: same {self.documents} evaluation documents"
        return (f"**WARNING: {pair} scored different documents**: {self.only_reasoned} of the "
                f"reasoned run's {self.documents} evaluation documents are not among the direct "
                f"readout's {self.direct_documents}, and {self.only_direct} of these not among "
                f"the reasoned run's; the paired differences use only the "
                f"{self.documents - self.only_reasoned} both scored, every other number each "
                "run's own documents")


def document_check(reasoned: Stored, direct: Stored | None, direct_task: str) -> DocumentCheck:
    """``DocumentCheck`` of a reasoned run against its direct-readout run (None: missing)."""
    ours = evaluation_sources(reasoned.run)
    if direct is None:
        return DocumentCheck(reasoned.task, direct_task, len(ours), None)
    theirs = evaluation_sources(direct.run)
    return DocumentCheck(reasoned.task, direct.task, len(ours), len(theirs),
                         len(set(ours) - set(theirs)), len(set(theirs) - set(ours)))


@dataclass
class SameDocuments:
    """One model and benchmark's reasoned rows beside the direct readout's on its documents."""

    direct: list[Scored]  # the direct-readout runs' rows (their own Analysis)
    reasoned: list[Scored]  # the reasoned runs' rows
    checks: list[DocumentCheck]
    # (reasoned row, its direct-readout row, {score: paired test reasoned - direct})
    paired: list[tuple[Scored, Scored, dict[str, dict | None]]]


def same_documents(analysis: Analysis, direct: Analysis
                   ) -> dict[tuple[str, str], SameDocuments]:
    """Per model and benchmark with reasoned runs in ``analysis`` and direct-readout runs in
    ``direct`` (the runs of ``records.SAME_DOCUMENTS``): both sides' rows, the document check
    of each reasoned run, and each reasoned row's paired ECE and Brier differences against its
    ``direct_counterpart``; a check that finds different documents is named in the problems."""
    by_label = {m.label: m for m in METHODS}
    found = {}
    for (model, benchmark), runs in reasoned_runs(analysis.stored).items():
        direct_rows = direct.rows(model, benchmark)
        if not direct_rows:
            continue
        checks = []
        for run in runs:
            suffix = DIRECT_READOUT[run.suffix]
            check = document_check(run, direct.runs.get((model, benchmark, suffix)),
                                   f"calidist_{benchmark}{suffix}")
            if check.direct_documents is not None and not check.same:
                analysis.problems.append(check.line().replace("**", ""))
            checks.append(check)
        reasoned = [r for r in analysis.rows(model, benchmark) if is_reasoned(by_label[r.label])]
        paired = []
        for row in reasoned:
            counterpart = direct_counterpart(by_label[row.label])
            other = next((r for r in direct_rows if counterpart and r.label == counterpart.label),
                         None)
            if other is not None:
                paired.append((row, other, {score: compare(row, other, score, analysis.n_boot)
                                            for score in ("ece", "brier")}))
        found[(model, benchmark)] = SameDocuments(direct_rows, reasoned, checks, paired)
    return found
