"""HellaSwag: strip the WikiHow markup ("[title]", "[step]", ...) as lm-eval's own task does.

Rows (hub ``Rowan/hellaswag``): ``{"ctx", "endings": [4 strings], "label": "0".."3", ...}``.
"""

from __future__ import annotations

import re
from typing import Any

# lm-eval's "\[.*?\]" without its quadratic time on a field of many "[" and no "]": a tag holds
# no bracket (WikiHow tags are "[header]", "[step]", ...), so "[a [b]" drops "[b]" only.
MARKUP = re.compile(r"\[[^\[\]\n]*\]")


def clean(text: str) -> str:
    """lm-eval's hellaswag preprocessing: ' [title]' becomes '. ', other [tags] are dropped."""
    text = str(text).strip().replace(" [title]", ". ")
    return MARKUP.sub("", text).replace("  ", " ").strip()


def process_row(row: dict[str, Any]) -> dict[str, Any]:
    endings = row.get("endings")
    if not isinstance(endings, list) or len(endings) != 4:
        raise ValueError(f"field 'endings' must be a list of 4 strings, got {endings!r}")
    if not isinstance(row.get("ctx"), str):
        raise ValueError("missing or empty field 'ctx'")
    return {**row, "ctx": clean(row["ctx"]), "endings": [clean(e) for e in endings]}
