"""Shared pytest fixtures. Tests never reach the network: the model they use is built locally."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Set before anything imports transformers, datasets or huggingface_hub.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Llama model with its own BPE tokenizer, built once per test session."""
    from calidist_tasks.offline_models import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny_model"))


def run_lm_eval(
    tasks: list[str],
    model_dir: Path,
    metadata: dict,
    *,
    model: str = "hf",
    model_args: str | None = None,
    **kwargs,
) -> dict:
    """Run lm-eval in this process (no ~20 s CLI start-up) on our tasks; returns its results."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    from calidist_tasks import task_folder

    model_args = model_args or f"pretrained={model_dir},dtype=float32"
    manager = TaskManager(include_path=task_folder(), metadata=metadata)
    return lm_eval.simple_evaluate(
        model=model,
        model_args=model_args,
        tasks=tasks,
        task_manager=manager,
        batch_size=kwargs.pop("batch_size", 8),
        device="cpu",
        log_samples=kwargs.pop("log_samples", True),
        bootstrap_iters=0,
        **kwargs,
    )


@pytest.fixture(scope="session")
def ppdb_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """data_dir with a small PPDB file in the corpus's own TSV format (from the bundled sample)."""
    root = tmp_path_factory.mktemp("data")
    (root / "ppdb").mkdir()
    sample = Path(__file__).parents[1] / "calidist_tasks/sample_data/twitter_url_corpus/test.tsv"
    lines = sample.read_text(encoding="utf-8").splitlines()[:60]
    (root / "ppdb" / "test.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root
