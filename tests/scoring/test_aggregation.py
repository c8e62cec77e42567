"""Aggregation: fit on calibration records, score evaluation records; values checked by hand."""

from __future__ import annotations

import json
import math
import random
import warnings

import numpy as np
import pytest
from conftest import load_task

from calidist_metrics import CalibrationWarning
from calidist_tasks.registry import metric_names
from calidist_tasks.scoring.aggregation import summarize_baselines, summarize_calidist
from calidist_tasks.settings import RunSettings

CONTEXT = {"task": "calidist_x_assertion", "benchmark": "x", "labels": ["yes", "no"],
           "style": "assertion", "model": None}


def record(index, split, confidence, correct, mu, delta, requests=10, logprobs=None):
    return {
        "index": index, "split": split, "label": 0, "prediction": 0 if correct else 1,
        "confidence": confidence, "correct": int(correct), "mu": mu, "delta": delta,
        "lambda_raw": (1 - mu) / (delta + 1e-10), "flipped": int(mu > 0), "requests": requests,
        **({"letter_logprobs": logprobs} if logprobs is not None else {}),
    }


def make_records(n_cal=30, n_eval=20, seed=0, all_correct_cal=False):
    """Stable documents (small mu, delta) tend to be right, unstable ones wrong."""
    rng = np.random.default_rng(seed)
    records = []
    for i in range(n_cal + n_eval):
        stable = rng.random() < 0.6
        correct = True if all_correct_cal and i < n_cal else rng.random() < (0.8 if stable else 0.3)
        mu = 0.0 if stable and rng.random() < 0.5 else round(float(rng.uniform(0.05, 0.6)), 3)
        delta = round(float(rng.uniform(0.01, 0.05) if stable else rng.uniform(0.1, 0.4)), 3)
        confidence = round(float(rng.uniform(0.51, 0.99)), 4)
        split = "calibration" if i < n_cal else "evaluation"
        records.append(record(i, split, confidence, correct, mu, delta))
    return records


def hand_ece(conf, correct, adaptive=False):
    order = np.argsort(conf)
    if adaptive:  # 20 distinct confidences: 10 bins of 2
        groups = np.array_split(order, 10)
    else:
        ids = np.minimum(np.floor(conf * 10).astype(int), 9)
        groups = [np.flatnonzero(ids == b) for b in range(10)]
    gaps = [len(g) * abs(correct[g].mean() - conf[g].mean()) for g in groups if len(g)]
    return sum(gaps) / len(conf)


def hand_auroc(conf, correct):
    pos, neg = conf[correct == 1], conf[correct == 0]
    pairs = [(p > q) + 0.5 * (p == q) for p in pos for q in neg]
    return sum(pairs) / len(pairs)


def hand_scores(conf, correct, suffix=""):
    return {f"ece{suffix}": hand_ece(conf, correct),
            f"ece_adaptive{suffix}": hand_ece(conf, correct, adaptive=True),
            f"brier{suffix}": float(np.mean((conf - correct) ** 2)),
            f"auroc{suffix}": hand_auroc(conf, correct)}


def column(records, key):
    return np.array([r[key] for r in records], dtype=float)


def paper_calibrated(out, raw, p):
    lam = np.clip((raw - out["lambda_min"]) / (out["lambda_max"] - out["lambda_min"]), 0, 1) * 10
    return p / (1 + np.exp(-out["beta"] * (lam - out["alpha"])))


