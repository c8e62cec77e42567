"""CommonsenseQA: choices {label: [A..E], text: [...]} and answerKey "A".."E" -> list and index.

Reads the hub schema (``tau/commonsense_qa``: ``{"id", "question", "question_concept",
"choices": {"label", "text"}, "answerKey"}``) and the original release
(``dev_rand_split.jsonl``: ``{"id", "answerKey", "question": {"stem", "question_concept",
"choices": [{"label", "text"}, ...]}}``).
"""

from __future__ import annotations

from typing import Any


def process_row(row: dict[str, Any]) -> dict[str, Any]:
    question, choices = row.get("question"), row.get("choices")
    if isinstance(question, dict):  # the original release nests the stem and the choices
        choices = {"label": [c.get("label") for c in question.get("choices") or []],
                   "text": [c.get("text") for c in question.get("choices") or []]}
        question = question.get("stem")
    if not isinstance(choices, dict) or not isinstance(choices.get("text"), list):
        raise ValueError(
            f"field 'choices' must be {{'label': [...], 'text': [...]}}, got {choices!r}"
        )
    letters, texts = list(choices.get("label") or []), choices["text"]
    if len(letters) != len(texts) or not texts:
        raise ValueError(f"field 'choices' has {len(letters)} labels for {len(texts)} texts")
    key = row.get("answerKey")
    if not isinstance(key, str) or key.strip() not in letters:
        raise ValueError(f"field 'answerKey' must be one of {letters}, got {key!r}")
    return {"id": row.get("id"), "question": question, "choices": texts,
            "label": letters.index(key.strip())}
