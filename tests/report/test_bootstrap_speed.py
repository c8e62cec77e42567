"""`calidist report`'s intervals take calidist_metrics' one-pass bootstrap (all resamples in one
numpy pass) for every score they resample: a score registered in a form the bootstrap does not
recognise (a lambda) would silently fall back to one call per resample, minutes slower on the
committed benchmark records."""

import numpy as np
import pytest

from calidist_metrics import paired_bootstrap_test
from calidist_metrics.scores import _rowwise
from calidist_tasks.registry import SCORES
from calidist_tasks.report.tables import LEADERBOARD_SCORES, paired_difference


@pytest.mark.parametrize("score", [score for score, _, _ in LEADERBOARD_SCORES])
def test_the_reports_interval_scores_are_resampled_in_one_pass(score):
    assert _rowwise(SCORES[score]) is not None, score


def test_paired_difference_is_the_libraries_paired_test():
    rng = np.random.default_rng(3)
    correct = (rng.random(120) < 0.6).astype(float)
    a, b = rng.uniform(0.3, 1, 120), rng.uniform(0.3, 1, 120)
    other = correct.copy()
    other[:10] = 1 - other[:10]
    for correct_b in (None, other):
        found = paired_difference(SCORES["ece"], a, correct, b, correct_b, 200, seed=5)
        expected = paired_bootstrap_test(SCORES["ece"], a, b, correct, 200, seed=5,
                                         correct_b=correct_b)
        assert found == {**expected, "n": 120}
