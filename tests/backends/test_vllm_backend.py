"""lm-eval's ``--model vllm`` against ``--model hf`` on the same documents (docs/backends.md,
"vLLM in-process"). Runs only where vLLM is importable with a `vllm` distribution lm-eval can
read (``scripts/setup_vllm.sh``); skipped otherwise, so CI never needs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest

pytest.importorskip("vllm")
try:
    version("vllm")
except PackageNotFoundError:
    pytest.skip("no `vllm` distribution for lm-eval's version check (scripts/setup_vllm.sh)",
                allow_module_level=True)

from benchmarks.backend_speed import agreement, documents  # noqa: E402
from calidist_tasks.backends.offline_models import build_tiny_model  # noqa: E402

VLLM_ARGS = "dtype=float32,enable_prefix_caching=True,max_model_len=1024,enforce_eager=True"


def calidist_eval(model: str, model_args: str, out: Path, data_dir: Path, *extra: str) -> None:
    metadata = {"data_dir": str(data_dir), "calib_size": 4, "eval_size": 6, "m": 2}
    command = [sys.executable, "-m", "calidist_tasks.cli", "eval", "--model", model,
               "--model_args", model_args, "--metadata", json.dumps(metadata),
               "--output_path", str(out), "--log_samples", "--batch_size", "8", *extra]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}
    run = subprocess.run(command, capture_output=True, text=True, timeout=1200, env=env,
                         check=False)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]


@pytest.fixture(scope="module")
def vllm_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # the default tiny model's heads (8) are below vLLM's CPU attention minimum (32)
    return build_tiny_model(tmp_path_factory.mktemp("tiny_vllm"), head_dim=32)


@pytest.mark.parametrize(("tasks", "extra"), [
    ("calidist_ppdb_assertion", ["--two-stage"]),
    ("calidist_ppdb_verbalized", ["--apply_chat_template", "--gen_kwargs", "max_gen_toks=24"]),
])
def test_vllm_answers_what_hf_answers(vllm_model, ppdb_data_dir, tmp_path, tasks, extra):
    for model, model_args in (("hf", f"pretrained={vllm_model},dtype=float32"),
                              ("vllm", f"pretrained={vllm_model},{VLLM_ARGS}")):
        calidist_eval(model, model_args, tmp_path / model, ppdb_data_dir, "--tasks", tasks,
                      *extra)
    ours, reference = documents(tmp_path / "vllm", tasks), documents(tmp_path / "hf", tasks)
    assert len(reference) == 10
    found = agreement(ours, reference)
    if tasks.endswith("_verbalized"):
        assert found == "10 of 10 greedy replies identical"
    else:
        difference = float(found.split("difference ")[1].split(";")[0])
        assert difference < 1e-4 and found.endswith("same predictions"), found


def test_vllm_reasoned_task_scores_what_hf_scores(vllm_model, ppdb_data_dir, tmp_path):
    """The paper's protocol on vLLM in one command: the replies' run, then the letters scored
    after each reply; the command returns (a shared vLLM engine once kept Python waiting at
    exit) and answers what hf answers."""
    for model, model_args in (("hf", f"pretrained={vllm_model},dtype=float32"),
                              ("vllm", f"pretrained={vllm_model},{VLLM_ARGS}")):
        calidist_eval(model, model_args, tmp_path / model, ppdb_data_dir, "--tasks",
                      "calidist_ppdb_cot", "--apply_chat_template", "--gen_kwargs",
                      "max_gen_toks=24")
    replies = {model: documents(tmp_path / model, "calidist_ppdb_verbalized")
               for model in ("vllm", "hf")}
    assert agreement(replies["vllm"], replies["hf"]) == "10 of 10 greedy replies identical"
    scored = {model: documents(tmp_path / model, "calidist_ppdb_cot") for model in ("vllm", "hf")}
    assert len(scored["hf"]) == 10
    found = agreement(scored["vllm"], scored["hf"])
    difference = float(found.split("difference ")[1].split(";")[0])
    assert difference < 1e-4 and found.endswith("same predictions"), found
