"""Bad input in a JSON release: ContractNLI's official train/dev/test.json. The basic cases (an
unknown choice, no 'labels', no 'annotation_sets') are in tests/test_families.py."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from conftest import load_task
from family_data import contractnli_release
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calidist_tasks.settings import RunSettings
from reliability.support import refused, write

TASK = "calidist_contractnli"
RELEASE = contractnli_release(3, "test")  # 3 documents x 3 hypotheses


def files(tmp_path: Path, content: str | bytes) -> dict:
    path = write(tmp_path / "test.json", content)
    return {"data_files": {"evaluation": str(path)}, "calib_size": 2}


def broken(change) -> str:
    release = copy.deepcopy(RELEASE)
    change(release)
    return json.dumps(release)


def _set(path: list, value):
    def change(release: dict) -> None:
        target = release
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return change


ANNOTATION = ["documents", 1, "annotation_sets", 0, "annotations", "nda-2"]
BAD_RELEASES = {  # content, words the error must name
    "empty file": ("", ["test.json"]),
    "truncated": (json.dumps(RELEASE)[:-40], ["test.json", "not the ContractNLI JSON release"]),
    "not UTF-8": (json.dumps(RELEASE).encode().replace(b"Contract", b"Contr\xe0ct", 1),
                  ["test.json"]),
    "a list, not the release object": (json.dumps([RELEASE]), ["test.json", "documents"]),
    "documents is an object": (broken(_set(["documents"], {"0": {}})), ["test.json"]),
    "no documents": (broken(_set(["documents"], [])), ["test.json", "no rows"]),
    "labels is a list": (broken(_set(["labels"], ["nda-1"])), ["test.json", "'labels'"]),
    "a document is a string": (broken(_set(["documents", 1], "text")),
                               ["test.json documents[1]", "annotation_sets"]),
    "annotation_sets is an object": (broken(_set(["documents", 1, "annotation_sets"], {"a": 1})),
                                     ["test.json", "contractnli format"]),
    "annotation set is a number": (broken(_set(["documents", 1, "annotation_sets"], [7])),
                                   ["test.json", "contractnli format"]),
    "annotation is a string": (broken(_set(ANNOTATION, "Entailment")),
                               ["test.json", "contractnli format"]),
    "choice missing": (broken(lambda r: r["documents"][1]["annotation_sets"][0]["annotations"]
                              ["nda-2"].pop("choice")),
                       ["test.json documents[1] nda-2", "'choice'", "None"]),
    "choice in lower case": (broken(_set([*ANNOTATION, "choice"], "entailment")),
                             ["test.json documents[1] nda-2", "'entailment'"]),
    "hypothesis key not in labels": (broken(lambda r: r["labels"].pop("nda-3")),
                                     ["test.json documents[0]", "'nda-3'", "'labels'"]),
    "hypothesis entry is a string": (broken(_set(["labels", "nda-1"], "Keep it secret.")),
                                     ["test.json", "contractnli format"]),
    "hypothesis text is a number": (broken(_set(["labels", "nda-1", "hypothesis"], 5)),
                                    ["test.json documents[", "nda-1", "'hypothesis' holds a"]),
    "document text missing": (broken(lambda r: r["documents"][2].pop("text")),
                              ["test.json documents[2]", "'contract'"]),
    "document text empty": (broken(_set(["documents", 2, "text"], "  ")),
                            ["test.json documents[2]", "'contract'"]),
    "document text is a list": (broken(_set(["documents", 2, "text"], ["a", "b"])),
                                ["test.json documents[2]", "'contract' must be text"]),
}


@pytest.mark.parametrize("case", sorted(BAD_RELEASES))
def test_bad_releases_name_the_file_and_place(case: str, tmp_path: Path) -> None:
    content, words = BAD_RELEASES[case]
    refused(TASK, files(tmp_path, content), *words)


def test_the_release_reads_one_example_per_document_and_hypothesis(tmp_path: Path) -> None:
    """Documented fallbacks: extra fields (file_name, spans, short_description) are ignored;
    hypotheses a document does not annotate give no example."""
    release = copy.deepcopy(RELEASE)
    release["documents"][0]["annotation_sets"][0]["annotations"].pop("nda-1")
    release["documents"][0]["extra"] = {"anything": [1, 2]}
    task = load_task(TASK, {**files(tmp_path, json.dumps(release)), "calib_size": 2})
    assert len(task.eval_docs) == 3 * 3 - 1
    assert {d["label"] for d in task.eval_docs} == {0, 1, 2}


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=6),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=8)
_PLACES = [["documents"], ["labels"], ["documents", 0], ["documents", 0, "annotation_sets"],
           ["documents", 0, "annotation_sets", 0], ["documents", 0, "annotation_sets", 0,
                                                    "annotations"], ANNOTATION,
           [*ANNOTATION, "choice"], ["labels", "nda-2"], ["labels", "nda-2", "hypothesis"],
           ["documents", 2, "text"], ["documents", 2, "id"]]
_TASKS: dict = {}


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(place=st.sampled_from(_PLACES), value=_JSON)
def test_fuzzed_releases_give_documents_or_a_value_error(tmp_path_factory, place, value) -> None:
    """Any JSON value anywhere in the release: documents, or a ValueError naming the file."""
    folder = tmp_path_factory.mktemp("fuzz")
    path = write(folder / "test.json", broken(_set(place, value)))
    if not _TASKS:
        seed = write(folder / "seed.json", json.dumps(RELEASE))
        _TASKS["task"] = load_task(TASK, {"data_files": {"evaluation": str(seed)},
                                          "calib_size": 2})
    task = _TASKS["task"]
    task.settings = RunSettings(data_files={"evaluation": str(path)}, calib_size=2)
    try:
        task.download()
    except ValueError as error:
        assert "test.json" in str(error) or "contractnli" in str(error), error
        return
    assert all(d["label"] in (0, 1, 2) and isinstance(d["contract"], str | int | float)
               for d in task.eval_docs)
