"""The method registry (``calidist_tasks.registry``): one definition per variant and method, and
a new distractor style added by touching only the registry and the style's own class
(docs/architecture.md, "To add ...")."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest
from conftest import assert_report_rebuilds_results

from calidist_tasks import registry as methods
from calidist_tasks.data.yaml_configs import task_configs
from calidist_tasks.prompting import distractors, styles
from calidist_tasks.prompting.parts import HINT
from calidist_tasks.scoring import fits
from calidist_tasks.scoring.joining import PromptPlan
from calidist_tasks.scoring.records import CALIDIST, metric_name

FRIEND_HINT = "Hint: a friend picked"


class Friend(styles.Probe):
    """A toy style: "Hint: a friend picked (x) option." (one fixed template, like probe)."""

    name = "friend"

    def hinted_copy(self, doc: dict, plan: PromptPlan, choices: list[str]) -> dict:
        label = plan.hint_label
        return {**doc, HINT: f"{FRIEND_HINT} ({distractors.LETTERS[label]}) {choices[label]}."}


@pytest.fixture
def friend(monkeypatch: pytest.MonkeyPatch):
    """The toy style registered: its class, its variant and its CaliDist row (undone after)."""
    variant = methods.Variant("friend", "friend", short="Fr.")
    row = methods.Method("CaliDist (Fr.)", ("friend",), CALIDIST, fits.calidist_fit)
    monkeypatch.setitem(styles.STYLES, "friend", Friend)
    saved = [*methods.VARIANTS], [*methods.METHODS]
    methods.register(variant, row)
    yield variant, row
    methods.VARIANTS[:], methods.METHODS[:] = saved


def test_every_generated_task_is_a_registered_variant() -> None:
    """Each task of our YAML folder is found by its config, never by its name: the config's
    style and confidence name a registered variant whose suffix the task's name carries."""
    configs = task_configs()
    # GSM8K's generation stages (a worked answer, the hinted chains) only feed the next stage
    stages = {name for name, c in configs.items()
              if c.get("output_type") == "generate_until" and not c.get("confidence")}
    assert stages == {"calidist_gsm8k", "calidist_gsm8k_assertion_chains"}
    assert all(methods.task_variant(name)[1] is None for name in stages)
    tasks = {name: c for name, c in configs.items() if "task" in c and "group" not in c
             and name not in stages}
    assert len(tasks) >= 8 * len(methods.VARIANTS)
    for name in tasks:
        benchmark, variant = methods.task_variant(name)
        assert variant is not None, name
        assert name == f"calidist_{benchmark}{variant.suffix}"
    # every variant reports at least one method, and every method belongs to a variant
    names = {v.name for v in methods.VARIANTS}
    assert all(methods.methods_of(v) for v in methods.VARIANTS)
    assert all(set(m.variants) <= names for m in methods.METHODS)
    assert len({m.label for m in methods.METHODS}) == len(methods.METHODS)


def test_metric_names_follow_the_registry(friend) -> None:
    """A task's metric names are its methods' confidences: a new CaliDist row adds no metric
    (its confidence is CaliDist's), a new confidence would."""
    assert metric_name("ece", CALIDIST) in methods.metric_names(True)
    assert methods.fitted_methods(True)[0].confidence == CALIDIST
    before = methods.metric_names(False)
    methods.register(None, methods.Method("Toy", ("",), "toy", fits.platt_scaled))
    assert methods.metric_names(False) == [
        *before[:-len(methods.BASELINE_EXTRAS)], *(metric_name(s, "toy") for s in methods.SCORES),
        *methods.BASELINE_EXTRAS]
    with pytest.raises(ValueError, match="registered already"):
        methods.register(friend[0])


