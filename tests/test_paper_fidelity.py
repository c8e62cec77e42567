"""One test per row of docs/paper_fidelity.md: each pins a default to the paper, so that a change of
default fails here (and the table names the test). Prompts are pinned whole in tests/snapshots."""

from __future__ import annotations

import math
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import load_task

from calidist_metrics import (
    CALIDIST_COLUMNS,
    CaliDistCalibrator,
    brier_score,
    confidence_instability,
    expected_calibration_error,
    prediction_instability,
    reliability_score,
    stack_columns,
)
from calidist_tasks.confidence import consistency
from calidist_tasks.prompting import distractors, styles
from calidist_tasks.settings import RunSettings

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "docs" / "paper_fidelity.md"
CLASSIFICATION = ("mnli", "mscinli", "ppdb", "yahoo", "hellaswag", "csqa", "aqua", "contractnli")


def _template(benchmark: str) -> dict:
    text = (ROOT / "yaml_tasks" / benchmark / "_template_yaml").read_text()
    return yaml.safe_load(re.sub(r"!function \S+", "fn", text))


def test_every_row_names_a_test_that_exists() -> None:
    names = set(re.findall(r"`(?:tests/[a-z_/]+\.py::)?(test_[a-z0-9_]+)`", TABLE.read_text()))
    assert len(names) >= 20
    defined = {m for f in (ROOT / "tests").rglob("test_*.py")
               for m in re.findall(r"^def (test_[a-z0-9_]+)", f.read_text(), re.M)}
    missing = sorted(names - defined)
    assert not missing, f"docs/paper_fidelity.md names tests that do not exist: {missing}"


def test_confidence_is_the_softmax_over_option_letters() -> None:
    from calidist_tasks.scoring.joining import outcome_from_loglikelihoods

    outcome = outcome_from_loglikelihoods([-1.0, -0.2, -3.0], "doc")
    probs = np.exp([-1.0, -0.2, -3.0]) / np.exp([-1.0, -0.2, -3.0]).sum()
    assert outcome.prediction == 1 and outcome.confidence == pytest.approx(probs.max())


def test_instability_formulas() -> None:
    """mu = (1/k) sum 1[y_j != y] p'_j; delta = |p - mean p'|; lambda_raw = (1-mu)/(delta+1e-10)."""
    p, y = 0.8, 0
    preds, confs = [0, 1, 2, 0], [0.7, 0.6, 0.5, 0.9]
    mu = prediction_instability(y, preds, confs)
    delta = confidence_instability(p, confs)
    assert mu == pytest.approx((0.6 + 0.5) / 4)
    assert delta == pytest.approx(abs(0.8 - np.mean(confs)))
    assert reliability_score(mu, delta) == pytest.approx((1 - mu) / (delta + 1e-10))
    assert reliability_score(0.0, 0.0) == pytest.approx(1e10)


def test_delta_default_is_the_mean_and_worst_case_is_opt_in() -> None:
    assert RunSettings().delta_mode == "mean"
    assert confidence_instability(0.9, [0.5, 0.8], mode="worst_case") == pytest.approx(0.4)


def test_minmax_lambda_on_the_calibration_set_clipped_to_0_10() -> None:
    assert RunSettings().lambda_scale == "minmax"
    raw = np.array([1.0, 3.0, 5.0, 2.0, 4.0, 2.5])
    X = stack_columns(CALIDIST_COLUMNS, lambda_raw=raw, confidence=np.full(6, 0.9))
    fit = CaliDistCalibrator().fit(X, [1, 0, 1, 1, 0, 1])
    assert fit.scaled_reliability([1.0, 3.0, 5.0, -7.0, 99.0]).tolist() == [0, 5, 10, 0, 10]


def test_calibrated_confidence_is_sigmoid_times_p() -> None:
    rng = np.random.default_rng(0)
    raw, conf = rng.uniform(0, 10, 40), rng.uniform(0.3, 1, 40)
    X = stack_columns(CALIDIST_COLUMNS, lambda_raw=raw, confidence=conf)
    fit = CaliDistCalibrator().fit(X, rng.integers(0, 2, 40))
    lam = fit.scaled_reliability(raw)
    expected = conf / (1 + np.exp(-fit.beta_ * (lam - fit.alpha_)))
    np.testing.assert_allclose(fit.predict(X), expected)


