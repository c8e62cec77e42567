"""A wrapped group is one calibration pool (issue #35, docs/wrap.md "Groups: one calibration pool").

lm-eval 0.4.13's own registered ``mmlu_anatomy``, ``mmlu_astronomy`` and ``mmlu_virology``
configs, their data pointed at small local files in MMLU's schema (written here, one
``--metadata data_files`` mapping for all three through "{task}"), wrapped as one pool and run
through lm-eval in this process on ``calidist-fake`` (a deterministic stand-in model): every
member is fitted on the three members' calibration documents, reports its own evaluation
documents with that fit, and the group's row holds the scores over all evaluation documents.
"""

from __future__ import annotations

import json
import math

import pytest
import reliability.models  # noqa: F401  (registers calidist-fake)

from calidist_tasks.scoring.aggregation import summarize_baselines, summarize_calidist
from calidist_tasks.scoring.records import CALIBRATION, EVALUATION, line_record
from calidist_tasks.settings import RunSettings
from calidist_tasks.tasks.wrapped import POOLS, calibration_share, wrap

SUBJECTS = {"mmlu_anatomy": 12, "mmlu_astronomy": 14, "mmlu_virology": 16}  # test documents
POOL = "mmlu3"
CALIB_SIZE = 9  # the pool's: 3 per member
SCORES = ("ece", "brier", "auroc", "nll", "ece_vanilla")


def mmlu_rows(subject: str, n: int) -> list[dict]:
    return [{"question": f"Which {subject} fact is number {i}?", "subject": subject,
             "choices": [f"{subject} {i}-{k}" for k in range(4)], "answer": (i * 3 + 1) % 4}
            for i in range(n)]


