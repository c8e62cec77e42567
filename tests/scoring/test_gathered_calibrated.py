"""Per-document calibrated confidences in a run of several processes (issue 37, item 1).

lm-eval 0.4.13's ``evaluate`` gathers each rank's logged samples and each rank's per-metric values
to rank 0 in two separate ``gather_object`` calls, each pickled apart: rank 0 then holds two
copies of every record, and the aggregation logs the calibrated confidences on one of them only.
Simulated here as lm-eval does it with two ranks: ``process_results``' returns split between the
ranks, the samples and the metrics pickled apart, the metrics aggregated in lm-eval's order.
"""

from __future__ import annotations

import pickle

import pytest
from conftest import load_task
from test_aggregation import make_records

from calidist_tasks.scoring.records import CALIBRATED, CALIBRATED_CORRECT, line_record

pytestmark = pytest.mark.filterwarnings("ignore::calidist_metrics.CalibrationWarning")


def gathered_run(task, records, world_size):
    """What rank 0 holds after lm-eval's two gathers: (samples, {metric: values})."""
    list(task.doc_iterator(rank=0, world_size=world_size))  # lm-eval tells the task its ranks
    returned = [task.metric_results(record) for record in records]
    half = len(returned) // 2
    ranks = [returned[:half], returned[half:]] if world_size > 1 else [returned]
    samples, metrics = [], {}
    for rank in ranks:
        lines = [{"doc_id": r[next(iter(r))]["index"], "filter": "none", "metrics": list(r),
                  **r} for r in rank]
        values = {name: [r[name] for r in rank] for name in rank[0]}
        if world_size > 1:  # each gather pickles its object on its own
            lines, values = pickle.loads(pickle.dumps(lines)), pickle.loads(pickle.dumps(values))
        samples += lines
        for name, found in values.items():
            metrics.setdefault(name, []).extend(found)
    aggregation = task.aggregation()
    results = {name: aggregation[name](values) for name, values in metrics.items()}
    return samples, results


@pytest.mark.parametrize("world_size", [1, 2])
def test_every_logged_sample_holds_its_calibrated_confidences(ppdb_data_dir, world_size):
    metadata = {"data_dir": str(ppdb_data_dir), "calib_size": 10, "eval_size": 20}
    task = load_task("calidist_ppdb_assertion", metadata)
    records = make_records()
    samples, results = gathered_run(task, records, world_size)

    one = load_task("calidist_ppdb_assertion", metadata)
    expected_samples, expected = gathered_run(one, make_records(), 1)
    assert results == pytest.approx(expected, nan_ok=True)  # the same numbers
    assert results["calidist_record"] == len(records)

    logged = {line_record(s)["index"]: line_record(s) for s in samples}
    reference = {line_record(s)["index"]: line_record(s) for s in expected_samples}
    assert len(logged) == len(records)
    evaluation = 0
    for index, record in logged.items():
        if record["split"] == "calibration":
            assert record[CALIBRATED] is None and record[CALIBRATED_CORRECT] is None
            continue
        evaluation += 1
        assert {"calidist", "vanilla"} <= set(record[CALIBRATED]), index
        assert record[CALIBRATED] == pytest.approx(reference[index][CALIBRATED])
        assert record[CALIBRATED_CORRECT] == reference[index][CALIBRATED_CORRECT]
    assert evaluation == 20


def test_per_sample_acc_is_a_number_whose_mean_is_the_tasks_acc(ppdb_data_dir):
    task = load_task("calidist_ppdb_assertion",
                     {"data_dir": str(ppdb_data_dir), "calib_size": 10, "eval_size": 20})
    samples, results = gathered_run(task, make_records(), 2)
    numbers = [s["acc"] for s in samples if s["acc"] is not None]
    assert all(isinstance(v, int) for v in numbers) and len(numbers) == 20
    assert sum(numbers) / len(numbers) == pytest.approx(results["acc"])
    assert all(s["acc"] is None for s in samples if line_record(s)["split"] == "calibration")