def _paper_grid_search(raw, conf, correct):
    """Appendix I, written out independently: 100 x 100 grid, minimum calibration Brier."""
    lam = (raw - raw.min()) / (raw.max() - raw.min()) * 10
    best = (math.inf, None, None)
    for beta in np.linspace(0.1, 5, 100):
        for alpha in np.linspace(-5, 5, 100):
            brier = np.mean((conf / (1 + np.exp(-beta * (lam - alpha))) - correct) ** 2)
            if brier < best[0]:
                best = (brier, alpha, beta)
    return best[1], best[2]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fit_is_the_papers_grid_search_alone(seed: int) -> None:
    assert RunSettings().fit == "grid"
    rng = np.random.default_rng(seed)
    raw = rng.lognormal(0, 2, 60)
    conf = rng.uniform(0.3, 1, 60)
    correct = (rng.uniform(size=60) < conf * 0.8).astype(float)
    fit = CaliDistCalibrator().fit(
        stack_columns(CALIDIST_COLUMNS, lambda_raw=raw, confidence=conf), correct)
    alpha, beta = _paper_grid_search(raw, conf, correct)
    assert (fit.alpha_, fit.beta_) == pytest.approx((alpha, beta), abs=1e-12)
    assert fit.alpha_ in np.linspace(-5, 5, 100) and fit.beta_ in np.linspace(0.1, 5, 100)


def test_default_sigmoid_ablation_is_alpha_0_beta_1() -> None:
    rng = np.random.default_rng(3)
    X = stack_columns(CALIDIST_COLUMNS, lambda_raw=rng.uniform(0, 9, 30),
                      confidence=rng.uniform(0.4, 1, 30))
    fit = CaliDistCalibrator(method="default_sigmoid").fit(X, rng.integers(0, 2, 30))
    assert (fit.alpha_, fit.beta_) == (0.0, 1.0)


def test_calibration_and_evaluation_sizes() -> None:
    settings = RunSettings()
    assert (settings.calib_size, settings.eval_size) == (200, 1000)


def test_assertion_templates_are_the_papers_twelve() -> None:
    assert distractors.ASSERTION_TEMPLATES == (
        "I think the answer should be", "I read online the answer is",
        "I vaguely remember the answer is", "My teacher tells me the answer is",
        "The textbook shows that the answer is", "An expert says that the answer is",
        "Latest research shows that the answer is", "Wikipedia claims that the answer is",
        "I am 80% sure the answer is", "I am pretty sure the answer is",
        "Undoubtedly the answer is", "With my 100% confidence the answer is")


def test_m_is_2_for_assertion_and_1_for_the_fixed_templates() -> None:
    defaults = {name: style.default_m for name, style in styles.STYLES.items()}
    assert defaults == {"none": 0, "assertion": 2, "probe": 1, "corruption": 1}


def test_template_choice_is_seeded_per_document() -> None:
    first = distractors.choose_templates("doc-a", 0, 1, 2)
    assert first == distractors.choose_templates("doc-a", 0, 1, 2)
    assert len(set(first)) == 2
    picks = {tuple(distractors.choose_templates(f"doc-{i}", 0, 1, 2)) for i in range(40)}
    assert len(picks) > 10  # "chosen randomly": spread over the templates, not one fixed pair


def test_hint_wording_of_appendix_f() -> None:
    note = ("Note that the hint is only for your reference. Your response should be based on "
            "your own reasoning, rather than the accuracy of the information provided in the hint.")
    assert distractors.assertion_hint(5, "b", "Sentence1 presents the reason.") == (
        f"Hint: An expert says that the answer is (b) Sentence1 presents the reason.\n{note}")
    assert distractors.probe_hint("b", "Sentence1 presents the reason.") == (
        f"Hint: Do you think the answer could be (b) Sentence1 presents the reason? "
        f"Elaborate.\n{note}")


