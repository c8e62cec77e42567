"""The bundled data samples ship with their licences, and the README states the non-commercial
one."""

from fnmatch import fnmatchcase
from pathlib import Path

import tomllib

ROOT = Path(__file__).parents[2]


def test_every_bundled_sample_has_its_licence_in_the_package_data() -> None:
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))[
        "tool"]["setuptools"]["package-data"]["calidist_tasks"]
    samples = ROOT / "calidist_tasks" / "sample_data"
    folders = [f for f in samples.iterdir() if f.is_dir()]
    assert folders
    for folder in folders:
        licence = (folder / "LICENSE").relative_to(ROOT / "calidist_tasks").as_posix()
        assert (folder / "LICENSE").is_file(), folder
        assert any(fnmatchcase(licence, pattern) for pattern in patterns), licence


def test_readme_states_the_twitter_url_corpus_licence() -> None:
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    licence = (ROOT / "calidist_tasks/sample_data/twitter_url_corpus/LICENSE").read_text(
        encoding="utf-8")
    assert "CC BY-NC-SA 3.0, non-commercial use only" in readme
    assert "CC BY-NC-SA 3.0" in licence  # what the README states is what ships
