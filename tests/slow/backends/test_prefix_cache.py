"""Slow half of ``tests/backends/test_prefix_cache.py`` (builds the tiny model or runs lm-eval).

What the module tests: the fast half's docstring."""

from __future__ import annotations

import pytest
from lm_eval.api.instance import Instance

from tests.conftest import run_lm_eval


@pytest.fixture(scope="module")
def backends(tiny_model_dir):
    from lm_eval.models.huggingface import HFLM

    from calidist_tasks.backends.prefix_cache import PrefixCacheHFLM

    args = {"pretrained": str(tiny_model_dir), "dtype": "float32", "device": "cpu"}
    return HFLM(batch_size=3, **args), PrefixCacheHFLM(batch_size=3, **args)


def test_loglikelihoods_equal_the_hf_backend_for_any_request(backends) -> None:
    hf, cached = backends
    stem = "The cat sat on the mat near the river bank. Which option is true?\na. yes\nb. no\n"
    contexts = [stem + "The answer is (", stem + "Hint: maybe (a).\nThe answer is (",
                stem + "Hint: surely (b) no.\nThe answer is (", "Unrelated short prompt (",
                "x " * 3000]  # longer than the model's context: cut from the left
    continuations = ["a", "b", " yes it is", "a)"]
    requests = [Instance("loglikelihood", {}, (c, k), idx=0)
                for c in contexts for k in continuations]
    expected, got = hf.loglikelihood(requests), cached.loglikelihood(requests)
    assert [g for _, g in got] == [g for _, g in expected]
    assert [ll for ll, _ in got] == pytest.approx([ll for ll, _ in expected], abs=1e-4)
    assert len({round(ll, 3) for ll, _ in got}) > len(contexts)  # real, distinct numbers


def test_a_padded_output_layer_is_normalised_as_hf_does(tiny_model_dir, tmp_path) -> None:
    """Qwen's and Llama-3's output layers are wider than their tokenizers' vocabularies: the
    log-softmax runs over every output, as lm-eval's hf takes it, not over the tokenizer's."""
    import shutil

    import torch
    from lm_eval.models.huggingface import HFLM
    from transformers import LlamaForCausalLM

    from calidist_tasks.backends.prefix_cache import PrefixCacheHFLM

    padded = tmp_path / "padded"
    shutil.copytree(tiny_model_dir, padded)
    model = LlamaForCausalLM.from_pretrained(padded)
    width = model.config.vocab_size + 64
    model.resize_token_embeddings(width, mean_resizing=False)
    with torch.no_grad():  # the extra outputs carry real probability mass
        model.lm_head.weight[-64:].normal_(0, 1, generator=torch.Generator().manual_seed(0))
    model.save_pretrained(padded)
    args = {"pretrained": str(padded), "dtype": "float32", "device": "cpu"}
    hf, cached = HFLM(batch_size=2, **args), PrefixCacheHFLM(batch_size=2, **args)
    assert hf.model.config.vocab_size == width > hf.tokenizer.vocab_size
    requests = [Instance("loglikelihood", {}, ("Which is it?\nThe answer is (", k), idx=0)
                for k in ("a", "b")]
    expected, got = hf.loglikelihood(requests), cached.loglikelihood(requests)
    assert [ll for ll, _ in got] == pytest.approx([ll for ll, _ in expected], abs=1e-4)


def test_a_half_precision_model_is_told_how_far_it_agrees(tiny_model_dir, caplog) -> None:
    import logging

    from calidist_tasks.backends.prefix_cache import PrefixCacheHFLM

    with caplog.at_level(logging.WARNING, logger="calidist_tasks.backends.prefix_cache"):
        PrefixCacheHFLM(pretrained=str(tiny_model_dir), dtype="float32", device="cpu")
        assert not caplog.records
        PrefixCacheHFLM(pretrained=str(tiny_model_dir), dtype="bfloat16", device="cpu")
    [record] = caplog.records
    assert "in bfloat16" in record.message and "dtype=float32" in record.message


def test_a_calidist_run_gives_the_same_records_and_metrics(tiny_model_dir, ppdb_data_dir) -> None:
    import calidist_tasks.backends.prefix_cache  # noqa: F401  registers hf-prefix-cache

    metadata = {"data_dir": str(ppdb_data_dir), "calib_size": 5, "eval_size": 10}
    tasks = ["calidist_ppdb_assertion", "calidist_ppdb_corruption"]
    runs = [run_lm_eval(tasks, tiny_model_dir, metadata, model=model)
            for model in ("hf", "hf-prefix-cache")]
    for task in tasks:
        hf, cached = ([r[0] for s in run["samples"][task] for r in s["resps"]] for run in runs)
        assert len(hf) == len(cached) == 15 * {"calidist_ppdb_assertion": 5,
                                                 "calidist_ppdb_corruption": 3}[task] * 2
        assert [g for _, g in cached] == [g for _, g in hf]
        assert [ll for ll, _ in cached] == pytest.approx([ll for ll, _ in hf], abs=1e-4)
        for metric in ("acc,none", "flip_rate,none"):
            assert runs[1]["results"][task][metric] == runs[0]["results"][task][metric]
        assert runs[1]["results"][task]["ece,none"] == pytest.approx(
            runs[0]["results"][task]["ece,none"], abs=1e-3)


def test_repeated_prompts_are_run_once_and_sample_what_hf_samples(backends) -> None:
    import torch

    hf, cached = backends
    prompts = ["Which option is true? a. yes b. no. The answer is (",
               "Short prompt (", "A longer prompt about the cat on the mat, then the answer ("]
    # sampled, same seed: equal draws need equal distributions at every step (greedy is constant
    # on a random tiny model)
    sampled = {"max_gen_toks": 6, "do_sample": True, "temperature": 1.0}
    requests = [Instance("generate_until", {}, (p, sampled), idx=0)
                for p in prompts for _ in range(4)]
    batches: list[int] = []
    model = cached.model
    hook = model.register_forward_pre_hook(
        lambda _, args, kwargs: batches.append(kwargs["input_ids"].shape[0]), with_kwargs=True)
    try:
        torch.manual_seed(0)
        got = cached.generate_until(requests)
    finally:
        hook.remove()
    torch.manual_seed(0)
    assert got == hf.generate_until(requests)
    assert len(set(got)) > 6  # samples differ, also those of one prompt
    # batch size 3: the first call of each batch runs its distinct prompts only
    assert batches[0] == 1 and 2 in batches


def test_a_consistency_run_samples_what_hf_samples(tiny_model_dir, ppdb_data_dir) -> None:
    import calidist_tasks.backends.prefix_cache  # noqa: F401  registers hf-prefix-cache

    metadata = {"data_dir": str(ppdb_data_dir), "calib_size": 1, "eval_size": 3}
    task = "calidist_ppdb_consistency"
    # 8 tokens a sample: a random model never stops, and the task's own budget is 512
    runs = [run_lm_eval([task], tiny_model_dir, metadata, model=model, batch_size=16,
                        gen_kwargs="max_gen_toks=8")
            for model in ("hf", "hf-prefix-cache")]
    hf, cached = ([s["resps"] for s in run["samples"][task]] for run in runs)
    assert len(cached) == 3 and all(len(r[0]) == 15 for r in cached)
    assert len({text for r in cached for text in r[0]}) > 15  # sampled, not one answer copied
    assert cached == hf