@pytest.fixture(autouse=True)
def recovered_here(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("CALIDIST_RECOVERED_DIR", str(tmp_path))  # a failed run's records


@pytest.fixture(scope="module")
def pooled(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("pool")
    for task, n in SUBJECTS.items():
        subject = task.removeprefix("mmlu_")
        (root / f"{task}_test.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in mmlu_rows(subject, n)), encoding="utf-8")
    folder = root / "wrapped"
    written = wrap(list(SUBJECTS), folder, pool=POOL)
    metadata = {"data_files": {"test": str(root / "{task}_test.jsonl")},
                "calib_size": CALIB_SIZE, "eval_size": "all", "m": 1}
    return {"folder": folder, "written": written, "metadata": metadata}


def run(pooled: dict, tasks: list[str]) -> dict:
    import lm_eval
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_path=str(pooled["folder"]), include_defaults=False,
                          metadata=pooled["metadata"])
    return lm_eval.simple_evaluate(model="calidist-fake", model_args="", tasks=tasks,
                                   task_manager=manager, log_samples=True, bootstrap_iters=0)


def members(variant: str) -> list[str]:
    return [f"calidist_{task}{variant}" for task in sorted(SUBJECTS)]


def records(out: dict, task: str) -> list[dict]:
    return [line_record(line) for line in out["samples"][task]]


def test_wrap_writes_the_pool_and_its_groups(pooled):
    names = {p.stem for p in pooled["written"]}
    for variant in ("", "_assertion", "_probe"):
        assert f"calidist_{POOL}{variant}" in names
        assert set(members(variant)) <= names
        text = (pooled["folder"] / f"calidist_mmlu_anatomy{variant}.yaml").read_text()
        assert f'pool: "calidist_{POOL}{variant}"' in text
        assert json.dumps(members(variant)) in text
    group = (pooled["folder"] / f"calidist_{POOL}_assertion.yaml").read_text()
    assert "metric: ece_pooled, aggregation: mean, weight_by_size: false" in group
    # each member's share of the pool's calib_size, by member name: 9 -> 3, 3, 3; 10 -> 4, 3, 3
    assert [calibration_share(10, m, members("")) for m in members("")] == [4, 3, 3]
    assert [calibration_share(9, m, members("")) for m in members("")] == [3, 3, 3]


def test_a_group_given_is_a_pool_a_tag_is_not(tmp_path):
    from calidist_tasks.backends.lm_eval_compat import member_names

    written = {p.stem for p in wrap(["mmlu_stem"], tmp_path, acc_norm=False)}
    assert "calidist_mmlu_stem_assertion" in written  # lm-eval's group mmlu_stem: a pool
    text = (tmp_path / "calidist_mmlu_anatomy_assertion.yaml").read_text()
    assert 'pool: "calidist_mmlu_stem_assertion"' in text
    assert len(json.loads(text.rpartition("pool_members: ")[2])) == len(member_names("mmlu_stem"))
    tag = {p.stem for p in wrap(["ai2_arc"], tmp_path / "tag", acc_norm=False)}
    assert "calidist_ai2_arc" not in tag
    assert "pool:" not in (tmp_path / "tag" / "calidist_arc_easy.yaml").read_text()
    unpooled = tmp_path / "none"
    wrap(["mmlu_stem"], unpooled, acc_norm=False, pool=False)
    assert not (unpooled / "calidist_mmlu_stem.yaml").exists()
    with pytest.raises(ValueError, match="would be in two calibration pools"):
        wrap(["mmlu_stem", "mmlu"], tmp_path / "two", acc_norm=False)


@pytest.mark.parametrize("variant", ["_assertion", ""])
def test_every_member_is_fitted_on_the_pool(pooled, variant):
    out = run(pooled, [f"calidist_{POOL}{variant}"])
    numbers = out["results"]
    names = members(variant)
    settings = RunSettings.from_metadata(pooled["metadata"])
    every = {name: records(out, name) for name in names}
    for name in names:  # each member's calibration documents: its share, 3
        assert sum(r["split"] == CALIBRATION for r in every[name]) == 3
    calibration = [r for name in names for r in every[name] if r["split"] == CALIBRATION]
    summarize = summarize_calidist if variant else summarize_baselines
    for name in names:
        row = numbers[name]
        assert row["n_calibration,none"] == CALIB_SIZE  # the pool's, not the member's 3
        own = [r for r in every[name] if r["split"] == EVALUATION]
        context = {"task": name}
        expected = summarize([dict(r) for r in calibration + own], settings, context)
        alone = summarize([dict(r) for r in every[name]], settings, context)
        assert alone["n_calibration"] == 3
        shown = ("alpha", "beta", *SCORES) if variant else ("temperature", "ece_ts",
                                                             "ece_platt", "ece_isotonic")
        for score in shown:
            assert row[f"{score},none"] == pytest.approx(expected[score], abs=1e-12), score
        # a member fitted alone would differ (its 3 calibration documents only)
        differs = [s for s in shown if not math.isclose(alone[s], expected[s], abs_tol=1e-9)]
        assert differs, f"{name}: the pooled fit equals the member's own"
    fits = {json.dumps([numbers[n][f"{s},none"] for s in (
        ("alpha", "beta") if variant else ("temperature",))]) for n in names}
    assert len(fits) == 1  # one fit for every member
    # the pooled row: every member's evaluation documents with the pool's fit
    evaluation = [r for name in names for r in every[name] if r["split"] == EVALUATION]
    pooled_scores = summarize([dict(r) for r in calibration + evaluation], settings,
                              {"task": f"calidist_{POOL}{variant}"})
    group = numbers[f"calidist_{POOL}{variant}"]
    assert group["acc_pooled,none"] == pytest.approx(
        sum(r["correct"] for r in evaluation) / len(evaluation))
    assert group["n_evaluation_pooled,none"] == len(evaluation) == 42 - CALIB_SIZE
    for score in ("ece_vanilla", "brier_vanilla", *(("ece", "auroc") if variant else ("ece_ts",))):
        assert group[f"{score}_pooled,none"] == pytest.approx(pooled_scores[score], abs=1e-12)
        assert numbers[names[0]][f"{score}_pooled,none"] == pytest.approx(pooled_scores[score],
                                                                           abs=1e-12)
    metadata = out["configs"][names[0]]["metadata"]["calibration_pool"]
    assert metadata == {"name": f"calidist_{POOL}{variant}", "members": names, "calib_share": 3}


def test_the_pool_does_not_depend_on_the_order_of_the_tasks(pooled):
    names = members("_assertion")
    forward = run(pooled, names)["results"]
    backward = run(pooled, names[::-1])["results"]
    for name in names:
        assert {k: v for k, v in forward[name].items() if k != "alias"} == {
            k: v for k, v in backward[name].items() if k != "alias"}


def test_a_member_run_alone_pools_what_runs_and_says_so(pooled, caplog):
    name = members("_assertion")[0]
    with caplog.at_level("WARNING"):
        numbers = run(pooled, [name])["results"][name]
    assert numbers["n_calibration,none"] == 3  # its own share: the other members did not run
    assert "has 1 of its 3 tasks in this run" in caplog.text
    assert POOLS[f"calidist_{POOL}_assertion"].members.keys() == {name}  # a new run's pool
