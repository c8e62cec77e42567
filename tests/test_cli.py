"""The ``calidist`` command: path, tasks, eval (flag pass-through), link / unlink (tmp folders)."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
from pathlib import Path

import pytest

from calidist_metrics import DELTA_MODES, FIT_METHODS, LAMBDA_SCALES
from calidist_tasks import cli, task_folder
from calidist_tasks.runs.prompt_logging import LOG_PROMPTS
from calidist_tasks.settings import SAMPLINGS, SPLIT_STAGES, VERBALIZED_PROMPTS, RunSettings

# the option keys and the tuples RunSettings.validate checks them against
CHOICES = {"lambda_scale": LAMBDA_SCALES, "delta_mode": DELTA_MODES, "fit": FIT_METHODS,
           "verbalized_prompt": VERBALIZED_PROMPTS, "sampling": SAMPLINGS, "stage": SPLIT_STAGES,
           "log_prompts": LOG_PROMPTS}


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

    cli.main(["tasks", "--full"])
    lines = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    listed = {name: kind for name, kind, *_ in lines}
    # the paper's protocol first: every reasoned task before any other, and said so
    paper = [name for name, _, _, what, _ in lines if what.startswith(cli.PAPER)]
    assert paper == [line[0] for line in lines[:len(paper)]]
    assert {f"calidist_ppdb{s}_cot" for s in ("", "_assertion", "_probe", "_corruption")} <= set(
        paper)
    assert {line[0]: line[3] for line in lines}["calidist_ppdb_assertion"].startswith(
        "direct letter readout")
    for benchmark in ("mnli", "ppdb"):
        for suffix in ("", "_assertion", "_probe", "_corruption"):
            assert listed[f"calidist_{benchmark}{suffix}"] == "task"
        assert listed[f"calidist_{benchmark}_all"] == "group"
    manager = TaskManager(include_path=task_folder(), include_defaults=False)
    assert {n for n, kind in listed.items() if kind == "task"} == set(manager.all_subtasks)
    assert {n for n, kind in listed.items() if kind == "group"} == set(manager.all_groups)


def test_tasks_overview_has_a_header_and_fits_the_terminal(capsys):
    """Without --full: a header, one row per family with its variants, then what each variant
    is and reports, said once; every line within the terminal's width."""
    cli.main(["tasks"])
    text = capsys.readouterr().out
    assert text.startswith("calidist tasks: ") and "--full" in text.splitlines()[0] + text
    full = cli.list_tasks()
    for width in (80, 120):
        overview = cli.task_overview(width=width)
        assert max(map(len, overview.splitlines())) <= width
    lines = cli.task_overview(width=100).splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("family"))
    variants: dict[str, list[str]] = {}
    for line in lines[start + 1:lines.index("", start)]:
        if not line.startswith(" "):
            family, line = line.split(maxsplit=1)
        variants.setdefault(family, []).extend(line.split())
    for family, found in variants.items():  # the variants spell out every task and group
        named = {f"calidist_{family}" + ("" if v == cli.ORIGINAL else f"_{v}") for v in found}
        assert named == {name for name, *_ in full
                         if name == f"calidist_{family}" or name.startswith(f"calidist_{family}_")}
    assert overview.count("direct letter readout") == 4  # original, 3 styles: once each
    assert len(lines) < len(full)  # not one line per task
    assert "no task matches" in cli.task_overview("nothing*")


def test_help_and_tasks_import_no_model_stack():
    """`calidist --help`, `tasks` and `eval --help` answer without importing torch,
    transformers, scipy or lm-eval's evaluator and tasks: seconds of CPU they never need."""
    import subprocess
    import sys

    heavy = ("torch", "transformers", "scipy", "datasets", "lm_eval.tasks", "lm_eval.evaluator")
    for argv in (["--help"], ["tasks"], ["eval", "--help"]):
        code = (f"import sys\nfrom calidist_tasks.cli import main\ntry:\n    main({argv!r})\n"
                "except SystemExit:\n    pass\nprint('IMPORTED', sorted(m for m in sys.modules "
                f"if m.startswith({heavy!r})))")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True).stdout
        assert out.rstrip().endswith("IMPORTED []"), (argv, out[-300:])


@pytest.fixture
def lm_eval_argv(monkeypatch):
    """Stand in for lm-eval's CLI entry point: record the argv it would have parsed."""
    import lm_eval.__main__

    seen: list[list[str]] = []
    monkeypatch.setattr(lm_eval.__main__, "cli_evaluate", lambda: seen.append(list(sys.argv)))
    return seen


