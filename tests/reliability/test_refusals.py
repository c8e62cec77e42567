"""Refusals that came as raw tracebacks, after model time or not at all: task names, --metadata
mistakes, --limit 0, --use_cache under a file, replies_dir, saved fits no fit writes, stage-1
answers no run gives, earlier runs that name no model, Unicode copies, a calibration file that
is the evaluation file, lone surrogates, ``calidist unlink`` of an edited marker or a read-only
folder. Through the real CLI: tests/test_cli.py (one line, exit 1, no traceback)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
from conftest import load_task

import calidist_tasks
from calidist_metrics import CaliDistCalibrator
from calidist_tasks import cli
from calidist_tasks.runs import preflight
from calidist_tasks.runs.earlier_runs import Logged, check_model
from calidist_tasks.runs.two_stage import check_stage1_answer
from calidist_tasks.scoring.joining import Outcome
from calidist_tasks.scoring.records import SPLIT_FIELD
from calidist_tasks.settings import RunSettings
from reliability.support import MNLI_ROW, mnli_lines, refused, write

MNLI = "calidist_mnli"


# ---------------------------------------------------------------- task names and the command
@pytest.mark.parametrize(("name", "meant"), [
    ("calidist_ppdb_asertion", "calidist_ppdb_assertion"),
    ("calidist_mnli_prob", "calidist_mnli_probe"),
    ("calidst_aqua_assertion", "calidist_aqua_assertion"),
])
def test_a_mistyped_task_is_refused_with_the_closest_of_ours(name: str, meant: str) -> None:
    with pytest.raises(ValueError, match=rf"unknown task '{name}'; did you mean {meant}\b"):
        preflight.check_task_names([name])


def test_other_task_names_are_left_to_lm_eval() -> None:
    preflight.check_task_names(["hellaswag", "arc_easy", "calidist_ppdb_assertion",
                                "calidist_ppdb", "tasks/my.yaml", "mmlu_*"])


def test_the_python_api_refuses_a_mistyped_task_before_anything_runs() -> None:
    with pytest.raises(ValueError, match="did you mean calidist_ppdb_assertion"):
        calidist_tasks.evaluate("hf", "calidist_ppdb_asertion",
                                model_args="pretrained=/no/such/model")


def test_a_key_given_twice_in_the_metadata_json_is_named() -> None:
    with pytest.raises(ValueError, match=r"gives the key 'calib_size' twice \(5 and 50\)"):
        preflight.check_command(["--tasks", "calidist_ppdb", "--metadata",
                                 '{"calib_size": 5, "m": 1, "calib_size": 50}'])


@pytest.mark.parametrize("limit", ["0", "-3", "0.0"])
def test_a_limit_of_no_documents_is_refused(limit: str) -> None:
    with pytest.raises(ValueError, match=rf"--limit {limit} takes no documents"):
        preflight.check_command(["--tasks", "calidist_ppdb", "--limit", limit])
    with pytest.raises(ValueError, match="takes no documents"):
        calidist_tasks.evaluate("hf", "calidist_ppdb", limit=float(limit))


def test_use_cache_under_a_file_is_refused(tmp_path: Path) -> None:
    blocker = write(tmp_path / "cache", "not a folder")
    with pytest.raises(OSError, match=r"--use_cache .*cannot be written"):
        preflight.check_command(["--tasks", "calidist_ppdb", "--use_cache",
                                 str(blocker / "run")])
    assert blocker.read_text() == "not a folder"


# ---------------------------------------------------------------- --metadata
def test_nested_metadata_is_refused() -> None:
    with pytest.raises(ValueError, match="holds an object under 'metadata'"):
        RunSettings.from_metadata({"metadata": {"calib_size": 5}})


@pytest.mark.parametrize(("key", "meant"), [("size_calib", "calib_size"),
                                            ("seed_split", "split_seed"),
                                            ("scale_lambda", "lambda_scale")])
def test_keys_with_their_words_swapped_are_refused(key: str, meant: str) -> None:
    with pytest.raises(ValueError, match=rf"'{key}'; did you mean '{meant}'"):
        RunSettings.from_metadata({key: 5})


def test_a_negative_split_seed_is_refused() -> None:
    # random.Random(-k) shuffles as random.Random(k): -k would silently give +k's split
    with pytest.raises(ValueError, match="split_seed must be 0 or more, got -3"):
        RunSettings.from_metadata({"split_seed": -3})


def test_metadata_is_checked_before_the_model_loads() -> None:
    # no such model folder: a check after the model load would fail on the model instead
    with pytest.raises(ValueError, match="did you mean 'calib_size'"):
        calidist_tasks.evaluate("hf", "calidist_ppdb_assertion", {"calib_sise": 5},
                                model_args="pretrained=/no/such/model")


# ---------------------------------------------------------------- replies_dir
@pytest.mark.parametrize("kind", ["file", "under a file"])
def test_a_replies_dir_that_cannot_be_written_is_refused_before_any_reply(
        tmp_path: Path, kind: str) -> None:
    blocker = write(tmp_path / "replies", "x")
    folder = blocker if kind == "file" else blocker / "inner"
    with pytest.raises(OSError, match="replies_dir .* cannot be written"):
        calidist_tasks.evaluate("hf", ["calidist_ppdb_assertion_cot"], replies_dir=str(folder),
                                model_args="pretrained=/no/such/model")


# ---------------------------------------------------------------- saved fits
FIT = {"kind": "calidist", "lambda_scale": "minmax", "method": "grid", "alpha": -5.0,
       "beta": 0.1, "lambda_min": 0.0, "lambda_max": 2.0}


@pytest.mark.parametrize(("field", "value", "words"), [
    ("alpha", 3.14159, "not a point of the alpha grid"),
    ("beta", 1.2345, "not a point of the beta grid"),
    ("lambda_max", 1e308, "is no lambda_raw"),
    ("lambda_min", -1e308, "is no lambda_raw"),
])
def test_a_grid_fit_off_its_grid_or_with_impossible_bounds_is_refused(field, value, words):
    with pytest.raises(ValueError, match=f"invalid field '{field}': .*{words}"):
        CaliDistCalibrator.from_dict({**FIT, field: value})
    CaliDistCalibrator.from_dict(FIT)  # the same file on its grid loads


def test_a_saved_fit_with_a_delta_mode_no_fit_writes_is_refused_at_task_build(
        tmp_path: Path, ppdb_data_dir: Path) -> None:
    from calidist_metrics import save_calibrator

    task = "calidist_ppdb_assertion"
    calibrator = CaliDistCalibrator.from_dict(FIT)
    path = tmp_path / "fit.json"
    save_calibrator(calibrator, path, task=task, labels=["(a)", "(b)"], model=None,
                    delta_mode="bogus")
    refused(task, {"data_dir": str(ppdb_data_dir), "calib_size": 5, "calibrator": str(path)},
            "fit.json", "'delta_mode' is 'bogus'", "mean, worst_case")


# ---------------------------------------------------------------- earlier runs
WHERE = "calidist_ppdb_assertion: original_run s.jsonl line 1: document 0 (test.tsv:2)"


@pytest.mark.parametrize(("prediction", "letters", "words"), [
    ("1", None, "stage-1 prediction '1' is not an option index"),
    (1.0, None, "stage-1 prediction 1.0 is not an option index"),
    (0, (0.5, -1.2), "hold 0.5; a log-probability is a finite number at most 0"),
    (0, (-math.inf, -0.1), "hold -inf"),
    (0, (math.nan, -0.1), "hold nan"),
    (0, ("-0.1", -0.2), "hold '-0.1'"),
])
def test_a_stage1_answer_no_run_gives_is_refused_naming_the_document(prediction, letters, words):
    with pytest.raises(ValueError) as caught:
        check_stage1_answer(Outcome(prediction, 0.6, letters, True), 2, WHERE)
    assert str(caught.value).startswith(WHERE) and words in str(caught.value)


def _logged(model: str | None) -> dict[int, Logged]:
    record = {"prediction": 0, "split": "evaluation", "index": 0}
    return {0: Logged(1, {}, {**record, "model": model} if model else record)}


def test_an_earlier_run_of_another_model_is_refused_from_its_records(tmp_path: Path) -> None:
    file = write(tmp_path / "samples_t_2026-01-01T00-00-00.jsonl", "{}\n")
    with pytest.raises(ValueError, match=r"line 1: answered by model 'A', not this run's 'B'"):
        check_model(file, "t: original_run", "B", _logged("A"))
    check_model(file, "t: original_run", "B", _logged("B"))
    check_model(file, "t: original_run", None, _logged("A"))  # this run's model unknown


def test_an_earlier_run_that_names_no_model_is_refused(tmp_path: Path) -> None:
    file = write(tmp_path / "samples_t_2026-01-01T00-00-00.jsonl", "{}\n")
    with pytest.raises(ValueError, match="neither its records nor a results file"):
        check_model(file, "t: original_run", "B", _logged(None))
    write(tmp_path / "results_2026-01-01T00-00-00.json",
          json.dumps({"config": {"model_args": "pretrained=B,dtype=float32"}}))
    check_model(file, "t: original_run", "B", _logged(None))  # the results file names it


# ---------------------------------------------------------------- data files
def test_a_copy_differing_only_by_invisible_or_compatibility_characters_is_a_copy(
        tmp_path: Path) -> None:
    rows = [json.loads(line) for line in mnli_lines(6)]
    evaluation = write(tmp_path / "eval.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    copy = {**rows[0], "premise": "\u200b" + rows[0]["premise"].replace("cat", "c\u200bat"),
            "hypothesis": rows[0]["hypothesis"].replace("A", "\uff21")}  # fullwidth A: NFKC
    others = [json.loads(line) for line in mnli_lines(12)[6:]]
    calibration = write(tmp_path / "calib.jsonl",
                        "".join(json.dumps(r) + "\n" for r in [copy, *others]))
    task = load_task(MNLI, {"data_files": {"evaluation": str(evaluation),
                                           "calibration": str(calibration)},
                            "calib_size": 6, "eval_size": "all"})
    calibration_docs = [d for d in task.eval_docs if d[SPLIT_FIELD] == "calibration"]
    assert len(calibration_docs) == 6
    assert all("c\u200bat" not in d["premise"] for d in calibration_docs)


@pytest.mark.parametrize("how", ["copy", "hard link"])
def test_a_calibration_file_that_is_the_evaluation_file_is_refused(tmp_path: Path, how: str):
    evaluation = write(tmp_path / "eval.jsonl", "\n".join(mnli_lines(8)) + "\n")
    calibration = tmp_path / "calib.jsonl"
    if how == "copy":
        calibration.write_bytes(evaluation.read_bytes())
    else:
        os.link(evaluation, calibration)
    refused(MNLI, {"data_files": {"evaluation": str(evaluation),
                                  "calibration": str(calibration)}, "calib_size": 2},
            "every one of the 8 calibration rows", "calib.jsonl", "is also an evaluation row")


def test_a_lone_surrogate_in_a_row_is_refused_naming_the_field(tmp_path: Path) -> None:
    rows = mnli_lines(6) + [json.dumps({**MNLI_ROW, "idx": 9, "genre": "\ud800"})]
    path = write(tmp_path / "data.jsonl", "\n".join(rows) + "\n")
    refused(MNLI, {"data_files": str(path), "calib_size": 2, "eval_size": "all"},
            "data.jsonl:7", "field 'genre' holds a lone surrogate")


# ---------------------------------------------------------------- calidist unlink
@pytest.fixture
def linked_root(tmp_path: Path) -> Path:
    root = tmp_path / "lm_eval" / "tasks"
    root.mkdir(parents=True)
    write(root.parent / "__init__.py", "# lm-eval's own\n")
    cli.link(target_root=root)
    return root


def test_unlink_refuses_a_marker_naming_a_file_outside_its_folder(linked_root: Path) -> None:
    marker = linked_root / cli.LINK_NAME / cli.MARKER
    made = json.loads(marker.read_text())
    marker.write_text(json.dumps({**made, "files": [*made["files"], "../../__init__.py"]}))
    with pytest.raises(SystemExit, match=r"names '../../__init__.py', outside .*nothing was "
                                         "removed"):
        cli.unlink(target_root=linked_root)
    assert (linked_root.parent / "__init__.py").read_text() == "# lm-eval's own\n"
    assert all((linked_root / cli.LINK_NAME / name).exists() for name in made["files"])


def test_unlink_refuses_a_read_only_folder_before_removing_anything(linked_root: Path,
                                                                    monkeypatch) -> None:
    dest = linked_root / cli.LINK_NAME
    made = json.loads((dest / cli.MARKER).read_text())["files"]
    locked = dest / Path(made[-1]).parent
    real_access = os.access
    monkeypatch.setattr(cli.os, "access", lambda path, mode: False if Path(path) == locked
                        else real_access(path, mode))
    with pytest.raises(SystemExit, match="cannot be written; nothing was removed"):
        cli.unlink(target_root=linked_root)
    assert all((dest / name).exists() for name in made)


def test_unlink_returns_what_it_removed(linked_root: Path) -> None:
    dest = linked_root / cli.LINK_NAME
    made = json.loads((dest / cli.MARKER).read_text())["files"]
    removed = cli.unlink(target_root=linked_root)
    assert {dest / name for name in made} | {dest / cli.MARKER, dest} <= set(removed)
    assert not dest.exists()


def test_replies_the_replies_dir_fails_to_take_are_kept_in_a_named_folder(
        tmp_path: Path, monkeypatch) -> None:
    import calidist_tasks
    from calidist_tasks.runs import files, recovery

    task = "calidist_ppdb_assertion_verbalized"
    reply = {"doc_id": 0, "doc": {"x": 1}, "resps": [["(a) 80%"]], "acc": {"index": 0}}
    answered = {"results": {task: {}}, "configs": {task: {}}, "samples": {task: [reply]}}

    def evaluate_once(*args, **kwargs):  # the reply run answers, then saving fails
        return answered

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(calidist_tasks, "_evaluate_once", evaluate_once)
    monkeypatch.setattr(files, "save_like_lm_eval", broken)
    monkeypatch.setenv(recovery.RECOVERED_DIR_VARIABLE, str(tmp_path / "recovered"))
    with pytest.raises(recovery.ResultsNotSaved, match="No space left on device.*saved in") as e:
        calidist_tasks.evaluate("hf", ["calidist_ppdb_assertion_cot"],
                                replies_dir=str(tmp_path / "replies"))
    kept = Path(str(e.value).split("it is saved in ")[1].split(":")[0])
    (samples,) = kept.glob(f"samples_{task}_*.jsonl")
    assert json.loads(samples.read_text())["resps"] == [["(a) 80%"]]
