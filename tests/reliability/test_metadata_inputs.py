"""Bad ``--metadata``: unknown keys, near-misspellings, negative or zero sizes, wrong types, an
unknown style. The basic cases (calib_sise, eval_size "some", calib_size 0, lambda_scale "minmx",
m for probe / corruption) are in tests/test_dataset.py."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import lm_eval.models
import pytest
from lm_eval.tasks import TaskManager

from calidist_tasks import task_folder
from calidist_tasks.settings import RunSettings
from reliability.support import refused

KNOWN = sorted(f.name for f in dataclasses.fields(RunSettings) if not f.metadata.get("internal"))


def lm_eval_model_arguments() -> set[str]:
    """Every constructor argument of every lm-eval model backend (read from the source, since
    vllm, sglang... are not installed here): lm-eval merges --model_args into the metadata."""
    names: set[str] = set()
    for path in Path(lm_eval.models.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and node.name == "__init__":
                names.update(a.arg for a in node.args.args + node.args.kwonlyargs)
    return names - {"self"}


def test_no_lm_eval_model_argument_is_mistaken_for_a_misspelling() -> None:
    names = lm_eval_model_arguments()
    assert {"pretrained", "base_url", "max_length", "tokenizer", "dtype"} <= names
    assert len(names) > 80
    for name in sorted(names):
        RunSettings.from_metadata({name: None})  # raises for a near-miss of one of our keys
    # lm-eval's API backends take a sampling `seed` too: the same key reaches calidist (documented).
    assert names & set(KNOWN) == {"seed"}


@pytest.mark.parametrize("key", ["version", "num_fewshot", "gen_kwargs", "my_note", "run_id",
                                 "calidist", "sizes", "split", "datasets"])
def test_unrelated_keys_pass(key: str) -> None:
    assert RunSettings.from_metadata({key: 1, "calib_size": 7}).calib_size == 7


@pytest.mark.parametrize(("key", "meant"), [
    ("calib-size", "calib_size"), ("Calib_Size", "calib_size"), ("calibsize", "calib_size"),
    ("eval_szie", "eval_size"), ("evalsize", "eval_size"), ("lamda_scale", "lambda_scale"),
    ("lambda-scale", "lambda_scale"), ("delta_mod", "delta_mode"), ("split-seed", "split_seed"),
    ("data_file", "data_files"), ("datafiles", "data_files"), ("data-dir", "data_dir"),
    ("calibrater", "calibrator"), ("save_calibrater", "save_calibrator"),
    ("allow_transfers", "allow_transfer"), ("seeds", "seed"), ("samplng", "sampling"),
])
def test_near_misspellings_are_refused_with_the_intended_key(key: str, meant: str) -> None:
    with pytest.raises(ValueError, match=rf"unknown --metadata key '{key}'; did you mean "
                                         rf"'{meant}'"):
        RunSettings.from_metadata({key: 1})


BAD_VALUES = [
    ("calib_size", -5, "positive integer"), ("calib_size", "20", "positive integer"),
    ("calib_size", 20.0, "positive integer"), ("calib_size", True, "positive integer"),
    ("eval_size", 0, "positive integer"), ("eval_size", -1, "positive integer"),
    ("eval_size", "ALL", "positive integer"), ("eval_size", [10], "positive integer"),
    ("m", 0, "positive integer"), ("m", -2, "positive integer"), ("m", "2", "positive integer"),
    ("seed", "1", "integer"), ("seed", 1.5, "integer"), ("seed", False, "integer"),
    ("split_seed", "0", "integer"), ("allow_transfer", "yes", "true or false"),
    ("allow_transfer", 1, "true or false"), ("lambda_scale", "MinMax", "one of"),
    ("lambda_scale", "", "one of"), ("delta_mode", "max", "one of"),
    ("sampling", "greedy", "one of"),
    ("data_files", 5, "data_files must be a path"), ("data_files", [], "data_files must be"),
    ("data_files", "", "data_files must be"), ("data_files", {}, "data_files must be"),
    ("data_files", {"test": 5}, "data_files must be"), ("data_files", ["a", 3], "data_files must"),
    ("data_dir", 5, "data_dir must be a path"), ("data_dir", " ", "data_dir must be a path"),
    ("calibrator", 5, "calibrator must be a path"),
    ("save_calibrator", ["a.json"], "save_calibrator must be a path"),
]


@pytest.mark.parametrize(("key", "value", "words"), BAD_VALUES,
                         ids=[f"{k}={v!r}" for k, v, _ in BAD_VALUES])
def test_bad_values_are_refused_naming_the_key(key: str, value, words: str) -> None:
    with pytest.raises(ValueError) as error:
        RunSettings.from_metadata({key: value})
    assert f"--metadata {key}" in str(error.value) and words in str(error.value), error.value


def test_null_means_the_default_and_all_means_every_document() -> None:
    settings = RunSettings.from_metadata({"calib_size": None, "eval_size": "all", "m": None})
    assert (settings.calib_size, settings.eval_size, settings.m) == (200, None, None)


def test_bad_metadata_is_refused_when_the_task_is_built(ppdb_data_dir: Path) -> None:
    refused("calidist_ppdb_assertion", {"data_dir": str(ppdb_data_dir), "eval_size": -3},
            "--metadata eval_size", "-3")
    refused("calidist_ppdb_assertion", {"data_dir": str(ppdb_data_dir), "m": 13},
            "m", "13")
    refused("calidist_ppdb_assertion", {"data_dir": 7}, "--metadata data_dir", "7")


def test_unknown_distractor_style_in_yaml_is_refused(tmp_path: Path, ppdb_data_dir: Path) -> None:
    folder = tmp_path / "tasks"
    folder.mkdir()
    template = Path(task_folder()) / "ppdb" / "_template_yaml"
    (folder / "_template_yaml").write_text(template.read_text(encoding="utf-8"), encoding="utf-8")
    (folder / "shouting.yaml").write_text(
        "include: _template_yaml\ntask: calidist_ppdb_shouting\ndistractor: shouting\n",
        encoding="utf-8")
    manager = TaskManager(include_path=str(folder), include_defaults=False,
                          metadata={"data_dir": str(ppdb_data_dir), "calib_size": 5})
    with pytest.raises(ValueError, match=r"calidist_ppdb_shouting: unknown distractor style "
                                         r"'shouting'"):
        manager.load(["calidist_ppdb_shouting"])
