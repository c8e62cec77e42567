"""The ``calidist`` command: path, tasks, eval (flag pass-through), link / unlink (tmp folders)."""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from pathlib import Path

import pytest

from calidist_metrics import DELTA_MODES, FIT_METHODS, LAMBDA_SCALES
from calidist_tasks import cli, task_folder
from calidist_tasks.settings import SAMPLINGS, STAGES, VERBALIZED_PROMPTS, RunSettings

# the option keys and the tuples RunSettings.validate checks them against
CHOICES = {"lambda_scale": LAMBDA_SCALES, "delta_mode": DELTA_MODES, "fit": FIT_METHODS,
           "verbalized_prompt": VERBALIZED_PROMPTS, "sampling": SAMPLINGS, "stage": STAGES}


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_path_prints_the_folder_holding_our_yaml(capsys):
    cli.main(["path"])
    folder = Path(capsys.readouterr().out.strip())
    assert folder == Path(task_folder())
    assert (folder / "mnli" / "calidist_mnli_assertion.yaml").is_file()
    assert (folder / "ppdb" / "calidist_ppdb_probe.yaml").is_file()


def test_tasks_lists_every_task_and_group_lm_eval_indexes(capsys):
    from lm_eval.tasks import TaskManager

    cli.main(["tasks"])
    lines = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    listed = {name: kind for name, kind, _ in lines}
    # the paper's protocol first: every reasoned task before any other, and said so
    paper = [name for name, _, what in lines if what.startswith(cli.PAPER)]
    assert paper == [name for name, _, _ in lines[:len(paper)]]
    assert {f"calidist_ppdb{s}_cot" for s in ("", "_assertion", "_probe", "_corruption")} <= set(
        paper)
    assert dict((n, w) for n, _, w in lines)["calidist_ppdb_assertion"].startswith(
        "direct letter readout")
    for benchmark in ("mnli", "ppdb"):
        for suffix in ("", "_assertion", "_probe", "_corruption"):
            assert listed[f"calidist_{benchmark}{suffix}"] == "task"
        assert listed[f"calidist_{benchmark}_all"] == "group"
    manager = TaskManager(include_path=task_folder(), include_defaults=False)
    assert {n for n, kind in listed.items() if kind == "task"} == set(manager.all_subtasks)
    assert {n for n, kind in listed.items() if kind == "group"} == set(manager.all_groups)


@pytest.fixture
def lm_eval_argv(monkeypatch):
    """Stand in for lm-eval's CLI entry point: record the argv it would have parsed."""
    import lm_eval.__main__

    seen: list[list[str]] = []
    monkeypatch.setattr(lm_eval.__main__, "cli_evaluate", lambda: seen.append(list(sys.argv)))
    return seen


def test_eval_passes_every_flag_through_and_adds_the_include_path(lm_eval_argv):
    argv = ["--model", "hf", "--model_args", "pretrained=x", "--tasks", "calidist_ppdb_probe",
            "--metadata", '{"calib_size": 5}', "--limit", "9", "--log_samples", "--unknown", "1"]
    saved = list(sys.argv)
    cli.main(["eval", *argv])
    assert lm_eval_argv == [["lm_eval", *argv, "--include_path", task_folder()]]
    assert sys.argv == saved  # restored
    for given in (["--include_path", "/mine"], ["--include_path=/mine"]):
        cli.main(["eval", "--tasks", "t", *given])
        assert lm_eval_argv[-1] == ["lm_eval", "--tasks", "t", *given]


