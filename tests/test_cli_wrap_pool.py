"""``calidist wrap --pool NAME`` / ``--no-pool`` through the installed console script (issue #35).

Each run indexes lm-eval's whole task tree (``lm_eval_compat.registered_kind``: its own tasks
cannot be left out of the index), about 20 s of CPU: slow tier, the two runs side by side.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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


def test_pool_and_no_pool_together_are_refused(tmp_path):
    process = subprocess.run([str(CALIDIST), "wrap", "mmlu_anatomy", "--pool", "x",
                              "--no-pool", "--out", str(tmp_path)],
                             capture_output=True, text=True, timeout=120)
    assert process.returncode == 2
    assert "not allowed with argument" in process.stderr
    assert not any(tmp_path.iterdir())
