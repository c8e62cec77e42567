"""How many prompts a run logs: ``--metadata log_prompts`` (docs/outputs.md, "Fewer prompts").

lm-eval logs each request's arguments in the samples file, the prompt in full: with every hinted
prompt sent once per option letter, that is ~97% of a samples file (~194 KB per AQuA document).
``log_prompts`` keeps:

- ``all`` (the default): every prompt, as lm-eval logs it;
- ``first``: the document's first request in full (its original prompt), every other prompt by
  its hash (``prompt_marker``);
- ``hash``: every prompt by its hash, the first one's included.

A hashed prompt is logged in the prompt's place as "calidist-prompt-sha256:<hex>", where <hex>
is lm-eval's ``hash_string`` of the prompt (the ``prompt_hash`` it logs of the first one); the
rest of the request (the continuation, the generation settings) is kept. The task shortens the
prompts of its requests after the model answered them (``CaliDistTask.apply_filters``), before
lm-eval logs them. The readers of an earlier run compare a prompt to a hashed one by its hash
(``same_prompt``), so a two-stage stage 2 and a reasoned ``_cot`` task read such runs as they read
full ones; ``calidist report``'s cost table counts the tokens of a prompt it has the text of
(``resolved``: a repeat of a prompt logged in full on the same line is known), and says which
runs' tokens it could not count.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

LOG_PROMPTS = ("all", "first", "hash")  # --metadata log_prompts (settings.RunSettings)
ALL, FIRST, HASH = LOG_PROMPTS
MARK = "calidist-prompt-sha256:"


def prompt_hash(prompt: str) -> str:
    """lm-eval's ``hash_string`` of a prompt (its samples' ``prompt_hash``)."""
    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()


def prompt_marker(prompt: str) -> str:
    """What a hashed prompt is logged as."""
    return MARK + prompt_hash(prompt)


def is_prompt_marker(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(MARK)


def marked_hash(value: Any) -> str | None:
    """The hash a prompt marker holds; None for anything else."""
    return value[len(MARK):] if is_prompt_marker(value) else None


def _text(prompt: Any) -> str | None:
    """A prompt's text: the prompt, a chat prompt's JSON text (lm-eval's ``JsonChatStr``)."""
    if isinstance(prompt, str):
        return prompt
    text = getattr(prompt, "prompt", None)
    return text if isinstance(text, str) else None


def shorten(instances: Iterable[Any], how: str) -> None:
    """Replace the prompts of ``instances`` (lm-eval's ``Instance``s of one task, answered) by
    their markers as ``how`` says (``LOG_PROMPTS``), in place: ``first`` keeps each document's
    first request's, ``hash`` none."""
    if how == ALL:
        return
    by_document: dict[Any, list[Any]] = defaultdict(list)
    for instance in instances:
        by_document[instance.doc_id].append(instance)
    for requests in by_document.values():
        requests.sort(key=lambda instance: instance.idx)
        for instance in requests[1 if how == FIRST else 0:]:
            arguments = instance.arguments
            if not isinstance(arguments, tuple) or not arguments:
                continue
            text = _text(arguments[0])
            if text is not None and not is_prompt_marker(text):
                instance.arguments = (prompt_marker(text), *arguments[1:])


def same_prompt(ours: str, theirs: Any) -> bool:
    """Whether ``ours`` is the logged prompt ``theirs``: the text itself, or its marker."""
    if ours == theirs:
        return True
    hashed = marked_hash(theirs)
    return hashed is not None and hashed == prompt_hash(ours)


def logged_prompts(line: Mapping[str, Any]) -> list[Any]:
    """The prompt of each request of a samples line, in request order: lm-eval's list of
    argument tuples, or the saved {"gen_args_i": {"arg_0": ...}} form."""
    arguments = line.get("arguments") or {}
    values = list(arguments.values()) if isinstance(arguments, Mapping) else list(arguments)
    prompts = []
    for argument in values:
        if isinstance(argument, Mapping):
            prompts.append(next(iter(argument.values()), None))
        elif isinstance(argument, Sequence) and not isinstance(argument, str) and argument:
            prompts.append(argument[0])
        else:
            prompts.append(argument)
    return prompts


def first_prompt_hash(line: Mapping[str, Any]) -> str | None:
    """The hash of a line's first prompt: lm-eval's ``prompt_hash``, unless the line logged
    that prompt as a marker (``hash``), whose own hash lm-eval then took."""
    prompts = logged_prompts(line)
    marked = marked_hash(prompts[0]) if prompts else None
    return marked or line.get("prompt_hash")


def resolved(prompts: Sequence[Any]) -> list[str | None]:
    """Each prompt's text: a marker of a prompt logged in full among ``prompts`` is that text,
    any other marker None (only its hash was logged)."""
    texts = {prompt_hash(p): p for p in prompts if isinstance(p, str) and not is_prompt_marker(p)}
    return [texts.get(marked_hash(p)) if is_prompt_marker(p) else p for p in prompts]
