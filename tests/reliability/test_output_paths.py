"""Model work is never lost (issue 28, item 1): an output folder that cannot be written is refused
before any model time (`calidist eval`, `--two-stage`, `calidist_tasks.evaluate`'s
`stage1_dir`); results lm-eval still cannot write after the run stop it with a non-zero exit,
saved elsewhere; and a task whose aggregation fails no longer loses the other tasks of the run.
Runs go through the real `calidist eval` (lm-eval's CLI, indexing our task folder only)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import lm_eval.__main__
import lm_eval.tasks
import pytest

import calidist_tasks
from calidist_tasks import cli

METADATA = {"calib_size": 2, "eval_size": 2, "m": 1}


@pytest.fixture
def no_model_time(monkeypatch) -> list:
    """lm-eval's CLI and simple_evaluate replaced by a recorder: any call is model time."""
    calls: list = []
    monkeypatch.setattr(lm_eval.__main__, "cli_evaluate", lambda: calls.append("cli"))
    monkeypatch.setattr(lm_eval, "simple_evaluate", lambda **kw: calls.append("api"))
    return calls


def eval_argv(model_dir: Path, data_dir: Path, tasks: str, out: Path, **metadata) -> list[str]:
    return ["eval", "--model", "hf", "--model_args", f"pretrained={model_dir},dtype=float32",
            "--device", "cpu", "--batch_size", "8", "--num_fewshot", "0", "--tasks", tasks,
            "--metadata", json.dumps({**METADATA, "data_dir": str(data_dir), **metadata}),
            "--output_path", str(out), "--log_samples"]


def stopped(argv: list[str]) -> str:
    """`calidist <argv>` must exit non-zero; its message."""
    with pytest.raises(SystemExit) as done:
        cli.main(argv)
    assert done.value.code not in (0, None)
    return str(done.value.code)


# ------------------------------------------------------------------ before any model time
@pytest.mark.parametrize("where", ["a file", "under a file"])
def test_an_output_path_blocked_by_a_file_is_refused_before_model_time(
        tmp_path, ppdb_data_dir, no_model_time, where):
    blocker = tmp_path / "results"
    blocker.write_text("not a folder", encoding="utf-8")
    out = blocker if where == "a file" else blocker / "run"
    message = stopped(eval_argv(Path("m"), ppdb_data_dir, "calidist_ppdb_assertion", out))
    assert message.startswith(f"calidist: --output_path {out} cannot be written (")
    assert str(blocker) in message and "nothing was run" in message
    assert no_model_time == []


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0,
                    reason="permissions do not stop root from writing")
def test_an_output_folder_without_write_permission_is_refused(tmp_path, ppdb_data_dir,
                                                              no_model_time):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        message = stopped(eval_argv(Path("m"), ppdb_data_dir, "calidist_ppdb_assertion",
                                    locked / "run"))
    finally:
        locked.chmod(0o700)
    assert "Permission denied" in message and no_model_time == []


def test_two_stage_refuses_an_unwritable_output_before_stage_1(tmp_path, ppdb_data_dir,
                                                              no_model_time):
    blocker = tmp_path / "out"
    blocker.write_text("not a folder", encoding="utf-8")
    argv = eval_argv(Path("m"), ppdb_data_dir, "calidist_ppdb_assertion", blocker)
    message = stopped([argv[0], "--two-stage", *argv[1:]])
    assert message.startswith(f"calidist eval --two-stage: --output_path {blocker} cannot be "
                              "written")
    assert no_model_time == []


def test_the_python_api_refuses_an_unwritable_stage1_dir_before_model_time(tmp_path,
                                                                         no_model_time):
    blocker = tmp_path / "stage1"
    blocker.write_text("not a folder", encoding="utf-8")
    with pytest.raises(OSError, match=rf"stage1_dir {blocker} cannot be written"):
        calidist_tasks.evaluate("hf", ["calidist_ppdb_assertion"], METADATA, two_stage=True,
                                stage1_dir=str(blocker))
    assert no_model_time == []
