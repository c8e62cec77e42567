"""Yahoo! Answers topics: the question title, with its body and best answer as the context.

Rows (hub ``community-datasets/yahoo_answers_topics``): ``{"topic": 0..9, "question_title",
"question_content", "best_answer"}``. The body and the best answer are often empty, so they are
joined into one ``context`` field ("(no context)" when both are empty) instead of failing the
row; the title is required.
"""

from __future__ import annotations

from typing import Any


def process_row(row: dict[str, Any]) -> dict[str, Any]:
    for name in ("question_title", "topic"):
        value = row.get(name)
        if value is None or (isinstance(value, str) and not value.strip()):
            raise ValueError(f"missing or empty field '{name}'")
    parts = [str(row.get(name) or "").strip() for name in ("question_content", "best_answer")]
    context = " ".join(p for p in parts if p) or "(no context)"
    return {**row, "question": str(row["question_title"]).strip(), "context": context,
            "label": row["topic"]}
