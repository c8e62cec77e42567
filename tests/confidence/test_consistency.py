"""Consistency (self-consistency, entropy, FSD) and SPUQ baselines: their confidences, their
requests (decoding, repeats or seeded API samples, perturbations) and a real run with hf."""

from __future__ import annotations

import math
import warnings
from collections import Counter

import pytest
from conftest import load_task
from hypothesis import given, settings
from hypothesis import strategies as st

from calidist_metrics import CalibrationWarning
from calidist_tasks.confidence import consistency, spuq
from calidist_tasks.confidence.consistency import decoding, sample_requests, vote
from calidist_tasks.prompting.styles import content_key
from calidist_tasks.scoring.records import CONSISTENCY_KINDS, line_record
from calidist_tasks.tasks.generation import DUMMY

# the YAMLs' until: end-of-turn strings, then where an invented next turn begins (issue #34)
END_OF_TURN = ["<|im_end|>", "<|eot_id|>", "<|endoftext|>", "</s>", "\nUser:", "\nAssistant:"]


def test_vote_on_the_papers_example():
    answers = [2] * 12 + [0] * 2 + [1]  # 12 of 15 for (c)
    result = vote(answers, 3)
    assert result["prediction"] == 2 and result["parsed"]
    assert result["consistency"] == pytest.approx(12 / 15)
    shares = [12 / 15, 2 / 15, 1 / 15]
    entropy = -sum(p * math.log2(p) for p in shares)
    assert result["entropy"] == pytest.approx(1 - entropy / math.log2(3))
    assert result["fsd"] == pytest.approx((12 - 2) / 15)


def test_vote_edge_cases():
    # one unique answer: H = 0 and log|unique| = 0; defined as full confidence
    assert vote([1] * 15, 4) == {"prediction": 1, "parsed": True, "consistency": 1.0,
                                 "entropy": 1.0, "fsd": 1.0}
    # a tie goes to the answer sampled first
    assert vote([3, 0, 0, 3], 4)["prediction"] == 3
    # unreadable samples vote for "no answer": they count in N and as a category...
    mixed = vote([None, None, None, 1, 1], 2)
    assert mixed["prediction"] == 1  # ...but never become the prediction
    assert mixed["consistency"] == pytest.approx(2 / 5)
    assert mixed["fsd"] == 0.0  # "no answer" outvotes the prediction: no separation
    # no readable sample: wrong, every confidence 1/c
    assert vote([None] * 15, 5) == {"prediction": -1, "parsed": False, "consistency": 0.2,
                                    "entropy": 0.2, "fsd": 0.2}
    with pytest.raises(ValueError):
        vote([], 2)


@settings(max_examples=150, deadline=None)
@given(answers=st.lists(st.one_of(st.none(), st.integers(0, 4)), min_size=1, max_size=20))
def test_vote_properties(answers):
    result = vote(answers, 5)
    readable = [a for a in answers if a is not None]
    assert 0.0 <= result["consistency"] <= 1.0 and 0.0 <= result["entropy"] <= 1.0 + 1e-12
    assert 0.0 <= result["fsd"] <= result["consistency"]
    if readable:
        counts = Counter(readable)
        assert counts[result["prediction"]] == max(counts.values())
        assert result["consistency"] == pytest.approx(counts[result["prediction"]] / len(answers))
    else:
        assert result["prediction"] == -1
    shuffled = vote(list(reversed(answers)), 5)
    assert shuffled["entropy"] == pytest.approx(result["entropy"])  # order-free
    assert shuffled["consistency"] == pytest.approx(result["consistency"])


def test_decoding_top_k_locally_temperature_on_apis():
    yaml = {"until": [], "max_gen_toks": 32, "do_sample": True, "temperature": 1.0,
            "top_k": 50, "top_p": 0.95}
    assert decoding(yaml, "auto", api=False) == yaml
    api = decoding(yaml, "auto", api=True)
    assert api == {"until": [], "max_gen_toks": 32, "do_sample": True, "temperature": 1.5}
    assert decoding(yaml, "temperature", api=False) == api
    assert decoding(yaml, "top_k", api=True) == yaml


def test_samples_are_repeats_locally_and_seeded_requests_on_apis():
    assert sample_requests({"temperature": 1.0}, 15, api=False) == [({"temperature": 1.0}, 15)]
    seeded = sample_requests({"temperature": 1.5}, 15, api=True, seed=2)
    assert [n for _, n in seeded] == [1] * 15
    assert len({kw["seed"] for kw, _ in seeded}) == 15  # the API cannot return 15 copies