def test_calidist_summary_matches_hand_computation():
    records = make_records()
    out = summarize_calidist(records, RunSettings(), CONTEXT)
    assert set(out) == set(metric_names(distracted=True))
    cal = [r for r in records if r["split"] == "calibration"]
    ev = [r for r in records if r["split"] == "evaluation"]
    p, y = column(ev, "confidence"), column(ev, "correct")

    assert out["n_calibration"] == 30 and out["n_evaluation"] == 20
    assert out["acc"] == pytest.approx(y.mean())
    assert out["requests_per_doc"] == 10
    assert out["mu_mean"] == pytest.approx(column(ev, "mu").mean())
    assert out["delta_mean"] == pytest.approx(column(ev, "delta").mean())
    assert out["flip_rate"] == pytest.approx(column(ev, "flipped").mean())
    for name, value in hand_scores(p, y, "_vanilla").items():
        assert out[name] == pytest.approx(value), name

    # lambda bounds from the calibration documents only (the paper's Eq. 4, min-max scaling).
    assert out["lambda_min"] == pytest.approx(column(cal, "lambda_raw").min())
    assert out["lambda_max"] == pytest.approx(column(cal, "lambda_raw").max())
    assert -5 <= out["alpha"] <= 5 and 0.1 <= out["beta"] <= 5
    # conf = sigmoid(beta * (lambda - alpha)) * p with the reported parameters.
    calibrated = paper_calibrated(out, column(ev, "lambda_raw"), p)
    for name, value in hand_scores(calibrated, y).items():
        assert out[name] == pytest.approx(value), name
    assert np.all(calibrated <= p)  # the prediction is kept, only the confidence shrinks

    # alpha and beta are exactly the paper's 100 x 100 grid search (Appendix I), nothing more.
    assert (out["alpha"], out["beta"]) == paper_grid_search(cal)


def paper_grid_search(calibration):
    """The paper's search written out: min-max lambda, 100 x 100 grid, lowest Brier.

    Ties go to the smallest beta, then the smallest alpha (np.argmin over brier[beta, alpha]).
    """
    raw, p, y = (column(calibration, k) for k in ("lambda_raw", "confidence", "correct"))
    lam = (raw - raw.min()) / (raw.max() - raw.min()) * 10
    alphas, betas = np.linspace(-5, 5, 100), np.linspace(0.1, 5, 100)
    brier = np.array([[np.mean((p / (1 + np.exp(-b * (lam - a))) - y) ** 2) for a in alphas]
                      for b in betas])
    b, a = np.unravel_index(np.argmin(brier), brier.shape)
    return float(alphas[a]), float(betas[b])


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_task_metadata_fit_chooses_the_search(ppdb_data_dir, seed):
    records = make_records(n_cal=40, seed=seed)
    cal = [r for r in records if r["split"] == "calibration"]
    metadata = {"data_dir": str(ppdb_data_dir), "calib_size": 10, "eval_size": 20}
    out = {}
    for fit in (None, "grid", "refine", "default_sigmoid"):
        task = load_task("calidist_ppdb_assertion", {**metadata, **({"fit": fit} if fit else {})})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CalibrationWarning)
            out[fit] = {name: fn(records) for name, fn in task.aggregation().items()}
    # no fit given is the paper's grid search alone: exactly the search written out above
    assert out[None] == out["grid"]
    assert (out["grid"]["alpha"], out["grid"]["beta"]) == paper_grid_search(cal)
    assert (out["default_sigmoid"]["alpha"], out["default_sigmoid"]["beta"]) == (0.0, 1.0)
    # refine is never worse than the grid on the calibration documents
    pc, yc, rc = (column(cal, k) for k in ("confidence", "correct", "lambda_raw"))
    brier = {fit: np.mean((paper_calibrated(out[fit], rc, pc) - yc) ** 2) for fit in out}
    assert brier["refine"] <= brier["grid"] + 1e-12


def test_fit_uses_only_calibration_records_and_ignores_order():
    records = make_records()
    base = summarize_calidist(records, RunSettings(), CONTEXT)
    shuffled = records[:]
    random.Random(1).shuffle(shuffled)  # lm-eval gathers ranks in any order
    assert summarize_calidist(shuffled, RunSettings(), CONTEXT) == base

    changed_eval = [dict(r, delta=0.5, lambda_raw=1.0) if r["split"] == "evaluation" else r
                    for r in records]
    out = summarize_calidist(changed_eval, RunSettings(), CONTEXT)
    for key in ("alpha", "beta", "lambda_min", "lambda_max", "acc", "ece_vanilla"):
        assert out[key] == base[key], key
    assert out["ece"] != base["ece"]

    changed_cal = [dict(r, correct=1) if r["split"] == "calibration" else r for r in records]
    out = summarize_calidist(changed_cal, RunSettings(), CONTEXT)
    assert (out["alpha"], out["beta"]) != (base["alpha"], base["beta"])
    assert out["acc"] == base["acc"] and out["ece_vanilla"] == base["ece_vanilla"]