def test_eval_passes_every_flag_through_and_adds_the_include_path(lm_eval_argv, tmp_path):
    argv = ["--model", "hf", "--model_args", "pretrained=x", "--tasks", "calidist_ppdb_probe",
            "--metadata", '{"calib_size": 5}', "--limit", "9", "--log_samples", "--unknown", "1"]
    saved = list(sys.argv)
    cli.main(["eval", *argv])
    assert lm_eval_argv == [["lm_eval", *argv, "--include_path", task_folder()]]
    assert sys.argv == saved  # restored
    (tmp_path / "t.yaml").write_text("task: t\n")  # the user's own task, in their folder
    mine = str(tmp_path)
    for given in (["--include_path", mine], [f"--include_path={mine}"]):
        cli.main(["eval", "--tasks", "t", *given])
        assert lm_eval_argv[-1] == ["lm_eval", "--tasks", "t", *given]


def test_a_users_include_path_adds_to_ours(monkeypatch, tmp_path):
    """`calidist eval --include_path MINE`: lm-eval's CLI builds its TaskManager with MINE; ours
    is added beside it, so both the user's tasks and calidist's are found."""
    import lm_eval.__main__
    import lm_eval.tasks

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "my_task.yaml").write_text("task: my_task\ndataset_path: json\n"
                                       "output_type: loglikelihood\ndoc_to_text: q\n"
                                       "doc_to_target: a\n", encoding="utf-8")
    found = []

    def cli_evaluate() -> None:  # what lm-eval's CLI does with --include_path
        manager = lm_eval.tasks.TaskManager(include_path=str(mine), include_defaults=False)
        found.append(set(manager.all_tasks))

    monkeypatch.setattr(lm_eval.__main__, "cli_evaluate", cli_evaluate)
    cli.main(["eval", "--tasks", "my_task", "--include_path", str(mine)])
    assert {"my_task", "calidist_ppdb_assertion"} <= found[0]
    assert lm_eval.tasks.TaskManager.__name__ == "TaskManager"  # restored


@pytest.mark.parametrize(("tasks", "defaults"), [
    (["calidist_ppdb_assertion"], False), (["calidist_ppdb_all"], False),  # a task, a group
    (["calidist_mnli", "my_group"], True),  # my_group lists one of lm-eval's tasks
    (["calidist_ppdb", "arc_easy"], True), (["calidist_*"], True), ([], True)])