def test_identical_samples_rate_and_its_warning():
    def records(*answer_lists):
        return [{"answers": list(a)} for a in answer_lists]

    same, mixed = [1] * 15, [1] * 14 + [0]
    assert consistency.identical_samples_rate(records(same, mixed)) == 0.5
    # 15 unreadable samples are 15 times "no answer" (what transformers serve's greedy replies
    # of SmolLM2 were); a single sample says nothing about the sampling
    assert consistency.identical_samples_rate(records([None] * 15, [2], [None, 1])) == (
        pytest.approx(1 / 3))
    assert math.isnan(consistency.identical_samples_rate([]))
    assert consistency.identical_samples_warning(records(*[same] * 9, mixed)) is None  # 90%
    message = consistency.identical_samples_warning(records(same, [None] * 15))
    assert message.startswith("on 100% of 2 evaluation documents the samples all gave the same "
                              "answer (1 of them: all unreadable)")
    for words in ("ignores temperature", "transformers serve", "greedy decoding",
                  "sampling=temperature", "do_sample: true"):
        assert words in message


def test_consistency_task_warns_once_on_identical_samples(metadata):
    task = load_task("calidist_ppdb_consistency", metadata)
    assert "identical_samples_rate" in task.reported_metrics()
    docs = [d for d in task.eval_docs if d["calidist_split"] == "evaluation"]
    records = []
    for doc in docs:
        answers = [1 - doc["label"]] * 15  # what a server that ignores temperature returns
        parsed = [[{"answer": a, "confidence": None} for a in answers]]
        records.append(task.process_results(doc, parsed)["calidist_record"])
    with pytest.warns(CalibrationWarning, match="the samples all gave the same answer") as caught:
        summary = task.summarize(records)
    assert sum("the samples all gave the same answer" in str(w.message) for w in caught) == 1
    assert summary["identical_samples_rate"] == 1.0 and summary["ece_consistency"] == 1.0
    records[0] = task.process_results(docs[0], [[
        {"answer": a, "confidence": None} for a in [0] * 8 + [1] * 7]])["calidist_record"]
    with warnings.catch_warnings():
        warnings.filterwarnings("error", ".*the samples all gave")  # 3 of 4 (75%): no warning
        assert task.summarize(records)["identical_samples_rate"] == 0.75


def test_spuq_perturbations_are_deterministic_and_follow_spuq():
    plans = spuq.perturbations("doc-key", seed=0)
    assert plans == spuq.perturbations("doc-key", seed=0)
    assert plans != spuq.perturbations("doc-key", seed=1)
    kinds = Counter(p.kind for p in plans)
    assert kinds == spuq.COUNTS
    for plan in plans:
        if plan.kind == "dummy_token":
            assert (plan.text, plan.position) in {
                (t, p) for t, where in spuq.DUMMY_TOKENS
                for p in (("before", "after") if where == "both" else (where,))}
        elif plan.kind == "system_message":
            assert plan.text in spuq.SYSTEM_MESSAGES
        else:
            assert 0.0 <= plan.temperature <= 1.0


def test_spuq_confidence_is_agreement_with_the_reference():
    assert spuq.confidence(2, [2, 2, 1, None]) == 0.5
    assert spuq.confidence(None, [None, None]) == 0.0
    with pytest.raises(ValueError):
        spuq.confidence(1, [])


# ------------------------------------------------------------------ the tasks
@pytest.fixture(scope="module")
def metadata(ppdb_data_dir):
    return {"data_dir": str(ppdb_data_dir), "calib_size": 3, "eval_size": 4}


def build(task, doc):
    ctx = task.fewshot_context(doc, 0, gen_prefix=task.doc_to_prefix(doc))
    return ctx, task.construct_requests(doc, ctx, metadata=(task.config.task, 0,
                                                             task.config.repeats))