@pytest.mark.parametrize("scale", ["log", "rank"])
def test_other_lambda_scales_keep_raw_bounds_and_range(scale):
    records = make_records()
    out = summarize_calidist(records, RunSettings(lambda_scale=scale), CONTEXT)
    paper = summarize_calidist(records, RunSettings(), CONTEXT)
    assert out["lambda_min"] == paper["lambda_min"] and out["lambda_max"] == paper["lambda_max"]
    assert out["ece"] != paper["ece"]
    assert 0 <= out["ece"] <= 1 and 0 <= out["brier"] <= 1 and 0 <= out["auroc"] <= 1


@pytest.mark.parametrize(
    "case", ["all_correct", "all_wrong", "constant_lambda", "three_documents"]
)
def test_degenerate_calibration_sets_warn_and_stay_finite(case):
    records = make_records(all_correct_cal=case == "all_correct")
    if case == "all_wrong":
        records = [dict(r, correct=0) if r["split"] == "calibration" else r for r in records]
    if case == "constant_lambda":
        records = [dict(r, mu=0.2, delta=0.1, lambda_raw=8.0) if r["split"] == "calibration"
                   else r for r in records]
    if case == "three_documents":
        records = records[27:]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = summarize_calidist(records, RunSettings(), CONTEXT)
    assert any(issubclass(w.category, CalibrationWarning) for w in caught)
    assert all(math.isfinite(v) for v in out.values())
    for name in ("ece", "ece_adaptive", "brier", "auroc", "acc"):
        assert 0 <= out[name] <= 1
    if case == "all_correct":  # nothing to shrink: the fitted factor is (nearly) 1
        ev = [r for r in records if r["split"] == "evaluation"]
        calibrated = paper_calibrated(out, column(ev, "lambda_raw"), column(ev, "confidence"))
        assert np.min(calibrated / column(ev, "confidence")) > 0.9


def test_missing_splits_are_refused():
    records = make_records()
    with pytest.raises(ValueError, match="no evaluation documents"):
        summarize_calidist([r for r in records if r["split"] == "calibration"], RunSettings(),
                           CONTEXT)
    with pytest.raises(ValueError, match="calibrator=FILE"):
        summarize_calidist([r for r in records if r["split"] == "evaluation"], RunSettings(),
                           CONTEXT)


def baseline_records() -> list[dict]:
    """50 three-label records with letter log-probabilities (30 calibration, 20 evaluation)."""
    rng = np.random.default_rng(3)
    records = []
    for i in range(50):
        label = int(rng.integers(3))
        logits = rng.normal(0, 1.5, 3) + 2.0 * (np.arange(3) == label) * (rng.random() < 0.6)
        probs = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
        rec = record(i, "calibration" if i < 30 else "evaluation", float(probs.max()),
                     int(probs.argmax() == label), 0, 0, requests=3, logprobs=logits.tolist())
        records.append(dict(rec, label=label, prediction=int(probs.argmax())))
    return records


def test_baselines_match_hand_computation():
    records = baseline_records()
    out = summarize_baselines(records, RunSettings(), dict(CONTEXT, labels=["a", "b", "c"]))
    assert set(out) == set(metric_names(distracted=False))
    ev = records[30:]
    y = column(ev, "correct")
    assert out["acc"] == pytest.approx(y.mean())
    assert out["requests_per_doc"] == 3 and out["n_calibration"] == 30
    for name, value in hand_scores(column(ev, "confidence"), y, "_vanilla").items():
        assert out[name] == pytest.approx(value), name
    # Temperature scaling keeps the prediction: softmax(logits / T).max with the reported T.
    z = np.array([r["letter_logprobs"] for r in ev]) / out["temperature"]
    ts = (np.exp(z - z.max(1, keepdims=True)) / np.exp(z - z.max(1, keepdims=True)).sum(1,
          keepdims=True)).max(1)
    assert out["temperature"] > 0
    for name, value in hand_scores(ts, y, "_ts").items():
        assert out[name] == pytest.approx(value, abs=1e-9), name
    for name in out:
        if name.startswith(("ece", "brier", "auroc", "acc")):
            assert 0 <= out[name] <= 1, name


