"""``--model hf-prefix-cache`` gives the ``hf`` backend's log-likelihoods while computing less."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest
from lm_eval.api.instance import Instance

from calidist_tasks.backends.prefix_cache import prefix_groups, shared_prefix_length
from tests.conftest import run_lm_eval


def computed_tokens(inputs: Sequence[Sequence[int]], groups: list[tuple[list[int], int]]) -> int:
    """Tokens the backend runs for ``groups`` (``prefix_groups``), padding not counted."""
    total, previous = 0, ()
    for members, shared in groups:
        prefix = tuple(inputs[members[0]][:shared])
        total += shared - min(shared, shared_prefix_length(previous, prefix))
        total += sum(len(inputs[i]) - shared for i in members)
        previous = prefix
    return total


def document_prompts(n_docs: int, hints: int, seed: int = 0) -> list[list[int]]:
    """Token lists shaped like a CaliDist task's: a document, then an answer prefix or a hint."""
    rng = random.Random(seed)
    prompts = []
    for _ in range(n_docs):
        doc = [rng.randrange(50, 1000) for _ in range(rng.randint(60, 90))]
        prompts.append(doc + [7, 8, 9])
        prompts += [doc + [5] + [rng.randrange(50, 1000) for _ in range(rng.randint(30, 50))]
                    for _ in range(hints)]
    rng.shuffle(prompts)
    return prompts


def test_prefix_groups_batch_each_documents_prompts_over_their_shared_prefix() -> None:
    prompts = document_prompts(n_docs=5, hints=6)
    groups = prefix_groups(prompts, [1] * len(prompts), batch_size=8)
    assert sorted(i for members, _ in groups for i in members) == list(range(len(prompts)))
    for members, shared in groups:
        assert len(members) == 7  # one document: its original prompt and its 6 hints
        assert all(prompts[i][:shared] == prompts[members[0]][:shared] for i in members)
        assert shared >= 60  # the whole document, not just a chance common start
    assert computed_tokens(prompts, groups) == sum(
        shared + sum(len(prompts[i]) - shared for i in members) for members, shared in groups)
    assert computed_tokens(prompts, groups) < 0.6 * sum(map(len, prompts))


def test_prefix_groups_respect_the_batch_size_and_the_scored_tokens() -> None:
    prompts = document_prompts(n_docs=3, hints=10)
    scored = [len(p) if i % 5 == 0 else 3 for i, p in enumerate(prompts)]
    groups = prefix_groups(prompts, scored, batch_size=4)
    assert max(len(members) for members, _ in groups) == 4
    for members, shared in groups:
        # every input keeps its scored tokens out of the prefix; one scored whole shares nothing
        assert all(len(prompts[i]) - shared >= scored[i] for i in members)


def test_unrelated_prompts_are_batched_together_with_no_prefix() -> None:
    rng = random.Random(1)
    prompts = [[rng.randrange(1000) for _ in range(rng.randint(5, 40))] for _ in range(19)]
    groups = prefix_groups(prompts, [1] * 19, batch_size=8)
    assert [len(members) for members, _ in groups] == [8, 8, 3]
    assert computed_tokens(prompts, groups) == sum(map(len, prompts))


def test_shared_prefix_length() -> None:
    assert shared_prefix_length([1, 2, 3], [1, 2, 4, 5]) == 2
    assert shared_prefix_length([1, 2], [1, 2, 3]) == 2
    assert shared_prefix_length([], [1]) == 0


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


def test_a_calidist_run_gives_the_same_records_and_metrics(tiny_model_dir, ppdb_data_dir) -> None:
    metadata = {"data_dir": str(ppdb_data_dir), "calib_size": 10, "eval_size": 20}
    tasks = ["calidist_ppdb_assertion", "calidist_ppdb_corruption"]
    runs = [run_lm_eval(tasks, tiny_model_dir, metadata, model=model)
            for model in ("hf", "hf-prefix-cache")]
    for task in tasks:
        hf, cached = ([r[0] for s in run["samples"][task] for r in s["resps"]] for run in runs)
        assert len(hf) == len(cached) == 30 * {"calidist_ppdb_assertion": 5,
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
    metadata = {"data_dir": str(ppdb_data_dir), "calib_size": 1, "eval_size": 3}
    task = "calidist_ppdb_consistency"
    runs = [run_lm_eval([task], tiny_model_dir, metadata, model=model, batch_size=16)
            for model in ("hf", "hf-prefix-cache")]
    hf, cached = ([s["resps"] for s in run["samples"][task]] for run in runs)
    assert len(cached) == 3 and all(len(r[0]) == 15 for r in cached)
    assert len({text for r in cached for text in r[0]}) > 15  # sampled, not one answer copied
    assert cached == hf
