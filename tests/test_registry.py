"""The method registry (``calidist_tasks.registry``): one definition per variant and method, and
a new distractor style added by touching only the registry and the style's own class
(docs/architecture.md, "To add ...")."""

from __future__ import annotations

import math

import numpy as np
import pytest

from calidist_tasks import registry
from calidist_tasks.data.yaml_configs import task_configs
from calidist_tasks.prompting import distractors, styles
from calidist_tasks.prompting.parts import HINT
from calidist_tasks.scoring import fits
from calidist_tasks.scoring.joining import PromptPlan
from calidist_tasks.scoring.records import CALIDIST, metric_name

FRIEND_HINT = "Hint: a friend picked"


class Friend(styles.Probe):
    """A toy style: "Hint: a friend picked (x) option." (one fixed template, like probe)."""

    name = "friend"

    def hinted_copy(self, doc: dict, plan: PromptPlan, choices: list[str]) -> dict:
        label = plan.hint_label
        return {**doc, HINT: f"{FRIEND_HINT} ({distractors.LETTERS[label]}) {choices[label]}."}


@pytest.fixture
def friend(monkeypatch: pytest.MonkeyPatch):
    """The toy style registered: its class, its variant and its CaliDist row (undone after)."""
    variant = registry.Variant("friend", "friend", short="Fr.")
    row = registry.Method("CaliDist (Fr.)", ("friend",), CALIDIST, fits.calidist_fit)
    monkeypatch.setitem(styles.STYLES, "friend", Friend)
    saved = [*registry.VARIANTS], [*registry.METHODS]
    registry.register(variant, row)
    yield variant, row
    registry.VARIANTS[:], registry.METHODS[:] = saved


def test_every_generated_task_is_a_registered_variant() -> None:
    """Each task of our YAML folder is found by its config, never by its name: the config's
    style and confidence name a registered variant whose suffix the task's name carries."""
    configs = task_configs()
    # GSM8K's generation stages (a worked answer, the hinted chains) only feed the next stage
    stages = {name for name, c in configs.items()
              if c.get("output_type") == "generate_until" and not c.get("confidence")}
    assert stages == {"calidist_gsm8k", "calidist_gsm8k_assertion_chains"}
    assert all(registry.task_variant(name)[1] is None for name in stages)
    tasks = {name: c for name, c in configs.items() if "task" in c and "group" not in c
             and name not in stages}
    assert len(tasks) >= 8 * len(registry.VARIANTS)
    for name in tasks:
        benchmark, variant = registry.task_variant(name)
        assert variant is not None, name
        assert name == f"calidist_{benchmark}{variant.suffix}"
    # every variant reports at least one method, and every method belongs to a variant
    names = {v.name for v in registry.VARIANTS}
    assert all(registry.methods_of(v) for v in registry.VARIANTS)
    assert all(set(m.variants) <= names for m in registry.METHODS)
    assert len({m.label for m in registry.METHODS}) == len(registry.METHODS)


def test_metric_names_follow_the_registry(friend) -> None:
    """A task's metric names are its methods' confidences: a new CaliDist row adds no metric
    (its confidence is CaliDist's), a new confidence would."""
    assert metric_name("ece", CALIDIST) in registry.metric_names(True)
    assert registry.fitted_methods(True)[0].suffix == CALIDIST
    before = registry.metric_names(False)
    registry.register(None, registry.Method("Toy", ("",), "toy", fits.platt_scaled))
    assert registry.metric_names(False) == [
        *before[:-len(registry.BASELINE_EXTRAS)], *(metric_name(s, "toy") for s in registry.SCORES),
        *registry.BASELINE_EXTRAS]
    with pytest.raises(ValueError, match="registered already"):
        registry.register(friend[0])


def test_logprob_rows_name_the_metrics_the_aggregation_reports() -> None:
    """A verbalized task's log-prob rows (a chat API's second reading of its replies) are the
    ``*_logprob`` metrics its aggregation adds, and add none to the task's own list."""
    from calidist_tasks.scoring.aggregation import logprob_metric_names
    from calidist_tasks.scoring.records import LOGPROB, VERBALIZED

    for variant in (v for v in registry.VARIANTS if v.source == VERBALIZED):
        rows = [m for m in registry.methods_of(variant) if m.reading == LOGPROB]
        assert [m.label for m in rows][0] == "Vanilla (log-prob)"
        assert len(rows) == (2 if variant.distracted else 5), variant.name
        reported = logprob_metric_names(variant.distracted)
        assert all(m.metric(s) in reported for m in rows for s in registry.SCORES)
        assert not any(LOGPROB in name for name in registry.metric_names(variant.distracted,
                                                                         VERBALIZED))


