"""``calidist wrap --pool NAME`` / ``--no-pool`` through the installed console script (issue #35).

Each run indexes lm-eval's whole task tree (``lm_eval_compat.registered_kind``: its own tasks
cannot be left out of the index), about 20 s of CPU: slow tier, the two runs side by side.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CALIDIST = Path(sys.executable).parent / "calidist"
SUBJECTS = ["mmlu_anatomy", "mmlu_astronomy", "mmlu_virology"]


def start(*args: str) -> subprocess.Popen:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.Popen([str(CALIDIST), "wrap", *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def finish(process: subprocess.Popen) -> str:
    out, err = process.communicate(timeout=600)
    assert process.returncode == 0, err[-2000:]
    return out


@pytest.mark.slow
def test_wrap_pool_and_no_pool_through_the_command(tmp_path):
    pooled, unpooled = tmp_path / "pooled", tmp_path / "unpooled"
    runs = [start(*SUBJECTS, "--pool", "sci", "--out", str(pooled)),
            start("mmlu_stem", "--no-pool", "--out", str(unpooled))]  # a group, not pooled
    outputs = [finish(p) for p in runs]
    members = [f"calidist_{s}_assertion" for s in SUBJECTS]
    for subject in SUBJECTS:
        text = (pooled / f"calidist_{subject}_assertion.yaml").read_text()
        assert 'pool: "calidist_sci_assertion"' in text
        assert f"pool_members: {json.dumps(members)}" in text
        assert 'pool: "calidist_sci"' in (pooled / f"calidist_{subject}.yaml").read_text()
    group = (pooled / "calidist_sci_assertion.yaml").read_text()
    assert f"task: {json.dumps(members)}" in group
    assert "calidist_sci_assertion" in outputs[0]  # the command lists the pool's group
    written = sorted(unpooled.glob("*.yaml"))
    assert len(written) > 3 * len(SUBJECTS)  # every mmlu_stem subject
    assert not any("pool" in p.read_text() for p in written)
    assert not (unpooled / "calidist_mmlu_stem.yaml").exists()


def test_pool_and_no_pool_together_are_refused(tmp_path):
    process = subprocess.run([str(CALIDIST), "wrap", "mmlu_anatomy", "--pool", "x",
                              "--no-pool", "--out", str(tmp_path)],
                             capture_output=True, text=True, timeout=120)
    assert process.returncode == 2
    assert "not allowed with argument" in process.stderr
    assert not any(tmp_path.iterdir())
