"""The variant YAML files are generated (yaml_tasks/_generate_configs.py), never edited by hand:
regenerating them changes no byte, and every family folder holds exactly the generated set."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from types import ModuleType

import pytest

YAML_TASKS = Path(__file__).resolve().parents[2] / "yaml_tasks"
FIX = "run `python yaml_tasks/_generate_configs.py` and commit the result"


def _load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "_generate_configs", YAML_TASKS / "_generate_configs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen = _load_generator()
FAMILIES = gen.families()


def test_every_task_folder_is_generated_or_hand_written() -> None:
    assert {"mnli", "ppdb", "aqua"} <= set(FAMILIES) and "gsm8k" not in FAMILIES
    # a new folder with a _template_yaml is a family; GSM8K's stages are written by hand
    with_yaml = {p.parent.name for p in YAML_TASKS.glob("*/*.yaml")}
    assert with_yaml == set(FAMILIES) | set(gen.HAND_WRITTEN)


@pytest.mark.parametrize("benchmark", FAMILIES)
def test_regenerating_changes_no_byte(benchmark: str, tmp_path: Path) -> None:
    gen.generate(benchmark, tmp_path)
    committed = YAML_TASKS / benchmark
    differing = [p.name for p in sorted(tmp_path.iterdir())
                 if not (committed / p.name).is_file()
                 or (committed / p.name).read_bytes() != p.read_bytes()]
    assert not differing, f"{benchmark}: {differing} differ from the generator; {FIX}"


@pytest.mark.parametrize("benchmark", FAMILIES)
def test_family_holds_exactly_the_generated_variants(benchmark: str) -> None:
    found = {p.name for p in (YAML_TASKS / benchmark).glob("*.yaml")}
    expected = {f"calidist_{benchmark}{suffix}.yaml" for suffix in [*gen.variants(), "_all"]}
    assert found == expected, (f"{benchmark}: extra {sorted(found - expected)}, "
                               f"missing {sorted(expected - found)}; {FIX}")


def test_check_names_the_files_that_differ_and_a_run_fixes_them(tmp_path: Path, capsys) -> None:
    root = tmp_path / "yaml_tasks"
    shutil.copytree(YAML_TASKS, root, ignore=shutil.ignore_patterns("__pycache__"))
    assert gen.main(["--check"], root=root) == 0
    (root / "csqa" / "calidist_csqa_probe.yaml").write_text("task: calidist_csqa_probe\n")
    (root / "aqua" / "calidist_aqua_spuq.yaml").unlink()
    (root / "aqua" / "calidist_aqua_extra.yaml").write_text("task: calidist_aqua_extra\n")
    capsys.readouterr()

    assert gen.main(["--check"], root=root) == 1
    err = capsys.readouterr().err
    for entry in ("calidist_csqa_probe.yaml (differs)", "calidist_aqua_spuq.yaml (missing)",
                  "calidist_aqua_extra.yaml (not generated)"):
        assert entry in err
    assert "calidist_mnli" not in err

    assert gen.main(["--benchmark", "csqa"], root=root) == 0  # one family alone
    assert "calidist_csqa_probe.yaml" in capsys.readouterr().out
    assert gen.main(["--check", "--benchmark", "csqa"], root=root) == 0
    assert gen.main(["--check"], root=root) == 1  # aqua still out of date
    assert gen.main([], root=root) == 1  # writes aqua's variants; the extra file stays, named
    assert "calidist_aqua_extra.yaml (not generated)" in capsys.readouterr().err
    (root / "aqua" / "calidist_aqua_extra.yaml").unlink()
    assert gen.main(["--check"], root=root) == 0
