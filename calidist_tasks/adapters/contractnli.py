"""ContractNLI: the official JSON release; one example per (document, hypothesis) pair.

File (``train.json`` / ``dev.json`` / ``test.json``): ``{"documents": [{"id", "text", "spans",
"annotation_sets": [{"annotations": {"nda-k": {"choice": "Entailment" | "Contradiction" |
"NotMentioned", "spans": [...]}}}]}], "labels": {"nda-k": {"short_description", "hypothesis"}}}``.
The label order is the options' order: entailment, contradiction, not mentioned.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from calidist_tasks.data.documents import read_rows

CHOICES = ("Entailment", "Contradiction", "NotMentioned")


def read_file(path: Path) -> list[tuple[str, dict[str, Any]]]:
    if path.suffix.lower() != ".json":
        return read_rows(path)  # rows already flattened to the task's schema (jsonl, csv, ...)
    if not path.is_file():
        raise FileNotFoundError(f"data file not found: {path}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: not the ContractNLI JSON release ({error})") from None
    if not isinstance(data, dict) or not isinstance(data.get("documents"), list):
        raise ValueError(f"{path}: expected {{'documents': [...], 'labels': {{...}}}}")
    labels = data.get("labels")
    if not isinstance(labels, dict) or not labels:
        raise ValueError(f"{path}: missing the 'labels' object (hypothesis texts)")
    rows = []
    for i, document in enumerate(data["documents"]):
        where = f"{path.name} documents[{i}]"
        sets = document.get("annotation_sets") if isinstance(document, dict) else None
        if not sets or not isinstance(sets[0].get("annotations"), dict):
            raise ValueError(f"{where}: missing field 'annotation_sets[0].annotations'")
        for key, annotation in sets[0]["annotations"].items():
            hypothesis = labels.get(key, {}).get("hypothesis")
            if hypothesis is None:
                raise ValueError(f"{where}: hypothesis {key!r} is not in the file's 'labels'")
            rows.append((f"{where} {key}", {
                "id": f"{document.get('id')}/{key}", "contract": document.get("text"),
                "hypothesis": hypothesis, "choice": (annotation or {}).get("choice"),
            }))
    return rows


def process_row(row: dict[str, Any]) -> dict[str, Any]:
    if "label" in row:  # already flattened to the task's schema
        return row
    choice = row.get("choice")
    if choice not in CHOICES:
        raise ValueError(f"field 'choice' must be one of {', '.join(CHOICES)}, got {choice!r}")
    return {**row, "label": CHOICES.index(choice)}
