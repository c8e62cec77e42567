"""Each refit of a report once: the same fit of the same runs' records with the same settings.

A report refits every method of every task for the leaderboard (``cells.refit``) and CaliDist
again for each ``--transfer`` pair, where the target's in-domain fit is the leaderboard's own.
Within ``fitted_once`` a fit is computed once per (fit function, the source run's records, the
target run's records, settings, calibrator context) and handed out again after that; outside
it every call fits. The records are keyed by the run's record list itself (its identity, held
by the cache so that it cannot be freed and its address reused), so two runs never share a
fit, even with equal names.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from calidist_tasks.report.runs import TaskRun
from calidist_tasks.scoring import fits
from calidist_tasks.settings import RunSettings

__all__ = ["fitted", "fitted_once"]

# key -> (the records it was fitted on, kept alive; the fit); None outside ``fitted_once``
_KEPT: dict[tuple, tuple[tuple, fits.Fitted | None]] | None = None


@contextmanager
def fitted_once() -> Iterator[None]:
    """Within the block, ``fitted`` fits each (fit, source records, target records, settings,
    context) once."""
    global _KEPT
    outer, _KEPT = _KEPT, {} if _KEPT is None else _KEPT
    try:
        yield
    finally:
        _KEPT = outer


def fitted(fit: fits.Fit, source: TaskRun, target: TaskRun,
           calibration: Sequence[Mapping[str, Any]], evaluation: Sequence[Mapping[str, Any]],
           settings: RunSettings, context: Mapping[str, Any]) -> fits.Fitted | None:
    """``fit(calibration, evaluation, settings, context)``: ``calibration`` the calibration
    records of ``source``, ``evaluation`` the evaluation records of ``target`` (the same run for
    an in-domain fit; ``fits.split_records``), as the fit returns it (shared within
    ``fitted_once``: not to be modified). A fit that raises (``fits.NoCalibration``) raises
    each time."""
    if _KEPT is None:
        return fit(calibration, evaluation, settings, context)
    key = (fit, id(source.records), id(target.records), repr(settings),
           repr(sorted(context.items())))
    if key not in _KEPT:
        _KEPT[key] = ((source.records, target.records),
                      fit(calibration, evaluation, settings, context))
    return _KEPT[key][1]
