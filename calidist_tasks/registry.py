"""The method registry: every task variant and every method, defined here once.

A *variant* is what a task sends: its distractor style (YAML ``distractor``, ``styles.STYLES``)
and its confidence source (``LOGIT``, the option letters' probabilities, or a generation task's
YAML ``confidence``); ``yaml_tasks/_generate_configs.py`` writes one task per variant and
benchmark. A *method* is a leaderboard row: the variants that report it (preferred first), the
confidence its metrics are named after (``records.metric_name``), its fit (``fits.Fit``:
calibration records -> evaluation confidences) and its display label. The task's metric names,
the aggregation's fits, ``calidist report``, the demo summary and ``benchmarks/`` all read them
from here; a task's variant comes from its own config (``task_variant``), never from its name.
A new method or variant is one more entry (``register``); see docs/architecture.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Any

import numpy as np

from calidist_metrics import (
    accuracy_at_coverage,
    aurc,
    auroc,
    brier_score,
    coverage_at_accuracy,
    expected_calibration_error,
    maximum_calibration_error,
    negative_log_likelihood,
    prediction_rejection_ratio,
    rms_calibration_error,
    smooth_ece,
)
from calidist_tasks.scoring import fits
from calidist_tasks.scoring.records import (
    CALIDIST,
    CONSISTENCY,
    ENTROPY,
    FSD,
    ISOTONIC,
    LOGPROB,
    PLATT,
    SPUQ,
    TEMPERATURE_SCALING,
    VANILLA,
    VECTOR_SCALING,
    VERBALIZED,
    metric_name,
)
from calidist_tasks.settings import RunSettings

# ------------------------------------------------------------------ scores
# How ``ece`` and ``ece_adaptive`` bin (calidist_metrics.reliability_bins), printed wherever
# results are: libraries differ here (a 5%-step confidence of exactly 0.7 falls in another bin
# under a right-closed rule) by up to 0.014 ECE.
ECE_BINNING = ("ECE: top-label, 10 equal-width bins [0, 0.1), [0.1, 0.2), ..., [0.9, 1.0], "
               "each closed on the left (a confidence of exactly 0.7 is in [0.7, 0.8); 1.0 in "
               "the last bin); adaptive ECE: 10 equal-mass bins (HELM's ece_10_bin)")

# Where a score is shown (``Score.shown``)
RESULTS = "results"  # every task's metrics, once per confidence ("ece", "ece_vanilla")
LEADERBOARD = "leaderboard"  # the report's leaderboard, transfer table and model figures
MORE = "more"  # the report's "more scores" table
SUMMARY = "summary"  # the compact table ``calidist eval`` prints


@dataclass(frozen=True)
class Score:
    """One score of a top-label confidence against correctness, callable as
    ``score(confidence, correct)``."""

    name: str  # its metric name; "<name>_<confidence suffix>" per confidence
    function: Callable[[np.ndarray, np.ndarray], float]
    higher_is_better: bool
    title: str  # its column title in tables and figures
    shown: tuple[str, ...] = (RESULTS, MORE)  # RESULTS, LEADERBOARD, MORE, SUMMARY

    def __call__(self, confidence: np.ndarray, correct: np.ndarray) -> float:
        return self.function(confidence, correct)

    @property
    def __wrapped__(self) -> Callable[[np.ndarray, np.ndarray], float]:
        """The function (``inspect.unwrap``: the bootstrap's one-pass forms recognise it)."""
        return self.function

    @property
    def arrow(self) -> str:
        return "↑" if self.higher_is_better else "↓"


SCORE_ENTRIES: list[Score] = [
    Score("ece", partial(expected_calibration_error, n_bins=10, strategy="uniform"), False,
          "ECE", (RESULTS, LEADERBOARD, SUMMARY)),
    Score("ece_adaptive", partial(expected_calibration_error, n_bins=10, strategy="quantile"),
          False, "Adaptive ECE (HELM ece_10_bin)", (RESULTS, MORE, SUMMARY)),
    Score("brier", brier_score, False, "Brier", (RESULTS, LEADERBOARD, SUMMARY)),
    Score("auroc", auroc, True, "AUROC", (RESULTS, LEADERBOARD, SUMMARY)),
    # the report's only: HELM's one-bin ECE
    Score("ece_1_bin", partial(expected_calibration_error, n_bins=1), False, "ECE 1 bin",
          (MORE,)),
    Score("mce", partial(maximum_calibration_error, n_bins=10, strategy="uniform"), False,
          "MCE"),
    Score("smece", smooth_ece, False, "smECE"),
    Score("aurc", aurc, False, "AURC"),
    # the report's only: the accuracy of the 80% most confident documents
    Score("acc_at_80_coverage", partial(accuracy_at_coverage, coverage=0.8), True,
          "Acc@80% coverage", (MORE,)),
    Score("prr", prediction_rejection_ratio, True, "PRR"),
    Score("nll", negative_log_likelihood, False, "NLL"),
    Score("rmsce", partial(rms_calibration_error, n_bins=10, strategy="uniform"), False,
          "RMS CE"),
    # selective prediction: the share of answers kept, most confident first, while 90% of the
    # kept ones are right (``calidist_metrics.selective_threshold``); the report's Thresholds
    # table gives the threshold and other targets (``calidist report --target-accuracy``)
    Score("coverage_acc90", partial(coverage_at_accuracy, target_accuracy=0.9), True,
          "Coverage @ 90% acc"),
]


def scores_shown(where: str) -> dict[str, Score]:
    """The scores shown ``where`` (RESULTS, LEADERBOARD, MORE, SUMMARY), in SCORE_ENTRIES order."""
    return {score.name: score for score in SCORE_ENTRIES if where in score.shown}


# Every task's scores, per confidence: name -> Score (callable as its function). Kept equal to
# ``scores_shown(RESULTS)`` by ``register``.
SCORES: dict[str, Score] = scores_shown(RESULTS)
# Which way the reported numbers that are not scores go (lm-eval's arrows, the report's verdicts)
OTHER_DIRECTIONS = {"acc": True, "parse_fail_rate": False, "unreadable_original": False,
                    "unreadable_hinted": False}


def higher_is_better(name: str) -> bool | None:
    """True for accuracy and AUROC, False for ECE, Brier and the unreadable share (also under
    a confidence's suffix: "ece_vanilla", "acc_vector"): a score's own direction; None (lm-eval
    then prints no arrow) for diagnostics such as alpha, beta, lambda bounds and counts."""
    directions = {**OTHER_DIRECTIONS,
                  **{score.name: score.higher_is_better for score in SCORE_ENTRIES}}
    for prefix in sorted(directions, key=len, reverse=True):
        if name == prefix or name.startswith(prefix + "_"):
            return directions[prefix]
    return None


# ------------------------------------------------------------------ variants
# A generation task's confidence sources by name (its YAML ``confidence:``): the
# ``confidence.sources.ConfidenceSource`` objects, the built-in ones put here by that module.
SOURCES: dict[str, Any] = {}
LOGIT = "logit"  # CaliDistTask's confidence source: the option letters' probabilities
# ReasonedTask's: the letters' probabilities at the answer of a reasoned reply, read with the
# reply's stated confidence (calidist_tasks.tasks.reasoned); the paper's protocol
REASONED = "reasoned"
NONE = "none"  # the distractor style of a task without hints
# The confidence sources whose hinted tasks run in two stages under --two-stage
# (``runs/two_stage.py``): stage 1 sends the original prompts, stage 2 only the hints naming a
# label other than stage 1's answer, and the record joins the two. The option letters'
# probabilities and one stated confidence per reply can; a sampling source (consistency, SPUQ)
# sends no hints, and a reasoned task reads its replies' run, which splits instead
# (``Variant.two_stage``). A new source whose record can take stage 1's answer joins here.
TWO_STAGE_SOURCES: set[str] = {LOGIT, VERBALIZED}


@dataclass(frozen=True)
class Variant:
    """One kind of task: what it sends (style, confidence source) and its YAML fragment."""

    name: str  # the task-name suffix without "_" ("" = the original prompt, logit)
    distractor: str = NONE  # ``styles.STYLES`` name
    source: str = LOGIT  # its confidence source: LOGIT, or a ``SOURCES`` name (YAML confidence)
    fragment: str = ""  # shared YAML fragment included after a family's _template_yaml
    short: str = ""  # the style's abbreviation in labels ("As.")
    reply: str = ""  # the variant whose logged replies this one reads (the reasoned variants)

    @property
    def suffix(self) -> str:
        """The task-name suffix: calidist_<benchmark><suffix>."""
        return f"_{self.name}" if self.name else ""

    @property
    def distracted(self) -> bool:
        return self.distractor != NONE

    @property
    def splits_in_stages(self) -> bool:
        """Whether a task of this variant sends its original and its hinted prompts in two runs
        (``--metadata stage``, ``calidist eval --two-stage``): a hinted variant of a
        ``TWO_STAGE_SOURCES`` source. The one definition: the task class
        (``CaliDistTask.splits_in_stages``), the planner (``runs.planning``) and the benchmark
        runner read it."""
        return self.distracted and self.source in TWO_STAGE_SOURCES

    @property
    def two_stage(self) -> bool:
        """Whether ``--two-stage`` shortens this variant's runs: it splits in stages itself, or
        (a reading of replies, ``reply``) its reply run does."""
        return self.splits_in_stages or bool(self.reply) and variant_named(self.reply).two_stage


# The group calidist_<b>_all lists the variants in this order.
VARIANTS: list[Variant] = [
    Variant(""),
    Variant("assertion", "assertion", short="As."),
    Variant("probe", "probe", short="Pr."),
    Variant("corruption", "corruption", short="Sa."),
    Variant("verbalized", source=VERBALIZED, fragment="_verbalized_yaml"),
    Variant("assertion_verbalized", "assertion", VERBALIZED, "_verbalized_yaml", "As."),
    Variant("probe_verbalized", "probe", VERBALIZED, "_verbalized_yaml", "Pr."),
    Variant("corruption_verbalized", "corruption", VERBALIZED, "_verbalized_yaml", "Sa."),
    Variant("consistency", source=CONSISTENCY, fragment="_consistency_yaml"),
    Variant("spuq", source=SPUQ, fragment="_spuq_yaml"),
    # the paper's protocol: letters scored at the answer of the matching _verbalized task's
    # reasoned replies (calidist_tasks/tasks/reasoned.py)
    Variant("cot", source=REASONED, fragment="_cot_yaml", reply="verbalized"),
    Variant("assertion_cot", "assertion", REASONED, "_cot_yaml", "As.",
            reply="assertion_verbalized"),
    Variant("probe_cot", "probe", REASONED, "_cot_yaml", "Pr.", reply="probe_verbalized"),
    Variant("corruption_cot", "corruption", REASONED, "_cot_yaml", "Sa.",
            reply="corruption_verbalized"),
]


# ------------------------------------------------------------------ methods
@dataclass(frozen=True)
class Method:
    """One leaderboard row."""

    label: str
    variants: tuple[str, ...]  # the Variant names that report it, preferred first
    # the suffix its metrics are named with: ``records.metric_name(score, suffix)``
    suffix: str
    # calibration records -> its confidence per evaluation document; called through ``fit``
    function: fits.Fit

    def fit(self, calibration: Sequence[Mapping[str, Any]],
            evaluation: Sequence[Mapping[str, Any]], settings: RunSettings,
            context: Mapping[str, Any]) -> fits.Fitted | None:
        """This row's confidence per evaluation document (None where it is undefined for these
        records): its ``function`` on the records, then the unreadable rule (``fits.as_scored``:
        an evaluation document whose original reply was unreadable is scored wrong at 1/c by
        every method; ``fits.split_records`` leaves such calibration documents out of every
        fit). The one fit path: the task's aggregation, ``calidist report`` and the transfer
        table all call it."""
        fitted = self.function(calibration, evaluation, settings, context)
        return fitted and fits.as_scored(fitted, evaluation)

    def metric(self, score: str) -> str:
        """The results-file name of ``score`` for this row."""
        return metric_name(score, self.suffix)

    @property
    def own(self) -> bool:
        """Whether this row is the model's own confidence (no fit): the vanilla rows."""
        return self.function is fits.own_confidence

    @property
    def reading(self) -> str:
        """The record key of the second reading this row is fitted on (``fits.of_reading``),
        "" for the record's own: a second reading's metrics are the task's suffixed ones."""
        return getattr(self.function, "reading", "")


def _names(source: str) -> tuple[str, ...]:
    """The variants of confidence source ``source``, in VARIANTS order."""
    return tuple(v.name for v in VARIANTS if v.source == source)


def _calidist(variant: Variant) -> Method:
    kind = " verbalized" if variant.source == VERBALIZED else ""
    return Method(f"CaliDist{kind} ({variant.short})", (variant.name,), CALIDIST, fits.calidist_fit)


# A reasoned task reads one reply per prompt twice: the log-prob reading under the logit tasks'
# names, the stated confidence (the record's ``verbalized``) under the same names + this suffix.
STATED = "_" + VERBALIZED


def _reasoned(variant: Variant) -> list[Method]:
    """A reasoned style's CaliDist rows: the log-prob reading and the stated one."""
    return [Method(f"CaliDist reasoned ({variant.short})", (variant.name,), CALIDIST,
                   fits.calidist_fit),
            Method(f"CaliDist reasoned verbalized ({variant.short})", (variant.name,),
                   VERBALIZED, fits.of_reading(VERBALIZED, fits.calidist_fit))]


def _stated(label: str, suffix: str, fit: fits.Fit, variants: tuple[str, ...]) -> Method:
    """The row of a reasoned task's stated-confidence reading (``_reasoned``): the logit row of
    metric suffix ``suffix``, its suffix + STATED."""
    return Method(label, variants, suffix + STATED, fits.of_reading(VERBALIZED, fit))


def _logprob(label: str, suffix: str, fit: fits.Fit, variants: tuple[str, ...]) -> Method:
    """The row of a verbalized task's log-prob reading of its replies on a chat API (the
    record's ``logprob``, ``answer_logprobs``): the logit task's metric + "_logprob"; a run
    whose records hold no such reading (``hf``, ``vllm``) reports none of these rows."""
    return Method(label, variants, f"{suffix}_{LOGPROB}" if suffix else LOGPROB,
                  fits.of_reading(LOGPROB, fit, saved_fit=True))


LOGIT_VARIANTS = _names(LOGIT)
VERBALIZED_VARIANTS = _names(VERBALIZED)
REASONED_VARIANTS = _names(REASONED)
METHODS: list[Method] = [
    Method("Vanilla", LOGIT_VARIANTS, VANILLA, fits.own_confidence),
    Method("Temperature scaling", ("",), TEMPERATURE_SCALING, fits.temperature_scaled),
    Method("Platt", ("",), PLATT, fits.platt_scaled),
    Method("Isotonic", ("",), ISOTONIC, fits.isotonic_calibrated),
    Method("Vector scaling", ("",), VECTOR_SCALING, fits.vector_scaled),
    Method("Verbalized", VERBALIZED_VARIANTS, VANILLA, fits.own_confidence),
    Method("Verbalized + Platt", ("verbalized",), PLATT, fits.platt_scaled),
    Method("Verbalized + isotonic", ("verbalized",), ISOTONIC, fits.isotonic_calibrated),
    Method("Consistency", ("consistency",), CONSISTENCY, fits.sampled(CONSISTENCY)),
    Method("Entropy", ("consistency",), ENTROPY, fits.sampled(ENTROPY)),
    Method("FSD", ("consistency",), FSD, fits.sampled(FSD)),
    Method("SPUQ", ("spuq",), SPUQ, fits.sampled(SPUQ)),
    *(_calidist(v) for v in VARIANTS if v.distracted and v.source == LOGIT),
    *(_calidist(v) for v in VARIANTS if v.distracted and v.source == VERBALIZED),
    Method("Vanilla (reasoned)", REASONED_VARIANTS, VANILLA, fits.own_confidence),
    Method("Temperature scaling (reasoned)", ("cot",), TEMPERATURE_SCALING,
           fits.temperature_scaled),
    Method("Platt (reasoned)", ("cot",), PLATT, fits.platt_scaled),
    Method("Isotonic (reasoned)", ("cot",), ISOTONIC, fits.isotonic_calibrated),
    Method("Vector scaling (reasoned)", ("cot",), VECTOR_SCALING, fits.vector_scaled),
    _stated("Verbalized (reasoned)", VANILLA, fits.own_confidence, REASONED_VARIANTS),
    _stated("Verbalized + Platt (reasoned)", PLATT, fits.platt_scaled, ("cot",)),
    _stated("Verbalized + isotonic (reasoned)", ISOTONIC, fits.isotonic_calibrated, ("cot",)),
    *(m for v in VARIANTS if v.distracted and v.source == REASONED for m in _reasoned(v)),
    # the paper's Table 3 "Log-Prob" rows: the answer token's letter probabilities of the
    # verbalized tasks' replies on a chat API
    _logprob("Vanilla (log-prob)", VANILLA, fits.own_confidence, VERBALIZED_VARIANTS),
    _logprob("Temperature scaling (log-prob)", TEMPERATURE_SCALING, fits.temperature_scaled,
             ("verbalized",)),
    _logprob("Platt (log-prob)", PLATT, fits.platt_scaled, ("verbalized",)),
    _logprob("Isotonic (log-prob)", ISOTONIC, fits.isotonic_calibrated, ("verbalized",)),
    _logprob("Vector scaling (log-prob)", VECTOR_SCALING, fits.vector_scaled, ("verbalized",)),
    *(_logprob(f"CaliDist log-prob ({v.short})", CALIDIST, fits.calidist_fit, (v.name,))
      for v in VARIANTS if v.distracted and v.source == VERBALIZED),
]


def register(variant: Variant | None = None, *rows: Method, score: Score | None = None,
             source: Any = None) -> None:
    """Add a variant (written by the YAML generator, found by ``task_variant``), the methods it
    reports (a new calibrator is a method whose ``fit`` is new), a score (reported for every
    confidence, shown where its ``shown`` says) and a generation task's confidence source (a
    ``confidence.sources.ConfidenceSource``, found by its YAML ``confidence:``); a style's own
    class goes into ``styles.STYLES``."""
    if source is not None:
        if source.name in SOURCES or source.name == LOGIT:
            raise ValueError(f"a confidence source named {source.name!r} is registered already")
        SOURCES[source.name] = source
    if score is not None:
        if any(s.name == score.name for s in SCORE_ENTRIES):
            raise ValueError(f"a score named {score.name!r} is registered already")
        SCORE_ENTRIES.append(score)
        SCORES.clear()
        SCORES.update(scores_shown(RESULTS))
    if variant is not None:
        if any(v.name == variant.name for v in VARIANTS):
            raise ValueError(f"a variant named {variant.name!r} is registered already")
        VARIANTS.append(variant)
    for method in rows:
        if any(m.label == method.label for m in METHODS):
            raise ValueError(f"a method labelled {method.label!r} is registered already")
        METHODS.append(method)


def calidist_method() -> Method:
    """The CaliDist row of the logit tasks. Every CaliDist row fits alike
    (``fits.calidist_fit``); the task's aggregation, ``calidist report`` and the transfer table
    all call this row's ``fit``."""
    return next(m for m in METHODS if m.suffix == CALIDIST and not m.reading)


def variant_named(name: str) -> Variant:
    return next(v for v in VARIANTS if v.name == name)


def direct_readout(name: str) -> Variant:
    """The logit variant of variant ``name``'s distractor style: its prompts with the letters
    scored right after the options (a reasoned variant's direct readout: ``cot`` -> ``""``,
    ``assertion_cot`` -> ``assertion``)."""
    distractor = variant_named(name).distractor
    found = [v for v in VARIANTS if v.source == LOGIT and v.distractor == distractor]
    if not found:
        raise ValueError(f"variant {name!r}: no direct-readout (logit) variant of its style "
                         f"{distractor!r} is registered")
    return found[0]


def methods_of(variant: Variant) -> list[Method]:
    """The leaderboard rows a task of ``variant`` fills, in METHODS order."""
    return [m for m in METHODS if variant.name in m.variants]


def paired_references(method: Method) -> dict[str, str]:
    """The rows ``method``'s paired differences are taken against (BENCHMARKS.md): the Vanilla
    and temperature-scaling rows of the same protocol, so that a reasoned row is compared with
    the reasoned Vanilla on the same replies, a chat API's log-prob row with its own Vanilla."""
    if method.reading == LOGPROB:
        protocol = " (log-prob)"
    elif any(variant_named(name).source == REASONED for name in method.variants):
        protocol = " (reasoned)"
    else:
        protocol = ""
    return {"Vanilla": "Vanilla" + protocol, "TS": "Temperature scaling" + protocol}


def vanilla_labels() -> set[str]:
    """Labels of the rows that are the model's own confidence."""
    return {m.label for m in METHODS if m.own}


def paired_variants() -> set[str]:
    """Variants whose record "confidence" is a vanilla row: their other rows are paired with
    it."""
    return {v for m in METHODS if m.own for v in m.variants}


def fitted_methods(distracted: bool, source: str = LOGIT) -> list[Method]:
    """One method per confidence a task of this kind reports (every variant sending the same
    kind reports the same metric names), in METHODS order, CaliDist's first; not the rows of a
    second reading (``Method.reading``), whose suffixed metrics the task names and summarizes
    itself (``aggregation.logprob_metric_names``, ``reasoned.reasoned_metric_names``)."""
    names = {v.name for v in VARIANTS if v.distracted == distracted and v.source == source}
    found: dict[str, Method] = {}
    for method in METHODS:
        if names & set(method.variants) and not method.reading:
            found.setdefault(method.suffix, method)
    return sorted(found.values(), key=lambda m: m.suffix != CALIDIST)


# ------------------------------------------------------------------ metric names
DIAGNOSTICS = (
    "flip_rate", "mu_mean", "delta_mean", "alpha", "beta", "lambda_min", "lambda_max",
    "stable_fraction", "requests_per_doc", "n_calibration", "n_evaluation",
)
# the fitted temperature, and vector scaling's own accuracy (it may change the prediction)
BASELINE_EXTRAS = ("temperature", metric_name("acc", VECTOR_SCALING), "requests_per_doc",
                   "n_calibration", "n_evaluation")
GENERATION_EXTRAS = ("parse_fail_rate", "unreadable_original", "requests_per_doc",
                     "n_calibration", "n_evaluation")
# unreadable replies counted (aggregation.unreadable_counts), beside parse_fail_rate
UNREADABLE_EXTRAS = ("parse_fail_rate", "unreadable_original", "unreadable_hinted")


# "does the model reason?" (aggregation.reasoning_metrics): a _verbalized / _cot run's replies
REASONING_METRICS = ("reasoned_rate", "cut_rate", "readable_rate", "copied_rate",
                     "output_tokens_per_reply")


def unreadable_metrics(distracted: bool) -> tuple[str, ...]:
    """The unreadable share and counts a reading of replies reports (no hints: no hinted)."""
    return UNREADABLE_EXTRAS if distracted else UNREADABLE_EXTRAS[:2]
# sampling_temperature: the samples' temperature (ConfidenceSource.summary_extras)
SAMPLING_EXTRAS = {CONSISTENCY: ("identical_samples_rate", "sampling_temperature"), SPUQ: ()}


def metric_names(distracted: bool, source: str = LOGIT) -> list[str]:
    """The metrics a task reports (README, "Metrics"): accuracy, every score of each of its
    methods' confidences (``fitted_methods``), then its diagnostics."""
    names = ["acc", *(m.metric(s) for m in fitted_methods(distracted, source)
                      for s in SCORES)]
    if distracted:
        return [*names, *DIAGNOSTICS, *(UNREADABLE_EXTRAS if source != LOGIT else ())]
    if source == LOGIT:
        return [*names, *BASELINE_EXTRAS]
    return [*names, *GENERATION_EXTRAS, *SAMPLING_EXTRAS.get(source, ())]


# ------------------------------------------------------------------ a task's variant
@lru_cache(maxsize=1)
def _yaml_configs() -> dict[str, dict[str, Any]]:
    from calidist_tasks.data.yaml_configs import task_configs

    return task_configs()


def task_variant(task: str, config: Mapping[str, Any] | None = None
                 ) -> tuple[str, Variant | None]:
    """(benchmark, variant) of a task run, from the keys a calidist task logs in its config's
    metadata (``benchmark``, ``distractor``, ``confidence``), else from our YAML config of that
    task (runs made before the task logged them); variant None when no registered variant sends
    that style and confidence, for a stage that only generates what a later stage scores (a
    letter-scoring confidence with generate_until requests), or when the task is none of ours."""
    config = config or {}
    keys = {**_yaml_configs().get(task, {}), **config, **(config.get("metadata") or {})}
    if not keys.get("distractor") and not keys.get("benchmark"):
        return task, None
    distractor = keys.get("distractor") or NONE
    confidence = keys.get("confidence") or LOGIT
    if confidence == LOGIT and keys.get("output_type") == "generate_until":
        return str(keys.get("benchmark") or task), None  # a generation stage (GSM8K's first two)
    return str(keys.get("benchmark") or task), variant_of(distractor, confidence)


def variant_of(distractor: str, source: str) -> Variant | None:
    """The registered variant sending style ``distractor`` with confidence ``source``."""
    return next((v for v in VARIANTS if v.distractor == distractor and v.source == source), None)


def splits_in_stages(task: str, config: Mapping[str, Any]) -> bool:
    """Whether the task of YAML ``config`` runs in two stages under ``--two-stage``: its
    variant splits (``Variant.splits_in_stages``) and its YAML names no stage of its own
    (GSM8K's ``stage``, docs/gsm8k.md; ``OpenEndedTask.splits_in_stages``)."""
    if config.get("stage"):
        return False
    _, variant = task_variant(task, config)
    return variant is not None and variant.splits_in_stages