def help_entries(text: str) -> dict[str, str]:
    """{key: its help, continuation lines joined} from the metadata section of the help."""
    entries: dict[str, str] = {}
    for line in text.splitlines()[1:]:
        if match := re.match(r"^  (\w+) +(.*)$", line):
            entries[match[1]] = match[2]
        elif line.startswith(" " * 21) and entries:
            entries[list(entries)[-1]] += " " + line.strip()
    return entries


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_eval_help_lists_every_metadata_key_before_lm_evals_options(flag, capsys):
    with pytest.raises(SystemExit) as done:
        cli.main(["eval", "--tasks", "calidist_ppdb", flag])
    assert done.value.code in (0, None)
    out = capsys.readouterr().out
    lm_eval_model = re.search(r"^\s+--model\b", out, re.MULTILINE)  # lm-eval's own option
    assert lm_eval_model is not None
    ours = out[:lm_eval_model.start()]
    assert ours.startswith("calidist options (pass as --metadata '{\"key\": value}'):\n")
    entries = help_entries(ours.split("\n\n")[0])
    keys = [f.name for f in dataclasses.fields(RunSettings) if f.name not in ("model", "api")]
    assert list(entries) == keys  # every key, in declaration order, and nothing else
    fields = {f.name: f for f in dataclasses.fields(RunSettings)}
    for key, text in entries.items():
        assert fields[key].metadata["help"] in text
        assert "(default: " in text
        if key not in CHOICES:
            assert "one of:" not in text
    assert "(default: 200)" in entries["calib_size"]
    for key, choices in CHOICES.items():
        assert fields[key].metadata["choices"] is choices  # the tuple validate uses
        printed = re.search(r"one of: ([^)]*)\)$", entries[key])[1].split(", ")
        assert printed == list(choices)
        assert f'(default: "{fields[key].default}"' in entries[key]
        for value in printed:  # each printed value is accepted, anything else refused
            assert getattr(RunSettings.from_metadata({key: value}), key) == value
        with pytest.raises(ValueError, match=f"{key} must be one of"):
            RunSettings.from_metadata({key: "not_" + choices[0]})


def test_calidist_help_points_to_eval_help(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "`calidist eval --help` lists calidist's own options (the --metadata keys" in out


def test_unknown_arguments_of_other_commands_are_refused(capsys):
    with pytest.raises(SystemExit):
        cli.main(["path", "--bogus"])
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err


# ---------------------------------------------------------------- link / unlink


@pytest.fixture
def lm_eval_root(tmp_path: Path) -> Path:
    """A stand-in for lm-eval's task folder, with a task of its own."""
    root = tmp_path / "tasks"
    (root / "other").mkdir(parents=True)
    (root / "other" / "other.yaml").write_text("task: other\n")
    return root


def test_link_mirrors_our_yaml_as_real_folders_and_unlink_restores(lm_eval_root, ppdb_data_dir):
    before = tree(lm_eval_root)
    dest = cli.link(target_root=lm_eval_root)
    assert dest == lm_eval_root / "calidist"
    source = Path(task_folder())
    ours = sorted(str(p.relative_to(source)) for p in source.rglob("*")
                  if p.is_file() and p.suffix != ".py" and "__pycache__" not in p.parts)
    linked = sorted(str(p.relative_to(dest)) for p in dest.rglob("*")
                    if p.is_file() and p.name != cli.MARKER)
    assert linked == ours
    # Real folders (Python 3.11's glob does not enter symlinked folders), per-file links.
    assert all(not p.is_symlink() for p in dest.rglob("*") if p.is_dir())
    assert not dest.is_symlink()
    yaml_in_root = {p.name for p in lm_eval_root.glob("**/*.yaml")}
    assert {p.name for p in source.glob("**/*.yaml")} <= yaml_in_root

    # lm-eval indexes the linked folder and builds a task from it (module-path !function).
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_path=str(lm_eval_root), include_defaults=False,
                          metadata={"data_dir": str(ppdb_data_dir), "calib_size": 5})
    assert {"calidist_mnli_assertion", "calidist_ppdb_probe", "other"} <= set(manager.all_tasks)
    task = manager.load(["calidist_ppdb_probe"])["tasks"]["calidist_ppdb_probe"]
    assert len(task.eval_docs) == 60

    assert cli.link(target_root=lm_eval_root) == dest  # linking again replaces our own link
    cli.unlink(target_root=lm_eval_root)
    assert tree(lm_eval_root) == before
    with pytest.raises(SystemExit, match="nothing linked"):
        cli.unlink(target_root=lm_eval_root)