def test_task_aggregation_routes_every_metric_and_refits_on_new_records(ppdb_data_dir):
    task = load_task("calidist_ppdb_assertion",
                     {"data_dir": str(ppdb_data_dir), "calib_size": 10, "eval_size": 20})
    records = make_records()
    expected = summarize_calidist(records, task.settings, task.calibrator_context())
    aggregation = task.aggregation()
    assert set(aggregation) == {"calidist_record", *expected}  # its value: the record count
    assert {name: fn(records) for name, fn in aggregation.items()} == {
        "calidist_record": len(records), **expected}
    assert task.higher_is_better()["auroc"] and task.higher_is_better()["acc"]
    assert not task.higher_is_better()["ece"] and not task.higher_is_better()["brier"]
    other = make_records(seed=5)
    assert aggregation["ece"](other) == summarize_calidist(
        other, task.settings, task.calibrator_context())["ece"]


def test_calibration_warnings_name_the_task(ppdb_data_dir, caplog):
    # A group run fits one calibrator per task: a grid-edge or one-class warning must say which,
    # in one logged line (no Python warning, so no echoed source line).
    task = load_task("calidist_ppdb_assertion",
                     {"data_dir": str(ppdb_data_dir), "calib_size": 10, "eval_size": 20})
    records = make_records(all_correct_cal=True)
    with warnings.catch_warnings(record=True) as caught, caplog.at_level("WARNING"):
        warnings.simplefilter("always")
        task.aggregation()["ece"](records)
    assert not [w for w in caught if issubclass(w.category, CalibrationWarning)]
    lines = [r.getMessage() for r in caplog.records if "all-correct" in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith(
        "calidist_ppdb_assertion: CaliDistCalibrator: the calibration set is all-correct")


def test_warning_lines_merge_one_cause_of_several_estimators():
    from calidist_tasks.scoring.warnings import warning_lines

    one_class = "the calibration set is all-correct; the fit is defined but degenerate"
    lines = warning_lines("t", [f"PlattScaling: {one_class}", f"IsotonicCalibration: {one_class}",
                                "auroc: only one class", "auroc: only one class",
                                "PlattScaling: " + one_class, "on 100% of 3\ndocuments"])
    assert lines == [f"t: PlattScaling, IsotonicCalibration: {one_class}",
                     "t: auroc: only one class", "t: on 100% of 3 documents"]


# ---------------------------------------------------------------- lambda diagnostics


@pytest.mark.filterwarnings("ignore::calidist_metrics.CalibrationWarning")
def test_lambda_bounds_leave_out_documents_that_did_not_move():
    """Issue #15.2: a document whose confidence did not move has lambda_raw = 1/epsilon = 1e10;
    the printed bounds are those of the documents that moved, stable_fraction counts the rest,
    and the fit (min-max up to 1e10) and every calibrated score are unchanged."""
    from calidist_metrics import CALIDIST_COLUMNS, CaliDistCalibrator, stack_columns

    records = make_records()
    stable = {0, 3, 7}  # calibration documents with mu = delta = 0 (one of them: mu > 0)
    records = [dict(r, mu=0.25 if i == 7 else 0.0, delta=0.0,
                    lambda_raw=(1 - (0.25 if i == 7 else 0.0)) / 1e-10)
               if i in stable else r for i, r in enumerate(records)]
    out = summarize_calidist(records, RunSettings(), CONTEXT)
    cal = [r for r in records if r["split"] == "calibration"]
    moved = [r["lambda_raw"] for i, r in enumerate(cal) if i not in stable]
    assert (out["lambda_min"], out["lambda_max"]) == (min(moved), max(moved))
    assert out["lambda_max"] < 1e3 and out["stable_fraction"] == 3 / 30
    def inputs(records):
        return stack_columns(CALIDIST_COLUMNS, lambda_raw=column(records, "lambda_raw"),
                             confidence=column(records, "confidence"))

    fit = CaliDistCalibrator().fit(inputs(cal), column(cal, "correct"))
    assert fit.lambda_max_ == 1e10 and (out["alpha"], out["beta"]) == (fit.alpha_, fit.beta_)
    ev = [r for r in records if r["split"] == "evaluation"]
    calibrated = fit.predict(inputs(ev))
    for name, value in hand_scores(calibrated, column(ev, "correct")).items():
        assert out[name] == pytest.approx(value, abs=1e-12), name
    # without such documents the bounds are the fit's own and stable_fraction is 0
    plain = summarize_calidist(make_records(), RunSettings(), CONTEXT)
    assert plain["stable_fraction"] == 0.0
    # every calibration document stable: no bound to print (NaN), the fit is the constant one
    still = [dict(r, mu=0.0, delta=0.0, lambda_raw=1e10) if r["split"] == "calibration" else r
             for r in make_records()]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibrationWarning)
        out = summarize_calidist(still, RunSettings(), CONTEXT)
    assert math.isnan(out["lambda_min"]) and math.isnan(out["lambda_max"])
    assert out["stable_fraction"] == 1.0