def test_consistency_requests_local_and_api(metadata):
    local = load_task("calidist_ppdb_consistency", metadata)
    ctx, requests = build(local, local.eval_docs[5])
    assert len(requests) == 1 and requests[0].repeats == 15
    # the vanilla reply's prompt and budget (the paper's Table 4: 15 x its tokens)
    assert requests[0].arguments == (ctx, {"until": END_OF_TURN, "max_gen_toks": 512,
                                           "do_sample": True, "temperature": 1.0, "top_k": 50,
                                           "top_p": 0.95})
    vanilla = load_task("calidist_ppdb_verbalized", metadata)
    assert ctx == vanilla.fewshot_context(vanilla.eval_docs[5], 0, gen_prefix=None)
    assert vanilla.config.generation_kwargs["max_gen_toks"] == 512
    api = load_task("calidist_ppdb_consistency", {**metadata, "base_url": "http://127.0.0.1:9"})
    _, requests = build(api, api.eval_docs[5])
    assert [r.repeats for r in requests] == [1] * 15
    assert [r.arguments[1]["seed"] for r in requests] == list(range(15))
    assert all(r.arguments[1]["temperature"] == 1.5 and "top_k" not in r.arguments[1]
               for r in requests)
    # the calibration documents are skipped: the baseline fits nothing
    docs = list(local.doc_iterator())
    assert [d["calidist_split"] for _, d in docs] == ["evaluation"] * 4


@pytest.mark.parametrize(("backend", "api"), [
    ("local-chat-completions", True), ("openai-chat-completions", True),
    ("local-completions", True), ("dummy", False), ("not-a-backend", False)])
def test_sampling_follows_the_backend_kind_not_the_base_url(metadata, backend, api):
    """issue #34: the API settings (temperature 1.5, no top-k) by the backend's kind: an API
    backend without a base_url in the metadata samples at 1.5, a local model's run (lm-eval's
    dummy: hf's class costs a torch import; tests/slow/confidence/test_consistency.py runs hf)
    whose model_args name a base_url does not; the kind is in the settings (logged with the task
    config)."""
    url = {} if api else {"base_url": "http://127.0.0.1:9"}
    task = load_task("calidist_ppdb_consistency", {**metadata, "model_backend": backend, **url})
    _, requests = build(task, task.eval_docs[5])
    sent = requests[0].arguments[1]
    assert (sent["temperature"] == 1.5 and "top_k" not in sent) == api
    assert (len(requests) == 15) == api  # an API: one seeded request per sample
    assert task.settings.model_backend == backend


def test_evaluate_passes_the_backend_kind():
    from calidist_tasks import _model_metadata

    assert _model_metadata("local-chat-completions", "model=m,base_url=http://x")[
        "model_backend"] == "local-chat-completions"
    assert _model_metadata("hf", {"pretrained": "m"}) == {"pretrained": "m", "model_backend": "hf"}


def test_consistency_record(metadata):
    task = load_task("calidist_ppdb_consistency", metadata)
    doc = task.eval_docs[4]
    answers = [doc["label"]] * 9 + [1 - doc["label"]] * 5 + [None]
    record = task.process_results(doc, [[{"answer": a, "confidence": None} for a in answers]])
    record = record["calidist_record"]  # the record once (acc a number, markers elsewhere)
    assert record["prediction"] == doc["label"] and record["correct"] == 1
    assert record["confidences"] == pytest.approx(
        {k: v for k, v in vote(answers, 2).items() if k in CONSISTENCY_KINDS})
    assert (record["generations"], record["parse_failures"], record["requests"]) == (15, 1, 15)


def test_spuq_requests_and_record(metadata):
    task = load_task("calidist_ppdb_spuq", metadata)
    doc = task.eval_docs[3]
    ctx, requests = build(task, doc)
    plans = spuq.perturbations(content_key(doc), 0)
    assert len(requests) == 1 + len(plans) == 10
    assert requests[0].arguments[0] == ctx and requests[0].arguments[1]["do_sample"] is False
    for request, plan in zip(requests[1:], plans, strict=True):
        prompt, kwargs = request.arguments
        if plan.kind == "dummy_token":
            expected = task.copy_prompt({**doc, DUMMY: [plan.text, plan.position]})
            assert prompt == expected and prompt != ctx and plan.text in prompt
        elif plan.kind == "system_message":
            assert prompt.startswith(plan.text) and prompt.endswith(ctx)
        else:
            assert prompt == ctx and kwargs["temperature"] == plan.temperature
    label = doc["label"]
    answers = [label] + [label] * 6 + [1 - label, None, label]
    record = task.process_results(doc, [[{"answer": a, "confidence": None}] for a in answers])
    record = record["calidist_record"]
    assert record["prediction"] == label and record["confidence"] == pytest.approx(7 / 9)
    assert record["agreement"] == [1] * 6 + [0, 0, 1] and record["parse_failures"] == 1
    unreadable = task.process_results(doc, [[{"answer": None, "confidence": None}]] * 10)
    unread = line_record(unreadable)
    assert unread["prediction"] == -1 and unread["confidence"] == 0.5