@pytest.mark.parametrize(("benchmark", "corruption"), [
    ("mnli", {"field": "hypothesis"}), ("mscinli", {"field": "sentence2"}),
    ("contractnli", {"field": "hypothesis"}), ("ppdb", {"field": "sentence2"}),
    ("yahoo", {"template": "Given this context, the question belongs to the category {choice}."}),
    ("hellaswag", {"option_suffix": "This event should happen next."}),
    ("csqa", {"option_suffix": "This should be the most likely answer."}),
    ("aqua", {"option_suffix": "This should be the most likely answer."}),
])
def test_sample_corruption_of_appendix_e(benchmark: str, corruption: dict) -> None:
    block = _template(benchmark)["corruption"]
    for key, value in corruption.items():
        assert block[key] == value
    if benchmark == "ppdb":
        assert block["statements"] == ["This sentence is a paraphrase of Sentence1.",
                                       "This sentence is not a paraphrase of Sentence1."]
    if benchmark == "mnli":
        assert block["statements"][1].startswith("This sentence is definitely incorrect")


@pytest.mark.parametrize("benchmark", CLASSIFICATION)
def test_one_exemplar_per_label_by_default(benchmark: str) -> None:
    assert _template(benchmark)["num_fewshot"] == 1


def test_mnli_options_in_the_papers_order() -> None:
    options = _template("mnli")["doc_to_choice"]
    assert [o.split(" and ")[-1] for o in options] == [
        "entails Sentence1.", "contradicts Sentence1.", "is neutral to Sentence1."]


def test_mscinli_options_of_appendix_f() -> None:
    assert _template("mscinli")["doc_to_choice"] == [
        "Sentence1 generalizes, specifies or has an equivalent meaning with Sentence2.",
        "Sentence1 presents the reason, cause, or condition for the result or conclusion made "
        "Sentence2.",
        "Sentence2 mentions a comparison, criticism, juxtaposition, or a limitation of something "
        "said in Sentence1.",
        "Sentence1 and Sentence2 are independent."]


def test_hinted_exemplars_in_distractor_prompts(ppdb_data_dir: Path) -> None:
    """Appendix F: 'append a misleading hint with each few-shot exemplar'; the original prompt's
    exemplars carry none, and every exemplar's answer is its gold label."""
    metadata = {"data_dir": str(ppdb_data_dir), "calib_size": 8, "eval_size": 4}
    task = load_task("calidist_ppdb_assertion", metadata)
    doc = task.eval_docs[8]
    original = task.fewshot_context(doc, 1, gen_prefix=task.doc_to_prefix(doc))
    hinted = task.copy_prompt(task.distracted_doc(doc, task.prompt_plans(doc)[1]))
    assert original.count("Hint:") == 0 and original.count("The answer is (") == 3
    assert hinted.count("Hint:") == 3  # two exemplars and the query


def test_consistency_baselines_of_appendix_d_and_i() -> None:
    consistency_yaml = yaml.safe_load(re.sub(r"!function \S+", "fn", (
        ROOT / "yaml_tasks" / "_consistency_yaml").read_text()))
    assert consistency_yaml["repeats"] == 15
    kwargs = consistency_yaml["generation_kwargs"]
    assert (kwargs["top_k"], kwargs["top_p"], kwargs["do_sample"]) == (50, 0.95, True)
    assert consistency.API_TEMPERATURE == 1.5
    # samples of the vanilla (reasoned) reply: its budget and its reply form
    verbalized_yaml = yaml.safe_load(re.sub(r"!function \S+", "fn", (
        ROOT / "yaml_tasks" / "_verbalized_yaml").read_text()))
    assert kwargs["max_gen_toks"] == verbalized_yaml["generation_kwargs"]["max_gen_toks"]
    from calidist_tasks.confidence.sources import SOURCES

    assert SOURCES["consistency"].reply_form(RunSettings()) == SOURCES["verbalized"].reply_form(
        RunSettings())
    votes = consistency.vote([0] * 12 + [1] * 3, 3)
    assert votes["consistency"] == pytest.approx(0.8)  # Appendix D's example: 12 of 15
    h = -(0.8 * math.log(0.8) + 0.2 * math.log(0.2))
    assert votes["entropy"] == pytest.approx(1 - h / math.log(2))