# ---------------------------------------------------------------- saved calibrators


@pytest.fixture(scope="module")
def saved_fit(tmp_path_factory, ppdb_data_dir):
    """A calibrator saved by calidist_ppdb_assertion's aggregation (--metadata save_calibrator)."""
    folder = tmp_path_factory.mktemp("fits")
    metadata = {"data_dir": str(ppdb_data_dir), "calib_size": 10, "eval_size": 20,
                "save_calibrator": str(folder / "{task}.json")}
    task = load_task("calidist_ppdb_assertion", metadata)
    metrics = {name: fn(make_records()) for name, fn in task.aggregation().items()}
    return folder / "calidist_ppdb_assertion.json", metrics


def test_saved_calibrator_records_its_task_and_reproduces_the_metrics(saved_fit, ppdb_data_dir):
    path, fitted = saved_fit
    saved = json.loads(path.read_text())
    assert saved["context"]["task"] == "calidist_ppdb_assertion"
    assert saved["context"]["labels"] == ["Sentence2 is a paraphrase of Sentence1.",
                                          "Sentence2 is not a paraphrase of Sentence1."]
    assert saved["calibrator"]["alpha"] == pytest.approx(fitted["alpha"])
    # Applied to a second run (other calibration documents): the same evaluation metrics.
    task = load_task("calidist_ppdb_assertion", {"data_dir": str(ppdb_data_dir),
                                                 "calib_size": 10, "calibrator": str(path)})
    records = [dict(r, correct=1 - r["correct"]) if r["split"] == "calibration" else r
               for r in make_records()]
    applied = {name: fn(records) for name, fn in task.aggregation().items()}
    assert applied == fitted


def test_calibrator_of_another_task_is_refused_before_any_model_time(saved_fit, ppdb_data_dir,
                                                                    mnli_data_dir):
    path = str(saved_fit[0])
    ppdb = {"data_dir": str(ppdb_data_dir), "calib_size": 10, "calibrator": path}
    with pytest.raises(ValueError, match=r"fitted on task 'calidist_ppdb_assertion', not "
                                         r"'calidist_ppdb_probe'.*allow_transfer"):
        load_task("calidist_ppdb_probe", ppdb)
    # Same labels: an explicit out-of-domain transfer is allowed.
    task = load_task("calidist_ppdb_probe", {**ppdb, "allow_transfer": True})
    assert task.aggregation()["alpha"](make_records()) == pytest.approx(saved_fit[1]["alpha"])
    # Another label space is refused even with allow_transfer.
    mnli = {"data_dir": str(mnli_data_dir), "calib_size": 5, "calibrator": path,
            "allow_transfer": True}
    with pytest.raises(ValueError, match=r"calidist_mnli_assertion has labels"):
        load_task("calidist_mnli_assertion", mnli)


def test_calibrator_path_with_task_placeholder_picks_each_tasks_file(saved_fit, ppdb_data_dir):
    folder = saved_fit[0].parent
    metadata = {"data_dir": str(ppdb_data_dir), "calib_size": 10,
                "calibrator": str(folder / "{task}.json")}
    load_task("calidist_ppdb_assertion", metadata)  # its own file: accepted
    with pytest.raises(FileNotFoundError, match="calidist_ppdb_probe.json"):
        load_task("calidist_ppdb_probe", metadata)


