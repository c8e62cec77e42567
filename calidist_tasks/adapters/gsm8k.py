"""GSM8K: the gold answer is the number after "####" at the end of the worked solution.

Rows (hub ``openai/gsm8k`` config ``main``, and ``test.jsonl``): ``{"question", "answer": "…
#### 42"}``. ``target`` holds the gold number in canonical form ("1,234" -> "1234").
"""

from __future__ import annotations

from typing import Any

from calidist_tasks.tasks.gsm8k import MAX_DIGITS, canonical_number


def process_row(row: dict[str, Any]) -> dict[str, Any]:
    answer = row.get("answer")
    if not isinstance(answer, str) or "####" not in answer:
        raise ValueError(f"field 'answer' must end with '#### <number>', got {answer!r:.80}")
    target = canonical_number(answer.rsplit("####", 1)[1].strip().lstrip("$"))
    if target is None:
        raise ValueError(f"field 'answer': no number of at most {MAX_DIGITS} digits after '####' "
                         f"in {answer!r:.80}")
    return {**row, "target": target}