def test_lm_eval_s_own_tasks_are_indexed_only_where_a_run_needs_them(tmp_path, tasks, defaults):
    """Indexing lm-eval's own task folder is most of a run's start-up: `calidist eval` leaves it
    out where the include path registers every task and group member asked for, and keeps it
    for any name it does not (one of lm-eval's, a pattern, a group listing one of lm-eval's)."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "my_group.yaml").write_text("group: my_group\ntask: [calidist_ppdb, arc_easy]\n",
                                        encoding="utf-8")
    built = []
    build = cli.with_our_tasks(lambda **kwargs: built.append(kwargs), tasks)
    build(include_path=str(mine), metadata={})
    assert built[0]["include_defaults"] is defaults
    assert built[0]["include_path"] == [str(mine), str(Path(task_folder()).resolve())]
    build(include_path=str(mine), include_defaults=False)  # a caller's own choice stands
    assert built[1]["include_defaults"] is False


def test_after_link_eval_does_not_register_our_tasks_twice(monkeypatch, tmp_path):
    monkeypatch.setattr(cli, "linked", lambda: True)
    assert cli.with_include_path(["--tasks", "t"]) == ["--tasks", "t"]
    assert cli.include_paths("/mine") == "/mine"
    monkeypatch.setattr(cli, "linked", lambda: False)
    assert cli.include_paths("/mine") == ["/mine", str(Path(task_folder()).resolve())]


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
    keys = [f.name for f in dataclasses.fields(RunSettings) if not f.metadata.get("internal")]
    # every key, in declaration order, then the task options, and nothing else
    assert list(entries) == keys + list(cli.TASK_OPTIONS)
    fields = {f.name: f for f in dataclasses.fields(RunSettings)}
    for key, text in entries.items():
        if key in cli.TASK_OPTIONS:
            assert cli.TASK_OPTIONS[key][:40] in text
            continue
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

    from calidist_tasks.runs.two_stage import plan_two_stage

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


def test_eval_prints_calidist_summary_and_two_stage_one_table(capsys, monkeypatch):
    """After lm-eval's table, calidist eval prints vanilla beside calibrated (x100); a two-stage
    run asks lm-eval for stage 2's table only and returns stage 2's results."""
    from calidist_tasks import cli
    from calidist_tasks.runs import two_stage

    results = {"results": {"calidist_ppdb_assertion": {
        "acc,none": 0.5, "ece_vanilla,none": 0.3, "ece,none": 0.1, "brier,none": 0.2,
        "brier_vanilla,none": 0.25, "auroc,none": 0.6, "auroc_vanilla,none": 0.6}}}
    cli.print_summary(results)
    out = capsys.readouterr().out
    assert "| calidist_ppdb_assertion | Vanilla |  50.00 |  30.00 |" in out
    assert "| calidist_ppdb_assertion | CaliDist (As.) |  50.00 |  10.00 |" in out
    cli.print_summary({"results": {"arc_easy": {"acc,none": 0.5}}})  # not ours: nothing
    assert capsys.readouterr().out == ""
    calls = []

    def run(argv, table=True):
        calls.append(table)
        return results if table else None

    monkeypatch.setattr(two_stage, "count_lines", lambda tasks: [])
    monkeypatch.setattr(cli, "lm_eval_main", run)
    returned = cli.run_plan(
        ["--model", "hf", "--tasks", "calidist_ppdb_assertion", "--output_path", "out"],
        two_stage=True)
    assert calls == [False, True] and returned is results


def test_version_and_filtered_task_list(capsys):
    from importlib.metadata import version

    from calidist_tasks.cli import main

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"calidist 0.1.0 (lm-eval {version('lm_eval')})"
    main(["tasks", "--full", "calidist_ppdb_a*,calidist_gsm8k_assertion_chains"])
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    by_name = {r[0]: r[1:] for r in rows}
    assert set(by_name) == {"calidist_ppdb_assertion", "calidist_ppdb_assertion_verbalized",
                            "calidist_ppdb_assertion_cot", "calidist_ppdb_all",
                            "calidist_gsm8k_assertion_chains"}
    assert by_name["calidist_ppdb_assertion"][:2] == ["task", "multiple_choice"]
    assert by_name["calidist_ppdb_assertion"][3] == "Vanilla, CaliDist (As.)"
    assert by_name["calidist_ppdb_assertion_cot"][3] == (
        "Vanilla (reasoned), Verbalized (reasoned), CaliDist reasoned (As.), "
        "CaliDist reasoned verbalized (As.)")
    assert by_name["calidist_ppdb_assertion_verbalized"][1] == "generate_until"
    assert by_name["calidist_gsm8k_assertion_chains"][3].startswith("the stage's generations")
    assert by_name["calidist_ppdb_all"][0] == "group"


def test_eval_help_names_the_task_options():
    from calidist_tasks.cli import metadata_help

    assert "original_samples" in metadata_help()


def test_readme_matches_the_task_configs():
    """The README's tag claim names exactly GSM8K's later stages (tag calidist_stage2), and
    its commands that run a PPDB task (no Hub copy) give data_dir."""
    from calidist_tasks.data.yaml_configs import task_configs

    readme = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    tags = {name: config.get("tag") for name, config in task_configs().items()
            if "group" not in config}
    stage2 = sorted(name for name, tag in tags.items() if tag == "calidist_stage2")
    reasoned = {name for name, tag in tags.items() if tag == "calidist_reasoned"}
    assert reasoned == {name for name in tags if name.endswith("_cot")}
    assert stage2 and all(tag in ("calidist", "calidist_stage2", "calidist_reasoned")
                          for tag in tags.values())
    claim = readme[readme.index("Every task carries the tag `calidist`"):]
    claim = claim[:claim.index("**Defaults")]
    assert sorted(re.findall(r"`(calidist_gsm8k\w*)`", claim)) == stage2
    assert "`_cot` tasks" in claim and "`calidist_reasoned`" in claim
    commands = re.split(r"\n(?=\S)", readme.split("## Use with lm-eval")[1].split("```")[1])
    for command in commands:
        if re.search(r"--tasks \S*calidist_ppdb", command):
            assert "data_dir" in command, command


def test_demo_announces_its_run_folder_under_the_current_one_first(tmp_path, monkeypatch, capsys):
    """`calidist demo` (what scripts/demo.sh runs in the clone) writes to runs/demo, says so
    before the model is prepared, and its note explains AUROC < 50 and confidence < 1/c."""
    from calidist_tasks.backends import offline_models
    from calidist_tasks.report import summary

    monkeypatch.chdir(tmp_path)
    seen = []

    def prepared():
        seen.append(capsys.readouterr().out)  # what was printed before the model
        return tmp_path / "smollm2"

    monkeypatch.setattr(offline_models, "prepare_smollm2", prepared)
    monkeypatch.setattr(cli, "lm_eval_main", lambda argv: seen.append(list(argv)))
    monkeypatch.setattr(summary, "latest_results", lambda out: {"results": {}})
    cli.main(["demo"])
    out = tmp_path / "runs" / "demo"
    assert seen[0].startswith(f"calidist demo: the run (lm-eval's results and per-document "
                              f"samples) goes to {out}")
    argv = seen[1]
    assert argv[argv.index("--output_path") + 1] == str(out)
    text = capsys.readouterr().out
    assert "AUROC below 50" in text and "below 1/c" in text and "only lowers" in text
    assert (Path(__file__).parents[1] / "scripts" / "demo.sh").read_text().count(
        "--output_path runs/demo") == 1


# ---------------------------------------------------------------- refusals through the real CLI
def calidist(*args: str, env: dict | None = None) -> tuple[int, str]:
    """Run ``python -m calidist_tasks.cli`` as a user would; (exit status, stderr)."""
    import subprocess

    done = subprocess.run([sys.executable, "-m", "calidist_tasks.cli", *args], text=True,
                          capture_output=True, timeout=600,
                          env={**os.environ, "CALIDIST_DEBUG": "", **(env or {})})
    return done.returncode, done.stderr


def one_line_refusal(status: int, err: str, words: str) -> None:
    assert status == 1, err
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("calidist: ")]
    assert len(lines) == 1 and words in lines[0], err


@pytest.mark.parametrize(("args", "words"), [
    (["--tasks", "calidist_ppdb_asertion"], "unknown task 'calidist_ppdb_asertion'; did you "
                                            "mean calidist_ppdb_assertion"),
    (["--tasks", "calidist_ppdb", "--limit", "0"], "--limit 0 takes no documents"),
    (["--tasks", "calidist_ppdb", "--metadata", '{"m": 1, "m": 2}'], "gives the key 'm' twice"),
])
def test_eval_refuses_a_bad_command_in_one_line_before_lm_eval(args, words):
    one_line_refusal(*calidist("eval", "--model", "hf", *args), words)


def test_eval_refuses_a_misspelt_metadata_key_before_the_model_loads(ppdb_data_dir):
    # no such model: had the model been loaded first, the error would be about the model
    status, err = calidist("eval", "--model", "hf", "--model_args", "pretrained=/no/such/model",
                           "--tasks", "calidist_ppdb_assertion", "--device", "cpu",
                           "--metadata", json.dumps({"data_dir": str(ppdb_data_dir),
                                                     "calib_sise": 5}))
    one_line_refusal(status, err, "unknown --metadata key 'calib_sise'; did you mean "
                                  "'calib_size'?")


def test_eval_shows_the_traceback_with_debug():
    status, err = calidist("eval", "--debug", "--model", "hf", "--tasks", "calidist_ppdb_asertion")
    assert status == 1 and "Traceback" in err and "did you mean" in err
    status, err = calidist("eval", "--model", "hf", "--tasks", "calidist_ppdb_asertion",
                           env={"CALIDIST_DEBUG": "1"})
    assert status == 1 and "Traceback" in err


@pytest.mark.parametrize(("error", "shown"), [
    (ValueError("mnli data.jsonl:2: missing or empty field 'premise'\n(only invisible "
                "characters: '\\u200b')"),
     "calidist: mnli data.jsonl:2: missing or empty field 'premise' (only invisible characters"),
    (KeyError("letters"), "calidist: KeyError: 'letters' (rerun with --debug for the traceback)"),
])
def test_an_error_inside_lm_eval_is_printed_as_one_line(monkeypatch, capsys, error, shown):
    def fails(argv, table=True):
        raise error

    monkeypatch.setattr(cli, "lm_eval_main", fails)
    monkeypatch.delenv("CALIDIST_DEBUG", raising=False)
    with pytest.raises(SystemExit) as stopped:
        cli.main(["eval", "--model", "hf", "--tasks", "calidist_ppdb"])
    assert stopped.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith(shown) and err.count("\n") == 1, err
    with pytest.raises(type(error)):
        cli.main(["eval", "--debug", "--model", "hf", "--tasks", "calidist_ppdb"])
