"""lm-eval's ``--limit`` on a calidist task: documents of both splits, in their proportion.

lm-eval's ``limit`` takes the first N documents, which are all calibration documents here
(calibration first, ``documents.build_documents``): nothing would be left to score. A calidist task
takes the first ones of each split instead (``limit_sizes``), says so once (``DocumentLimit.
message``) and leaves lm-eval's ``--samples`` (documents named by index) as lm-eval's.
"""

from __future__ import annotations

from collections.abc import Sequence

from calidist_tasks.scoring.records import EVALUATION


def limit_sizes(limit: int | None, calibration: int, evaluation: int) -> tuple[int, int] | None:
    """(calibration, evaluation) documents a run with lm-eval's ``--limit`` sends, None when it
    takes every document. lm-eval passes N (a fraction f of the documents as ceil(f * all)); a
    task with ``calibration`` + ``evaluation`` documents then sends N of them: round(N * share of
    calibration) calibration documents (halves up), at least 2 (1 when N = 2), always leaving at
    least 1 evaluation document, the rest evaluation documents; the first ones of each split. A
    task that sends no calibration documents takes the first N evaluation documents."""
    total = calibration + evaluation
    limit = int(limit) if limit else None  # lm-eval: 0 or None is no limit
    if limit is None or limit >= total:
        return None
    if not calibration:
        return 0, limit
    if limit < 2:
        raise ValueError(f"--limit {limit} cannot take a calibration and an evaluation document; "
                         "use --limit 2 or more")
    share = int(limit * calibration / total + 0.5)  # round half up (positive numbers)
    n_cal = min(max(share, min(2, limit - 1)), calibration, limit - 1)
    return n_cal, limit - n_cal


class DocumentLimit:
    """The documents a task sends under ``--limit``, from its documents' splits."""

    def __init__(self, task: str, splits: Sequence[str], sends_calibration: bool) -> None:
        self.task = task  # named in errors and the warning
        evaluation = [i for i, split in enumerate(splits) if split == EVALUATION]
        calibration = ([i for i, split in enumerate(splits) if split != EVALUATION]
                       if sends_calibration else [])  # the sampling baselines fit nothing
        self.calibration, self.evaluation = calibration, evaluation  # indices, in order

    def sizes(self, limit: int | None) -> tuple[int, int] | None:
        """(calibration, evaluation) documents sent (``limit_sizes``); None: every one."""
        try:
            return limit_sizes(limit, len(self.calibration), len(self.evaluation))
        except ValueError as error:
            raise ValueError(f"{self.task}: {error}") from None

    def chosen(self, limit: int | None) -> set[int]:
        """The indices of the documents sent: the first ones of each split."""
        n_cal, n_eval = self.sizes(limit) or (len(self.calibration), len(self.evaluation))
        return set(self.calibration[:n_cal] + self.evaluation[:n_eval])

    def message(self, limit: int) -> str:
        """The one warning of a --limit run: how many documents of each split it takes."""
        calibration, evaluation = len(self.calibration), len(self.evaluation)
        n_cal, n_eval = self.sizes(limit) or (calibration, evaluation)
        taken = (f"{n_cal} calibration + {n_eval} evaluation documents of {calibration} + "
                 f"{evaluation}" if calibration else
                 f"{n_eval} evaluation documents of {evaluation} (this task sends no "
                 "calibration documents)")
        return (f"{self.task}: --limit {limit}: {taken}; metrics from so few documents "
                "are a smoke test, not a measurement")
