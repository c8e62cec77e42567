"""Bad input that only shows once the model has answered: it must never cost the model's work nor
print a number that looks good by accident (documents whose option count varies, replies that are
all unreadable)."""

from __future__ import annotations

import pytest


def test_temperature_scaling_on_ragged_logits_matches_per_row_softmax():
    import numpy as np

    from calidist_metrics import TemperatureScaling

    logits = [[0.0, 1.0, -1.0, 0.5, 0.2], [2.0, 0.0, 1.0, -0.5], [0.3, 0.1, 0.0, 0.0, -2.0]]
    fit = TemperatureScaling().fit(logits, [1, 0, 2])
    probs = fit.predict_proba(logits)
    assert probs.shape == (3, 5) and probs[1, 4] == 0.0
    row = np.exp(np.array(logits[1]) / fit.temperature_)
    np.testing.assert_allclose(probs[1, :4], row / row.sum())
    with pytest.raises(ValueError, match="does not have"):
        TemperatureScaling().fit(logits, [1, 4, 2])
