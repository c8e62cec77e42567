"""GSM8K's consistency baselines (calidist_gsm8k_consistency, docs/gsm8k.md): the vote over
numbers by hand, the record and its aggregation by hand, and runs through lm-eval with the tiny
model and a scripted chat API."""

from __future__ import annotations

import pytest
from conftest import load_task
from family_data import write_all

from calidist_tasks.registry import metric_names
from calidist_tasks.tasks.gsm8k_verbalized import NumberFilter, number_vote, parse_number_response

TASK = "calidist_gsm8k_consistency"


def test_vote_counts_a_number_once_however_written():
    """'1,000', '1000.0' and '1000' are one answer; a reply with no number votes "no answer"."""
    votes = number_vote(["1,000", "1000.0", "1000", "999", None])
    assert votes["prediction"] == "1000" and votes["parsed"]
    assert votes["consistency"] == pytest.approx(3 / 5)
    # the paper's App. D: 1 - H(p) / log2 |unique answers|, p = (3, 1, 1) / 5 over
    # {1000, 999, no answer}: H = 1.370951 bits, log2 3 = 1.584963
    assert votes["entropy"] == pytest.approx(1 - 1.370951 / 1.584963, abs=1e-6)
    assert votes["fsd"] == pytest.approx((3 - 1) / 5)


def test_vote_ties_and_replies_without_numbers():
    # 2 against 2: the number sampled first wins; no gap, and an even split has the maximal
    # entropy (confidence 0)
    tie = number_vote(["12", "7", "7.00", "12.0"])
    assert (tie["prediction"], tie["consistency"], tie["fsd"], tie["entropy"]) == (
        "12", 0.5, 0.0, 0.0)
    # no answer outvotes 18 (3 to 2): 18 is still the prediction, with no separation
    mixed = number_vote([None, "18", None, "18.0", None])
    assert (mixed["prediction"], mixed["consistency"], mixed["fsd"]) == ("18", 0.4, 0.0)
    # nothing readable: no prediction, every confidence 1/c = 0 for an open answer
    assert number_vote([None, None, "not a number"]) == {
        "prediction": None, "parsed": False, "consistency": 0.0, "entropy": 0.0, "fsd": 0.0}


def test_replies_are_read_by_the_verbalized_parser():
    replies = ["500 + 500 = 1,000.\nThe answer is 1,000. Confidence: 90%",
               "The answer is 1000.0", "I am not sure. Confidence: 30%"]
    numbers = [parse_number_response(r)["answer"] for r in replies]
    assert numbers == ["1000", "1000", None]
    assert number_vote(numbers)["consistency"] == pytest.approx(2 / 3)


@pytest.fixture(scope="module")
def metadata(tmp_path_factory: pytest.TempPathFactory) -> dict:
    data = write_all(tmp_path_factory.mktemp("data"), n_eval=4, n_calib=3)
    return {"data_dir": str(data), "calib_size": 3, "eval_size": 4}


def _readings(doc: dict, replies: list[str]) -> list:
    """What the task's filter makes of one request's replies."""
    return NumberFilter().apply([replies], [doc])


