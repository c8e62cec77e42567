"""``--model hf-prefix-cache``: lm-eval's ``hf`` backend, computing each shared prompt prefix once.

Every CaliDist prompt of a document repeats the document (question and lettered options) and
differs only after it: the hint, or the corrupted field onwards. lm-eval's ``hf`` backend runs each
prompt whole and computes the vocabulary log-probabilities at every position; on a CPU that is
most of a run. This backend sorts the distinct prompts by tokens, so that a document's prompts are
neighbours, runs their shared prefix once (cutting back and extending the previous batch's cache
rather than starting again, so a few-shot block shared by every document is also run once), runs
the rest of each prompt in one right-padded batch over copies of that cache, and computes
log-probabilities only where a continuation is scored.

Generation is the ``hf`` backend's, except that a batch's repeated prompts (self-consistency's
samples of one document: lm-eval sends each ``repeats`` copy as its own request) are run once and
their key/value cache copied to every sample before decoding.

The log-likelihoods equal the ``hf`` backend's up to floating-point rounding, and so do the
generations, greedy or sampled under the same seed (the test suite compares them). Rolling
log-likelihoods are the ``hf`` backend's own. Use it with ``calidist eval --model hf-prefix-cache
--model_args pretrained=...`` (``calidist eval`` registers it; in Python, import this module
before ``lm_eval.simple_evaluate``).

It overrides two private methods of lm-eval's ``HFLM`` (``_loglikelihood_tokens`` and
``_model_generate``) and reads HFLM attributes through ``backends.lm_eval_compat``, whose
test checks them against the installed lm-eval.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterator, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from lm_eval.api.registry import register_model
from lm_eval.models.huggingface import HFLM
from tqdm import tqdm

from calidist_tasks.backends import lm_eval_compat
from calidist_tasks.backends.prefix_groups import prefix_groups, shared_prefix_length

log = logging.getLogger(__name__)
# measured by benchmarks/bf16_drift.py (docs/backends.md): what a 16-bit run should expect
HALF_PRECISION_NOTE = (
    "hf-prefix-cache in {dtype}: letter log-likelihoods agree with lm-eval's hf within {dtype} "
    "rounding, not exactly (on an H200, a model of Llama-3-8B's shape: 0.015 nats apart on "
    "average, 1 of 300 preferred letters; each 0.16 from float32); --model_args dtype=float32 "
    "gives hf's numbers to 1e-4 (docs/backends.md)")

Tokens = tuple[int, ...]


@register_model("hf-prefix-cache")
class PrefixCacheHFLM(HFLM):
    """HFLM whose log-likelihood requests reuse the key/value cache of shared prompt prefixes."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        dtype = getattr(self.model, "dtype", None)
        if dtype in (torch.bfloat16, torch.float16):
            log.warning(HALF_PRECISION_NOTE.format(dtype=str(dtype).removeprefix("torch.")))

    def _loglikelihood_tokens(
        self,
        requests: list[tuple[tuple[str, str] | None, list[int], list[int]]],
        disable_tqdm: bool = False,
        override_bs: int | None = None,
    ) -> list[tuple[float, bool]]:
        if not lm_eval_compat.is_causal(self):
            return super()._loglikelihood_tokens(requests, disable_tqdm, override_bs)
        # Model input = context + continuation without its last token, cut to the model's length
        # from the left as the hf backend does; requests with the same input share one run.
        users: dict[Tokens, list[int]] = {}
        targets: list[list[int]] = []
        for n, (_, context, continuation) in enumerate(requests):
            if not context or not continuation:
                raise ValueError("hf-prefix-cache: a request with an empty context or continuation")
            tokens = (list(context) + list(continuation))[-(self.max_length + 1):]
            users.setdefault(tuple(tokens[:-1]), []).append(n)
            targets.append(tokens[-len(continuation):])
        inputs = list(users)
        scored = [max(len(targets[n]) for n in users[key]) for key in inputs]
        results: list[tuple[float, bool]] = [(0.0, False)] * len(requests)
        for i, log_probs in self._log_probs(inputs, scored, override_bs, disable_tqdm):
            for n in users[inputs[i]]:
                target = torch.tensor(targets[n], dtype=torch.long)
                rows = log_probs[-len(target):]
                picked = rows.gather(1, target.unsqueeze(1))
                results[n] = (float(picked.sum()), bool((rows.argmax(dim=1) == target).all()))
                if requests[n][0] is not None:  # loglikelihood_rolling caches per document
                    lm_eval_compat.cache_loglikelihood(self, requests[n][0], results[n])
        return results

    def _log_probs(self, inputs: list[Tokens], scored: list[int], override_bs: int | None,
                   disable_tqdm: bool) -> Iterator[tuple[int, torch.Tensor]]:
        """Each input's index with its log-probabilities ``[scored, vocab]`` at its last positions.

        Per batch of ``prefix_groups``: extend the previous batch's prefix cache to this batch's
        prefix (batch of one), copy it once per input, and run the inputs' remaining tokens
        right-padded in one call; padding comes after every real token, so causal attention
        never sees it, and only the scored positions go through the output layer.
        """
        size = override_bs or (self.batch_size if isinstance(self.batch_size, int) else 16)
        softmax_dtype = lm_eval_compat.softmax_dtype(self)
        bar = tqdm(total=len(inputs), disable=disable_tqdm or self.rank != 0,
                   desc="Running loglikelihood requests (shared prefixes computed once)")
        cache, previous = None, ()  # key/value cache of the previous batch's shared prefix
        with torch.inference_mode(), self._autocast():
            for members, shared in prefix_groups(inputs, scored, max(1, int(size))):
                prefix = inputs[members[0]][:shared]
                reused = shared_prefix_length(previous, prefix) if cache is not None else 0
                if reused == 0:
                    cache = None
                elif reused < len(previous):
                    cache.crop(reused - len(previous))  # negative: drop tokens (any version)
                if shared > reused:
                    cache = self._run(prefix[reused:], cache, 1).past_key_values
                previous = prefix
                batch_cache = None
                if cache is not None:
                    batch_cache = copy.deepcopy(cache)
                    batch_cache.batch_repeat_interleave(len(members))
                rests = [inputs[i][shared:] for i in members]
                width = max(len(r) for r in rests)
                ids = [list(r) + [r[-1]] * (width - len(r)) for r in rests]
                keep = sorted({len(r) - k for r, i in zip(rests, members, strict=True)
                               for k in range(1, scored[i] + 1)})
                logits = self._run(ids, batch_cache, torch.tensor(keep)).logits
                for row, (rest, i) in enumerate(zip(rests, members, strict=True)):
                    where = [keep.index(len(rest) - k) for k in range(scored[i], 0, -1)]
                    # over the model's whole output layer, as hf normalises (a padded vocabulary
                    # larger than the tokenizer's keeps its share of the probability)
                    picked = logits[row, where]
                    yield i, F.log_softmax(picked, dim=-1, dtype=softmax_dtype).cpu()
                bar.update(len(members))
        bar.close()

    def _model_generate(self, context: torch.Tensor, max_length: int, stop: list[str],
                        **generation_kwargs: Any) -> torch.Tensor:
        """hf's generation; a prompt repeated in the batch is run once, its cache copied per row."""
        distinct, row_of = torch.unique(context, dim=0, return_inverse=True)
        repeated = len(distinct) < len(context)
        if not lm_eval_compat.is_causal(self) or not repeated or context.shape[1] < 2:
            return super()._model_generate(context, max_length, stop, **generation_kwargs)
        mask = generation_kwargs.get("attention_mask")
        mask = torch.ones_like(context) if mask is None else mask
        first = [int((row_of == d).nonzero()[0]) for d in range(len(distinct))]
        distinct_mask = mask[first]
        # the positions generate gives left-padded rows; the last prompt token is left to generate
        positions = (distinct_mask.long().cumsum(-1) - 1).masked_fill(distinct_mask == 0, 0)
        with torch.no_grad(), self._autocast():  # no_grad: generate extends this cache in place
            cache = self.model(input_ids=distinct[:, :-1], attention_mask=distinct_mask[:, :-1],
                               position_ids=positions[:, :-1], use_cache=True,
                               logits_to_keep=1).past_key_values
        cache.reorder_cache(row_of.to(self.device))
        return super()._model_generate(context, max_length, stop, past_key_values=cache,
                                       **generation_kwargs)

    def _autocast(self) -> torch.autocast:
        """The hf backend's mixed precision (``mixed_precision_dtype``), off when it has none."""
        dtype = lm_eval_compat.mixed_precision_dtype(self)
        return torch.autocast(device_type=self.device.type, dtype=dtype, enabled=dtype is not None)

    def _run(self, tokens: Sequence[Any], cache: Any, keep: int | torch.Tensor) -> Any:
        ids = torch.tensor(tokens if isinstance(tokens[0], list) else [list(tokens)],
                           dtype=torch.long, device=self.device)
        return self.model(input_ids=ids, past_key_values=cache, use_cache=True,
                          logits_to_keep=keep.to(self.device) if torch.is_tensor(keep) else keep)
