"""Other names for our ``--metadata`` keys (``calibration_size``, ``n_calib``, ...) were ignored
in silence: the near-miss check found misspellings only. Each is refused with ours suggested;
lm-eval's model arguments (merged into the metadata) and GSM8K's ``original_samples`` still
pass."""

from __future__ import annotations

import pytest

from calidist_tasks import settings
from calidist_tasks.settings import RunSettings
from reliability.support import refused
from reliability.test_metadata_inputs import KNOWN, lm_eval_model_arguments

CASES = [("calibration_size", "calib_size"), ("n_calib", "calib_size"),
         ("num_calibration", "calib_size"), ("evaluation_size", "eval_size"),
         ("n_eval", "eval_size"), ("test_size", "eval_size"), ("template_seed", "seed"),
         ("data_seed", "split_seed"), ("shuffle_seed", "split_seed"), ("num_distractors", "m"),
         ("hints_per_label", "m"), ("data_path", "data_dir"), ("files", "data_files"),
         ("load_calibrator", "calibrator"), ("calibrator_out", "save_calibrator"),
         ("instability", "delta_mode"), ("stage1_run", "original_run")]


def _refused_for(name: str, meant: str) -> None:
    with pytest.raises(ValueError, match=rf"unknown --metadata key '{name}'; did you mean "
                                         rf"'{meant}'\?"):
        RunSettings.from_metadata({name: 100})


@pytest.mark.parametrize(("name", "meant"), CASES, ids=[name for name, _ in CASES])
def test_a_synonym_is_refused_with_our_key(name: str, meant: str) -> None:
    _refused_for(name, meant)


def test_every_synonym_of_the_table_is_refused_with_its_key() -> None:
    for key, names in settings.SYNONYMS.items():
        for name in names:
            _refused_for(name, key)


@pytest.mark.parametrize("name", ["Calibration-Size", "N_CALIB"])
def test_synonyms_are_found_whatever_the_case_and_dashes(name: str) -> None:
    with pytest.raises(ValueError, match="did you mean 'calib_size'"):
        RunSettings.from_metadata({name: 100})


def test_the_synonym_table_names_our_keys_only_and_no_lm_eval_argument() -> None:
    assert set(settings.SYNONYMS) <= set(KNOWN)
    names = {name for names in settings.SYNONYMS.values() for name in names}
    assert not names & (lm_eval_model_arguments() | set(KNOWN) | {"original_samples"})


@pytest.mark.parametrize(("name", "meant"), [("calib_seed", "split_seed"),
                                             ("load_calibrator", "calibrator"),
                                             ("calibrator_out", "save_calibrator")])
def test_a_synonym_wins_over_the_closest_spelling(name: str, meant: str) -> None:
    """difflib alone suggests calib_size, save_calibrator and calibrator for these."""
    _refused_for(name, meant)


def test_a_task_is_not_built_with_calibration_size(ppdb_data_dir) -> None:
    """Through the task as lm-eval builds it: the run would otherwise use calib_size 200."""
    refused("calidist_ppdb", {"data_dir": str(ppdb_data_dir), "calibration_size": 5},
            "'calibration_size'", "did you mean 'calib_size'")
