"""Records gathered from several processes: every copy of a record gets its calibrated confidences.

With lm-eval's data parallelism (``accelerate launch``, ``torchrun``) each rank scores its own
documents; lm-eval 0.4.13 then gathers, to rank 0, each rank's logged samples and each rank's
per-metric values in two separate ``gather_object`` calls, each pickled on its own. Rank 0 so
holds two copies of every record: the samples' and the aggregation's. The aggregation logs each
method's calibrated confidence on the records it gets (``aggregation.log_confidences``), which in
one process are the very dicts lm-eval logs in the samples; after a gather they are not.

In a run of several processes ``process_results`` returns each record as a ``LinkedRecord``: a
dict (its JSON is a plain record's) that, when unpickled, registers itself under its task and
document index. After the aggregation, ``share_calibrated`` copies the logged confidences onto
every registered copy of each record, the samples' among them. In one process nothing is wrapped
or registered.
"""

from __future__ import annotations

import weakref
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

# (task, document index) -> the copies of its record unpickled in this process
_COPIES: dict[tuple[str, Any], list[weakref.ref]] = defaultdict(list)


class LinkedRecord(dict):
    """A record that knows its task, and registers itself when unpickled (a gathered copy)."""

    __slots__ = ("task", "__weakref__")

    def __init__(self, task: str, record: Mapping[str, Any]) -> None:
        super().__init__(record)
        self.task = task

    def __reduce__(self) -> tuple[Any, tuple[str, dict[str, Any]]]:
        return _unpickled, (self.task, dict(self))


def _unpickled(task: str, record: dict[str, Any]) -> LinkedRecord:
    copy = LinkedRecord(task, record)
    _COPIES[(task, record.get("index"))].append(weakref.ref(copy))
    return copy


def linked(task: str, record: Mapping[str, Any]) -> LinkedRecord:
    """``record`` as ``process_results`` returns it in a run of several processes."""
    return LinkedRecord(task, record)


def share_calibrated(task: str, records: Iterable[Mapping[str, Any]],
                     fields: Sequence[str]) -> int:
    """Copy ``fields`` of each of ``task``'s aggregated ``records`` onto every other copy of it
    unpickled in this process; return the copies updated. The copies are forgotten then."""
    updated = 0
    for record in records:
        for ref in _COPIES.pop((task, record.get("index")), ()):
            copy = ref()
            if copy is None or copy is record:
                continue
            for field in fields:
                if field in record:
                    copy[field] = record[field]
            updated += 1
    return updated
