"""lm-eval's HF backend, data parallel over CPU processes: for the multi-process check only.

lm-eval 0.4.13's ``hf`` backend shards documents across processes only when it sees more than
one GPU; on a CPU every process of ``accelerate launch`` / ``torchrun`` calls itself rank 0 and
evaluates every document. This subclass takes rank and world size from the process group, so
that lm-eval shards the documents and gathers them before the aggregation, as on GPUs:

    ACCELERATE_USE_CPU=true torchrun --nproc_per_node 2 benchmarks/cpu_data_parallel.py \\
        --model hf-cpu-dp --model_args pretrained=FOLDER --include_path "$(calidist path)" ...
"""

from __future__ import annotations

from typing import Any

from accelerate import Accelerator
from lm_eval.api.registry import register_model
from lm_eval.models.huggingface import HFLM


@register_model("hf-cpu-dp")
class CPUDataParallelHFLM(HFLM):
    """HFLM whose rank and world size come from the (gloo) process group on a CPU."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        accelerator = Accelerator()
        if accelerator.num_processes > 1:
            self.accelerator = accelerator
            self._rank = accelerator.process_index
            self._world_size = accelerator.num_processes


if __name__ == "__main__":
    import torch.distributed as dist
    from lm_eval.__main__ import cli_evaluate

    cli_evaluate()
    # Other ranks finish long before rank 0 has aggregated; leaving with gloo still open can
    # abort them (SIGABRT in its teardown), so wait for everyone and close the group first.
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
