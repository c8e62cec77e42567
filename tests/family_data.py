"""Tiny local data sets in the formats of docs/method.md, one writer per benchmark (used by the
family, few-shot and GSM8K tests). Rows are made up, short, and cycle through every label."""

from __future__ import annotations

import json
from pathlib import Path

WORDS = ["river", "garden", "engine", "market", "planet", "violin", "harbor", "winter", "copper"]


def _word(i: int) -> str:
    return WORDS[i % len(WORDS)]


def _jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def mscinli_rows(n: int, tag: str) -> list[dict]:
    labels = ["entailment", "reasoning", "contrasting", "neutral"]
    return [{"id": f"{tag}-{i}",
             "sentence1": f"We measured the {_word(i)} signal in {tag} run {i}.",
             "sentence2": f"The {_word(i + 3)} result of run {i} was stable.",
             "label": labels[i % 4], "domain": "ACL"} for i in range(n)]


def yahoo_rows(n: int, tag: str) -> list[dict]:
    return [{"id": i, "topic": i % 10, "question_title": f"Why is the {_word(i)} {tag} {i} loud?",
             "question_content": "" if i % 3 == 0 else f"I heard the {_word(i + 1)} at night.",
             "best_answer": "" if i % 4 == 1 else f"Because of the {_word(i + 2)}."}
            for i in range(n)]


def hellaswag_rows(n: int, tag: str) -> list[dict]:
    return [{"ind": i, "activity_label": "Walking", "ctx_a": "", "ctx_b": "",
             "ctx": f"[header] How to find the {_word(i)} [title] A man walks to the {tag} {i}",
             "endings": [f"and sees the {_word(i + k)}." for k in range(4)],
             "source_id": f"{tag}~{i}", "split": tag, "split_type": "indomain",
             "label": str(i % 4)} for i in range(n)]


def csqa_rows(n: int, tag: str) -> list[dict]:
    letters = ["A", "B", "C", "D", "E"]
    return [{"id": f"{tag}{i}", "question": f"Where would you keep a {_word(i)} in {tag} {i}?",
             "question_concept": _word(i),
             "choices": {"label": letters, "text": [f"the {_word(i + k)}" for k in range(5)]},
             "answerKey": letters[i % 5]} for i in range(n)]


def aqua_rows(n: int, tag: str) -> list[dict]:
    letters = ["A", "B", "C", "D", "E"]
    return [{"question": f"A {_word(i)} costs {i + 2} dollars in {tag}. What do {i + 3} cost?",
             "options": [f"{letter}){(i + 2) * (i + 3) + k}" for k, letter in enumerate(letters)],
             "rationale": f"{i + 2} * {i + 3}", "correct": letters[i % 5]} for i in range(n)]


def contractnli_release(n_documents: int, tag: str) -> dict:
    choices = ["Entailment", "Contradiction", "NotMentioned"]
    labels = {f"nda-{k}": {"short_description": f"rule {k}",
                           "hypothesis": f"The party shall keep the {_word(k)} confidential."}
              for k in range(1, 4)}
    documents = [{"id": d, "file_name": f"{tag}{d}.pdf", "text": f"Contract {tag} {d}: the "
                  f"{_word(d)} stays secret for {d + 1} years.", "spans": [[0, 10]],
                  "annotation_sets": [{"annotations": {
                      key: {"choice": choices[(d + k) % 3], "spans": [0]}
                      for k, key in enumerate(labels)}}]}
                 for d in range(n_documents)]
    return {"documents": documents, "labels": labels}


def gsm8k_rows(n: int, tag: str = "") -> list[dict]:
    """n GSM8K rows; a ``tag`` makes the questions of one split differ from another's."""
    suffix = f" ({tag})" if tag else ""
    return [{"question": f"Tom has {i + 2} {_word(i)}s and buys {i + 1} more. How many now?"
                         f"{suffix}",
             "answer": f"{i + 2} + {i + 1} = <<{i + 2}+{i + 1}={2 * i + 3}>>{2 * i + 3}\n"
                       f"#### {2 * i + 3:,}"} for i in range(n)]


def write_all(root: Path, n_eval: int = 8, n_calib: int = 6) -> Path:
    """A data_dir with every family of this issue in its own format (eval + calibration split)."""
    _jsonl(root / "mscinli/test.jsonl", mscinli_rows(n_eval, "test"))
    _jsonl(root / "mscinli/dev.jsonl", mscinli_rows(n_calib, "dev"))
    _jsonl(root / "yahoo/test.jsonl", yahoo_rows(n_eval, "test"))
    _jsonl(root / "yahoo/train.jsonl", yahoo_rows(n_calib, "train"))
    _jsonl(root / "hellaswag/validation.jsonl", hellaswag_rows(n_eval, "val"))
    _jsonl(root / "hellaswag/train.jsonl", hellaswag_rows(n_calib, "train"))
    _jsonl(root / "csqa/validation.jsonl", csqa_rows(n_eval, "val"))
    _jsonl(root / "csqa/train.jsonl", csqa_rows(n_calib, "train"))
    _jsonl(root / "aqua/test.jsonl", aqua_rows(n_eval, "test"))
    _jsonl(root / "aqua/dev.jsonl", aqua_rows(n_calib, "dev"))
    (root / "contractnli").mkdir(parents=True, exist_ok=True)
    for split, n in (("test", n_eval), ("dev", n_calib)):
        text = json.dumps(contractnli_release((n + 2) // 3, split))
        (root / "contractnli" / f"{split}.json").write_text(text, encoding="utf-8")
    _jsonl(root / "gsm8k/test.jsonl", gsm8k_rows(n_eval + n_calib))
    return root