def test_task_aggregation_fits_once_for_identical_or_copied_records(ppdb_data_dir, monkeypatch):
    # lm-eval calls one aggregation per metric: the same records (or, gathered from ranks,
    # equal copies) must be fitted once; new records are fitted again.
    task = load_task("calidist_ppdb_assertion",
                     {"data_dir": str(ppdb_data_dir), "calib_size": 10, "eval_size": 20})
    fits = []
    real = task.summarize
    monkeypatch.setattr(task, "summarize", lambda items: fits.append(1) or real(items))
    records = make_records()
    aggregation = task.aggregation()
    first = aggregation["ece"](records)
    assert aggregation["brier"](list(records)) is not None and len(fits) == 1
    copies = json.loads(json.dumps(records[::-1]))  # what another rank's gather looks like
    assert aggregation["ece"](copies) == first and len(fits) == 1
    aggregation["ece"](make_records(seed=5))
    assert len(fits) == 2


def test_diagnostics_carry_no_better_or_worse_arrow():
    from calidist_tasks.registry import higher_is_better, metric_names

    arrows = {name: higher_is_better(name) for name in metric_names(True) + metric_names(False)}
    for name in ("alpha", "beta", "lambda_min", "lambda_max", "temperature", "n_calibration",
                 "n_evaluation", "requests_per_doc", "mu_mean", "delta_mean", "flip_rate",
                 "stable_fraction"):
        assert arrows[name] is None, name
    assert arrows["ece"] is False and arrows["brier_ts"] is False and arrows["auroc"] is True
    assert arrows["acc"] is True and higher_is_better("parse_fail_rate") is False


def test_markers_resolve_to_the_records_of_the_carrier(ppdb_data_dir):
    """process_results stores the record once (under acc) and a marker under every other
    metric; lm-eval aggregates acc first (its order), then each marker list, gathered from the
    ranks in the same order: every metric gets the numbers of the records."""
    from calidist_tasks.scoring.records import is_record

    task = load_task("calidist_ppdb_assertion",
                     {"data_dir": str(ppdb_data_dir), "calib_size": 10, "eval_size": 20})
    records = make_records()
    returned = [task.metric_results(record) for record in records]
    names = list(returned[0])
    assert names[0] == "calidist_record" and all(
        r["calidist_record"] is rec for r, rec in zip(returned, records, strict=True))
    assert not any(is_record(r[name]) for r in returned for name in names[1:])
    expected = {"calidist_record": len(records), **task.summarize(records)}
    aggregation = task.aggregation()
    halves = (returned[:15], returned[15:])  # two ranks, gathered in rank order
    values = {name: aggregation[name]([r[name] for half in halves for r in half])
              for name in names}
    assert values == pytest.approx(expected, nan_ok=True)
    fresh = load_task("calidist_ppdb_assertion",
                      {"data_dir": str(ppdb_data_dir), "calib_size": 10, "eval_size": 20})
    with pytest.raises(RuntimeError, match="did not aggregate first"):
        fresh.aggregation()["ece"]([r["ece"] for r in returned])


@pytest.mark.filterwarnings("ignore::calidist_metrics.CalibrationWarning")
def test_the_behaviour_fit_reads_confidence_mu_and_delta_of_the_records():
    """fits.behaviour_calibrated (BENCHMARKS.md's behaviour-calibrator variant): fitted on the
    calibration records' p, mu and delta, applied to the evaluation records'; no calibration
    records is NoCalibration."""
    from calidist_metrics import BehaviourCalibrator
    from calidist_tasks.scoring.fits import NoCalibration, behaviour_calibrated

    records = make_records()
    cal = [r for r in records if r["split"] == "calibration"]
    ev = [r for r in records if r["split"] == "evaluation"]
    fitted = behaviour_calibrated(cal, ev, RunSettings(), CONTEXT)
    X_cal, X_ev = (np.column_stack([column(rs, "confidence"), column(rs, "mu"),
                                    column(rs, "delta")]) for rs in (cal, ev))
    expected = BehaviourCalibrator().fit(X_cal, column(cal, "correct")).predict(X_ev)
    np.testing.assert_array_equal(fitted.confidence, expected)
    np.testing.assert_array_equal(fitted.correct, column(ev, "correct"))
    with pytest.raises(NoCalibration):
        behaviour_calibrated([], ev, RunSettings(), CONTEXT)