def test_each_row_is_paired_with_the_vanilla_and_ts_of_its_own_protocol():
    from calidist_tasks.registry import METHODS, paired_references

    labels = {m.label for m in METHODS}
    for method in METHODS:
        references = paired_references(method)
        assert set(references.values()) <= labels, (method.label, references)
    by_label = {m.label: m for m in METHODS}
    assert paired_references(by_label["CaliDist reasoned (As.)"])["Vanilla"] == "Vanilla (reasoned)"
    assert paired_references(by_label["Verbalized (reasoned)"])["TS"] == (
        "Temperature scaling (reasoned)")
    assert paired_references(by_label["CaliDist log-prob (As.)"])["Vanilla"] == (
        "Vanilla (log-prob)")
    assert paired_references(by_label["CaliDist (As.)"]) == {"Vanilla": "Vanilla",
                                                              "TS": "Temperature scaling"}


# ------------------------------------------------ a toy source, calibrator and score, each one
# new module's worth of code (here, the test's) plus one ``register`` call
def _records(n_cal: int = 30, n_eval: int = 40, seed: int = 0) -> list[dict]:
    """Records of a logit task without hints: p, correctness and the letters' log-probs."""
    rng = np.random.default_rng(seed)
    records = []
    for i in range(n_cal + n_eval):
        p = float(rng.uniform(0.5, 0.99))
        correct = int(rng.random() < p - 0.1)
        records.append({"index": i, "split": "calibration" if i < n_cal else "evaluation",
                        "label": 0, "prediction": 0 if correct else 1, "confidence": p,
                        "correct": correct, "requests": 2, "generations": 3,
                        "parse_failures": 0,
                        "letter_logprobs": [math.log(p), math.log(1 - p)] if correct
                        else [math.log(1 - p), math.log(p)]})
    return records


@pytest.fixture
def restored(monkeypatch: pytest.MonkeyPatch):
    """The registry (and the confidence sources) as they were, after the test."""
    from calidist_tasks.confidence.sources import SOURCES

    saved = ([*registry.VARIANTS], [*registry.METHODS], [*registry.SCORE_ENTRIES],
             dict(registry.SCORES), dict(SOURCES))
    yield
    registry.VARIANTS[:], registry.METHODS[:], registry.SCORE_ENTRIES[:] = saved[:3]
    registry.SCORES.clear()
    registry.SCORES.update(saved[3])
    SOURCES.clear()
    SOURCES.update(saved[4])


def histogram_binned(calibration, evaluation, settings, context) -> fits.Fitted:
    """A toy calibrator (histogram binning, 5 equal-width bins): the calibration accuracy of the
    bin of each evaluation confidence (the bin's midpoint where no calibration document is)."""
    def bins(records):
        return np.minimum((fits.column(records, "confidence") * 5).astype(int), 4)

    where, correct = bins(calibration), fits.column(calibration, "correct")
    accuracy = np.array([correct[where == b].mean() if (where == b).any() else (b + 0.5) / 5
                         for b in range(5)])
    return fits.Fitted(accuracy[bins(evaluation)], fits.column(evaluation, "correct"))


def test_a_toy_calibrator_is_one_method(restored) -> None:
    """A new fit registered as a method: the logit tasks report its scores under its
    confidence's name, computed by the aggregation through its ``fit``."""
    from calidist_tasks.scoring.aggregation import summarize_baselines
    from calidist_tasks.settings import RunSettings

    registry.register(None, registry.Method("Histogram binning", ("",), "histogram",
                                          histogram_binned))
    assert "ece_histogram" in registry.metric_names(False)
    assert "ece_histogram" not in registry.metric_names(True)  # not a hinted task's row
    assert registry.higher_is_better("auroc_histogram") is True
    records = _records()
    results = summarize_baselines(records, RunSettings(), {"task": "calidist_toy"})
    expected = histogram_binned(records[:30], records[30:], RunSettings(), {})
    for name, score in registry.SCORES.items():
        assert results[metric_name(name, "histogram")] == pytest.approx(
            score(expected.confidence, expected.correct)), name
    assert results["ece_histogram"] != results["ece_vanilla"]


