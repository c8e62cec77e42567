"""`calidist report` inputs (issue 28, item 6): an `--out` that is a file is refused before any
work with a clear message (a FileExistsError traceback before), and a results file holding an
infinite number is shown as it is, never marked best, with a problem line naming it (an
`auroc: Infinity` was bold as the best AUROC before)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from calidist_tasks import cli

STAMP = "2026-01-02T03-04-05.678901"


def results_folder(root: Path, auroc: float) -> Path:
    """A results file (no samples) of one CaliDist task: CaliDist's AUROC ``auroc``, vanilla's
    0.6."""
    folder = root / "run" / "m"
    folder.mkdir(parents=True)
    scores = {"acc,none": 0.7, "ece,none": 0.1, "brier,none": 0.2, "auroc,none": auroc,
              "ece_vanilla,none": 0.3, "brier_vanilla,none": 0.25, "auroc_vanilla,none": 0.6}
    data = {"results": {"calidist_ppdb_assertion": {"alias": "calidist_ppdb_assertion",
                                                    **scores}},
            "config": {"model_args": "pretrained=m"}}
    (folder / f"results_{STAMP}.json").write_text(json.dumps(data), encoding="utf-8")
    return folder.parent


def calidist_report(*argv: str) -> int:
    with pytest.raises(SystemExit) as done:
        cli.main(["report", *argv, "--no_figures", "--bootstrap", "0"])
    return done.value.code


def test_an_out_that_is_a_file_is_refused_before_any_work(tmp_path, capsys):
    run = results_folder(tmp_path, 0.7)
    blocker = tmp_path / "report.md"
    blocker.write_text("my notes", encoding="utf-8")
    assert calidist_report(str(run), "--out", str(blocker)) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"calidist report: the report folder {blocker} cannot be written (")
    assert blocker.read_text(encoding="utf-8") == "my notes"


def test_an_infinite_score_is_never_marked_best(tmp_path, capsys):
    run = results_folder(tmp_path, float("inf"))
    out = tmp_path / "report"
    assert calidist_report(str(run), "--out", str(out)) == 0
    board = (out / "leaderboard.md").read_text(encoding="utf-8")
    calidist = next(line for line in board.splitlines() if "CaliDist (As.)" in line)
    vanilla = next(line for line in board.splitlines() if "| Vanilla" in line)
    assert "| inf |" in calidist and "**inf**" not in calidist
    # the best finite AUROC: results-file numbers only, so no paired test and no mark
    assert "| 60.00 |" in vanilla and "**" not in board
    err = capsys.readouterr().err
    assert "calidist_ppdb_assertion auroc is inf (not a finite number): shown as it is, never " \
           "marked best" in err
