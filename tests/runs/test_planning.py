"""The one planner of multi-run selections (``runs.planning.plan_runs``): the reply run before
the ``_cot`` tasks, stage 1 before stage 2, as data both executors carry out."""

from __future__ import annotations

from calidist_tasks.runs import planning
from calidist_tasks.runs.planning import HINTS, ONE_STAGE, ORIGINAL, plan_runs


def _shape(runs):
    return [(r.role, r.tasks, dict(r.metadata), dict(r.reads), r.folder) for r in runs]


def test_one_run_when_nothing_needs_another() -> None:
    assert _shape(plan_runs(["calidist_ppdb", "calidist_ppdb_assertion"])) == [
        ("", ("calidist_ppdb", "calidist_ppdb_assertion"), {}, {}, planning.OUTPUT)]


def test_two_stage_runs_the_hinted_tasks_original_prompts_first() -> None:
    assert _shape(plan_runs(["calidist_ppdb", "calidist_ppdb_assertion"], two_stage=True)) == [
        ("stage 1", ("calidist_ppdb_assertion",), {"stage": ORIGINAL}, {}, planning.STAGE1),
        ("", ("calidist_ppdb", "calidist_ppdb_assertion"), {"stage": HINTS},
         {"original_run": planning.STAGE1}, planning.OUTPUT)]


def test_reasoned_tasks_run_their_replies_first() -> None:
    assert _shape(plan_runs(["calidist_ppdb_assertion_cot"])) == [
        ("replies", ("calidist_ppdb_assertion_verbalized",), ONE_STAGE, {}, planning.REPLIES),
        ("", ("calidist_ppdb_assertion_cot",), {}, {"replies": planning.REPLIES},
         planning.OUTPUT)]
    # replies named already (--metadata replies): one run
    assert len(plan_runs(["calidist_ppdb_assertion_cot"], replies_given=True)) == 1


def test_two_stage_reasoned_tasks_split_the_reply_run_too() -> None:
    runs = plan_runs(["calidist_ppdb_assertion_cot", "calidist_ppdb_probe"], two_stage=True)
    assert [(r.role, r.folder) for r in runs] == [
        ("replies stage 1", planning.REPLIES_STAGE1), ("replies", planning.REPLIES),
        ("stage 1", planning.STAGE1), ("", planning.OUTPUT)]
    assert runs[1].reads == {"original_run": planning.REPLIES_STAGE1}
    assert runs[2].tasks == ("calidist_ppdb_probe",)  # the _cot task is not split
    assert runs[3].reads == {"replies": planning.REPLIES, "original_run": planning.STAGE1}
    assert runs[3].tasks == ("calidist_ppdb_assertion_cot", "calidist_ppdb_probe")


def test_a_group_is_expanded_and_its_reply_tasks_run_once() -> None:
    runs = plan_runs(["calidist_ppdb_all"])
    assert len(runs) == 2
    assert set(runs[0].tasks) == {f"calidist_ppdb{s}_verbalized"
                                  for s in ("", "_assertion", "_probe", "_corruption")}
    assert not set(runs[0].tasks) & set(runs[1].tasks)
    assert "calidist_ppdb_cot" in runs[1].tasks
