"""Cost regression guard: exact model requests and prompt tokens per document for every task.

One in-process lm-eval run on the tiny model and the bundled sample data. An accidental extra
request per document, a second copy of a prompt, or a longer prompt fails here. Timings are never
asserted. If a prompt's wording changes on purpose, update PROMPT_TOKENS (the failure message
prints the new totals) and say why in the commit.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_lm_eval

DATA = Path(__file__).parents[3] / "calidist_tasks" / "sample_data"
N_DOCS = 5  # calib_size 2 + eval_size 3
M_ASSERTION = 2  # the assertion style's default m (paper, Appendix G)
LABELS = {"ppdb": 2, "aqua": 5}


def prompts_per_doc(benchmark: str, variant: str) -> int:
    """1 original + c hinted prompts per distractor (c * m for assertion); docs/method.md,
    "Joining"."""
    c = LABELS[benchmark]
    style = variant.removesuffix("verbalized").rstrip("_")
    return 1 + {"": 0, "assertion": c * M_ASSERTION, "probe": c, "corruption": c,
                "consistency": 0}[style]


# (benchmark, variant) -> letters scored per prompt (log-likelihood) or None (one generation)
TASKS = {
    ("ppdb", ""): 2, ("ppdb", "assertion"): 2, ("ppdb", "probe"): 2, ("ppdb", "corruption"): 2,
    ("ppdb", "verbalized"): None, ("ppdb", "assertion_verbalized"): None,
    ("ppdb", "probe_verbalized"): None, ("ppdb", "corruption_verbalized"): None,
    ("aqua", ""): 5, ("aqua", "assertion"): 5, ("aqua", "probe"): 5, ("aqua", "corruption"): 5,
    ("aqua", "verbalized"): None, ("ppdb", "consistency"): None,
}
SAMPLES = {"consistency": 15}  # generations per request (lm-eval repeats); 1 otherwise
# consistency is fitted on nothing, so it sends its requests for the evaluation documents only
DOCUMENTS = {"consistency": 3}
# Sum over the 5 documents of the tiny tokenizer's tokens in each document's distinct prompts.
# One exemplar per label (Appendix F) and the paper's step-by-step verbalized request.
PROMPT_TOKENS = {  # Appendix F's exemplars that reason (issue #34), one per label
    "calidist_ppdb": 3830, "calidist_ppdb_assertion": 28739, "calidist_ppdb_probe": 16635,
    "calidist_ppdb_corruption": 12285, "calidist_ppdb_verbalized": 8500,
    "calidist_ppdb_assertion_verbalized": 52089, "calidist_ppdb_probe_verbalized": 30645,
    "calidist_ppdb_corruption_verbalized": 26295, "calidist_aqua": 6318,
    "calidist_aqua_assertion": 111234, "calidist_aqua_probe": 60779,
    "calidist_aqua_corruption": 41058, "calidist_aqua_verbalized": 13393,
    "calidist_ppdb_consistency": 5065,  # the vanilla reply's step-by-step prompt (reasoned samples)
}


def task_name(benchmark: str, variant: str) -> str:
    return f"calidist_{benchmark}" + (f"_{variant}" if variant else "")


@pytest.fixture(scope="module")
def evaluation(tiny_model_dir):
    from transformers import AutoTokenizer

    tasks = [task_name(*key) for key in TASKS]
    out = run_lm_eval(tasks, tiny_model_dir, {"data_dir": str(DATA), "calib_size": 2,
                                              "eval_size": 3}, gen_kwargs="max_gen_toks=4")
    return out, AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.mark.parametrize(("benchmark", "variant"), list(TASKS))
def test_requests_per_document_are_exact(evaluation, benchmark, variant):
    out, _ = evaluation
    task = task_name(benchmark, variant)
    samples = out["samples"][task]
    letters = TASKS[(benchmark, variant)]
    prompts = prompts_per_doc(benchmark, variant)
    assert len(samples) == DOCUMENTS.get(variant, N_DOCS)
    for sample in samples:
        texts = [argument[0] for argument in sample["arguments"]]
        assert len(set(texts)) == prompts, f"{task}: distinct prompts per document"
        assert len(texts) == prompts * (letters or 1), f"{task}: requests per document"
        # one answer per request (15 for consistency): no hidden repeats or extra samples
        assert sum(len(r) for r in sample["resps"]) == len(texts) * SAMPLES.get(variant, 1)
    # the task's own requests_per_doc counts every sample a request asks for
    assert out["results"][task]["requests_per_doc,none"] == (
        prompts * (letters or 1) * SAMPLES.get(variant, 1))


def test_prompt_tokens_per_document_are_exact(evaluation):
    out, tokenizer = evaluation
    totals = {}
    for key in TASKS:
        task = task_name(*key)
        totals[task] = sum(
            len(tokenizer(text, add_special_tokens=False)["input_ids"])
            for sample in out["samples"][task]
            for text in dict.fromkeys(argument[0] for argument in sample["arguments"])
        )
    assert totals == PROMPT_TOKENS, f"prompt tokens changed; new totals: {totals}"


@pytest.mark.parametrize("variant", ["assertion", "probe"])
def test_hinted_prompts_share_everything_up_to_the_hint(evaluation, variant):
    # What lets a prefix cache (vLLM enable_prefix_caching, hf-prefix-cache) compute a document's
    # hinted prompts once up to their hint: the hinted exemplar block is the same for every hint,
    # and the hint comes after the question and options, before the answer prefix.
    out, _ = evaluation
    for sample in out["samples"][task_name("ppdb", variant)]:
        original, *hinted = dict.fromkeys(argument[0] for argument in sample["arguments"])
        question = original.rsplit("\n\n", 1)[-1].removesuffix("The answer is (")
        stems = {p[:p.rindex("Hint:")] for p in hinted}
        assert len(hinted) == prompts_per_doc("ppdb", variant) - 1
        assert len(stems) == 1 and stems.pop().endswith(question)


# Two-stage runs (calidist eval --two-stage): stage 2 sends only the hints naming a label other
# than stage 1's prediction, so with the original prompt the paper's 1 + (c - 1)·m per document.
TWO_STAGE = {("ppdb", "assertion"): M_ASSERTION, ("aqua", "assertion"): M_ASSERTION,
             ("ppdb", "probe"): 1}


def test_two_stage_sends_one_plus_c_minus_one_times_m_prompts(evaluation, tiny_model_dir,
                                                               tmp_path):
    from calidist_tasks.report import save_like_lm_eval

    out, _ = evaluation
    tasks = [task_name(*key) for key in TWO_STAGE]
    # a single-stage run's samples hold the original answers stage 2 reads
    save_like_lm_eval(out, tmp_path)
    hints = run_lm_eval(tasks, tiny_model_dir, {
        "data_dir": str(DATA), "calib_size": 2, "eval_size": 3, "stage": "hints",
        "original_run": str(tmp_path)})
    for (benchmark, variant), m in TWO_STAGE.items():
        task, c = task_name(benchmark, variant), LABELS[benchmark]
        samples = hints["samples"][task]
        assert len(samples) == N_DOCS
        for sample in samples:
            texts = [argument[0] for argument in sample["arguments"]]
            assert len(set(texts)) == (c - 1) * m, f"{task}: stage-2 prompts per document"
            assert len(texts) == (c - 1) * m * c, f"{task}: stage-2 requests per document"
        # requests counts both stages: (1 + (c - 1)·m)·c against single-stage's (1 + c·m)·c
        assert hints["results"][task]["requests_per_doc,none"] == (1 + (c - 1) * m) * c
        assert out["results"][task]["requests_per_doc,none"] == (1 + c * m) * c