def test_records_and_summary_by_hand(metadata):
    """Four evaluation documents of hand-written replies: right at 15/15, right at 12/15, wrong
    at 10/15, nothing readable; every score of the aggregation checked by hand."""
    task = load_task(TASK, metadata)
    docs = [d for d in task.eval_docs if d["calidist_split"] == "evaluation"]
    records = []
    for i, doc in enumerate(docs):
        t = int(doc["target"])
        right, wrong = f"The answer is {t}. Confidence: 80%", f"The answer is {t + 1}."
        replies = [[right] * 15,
                   [right] * 11 + [f"So {t}.0 in all."] + [wrong] * 3,  # t.0 is t
                   [wrong] * 10 + [right] * 5,
                   ["No idea."] * 15][i]
        records.append(task.process_results(doc, _readings(doc, replies))["calidist_record"])
    targets = [int(doc["target"]) for doc in docs]
    want = [  # prediction, correct, consistency, fsd, parse failures
        (str(targets[0]), 1, 1.0, 1.0, 0),
        (str(targets[1]), 1, 12 / 15, (12 - 3) / 15, 0),
        (str(targets[2] + 1), 0, 10 / 15, (10 - 5) / 15, 0),
        (None, 0, 0.0, 0.0, 15)]
    for record, (prediction, correct, share, fsd, failures) in zip(records, want, strict=True):
        assert (record["prediction"], record["correct"], record["parse_failures"],
                record["generations"], record["requests"]) == (prediction, correct, failures,
                                                               15, 15)
        assert record["confidence"] == pytest.approx(share)
        assert record["confidences"]["consistency"] == pytest.approx(share)
        assert record["confidences"]["fsd"] == pytest.approx(fsd)
    assert records[1]["answers"].count(str(targets[1])) == 12
    summary = task.summarize(records)
    assert set(summary) >= set(task.reported_metrics()) == set(metric_names(False, "consistency"))
    assert summary["acc"] == 0.5 and summary["n_evaluation"] == 4
    assert summary["n_calibration"] == 0 and summary["requests_per_doc"] == 15
    assert summary["parse_fail_rate"] == pytest.approx(15 / 60)
    assert summary["identical_samples_rate"] == pytest.approx(2 / 4)  # all t; all no answer
    assert summary["sampling_temperature"] == 1.0
    # 10 equal-width bins: 1.0 (right), 0.8 (right), 0.667 (wrong), 0 (wrong) each alone
    assert summary["ece_consistency"] == pytest.approx((0 + 0.2 + 10 / 15 + 0) / 4)
    assert summary["brier_consistency"] == pytest.approx(
        (0 + 0.2 ** 2 + (10 / 15) ** 2 + 0) / 4)
    # FSD: 1.0 (right), 0.6 (right), 0.333 (wrong), 0 (wrong)
    assert summary["ece_fsd"] == pytest.approx((0 + 0.4 + 5 / 15 + 0) / 4)


def test_requests_local_and_api(metadata):
    """The vanilla reply's prompt and budget (calidist_gsm8k_verbalized's), 15 samples with the
    families' decoding; on an API 15 seeded requests at temperature 1.5; no calibration
    documents."""
    local = load_task(TASK, metadata)
    vanilla = load_task("calidist_gsm8k_verbalized", metadata)
    doc = local.eval_docs[4]
    ctx = local.fewshot_context(doc, 0, gen_prefix=local.doc_to_prefix(doc))
    assert ctx == vanilla.fewshot_context(doc, 0, gen_prefix=vanilla.doc_to_prefix(doc))
    (request,) = local.construct_requests(doc, ctx, metadata=(TASK, 0, 15))
    until = vanilla.config.generation_kwargs["until"]
    assert request.repeats == 15 and request.arguments == (ctx, {
        "until": until, "max_gen_toks": vanilla.config.generation_kwargs["max_gen_toks"],
        "do_sample": True, "temperature": 1.0, "top_k": 50, "top_p": 0.95})
    assert [d["calidist_split"] for _, d in local.doc_iterator()] == ["evaluation"] * 4
    api = load_task(TASK, {**metadata, "base_url": "http://127.0.0.1:9"})
    requests = api.construct_requests(doc, ctx, metadata=(TASK, 0, 15))
    assert [r.repeats for r in requests] == [1] * 15
    assert [r.arguments[1]["seed"] for r in requests] == list(range(15))
    assert all(r.arguments[1]["temperature"] == 1.5 and "top_k" not in r.arguments[1]
               for r in requests)


def test_replies_without_parsed_answers_name_the_document(metadata):
    task = load_task(TASK, metadata)
    doc = task.eval_docs[3]
    record = task.process_results(doc, [["The answer is 4."] * 15])["calidist_record"]
    assert record["error"].startswith(f"{TASK} document {doc['calidist_index']}: expected parsed")