def test_a_new_style_runs_end_to_end(friend, tiny_model_dir: Path, ppdb_data_dir: Path,
                                     tmp_path: Path) -> None:
    """The toy style through lm-eval on the tiny model: its YAML is the generator's, its prompts
    carry its hint, its results file names it in the config lm-eval logs, and ``calidist report``
    rebuilds its CaliDist row from the samples (not from the task's name, which no YAML of ours
    holds)."""
    import lm_eval
    from lm_eval.loggers import EvaluationTracker
    from lm_eval.tasks import TaskManager
    from test_task_yaml_generated import gen

    from calidist_tasks import task_folder
    from calidist_tasks.report import write_report

    folder = tmp_path / "tasks"
    folder.mkdir()
    shutil.copy(Path(task_folder()) / "ppdb" / "_template_yaml", folder / "_template_yaml")
    name = "calidist_ppdb_friend"
    (folder / f"{name}.yaml").write_text(gen.render("ppdb")[f"{name}.yaml"], encoding="utf-8")
    manager = TaskManager(include_path=str(folder), include_defaults=False,
                          metadata={"data_dir": str(ppdb_data_dir), "calib_size": 6,
                                    "eval_size": 6})
    tracker = EvaluationTracker(output_path=str(tmp_path / "lm"))
    results = lm_eval.simple_evaluate(
        model="hf", model_args=f"pretrained={tiny_model_dir},dtype=float32", tasks=[name],
        task_manager=manager, batch_size=8, device="cpu", log_samples=True, bootstrap_iters=0,
        evaluation_tracker=tracker)
    samples = results.pop("samples")
    for doc in samples[name]:  # the original prompt, then m = 1 hinted prompt per label
        prompts = list(dict.fromkeys(arg[0] for arg in doc["arguments"]))
        assert [FRIEND_HINT in p.rpartition("Sentence1:")[2] for p in prompts] == [
            False, True, True], prompts
    assert len(samples[name]) == 12  # calibration and evaluation documents
    assert results["configs"][name]["metadata"]["distractor"] == "friend"  # logged
    assert set(methods.metric_names(True)) <= {k.split(",")[0] for k in results["results"][name]}
    tracker.save_results_aggregated(results=results, samples=samples)
    tracker.save_results_samples(task_name=name, samples=samples[name])

    assert assert_report_rebuilds_results(tmp_path / "lm") == [name]
    report = write_report([tmp_path / "lm"], tmp_path / "out", (), n_resamples=20)
    assert report.problems == []
    with open(tmp_path / "out" / "leaderboard.csv", encoding="utf-8") as file:
        (row,) = list(csv.DictReader(file))
    assert row["method"] == "CaliDist (Fr.)"  # rebuilt from the samples: no problem above
    assert float(row["ppdb_ece"]) == pytest.approx(100 * results["results"][name]["ece,none"],
                                                   abs=1e-4)


def test_logprob_rows_name_the_metrics_the_aggregation_reports() -> None:
    """A verbalized task's log-prob rows (a chat API's second reading of its replies) are the
    ``*_logprob`` metrics its aggregation adds, and add none to the task's own list."""
    from calidist_tasks.scoring.aggregation import logprob_metric_names
    from calidist_tasks.scoring.records import LOGPROB, VERBALIZED

    for variant in (v for v in methods.VARIANTS if v.confidence == VERBALIZED):
        rows = [m for m in methods.methods_of(variant) if m.reading == LOGPROB]
        assert [m.label for m in rows][0] == "Vanilla (log-prob)"
        assert len(rows) == (2 if variant.distracted else 5), variant.name
        reported = logprob_metric_names(variant.distracted)
        assert all(m.metric(s) in reported for m in rows for s in methods.SCORES)
        assert not any(LOGPROB in name for name in methods.metric_names(variant.distracted,
                                                                         VERBALIZED))


def test_each_row_is_paired_with_the_vanilla_and_ts_of_its_own_protocol():
    from calidist_tasks.registry import METHODS, paired_references

    labels = {m.label for m in METHODS}
    for method in METHODS:
        references = paired_references(method)
        assert set(references.values()) <= labels, (method.label, references)
    by_label = {m.label: m for m in METHODS}
    assert paired_references(by_label["CaliDist reasoned (As.)"])["Vanilla"] == "Vanilla (reasoned)"
    assert paired_references(by_label["Verbalized (reasoned)"])["TS"] == (
        "Temperature scaling (reasoned)")
    assert paired_references(by_label["CaliDist log-prob (As.)"])["Vanilla"] == (
        "Vanilla (log-prob)")
    assert paired_references(by_label["CaliDist (As.)"]) == {"Vanilla": "Vanilla",
                                                              "TS": "Temperature scaling"}
