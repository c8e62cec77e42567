"""Model backends registered for the reliability tests (imported by the tests and by the
subprocesses they start; importing registers them with lm-eval).

- ``calidist-fake``: a deterministic stand-in for a paid API. Each answer is a pure function of the
  request (a hash of prompt and continuation), it counts the requests it is sent, can be slowed down
  so that a test can kill a run part-way, and can answer NaN or None for chosen prompts.
- ``calidist-hf-cpu-dp``: lm-eval's ``hf`` model with data parallelism on CPU. lm-eval shards
  documents over ``accelerate launch`` processes only when it sees more than one GPU; this subclass
  takes rank and world size from accelerate (under ``torchrun``) so that the real multi-process
  path (sharding, padding, gathering of the per-document items) runs on CPU too.
"""

from __future__ import annotations

import hashlib
import os
import time
from typing import Any

from lm_eval.api.model import LM
from lm_eval.api.registry import register_model
from lm_eval.models.huggingface import HFLM


def fake_loglikelihood(context: str, continuation: str) -> float:
    digest = hashlib.sha256(f"{context}\x1f{continuation}".encode()).digest()
    return -8.0 * int.from_bytes(digest[:4], "big") / 2**32


@register_model("calidist-fake")
class FakeLM(LM):
    """Deterministic loglikelihoods; ``requests_sent`` counts what the harness asked for."""

    requests_sent = 0  # in this process, over all instances

    def __init__(self, delay: float = 0.0, count_file: str | None = None,
                 bad_marker: str | None = None, bad_value: str = "nan", **kwargs: Any) -> None:
        super().__init__()
        self.delay = float(delay)
        self.count_file = count_file
        self.bad_marker = bad_marker
        # lm-eval parses "nan", "none", "inf" in --model_args into float / None already
        self.bad_value = {"nan": float("nan"), "none": None, "inf": float("-inf")}.get(
            str(bad_value).lower(), bad_value)

    def loglikelihood(self, requests: list[Any], disable_tqdm: bool = False) -> list[Any]:
        answers = []
        for request in requests:
            context, continuation = request.args
            value = fake_loglikelihood(context, continuation)
            if self.bad_marker is not None and self.bad_marker in context:
                value = self.bad_value
            answer = (value, False)
            answers.append(answer)
            FakeLM.requests_sent += 1
            if self.count_file:  # a killed process leaves its count behind
                with open(self.count_file, "a", encoding="utf-8") as handle:
                    handle.write("1\n")
            self.cache_hook.add_partial("loglikelihood", request.args, answer)
            time.sleep(self.delay)
        return answers

    def loglikelihood_rolling(self, requests: list[Any], disable_tqdm: bool = False) -> list:
        raise NotImplementedError

    def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
        raise NotImplementedError


@register_model("calidist-hf-cpu-dp")
class CpuDataParallelHFLM(HFLM):
    """``hf`` with documents sharded over ``torchrun`` CPU processes."""

    requests_seen = 0  # by this process: the test checks that each rank did a share

    def loglikelihood(self, requests: list[Any], disable_tqdm: bool = False) -> list[Any]:
        CpuDataParallelHFLM.requests_seen += len(requests)
        return super().loglikelihood(requests, disable_tqdm)

    def __init__(self, **kwargs: Any) -> None:
        # Without GPUs accelerate reports one process under torchrun unless told to use the CPU.
        os.environ.setdefault("ACCELERATE_USE_CPU", "true")
        super().__init__(**kwargs)
        if int(os.environ.get("WORLD_SIZE", "1")) > 1:
            from accelerate import Accelerator

            self.accelerator = Accelerator()
            self._rank = self.accelerator.process_index
            self._world_size = self.accelerator.num_processes
