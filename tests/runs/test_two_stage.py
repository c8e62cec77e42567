"""Two-stage runs (calidist_tasks.runs.two_stage; docs/method.md, "Two-stage runs"): the paper's
minimum of 1 + (c - 1)·m prompts per document, with the records and metrics of a single-stage
run, through hf and an API backend, refused before model time on a wrong stage-1 run, and
resumable with --use_cache when stage 2 fails."""

from __future__ import annotations

from calidist_tasks.runs import two_stage


def test_reports_read_stage_2_of_a_two_stage_folder_only(tmp_path):
    """Stage 1's records lack the hints: a report of the output folder reads stage 2's."""
    from calidist_tasks.report.loading import _find

    stamp = "2026-01-01T00-00-00.000001"
    for folder in (tmp_path / "tiny", tmp_path / two_stage.STAGE1_FOLDER / "tiny"):
        folder.mkdir(parents=True)
        (folder / f"results_{stamp}.json").write_text("{}", encoding="utf-8")
        (folder / f"samples_calidist_ppdb_assertion_{stamp}.jsonl").write_text("",
                                                                              encoding="utf-8")
    results, samples, _ = _find([tmp_path], [])
    assert [p.parent.name for p in results + samples] == ["tiny", "tiny"]
    assert all(two_stage.STAGE1_FOLDER not in p.parts for p in results + samples)
    # named directly, a stage-1 folder is read
    results, samples, _ = _find([tmp_path / two_stage.STAGE1_FOLDER], [])
    assert len(results) == len(samples) == 1