# ------------------------------------------------- per-document confidences and lm-eval's stderr
def _logged(records, key):
    evaluation = [r for r in records if r["split"] == "evaluation"]
    return (np.array([r["calibrated"][key] for r in evaluation]),
            np.array([r["calibrated_correct"][key] for r in evaluation]))


def _assert_logged_confidences_give_the_scores(records, out):
    """Every score the summary reports is the score of the confidences logged on the records."""
    from calidist_tasks.registry import SCORES
    from calidist_tasks.scoring.aggregation import interval_score
    from calidist_tasks.scoring.records import confidence_key

    checked = set()
    for name, value in out.items():
        score, suffix = interval_score(name) or (None, "")
        if score in SCORES and math.isfinite(value):
            confidence, correct = _logged(records, confidence_key(suffix))
            assert SCORES[score](confidence, correct) == pytest.approx(value, abs=1e-12), name
            checked.add(confidence_key(suffix))
    return checked


def test_every_reported_confidence_is_logged_on_each_evaluation_record():
    records = make_records()
    out = summarize_calidist(records, RunSettings(), CONTEXT)
    assert _assert_logged_confidences_give_the_scores(records, out) == {"calidist", "vanilla"}
    for r in records[:30]:  # calibration documents: fitted on, marked
        assert r["calibrated"] is None and r["calibrated_correct"] is None
    ev = records[30:]
    assert [r["calibrated"]["vanilla"] for r in ev] == [r["confidence"] for r in ev]
    calibrated = np.array([r["calibrated"]["calidist"] for r in ev])
    assert np.all(calibrated <= column(ev, "confidence"))  # CaliDist only scales down
    assert [r["calibrated_correct"]["calidist"] for r in ev] == [r["correct"] for r in ev]
    json.dumps(records, allow_nan=False)  # what lm-eval writes to its samples file


def test_the_baselines_log_theirs_and_vector_scaling_its_own_answers():
    records = baseline_records()
    out = summarize_baselines(records, RunSettings(), dict(CONTEXT, labels=["a", "b", "c"]))
    assert _assert_logged_confidences_give_the_scores(records, out) == {
        "vanilla", "ts", "platt", "isotonic", "vector"}
    _, correct = _logged(records, "vector")
    assert correct.mean() == pytest.approx(out["acc_vector"])


def test_a_second_reading_is_logged_under_its_metric_names():
    from calidist_tasks.scoring.aggregation import summarize_logprobs

    records = make_records()
    for r, sub in zip(records, make_records(seed=7), strict=True):
        r["logprob"] = dict(sub, generations=1, parse_failures=0)
    out = summarize_logprobs(records, RunSettings(), CONTEXT, distracted=True)
    assert "ece_logprob" in out and "ece_vanilla_logprob" in out
    assert _assert_logged_confidences_give_the_scores(records, out) == {
        "logprob", "vanilla_logprob"}
    assert all("calibrated" not in r["logprob"] for r in records)  # moved, not copied


def test_metric_stderr_bootstraps_the_documents_with_the_fit_fixed():
    from lm_eval.api.metrics import mean_stderr

    from calidist_tasks.registry import SCORES
    from calidist_tasks.scoring.aggregation import STDERR_RESAMPLES, metric_stderr

    records = make_records(n_eval=40)
    out = summarize_calidist(records, RunSettings(), CONTEXT)
    confidence, correct = _logged(records, "calidist")
    rng = np.random.default_rng(0)
    expected = np.std([SCORES["ece"](confidence[i], correct[i])
                       for i in rng.integers(0, 40, size=(200, 40))], ddof=1)
    assert metric_stderr("ece", records, out, 200) == pytest.approx(expected)
    assert metric_stderr("ece", records, out, 200) > 0
    # accuracy: lm-eval's own closed form for a mean of 0/1 outcomes
    assert metric_stderr("acc", records, out, 200) == pytest.approx(
        mean_stderr(column(records[30:], "correct").tolist()))
    # resamples are capped (lm-eval's default --bootstrap_iters is 100000)
    assert metric_stderr("brier_vanilla", records, out, 10 ** 6) == metric_stderr(
        "brier_vanilla", records, out, STDERR_RESAMPLES)
    assert metric_stderr("alpha", records, out, 200) == "N/A"  # a diagnostic: no interval
    assert metric_stderr("ece", records, dict(out, ece=math.nan), 200) == "N/A"