def test_a_toy_score_is_one_score_entry(restored) -> None:
    """A new score registered once: every confidence of every task reports it with its
    direction, the aggregation computes it, and the report's "more scores" table shows it."""
    from calidist_tasks.report.cells import Cell
    from calidist_tasks.report.tables import more_scores
    from calidist_tasks.scoring.aggregation import summarize_baselines
    from calidist_tasks.settings import RunSettings

    def mean_gap(confidence, correct) -> float:
        return float(abs(np.mean(confidence) - np.mean(correct)))

    registry.register(score=registry.Score("gap", mean_gap, False, "Gap"))
    for name in ("gap_vanilla", "gap_ts", "gap_platt"):
        assert name in registry.metric_names(False) and registry.higher_is_better(name) is False
    assert "gap" in registry.metric_names(True) and "gap_consistency" in registry.metric_names(
        False, "consistency")
    records = _records()
    results = summarize_baselines(records, RunSettings(), {"task": "calidist_toy"})
    evaluation = records[30:]
    assert results["gap_vanilla"] == pytest.approx(
        mean_gap(fits.column(evaluation, "confidence"), fits.column(evaluation, "correct")))
    cell = Cell("m", "toy", registry.METHODS[0], None, {},
                fits.column(evaluation, "confidence"), fits.column(evaluation, "correct"))
    table = more_scores([cell], {"m": "m"})
    assert "Gap↓" in table.columns
    assert table.rows[0][table.columns.index("Gap↓")] == pytest.approx(
        100 * results["gap_vanilla"])
    with pytest.raises(ValueError, match="registered already"):
        registry.register(score=registry.Score("gap", mean_gap, False, "Gap"))


def test_a_toy_confidence_source_is_one_source_and_its_rows(restored) -> None:
    """A new confidence source (three sampled replies; confidence: the share agreeing with the
    first) registered with its variant and its row: a task of its YAML ``confidence`` finds
    them, its records carry the confidence and the aggregation reports its scores."""
    from calidist_tasks.confidence.sources import SOURCES, Spuq
    from calidist_tasks.scoring.aggregation import summarize_generations
    from calidist_tasks.scoring.joining import Outcome
    from calidist_tasks.settings import RunSettings

    class Agreement(Spuq):
        name = "agreement"
        evaluation_only = False

        def asks(self, doc, variants, base, repeats, settings, original=True):
            return [Ask(None, {**base, "temperature": 1.0, "do_sample": True}, 3)]

        def outcome(self, answers, n_choices):
            share = sum(a == answers[0] for a in answers) / len(answers)
            return (Outcome(answers[0], share, parsed=answers[0] is not None),
                    {"confidences": {"agreement": share}})

    from calidist_tasks.confidence.sources import Ask

    variant = registry.Variant("agreement", source="agreement")
    row = registry.Method("Agreement", ("agreement",), "agreement", fits.sampled("agreement"))
    registry.register(variant, row, source=Agreement())
    assert SOURCES["agreement"].name == "agreement"
    assert registry.task_variant("calidist_ppdb_agreement", {
        "metadata": {"benchmark": "ppdb", "confidence": "agreement"}}) == ("ppdb", variant)
    assert registry.methods_of(variant) == [row]
    assert "ece_agreement" in SOURCES["agreement"].metric_names(False)
    rng = np.random.default_rng(1)
    records = []
    for i in range(20):
        answers = [int(a) for a in rng.integers(0, 2, 3)]
        parsed = [{"answer": a} for a in answers]
        record, unreadable = SOURCES["agreement"].record(parsed, [PromptPlan()], 2, 0,
                                                         RunSettings(), f"document {i}")
        assert unreadable == 0
        record.update(index=i, split="calibration" if i < 5 else "evaluation", requests=3,
                      generations=3, parse_failures=0)
        records.append(record)
    results = summarize_generations(records, RunSettings(), {"task": "calidist_ppdb_agreement"},
                                    "agreement", False)
    evaluation = records[5:]
    shares = [r["confidences"]["agreement"] for r in evaluation]
    assert results["ece_agreement"] == pytest.approx(
        registry.SCORES["ece"](np.array(shares), fits.column(evaluation, "correct")))
    with pytest.raises(ValueError, match="registered already"):
        registry.register(source=Agreement())
