"""Prompts longer than the model's context window: named, not silently cut.

lm-eval's ``hf`` backend cuts a prompt that does not fit from the left (the instructions and the
question go first; the options, the hint and "The answer is (" stay) and logs a warning per
request that names no document. When the model's tokenizer is a local folder
(``--model_args pretrained=DIR`` or ``tokenizer=DIR``, which lm-eval merges into the task
metadata), the task counts the tokens of every request when it builds them and logs one warning
naming the documents that will be cut, so that a truncated run is not mistaken for a clean one.
Without a local tokenizer (Hub names, chat APIs) the backend's own behaviour applies unchecked.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from calidist_tasks.scoring.records import INDEX_FIELD, SOURCE_FIELD

log = logging.getLogger(__name__)
DEFAULT_MAX_LENGTH = 2048  # lm-eval's hf default when neither config nor tokenizer says
LENGTH_ATTRIBUTES = ("n_positions", "max_position_embeddings", "n_ctx")  # as lm-eval's hf reads
# A folder with none of these holds no tokenizer AutoTokenizer could load: not checked, and
# transformers (seconds to import) is not imported for it.
TOKENIZER_FILES = ("tokenizer_config.json", "tokenizer.json", "config.json")


def context_window(metadata: Mapping[str, Any]) -> tuple[Any, int] | None:
    """(tokenizer, max tokens) of a model whose tokenizer is a local folder, else None."""
    folder = metadata.get("tokenizer") or metadata.get("pretrained")
    if not isinstance(folder, (str, os.PathLike)) or not Path(folder).is_dir() or not any(
            (Path(folder) / name).is_file() for name in TOKENIZER_FILES):
        return None
    from transformers import AutoConfig, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(folder)
    except (OSError, ValueError) as error:  # not a tokenizer folder: nothing to check with
        log.debug("prompt lengths not checked: no tokenizer in %s (%s)", folder, error)
        return None
    if metadata.get("max_length"):
        return tokenizer, int(metadata["max_length"])
    try:
        config = AutoConfig.from_pretrained(folder)
    except (OSError, ValueError):
        config = None
    for name in LENGTH_ATTRIBUTES:
        if getattr(config, name, None):
            return tokenizer, int(getattr(config, name))
    limit = getattr(tokenizer, "model_max_length", None)
    return tokenizer, int(limit) if limit and limit < 10**9 else DEFAULT_MAX_LENGTH


def long_documents(instances: Iterable[Any], tokenizer: Any, limit: int) -> dict[int, str]:
    """Document index -> "source (n tokens)" for documents with a request over ``limit`` tokens
    (a generation request also needs room for its ``max_gen_toks``)."""
    requests = []
    for instance in instances:
        context, second = instance.arguments[0], instance.arguments[1]
        text = str(getattr(context, "prompt", context))  # a chat prompt is logged as JSON text
        if isinstance(second, str):  # loglikelihood (context, continuation): an option letter
            requests.append((instance.doc, text, second, limit))
        else:  # generate_until (context, generation kwargs): room for the generation too
            requests.append((instance.doc, text, "", limit - int(second.get("max_gen_toks", 256))))
    # each prompt is sent once per option: count its tokens once (one batched call)
    texts = sorted({r[1] for r in requests} | {r[2] for r in requests})
    counts = dict(zip(texts, map(len, tokenizer(texts, add_special_tokens=False)["input_ids"]),
                      strict=True))
    found: dict[int, tuple[str, int]] = {}
    for doc, text, continuation, room in requests:
        n = counts[text] + counts[continuation] + 1  # + a BOS token where the model adds one
        index = doc.get(INDEX_FIELD, -1)
        if n > room and n - room > found.get(index, ("", 0))[1]:
            found[index] = (doc.get(SOURCE_FIELD, "?"), n - room)
    return {i: f"{source} ({over} tokens over)" for i, (source, over) in sorted(found.items())}


def warn_long_prompts(task: str, instances: list[Any], metadata: Mapping[str, Any]) -> dict:
    """Log which documents' prompts exceed the model's context; return them (see module doc)."""
    window = context_window(metadata)
    if window is None or not instances:
        return {}
    tokenizer, limit = window
    found = long_documents(instances, tokenizer, limit)
    if found:
        shown = "; ".join(f"document {i} {where}" for i, where in list(found.items())[:20])
        log.warning(
            "%s: %d document(s) have prompts longer than the model's context of %d tokens; "
            "lm-eval's hf backend cuts them from the left, so the model does not see their "
            "question (raise --model_args max_length if the model allows, or remove them): %s%s",
            task, len(found), limit, shown, " ..." if len(found) > 20 else "")
    return found
