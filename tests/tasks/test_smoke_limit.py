"""`--limit N` as a smoke test: calibration and evaluation documents are both taken, in the run's
proportion, with one warning naming the sizes (issue #15.1). Through the real `calidist eval`
command line (lm-eval's own argument parsing, output and samples files); only lm-eval's indexing
of its own ~10k task folders is skipped (TaskManager without its defaults)."""

from __future__ import annotations

import inspect

import pytest

from calidist_tasks.backends import lm_eval_compat
from calidist_tasks.data.limits import DocumentLimit, limit_sizes


@pytest.mark.parametrize(("limit", "calibration", "evaluation", "sizes"), [
    (10, 200, 1000, (2, 8)),  # the defaults: round(10 / 6) = 2
    (120, 200, 1000, (20, 100)),  # --limit 0.1 of 1200 documents, as lm-eval passes it
    (6, 20, 40, (2, 4)),
    (9, 30, 30, (5, 4)),  # 4.5 rounds half up
    (3, 200, 1000, (2, 1)),  # at least 2 calibration documents ...
    (2, 200, 1000, (1, 1)),  # ... and 1 evaluation document
    (5, 3, 1000, (2, 3)),
    (50, 45, 6, (44, 6)),
    (5, 1, 1000, (1, 4)),  # every calibration document, the rest evaluation
    (5, 0, 40, (0, 5)),  # a task that sends no calibration documents
])
def test_limit_takes_both_splits_in_proportion(limit, calibration, evaluation, sizes):
    assert limit_sizes(limit, calibration, evaluation) == sizes
    n_cal, n_eval = sizes
    assert n_cal + n_eval == limit and n_cal <= calibration and 1 <= n_eval <= evaluation


def test_a_limit_taking_everything_is_no_limit_and_one_document_is_refused():
    assert limit_sizes(None, 20, 40) is None and limit_sizes(0, 20, 40) is None
    assert limit_sizes(60, 20, 40) is None and limit_sizes(500, 20, 40) is None
    with pytest.raises(ValueError, match="--limit 1 cannot take a calibration and an evaluation"):
        limit_sizes(1, 20, 40)


def test_document_limit_takes_the_first_documents_of_each_split():
    splits = ["calibration"] * 20 + ["evaluation"] * 40
    limit = DocumentLimit("t", splits, sends_calibration=True)
    assert limit.chosen(6) == {0, 1, 20, 21, 22, 23}  # (2, 4) of limit_sizes, split by split
    assert limit.chosen(None) == set(range(60))
    assert limit.message(6) == ("t: --limit 6: 2 calibration + 4 evaluation documents of 20 + "
                                "40; metrics from so few documents are a smoke test, not a "
                                "measurement")
    with pytest.raises(ValueError, match="^t: --limit 1 cannot take"):
        limit.sizes(1)
    sampling = DocumentLimit("t", splits, sends_calibration=False)  # fits nothing
    assert sampling.chosen(None) == set(range(20, 60)) and sampling.chosen(3) == {20, 21, 22}
    assert "3 evaluation documents of 40 (this task sends no calibration" in sampling.message(3)


def test_doc_iterator_is_still_lm_evals_interface():
    """lm_eval_compat's section: the override keeps lm-eval's keyword-only parameters."""
    from lm_eval.api.task import Task

    assert tuple(inspect.signature(Task.doc_iterator).parameters) == \
        lm_eval_compat.DOC_ITERATOR_PARAMETERS
    pairs = iter([(0, "a"), (3, "b"), (5, "c"), (7, "d"), (9, "e")])
    assert list(lm_eval_compat.rank_share(pairs, 1, 2)) == [(3, "b"), (7, "d")]
    kwargs = lm_eval_compat.without_request_cache({"cache_requests": True, "rank": 0})
    assert kwargs == {"cache_requests": False, "rewrite_requests_cache": False, "rank": 0}
