"""The slow half of tests/test_cli_wrap_pool.py: ``calidist wrap --pool`` / ``--no-pool``
through the console script, each run indexing lm-eval's whole task tree."""

from __future__ import annotations

import json

from test_cli_wrap_pool import SUBJECTS, finish, start


def test_wrap_pool_and_no_pool_through_the_command(tmp_path):
    pooled, unpooled = tmp_path / "pooled", tmp_path / "unpooled"
    runs = [start(*SUBJECTS, "--pool", "sci", "--out", str(pooled)),
            start("mmlu_stem", "--no-pool", "--out", str(unpooled))]  # a group, not pooled
    outputs = [finish(p) for p in runs]
    members = [f"calidist_{s}_assertion" for s in SUBJECTS]
    for subject in SUBJECTS:
        text = (pooled / f"calidist_{subject}_assertion.yaml").read_text()
        assert 'pool: "calidist_sci_assertion"' in text
        assert f"pool_members: {json.dumps(members)}" in text
        assert 'pool: "calidist_sci"' in (pooled / f"calidist_{subject}.yaml").read_text()
    group = (pooled / "calidist_sci_assertion.yaml").read_text()
    assert f"task: {json.dumps(members)}" in group
    assert "calidist_sci_assertion" in outputs[0]  # the command lists the pool's group
    written = sorted(unpooled.glob("*.yaml"))
    assert len(written) > 3 * len(SUBJECTS)  # every mmlu_stem subject
    assert not any("pool" in p.read_text() for p in written)
    assert not (unpooled / "calidist_mmlu_stem.yaml").exists()


