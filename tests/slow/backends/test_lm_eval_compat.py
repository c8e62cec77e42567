"""Slow half of ``tests/backends/test_lm_eval_compat.py`` (builds the tiny model or runs lm-eval).

What the module tests: the fast half's docstring."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from lm_eval.api.model import CacheHook, hash_args

from calidist_tasks.backends import lm_eval_compat as compat


# ---------------------------------------------------------------------- models
@pytest.fixture(scope="module")
def hflm(tiny_model_dir):
    from lm_eval.models.huggingface import HFLM

    return HFLM(pretrained=str(tiny_model_dir), dtype="float32", device="cpu",
                softmax_dtype="float64", mixed_precision_dtype="bfloat16")


def test_hflm_attributes(hflm) -> None:
    import torch

    assert compat.is_causal(hflm)
    assert compat.softmax_dtype(hflm) == torch.float64
    assert compat.mixed_precision_dtype(hflm) == torch.bfloat16


def test_cache_loglikelihood_reaches_lm_eval_cache(hflm) -> None:
    stored: dict[str, object] = {}
    hflm.set_cache_hook(CacheHook(SimpleNamespace(dbdict=stored)))
    try:
        compat.cache_loglikelihood(hflm, ("context", " a"), (-1.5, True))
    finally:
        hflm.set_cache_hook(CacheHook(None))
    assert stored == {hash_args("loglikelihood", ("context", " a")): (-1.5, True)}