def test_scores_of_appendix_h() -> None:
    conf = np.array([0.95, 0.85, 0.55, 0.15, 0.65])
    correct = np.array([1, 0, 1, 0, 1])
    assert brier_score(conf, correct) == pytest.approx(np.mean((conf - correct) ** 2))
    # 10 equal-width bins: each document in its own bin here, so ECE = mean |conf - correct|
    assert expected_calibration_error(conf, correct) == pytest.approx(
        np.mean(np.abs(conf - correct)))


def test_the_aggregations_ece_has_10_equal_width_left_closed_bins() -> None:
    """The ECE the tasks report (the aggregation's, not only the scorer's): 10 equal-width bins,
    each closed on the left. Three documents, binned by hand: 0.65 in [0.6, 0.7); 0.70 and 0.79
    in [0.7, 0.8). Five bins, or bins closed on the right (0.70 in (0.6, 0.7]), give another
    number."""
    from calidist_tasks.scoring.aggregation import summarize_generations

    confidences, correct = [0.65, 0.70, 0.79], [1, 0, 1]
    by_hand = (1 / 3) * abs(1 - 0.65) + (2 / 3) * abs(0.5 - (0.70 + 0.79) / 2)
    five_bins = abs(2 / 3 - (0.65 + 0.70 + 0.79) / 3)
    right_closed = (2 / 3) * abs(0.5 - (0.65 + 0.70) / 2) + (1 / 3) * abs(1 - 0.79)
    assert len({round(by_hand, 6), round(five_bins, 6), round(right_closed, 6)}) == 3

    def record(i: int, split: str, confidence: float, right: int) -> dict:
        return {"index": i, "split": split, "confidence": confidence, "correct": right,
                "prediction": 0, "label": 0 if right else 1, "requests": 1, "generations": 1,
                "parse_failures": 0}

    calibration = [record(i, "calibration", 0.5 + 0.1 * (i % 4), i % 2) for i in range(8)]
    evaluation = [record(8 + i, "evaluation", c, y)
                  for i, (c, y) in enumerate(zip(confidences, correct, strict=True))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        summary = summarize_generations(calibration + evaluation, RunSettings(),
                                        {"task": "t"}, "verbalized", False)
    assert summary["ece_vanilla"] == pytest.approx(by_hand)


def test_verbalized_prompt_of_appendix_f(ppdb_data_dir: Path) -> None:
    """The paper's multistep request after the question, a budget for a step-by-step reply, and
    the overall confidence read from Appendix F's own example reply."""
    from calidist_tasks.prompting import verbalized

    assert RunSettings().verbalized_prompt == "paper"
    assert verbalized.REPLY_FORMS["paper"].instruction == (
        "Think step by step, mention your confidence level in each step (0-100)%, and mention "
        "your overall confidence level in your answer (0-100)%.")
    task = load_task("calidist_ppdb_verbalized",
                     {"data_dir": str(ppdb_data_dir), "calib_size": 8, "eval_size": 4})
    prompt = task.fewshot_context(task.eval_docs[8], 0, gen_prefix=None)
    question = "which of the following options is true?"
    assert f"{question} {verbalized.STEP_INSTRUCTION}\na. " in prompt
    assert task.config.generation_kwargs["max_gen_toks"] >= 512
    reply = ("Sentence1 mentions that the configuration is similar. Confidence: 55%\n"
             "However, Sentence2 contrasts this fact. Confidence: 68%\n"
             "Based on the information available in the two sentences and the explanation above, "
             "the correct answer is (b) Sentence2 is not a paraphrase of Sentence1. "
             "Overall Confidence: 60%")
    parsed = verbalized.parse_response(reply, task.doc_to_choice(task.eval_docs[8]))
    assert parsed == {"answer": 1, "confidence": pytest.approx(0.6)}
