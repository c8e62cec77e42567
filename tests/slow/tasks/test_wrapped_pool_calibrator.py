"""``--metadata save_calibrator`` in a calibration pool (issue #35, docs/wrap.md): each member
writes the pool's one fit once, to its own ``{task}`` path, under its own name (so that
``--metadata calibrator`` applies it to that member); a path without ``{task}`` is refused
before any model time. The pool of tests/tasks/test_wrapped_pool.py on ``calidist-fake``."""

from __future__ import annotations

import json

import pytest

from calidist_metrics import load_calibrator
from calidist_tasks.scoring import fits
from slow.tasks.test_wrapped_pool import POOL, members, pooled, run  # noqa: F401 (fixture)

pytestmark = pytest.mark.slow  # runs lm-eval


@pytest.fixture(autouse=True)
def recovered_here(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("CALIDIST_RECOVERED_DIR", str(tmp_path))


def test_each_member_saves_the_pools_fit_once_under_its_own_name(pooled, tmp_path,  # noqa: F811
                                                                 monkeypatch):
    saved: list[str] = []
    real = fits.save_calibrator

    def counted(calibrator, path, **context):
        saved.append(str(path))
        return real(calibrator, path, **context)

    monkeypatch.setattr(fits, "save_calibrator", counted)
    template = str(tmp_path / "fits" / "{task}.json")
    setup = {**pooled, "metadata": {**pooled["metadata"], "save_calibrator": template}}
    names = members("_assertion")
    out = run(setup, [f"calidist_{POOL}_assertion"])
    assert sorted(saved) == sorted(template.replace("{task}", n) for n in names)  # once each
    fitted = []
    for name in names:
        calibrator, context = load_calibrator(template.replace("{task}", name))
        assert context["task"] == name
        fitted.append(json.dumps([calibrator.alpha_, calibrator.beta_]))
        numbers = out["results"][name]
        assert [calibrator.alpha_, calibrator.beta_] == pytest.approx(
            [numbers["alpha,none"], numbers["beta,none"]])
    assert len(set(fitted)) == 1  # the pool's one fit


def test_a_pool_refuses_a_save_calibrator_path_without_task(pooled, tmp_path):  # noqa: F811
    setup = {**pooled, "metadata": {**pooled["metadata"],
                                    "save_calibrator": str(tmp_path / "fit.json")}}
    with pytest.raises(ValueError, match=r"has no \{task\}"):
        run(setup, [f"calidist_{POOL}_assertion"])
    assert not (tmp_path / "fit.json").exists()