def test_unlink_keeps_files_it_did_not_make(lm_eval_root):
    dest = cli.link(target_root=lm_eval_root)
    (dest / "ppdb" / "mine.yaml").write_text("task: mine\n")
    cli.unlink(target_root=lm_eval_root)
    assert tree(dest) == ["ppdb", "ppdb/mine.yaml"]


def test_link_refuses_a_folder_it_did_not_make(lm_eval_root):
    foreign = lm_eval_root / "calidist"
    foreign.mkdir()
    (foreign / "theirs.yaml").write_text("task: theirs\n")
    before = tree(lm_eval_root)
    with pytest.raises(SystemExit, match="exists and was not made by calidist; refusing"):
        cli.link(target_root=lm_eval_root)
    with pytest.raises(SystemExit, match="nothing linked"):
        cli.unlink(target_root=lm_eval_root)
    assert tree(lm_eval_root) == before


def test_link_refuses_a_folder_it_cannot_write(lm_eval_root, monkeypatch):
    lm_eval_root.chmod(0o555)
    try:
        if os.access(lm_eval_root, os.W_OK):  # root ignores mode bits: simulate a normal user
            real_access = os.access
            monkeypatch.setattr(cli.os, "access", lambda path, mode: False if Path(path) ==
                                lm_eval_root else real_access(path, mode))
        with pytest.raises(SystemExit, match=r"is not writable; use `lm_eval --include_path"):
            cli.link(target_root=lm_eval_root)
        assert tree(lm_eval_root) == ["other", "other/other.yaml"]
    finally:
        lm_eval_root.chmod(0o755)


def test_link_needs_an_existing_lm_eval_task_folder(tmp_path):
    with pytest.raises(SystemExit):
        cli.link(target_root=tmp_path / "missing")
    assert not (tmp_path / "missing").exists()



def test_two_stage_plans_stage1_with_the_hinted_tasks_and_stage2_with_all(tmp_path):
    import json

    from calidist_tasks.two_stage import plan_two_stage

    out = tmp_path / "out"
    argv = ["--model", "hf", "--tasks", "calidist_ppdb_all,calidist_aqua_assertion",
            "--output_path", str(out), "--use_cache", "c", "--metadata", '{"calib_size": 2}']
    plan = plan_two_stage(argv)
    # groups expanded: hinted log-likelihood and verbalized tasks split, the others run whole
    assert plan.hinted == ["calidist_ppdb_assertion", "calidist_ppdb_probe",
                           "calidist_ppdb_corruption", "calidist_ppdb_assertion_verbalized",
                           "calidist_ppdb_probe_verbalized", "calidist_ppdb_corruption_verbalized",
                           "calidist_aqua_assertion"]
    first = plan.stage1
    assert first[first.index("--tasks") + 1] == ",".join(plan.hinted)
    assert first[first.index("--output_path") + 1] == str(out / "stage1")
    assert "--log_samples" in first and "--use_cache" in first
    assert json.loads(first[-1]) == {"stage": "original"}
    assert plan.stage2[:-2] == argv
    assert json.loads(plan.stage2[-1]) == {"stage": "hints", "original_run": str(out / "stage1")}
    with pytest.raises(SystemExit, match="needs --output_path"):
        plan_two_stage(["--tasks", "calidist_ppdb_assertion"])
    with pytest.raises(SystemExit, match="sets --metadata stage"):
        plan_two_stage([*argv, "--metadata", '{"stage": "all"}'])
    # only tasks without hints: one stage
    assert plan_two_stage(["--tasks", "calidist_ppdb", "-o", str(out)]).stage1 is None
