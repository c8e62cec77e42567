"""A mistyped lm-eval task name is refused before lm-eval indexes its task tree (issue #36 item 1):
``preflight.check_task_names`` reads the names from the YAML text of lm-eval's installed task
folder and the ``--include_path`` folders (``lm_eval_task_names``), where lm-eval's own index
took 65 s on this machine; through the real CLI: one line, exit 1, no traceback, seconds. That
the scan knows every name of lm-eval's own index (which indexes the whole task tree) is the slow
half, tests/slow/reliability/test_task_name_check.py."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from calidist_tasks.runs import preflight


@pytest.mark.parametrize(("name", "meant"), [("arc_eazy", "arc_easy"),
                                             ("hellaswg", "hellaswag"),
                                             ("mmlu_anatmy", "mmlu_anatomy")])
def test_a_mistyped_lm_eval_task_is_refused_with_the_closest_names(name: str, meant: str) -> None:
    with pytest.raises(ValueError, match=rf"unknown task '{name}'; did you mean {meant}\b"):
        preflight.check_task_names([name])


def test_lm_eval_names_tasks_groups_and_tags_pass() -> None:
    preflight.check_task_names(["hellaswag", "mmlu", "mmlu_stem", "ai2_arc", "mmlu_anatomy",
                                "truthfulqa_mc1", "acp_bench", "calidist_ppdb"])


def test_a_name_of_an_include_path_folder_passes_only_with_it(tmp_path: Path) -> None:
    (tmp_path / "mine.yaml").write_text("task: my_own_task_xyz\ntag:\n  - my_tag_xyz\n")
    with pytest.raises(ValueError, match="unknown task 'my_own_task_xyz'"):
        preflight.check_task_names(["my_own_task_xyz"])
    preflight.check_task_names(["my_own_task_xyz", "my_tag_xyz"], [str(tmp_path)])
    preflight.check_command(["--tasks", "my_own_task_xyz", "--include_path", str(tmp_path)])


def test_a_wrapped_task_named_like_ours_passes_with_its_folder(tmp_path: Path) -> None:
    """`calidist wrap` names its tasks calidist_<task>: in the user's --include_path folder
    such a name is theirs, not a mistyped one of ours."""
    (tmp_path / "calidist_aqua_mc.yaml").write_text('task: "calidist_aqua_mc_x"\n')
    with pytest.raises(ValueError, match="unknown task 'calidist_aqua_mc_x'"):
        preflight.check_task_names(["calidist_aqua_mc_x"])
    preflight.check_task_names(["calidist_aqua_mc_x", "calidist_aqua_mc"], [str(tmp_path)])
    with pytest.raises(ValueError, match="did you mean calidist_aqua_mc"):
        preflight.check_task_names(["calidist_aqua_mcx"], [str(tmp_path)])


def test_the_cli_refuses_a_mistyped_lm_eval_task_in_one_line_in_seconds() -> None:
    calidist = Path(sys.executable).parent / "calidist"
    if not calidist.exists():
        pytest.skip("no calidist command")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    start = time.monotonic()
    done = subprocess.run([str(calidist), "eval", "--model", "hf", "--model_args",
                           "pretrained=/no/such/model", "--tasks", "calidist_ppdb,arc_eazy",
                           "--device", "cpu"], capture_output=True, text=True, env=env)
    elapsed = time.monotonic() - start
    assert done.returncode == 1
    assert "Traceback" not in done.stderr + done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "calidist: unknown task 'arc_eazy'; did you mean arc_easy"), done.stderr
    assert elapsed < 40, elapsed  # ~5 s at a load of 3 on 2 cores; lm-eval's index took 65 s