def test_lm_eval_prints_a_stderr_for_every_metric_with_an_interval(ppdb_data_dir):
    """lm-eval's own aggregation step (``_compute_task_aggregations``) on our task: a number
    for accuracy and every score, N/A for the diagnostics and with --bootstrap_iters 0."""
    from collections import defaultdict

    from lm_eval.evaluator_utils import _compute_task_aggregations

    from calidist_tasks.scoring.aggregation import interval_score

    task = load_task("calidist_ppdb_assertion",
                     {"data_dir": str(ppdb_data_dir), "calib_size": 10, "eval_size": 20})
    records = make_records()
    raw = defaultdict(list)
    for rec in records:
        for name, value in task.metric_results(rec).items():
            raw[(name, "none")].append(value)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibrationWarning)
        printed, _ = _compute_task_aggregations(task, raw, bootstrap_iters=100)
        unboot, _ = _compute_task_aggregations(task, raw, bootstrap_iters=0)
    for name in task.reported_metrics():
        stderr = printed[f"{name}_stderr,none"]
        if interval_score(name) is None:
            assert stderr == "N/A", name
        else:
            assert isinstance(stderr, float) and stderr > 0, name
        assert unboot[f"{name}_stderr,none"] == "N/A"
    assert {"ece", "brier", "auroc", "acc", "ece_vanilla"} <= {
        n for n in task.reported_metrics() if interval_score(n)}


@pytest.mark.parametrize("delta_mode", ["mean", "worst_case"])
def test_a_saved_fit_gives_new_answers_their_logged_confidence_in_one_call(tmp_path, delta_mode):
    """``calidist_metrics.calibrate_answers`` on a run's saved fit and the raw answers (p, the
    hinted replies) equals the calibrated confidence the run logged per document."""
    from calidist_metrics import calibrate_answers
    from calidist_tasks.scoring.joining import hint_instability

    rng = np.random.default_rng(4)
    records = []
    for i in range(60):
        prediction, confidence = int(rng.integers(3)), float(rng.uniform(0.4, 1.0))
        hints = tuple((label, None, int(rng.integers(3)) if rng.random() < 0.4 else prediction,
                       float(rng.uniform(0.3, 1.0))) for label in range(3))
        mu, delta, raw, flipped = hint_instability(prediction, confidence, hints, delta_mode)
        records.append({"index": i, "split": "calibration" if i < 40 else "evaluation",
                        "label": 0, "prediction": prediction, "confidence": confidence,
                        "correct": int(prediction == 0), "hints": hints, "mu": mu,
                        "delta": delta, "lambda_raw": raw, "flipped": int(flipped),
                        "requests": 4})
    path = tmp_path / "fit.json"
    settings = RunSettings.from_metadata({"save_calibrator": str(path),
                                          "delta_mode": delta_mode})
    summarize_calidist(records, settings, dict(CONTEXT, delta_mode=delta_mode))
    ev = records[40:]
    others = [[h for h in r["hints"] if h[0] != r["prediction"]] for r in ev]
    calibrated = calibrate_answers(path, [r["confidence"] for r in ev],
                                   [r["prediction"] for r in ev],
                                   [[h[2] for h in hs] for hs in others],
                                   [[h[3] for h in hs] for hs in others])
    np.testing.assert_allclose(calibrated, [r["calibrated"]["calidist"] for r in ev], rtol=1e-12)
    with pytest.raises(ValueError, match="document 1: no hinted answer"):
        calibrate_answers(path, [0.5, 0.5], [0, 1], [[1], []], [[0.5], []])
    with pytest.raises(ValueError, match="length mismatch"):
        calibrate_answers(path, [0.5], [0, 1], [[1]], [[0.5]])
