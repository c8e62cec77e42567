"""Slow half of ``tests/reliability/test_after_the_model.py`` (runs a model or lm-eval).

What the module tests: the fast half's docstring."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from conftest import run_lm_eval
from family_data import aqua_rows

from calidist_tasks.scoring.records import line_record


def _aqua_with_four_option_rows(root: Path) -> Path:
    """AQuA files where every third row has 4 options instead of 5 (answers stay in range)."""
    for split, n in (("test", 9), ("dev", 9)):
        rows = aqua_rows(n, split)
        for i, row in enumerate(rows):
            if i % 3 == 0:
                row["options"] = row["options"][:4]
                row["correct"] = "ABCD"[i % 4]
        path = root / "aqua" / f"{split}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return root


def test_varying_option_counts_keep_every_method_but_vector_scaling(tiny_model_dir, tmp_path,
                                                                   caplog):
    data = _aqua_with_four_option_rows(tmp_path)
    metadata = {"data_dir": str(data), "calib_size": 9, "eval_size": 9}
    with caplog.at_level("WARNING"):
        out = run_lm_eval(["calidist_aqua", "calidist_aqua_assertion"], tiny_model_dir,
                          metadata, num_fewshot=0)
    logged = [r.getMessage() for r in caplog.records]
    assert sum(bool(re.match(r"calidist_aqua: vector scaling skipped .* 4 and 5 options", m))
               for m in logged) == 1
    baselines = out["results"]["calidist_aqua"]
    for name in ("ece_ts", "brier_platt", "auroc_isotonic", "ece_vanilla", "temperature"):
        assert math.isfinite(baselines[f"{name},none"]), name
    assert all(math.isnan(baselines[f"{score}_vector,none"])
               for score in ("ece", "ece_adaptive", "brier", "auroc", "mce", "smece", "aurc"))
    assert math.isnan(baselines["acc_vector,none"])
    calidist = out["results"]["calidist_aqua_assertion"]
    assert math.isfinite(calidist["ece,none"]) and math.isfinite(calidist["alpha,none"])


def test_all_unreadable_replies_give_nan_scores_not_a_perfect_ece(tiny_model_dir, ppdb_data_dir,
                                                                   caplog):
    """The tiny random model writes no readable answer: every score must say so (NaN)."""
    metadata = {"data_dir": str(ppdb_data_dir), "calib_size": 4, "eval_size": 6,
                "verbalized_prompt": "short"}
    with caplog.at_level("WARNING"):
        out = run_lm_eval(["calidist_ppdb_verbalized", "calidist_ppdb_assertion_verbalized"],
                          tiny_model_dir, metadata, gen_kwargs="max_gen_toks=4", num_fewshot=0)
    logged = [r.getMessage() for r in caplog.records]
    for task in ("calidist_ppdb_verbalized", "calidist_ppdb_assertion_verbalized"):
        assert sum(bool(re.match(rf"{task}: \d+% of the evaluation replies were unreadable .* "
                                 r"every calibration score .* NaN", m)) for m in logged) == 1
    for task in ("calidist_ppdb_verbalized", "calidist_ppdb_assertion_verbalized"):
        results = out["results"][task]
        assert results["parse_fail_rate,none"] > 0.5
        scores = [k for k in results if "_stderr" not in k and k.split(",")[0].startswith(
            ("ece", "brier", "auroc", "mce", "smece", "aurc"))]
        assert scores and all(math.isnan(results[k]) for k in scores)
        assert math.isfinite(results["acc,none"])


# ------------------------------------------------------------------ a failed aggregation
def test_a_failed_aggregation_saves_the_records_and_says_how_to_recompute(
        tiny_model_dir, ppdb_data_dir, tmp_path, monkeypatch):
    """Issue #17.2, with a real cause: --metadata save_calibrator names a path that cannot be
    written (under a file), which fails only at the aggregation, after the model has answered.
    The records are saved where the message says, and `calidist report` recomputes from them."""
    from calidist_tasks import cli
    from calidist_tasks.runs.recovery import AggregationError

    monkeypatch.chdir(tmp_path)  # the documented default place: ./calidist-recovered/
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file", encoding="utf-8")
    metadata = {"data_dir": str(ppdb_data_dir), "calib_size": 4, "eval_size": 5, "m": 1,
                "save_calibrator": str(blocker / "{task}.json")}
    with pytest.raises(AggregationError) as failed:
        run_lm_eval(["calidist_ppdb_assertion"], tiny_model_dir, metadata, num_fewshot=0)
    message = str(failed.value)
    folder = failed.value.folder
    assert folder.parent == tmp_path / "calidist-recovered"
    assert message.startswith("calidist_ppdb_assertion: the aggregation failed after the model "
                              "answered every request (")
    assert "not-a-folder" in message and isinstance(failed.value.__cause__, OSError)
    assert f"9 per-document records are saved in {folder}" in message
    command = f"calidist report {folder} --out {folder}/report"
    assert message.endswith(command)

    samples = list(folder.glob("samples_calidist_ppdb_assertion_*.jsonl"))
    lines = [json.loads(line) for line in samples[0].read_text(encoding="utf-8").splitlines()]
    assert [line["doc_id"] for line in lines] == list(range(9))  # every document, in order
    splits = [line_record(line)["split"] for line in lines]
    assert splits == ["calibration"] * 4 + ["evaluation"] * 5
    assert all(line["doc"]["calidist_index"] == line["doc_id"] and line["arguments"]
               for line in lines)

    with pytest.raises(SystemExit) as done:
        cli.main(command.split()[1:] + ["--no_figures", "--bootstrap", "0"])
    assert done.value.code == 0
    report = (folder / "report" / "report.md").read_text(encoding="utf-8")
    board = (folder / "report" / "leaderboard.csv").read_text(encoding="utf-8")
    assert "| calidist\\_ppdb\\_assertion |" in report and ",CaliDist (As.)," in board
    assert "## Problems (left out of the affected cells)\n\nNone." in report
