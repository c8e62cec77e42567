"""A task's calibration warnings, logged once per task and cause.

``calidist_metrics`` raises ``CalibrationWarning`` for library users; a task collects those of
its aggregation (``warnings_named``) and logs each cause as one line naming the task
(docs/reliability.md, "Warnings").
"""

from __future__ import annotations

import logging
import re
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from calidist_metrics import CalibrationWarning

log = logging.getLogger(__name__)


@contextmanager
def warnings_named(task: str) -> Iterator[None]:
    """Log the calibration warnings (``CalibrationWarning``) raised in the block once each, as
    one line naming the task (``warning_lines``): a group run fits one set per task, and the same
    cause (a one-class calibration set for Platt and isotonic, AUROC of one class for every
    confidence) is one line, with no source line echoed. Other warnings pass on unchanged."""
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield
    finally:  # also when the block fails: what it warned about may explain why
        ours = [str(w.message) for w in caught if issubclass(w.category, CalibrationWarning)]
        for line in warning_lines(task, ours):
            log.warning("%s", line)
        for w in caught:
            if not issubclass(w.category, CalibrationWarning):
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


_OWNER = re.compile(r"^(\w+): (.+)$", re.S)  # "PlattScaling: the calibration set is all-correct"


def warning_lines(task: str, messages: Sequence[str]) -> list[str]:
    """One line per distinct warning of ``task``, in order: messages that differ only in the
    estimator or score they start with ("IsotonicCalibration: ...") are one line naming them all;
    line breaks are folded."""
    grouped: dict[str, list[str]] = {}
    for message in messages:
        text = short_warning(" ".join(str(message).split()))
        match = _OWNER.match(text)
        owner, rest = (match[1], match[2]) if match else ("", text)
        owners = grouped.setdefault(rest, [])
        if owner and owner not in owners:
            owners.append(owner)
    return [f"{task}: {', '.join(owners) + ': ' if owners else ''}{rest}"
            for rest, owners in grouped.items()]


GRID_EDGE = "the fit landed on a grid edge"
GRID_EDGE_DOCS = "docs/method.md, \"A known weakness of min-max λ\""


def short_warning(text: str) -> str:
    """The one line a task logs for a calibration warning: a grid-edge fit (common on small
    runs, and not an error) keeps where it landed and names the docs instead of the paragraph
    ``CaliDistCalibrator`` warns with (library users and ``calidist report`` keep that)."""
    if GRID_EDGE not in text:
        return text
    head, _, _ = text.partition("): ")
    return f"{head}); see {GRID_EDGE_DOCS}"
