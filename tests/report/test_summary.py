"""The compact table ``calidist eval`` prints (``calibration_table``)."""

from calidist_tasks.report.summary import calibration_table


def _rows(results: dict) -> dict[tuple[str, str], list[str]]:
    lines = calibration_table(results).splitlines()
    assert lines[0].split("|")[-2].strip() == "unreadable"
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:] if "|" in line]
    return {(r[0], r[1]): r[2:] for r in rows}


def test_vector_scaling_row_shows_its_own_accuracy() -> None:
    # vector scaling changes the predictions: its row shows acc_vector, the others the task's acc
    scores = {f"{s}_{c},none": 0.1 for s in ("ece", "ece_adaptive", "brier", "auroc")
              for c in ("vanilla", "ts", "platt", "isotonic", "vector")}
    results = {"results": {"calidist_ppdb": {"acc,none": 0.45, "acc_vector,none": 0.70,
                                             **scores}}}
    rows = _rows(results)
    assert rows[("calidist_ppdb", "Vector scaling")][0] == "70.00"
    assert rows[("calidist_ppdb", "Vanilla")][0] == "45.00"
    assert rows[("calidist_ppdb", "Platt")][0] == "45.00"
    assert rows[("calidist_ppdb", "Platt")][-1] == "-"  # scored letters: no unreadable share


def test_unreadable_share_of_the_reading_each_row_is_fitted_on() -> None:
    scores = {f"{s}_{c},none": 0.2 for s in ("ece", "ece_adaptive", "brier", "auroc")
              for c in ("vanilla", "vanilla_verbalized")}
    results = {"results": {"calidist_aqua_cot": {
        "acc,none": 0.3, "acc_verbalized,none": 0.25, "parse_fail_rate,none": 0.16,
        "parse_fail_rate_verbalized,none": 0.5, **scores}}}
    rows = _rows(results)
    assert rows[("calidist_aqua_cot", "Vanilla (reasoned)")][-1] == "16.00"
    assert rows[("calidist_aqua_cot", "Verbalized (reasoned)")][-1] == "50.00"
    assert rows[("calidist_aqua_cot", "Verbalized (reasoned)")][0] == "25.00"
