"""Yahoo! Answers topics: the question title, with its body and best answer as the context.

Rows (hub ``community-datasets/yahoo_answers_topics``): ``{"topic": 0..9, "question_title",
"question_content", "best_answer"}``. The body and the best answer are often empty, so they are
joined into one ``context`` field ("(no context)" when both are empty) instead of failing the
row; the title is required.
"""

from __future__ import annotations

from typing import Any

from calidist_tasks.data.documents import is_blank


def process_row(row: dict[str, Any]) -> dict[str, Any]:
    title = row.get("question_title")
    if not isinstance(title, str) or is_blank(title):
        raise ValueError("missing or empty field 'question_title'")
    parts = [str(row.get(name) or "").strip() for name in ("question_content", "best_answer")]
    context = " ".join(p for p in parts if not is_blank(p)) or "(no context)"
    return {**row, "question": str(row["question_title"]).strip(), "context": context}
