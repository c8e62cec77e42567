"""The prompt builder: a prompt's parts, and the one function that renders them.

Every multiple-choice prompt, logit or generation, original or hinted, few-shot exemplar or
question, is ``render(PromptParts(...))``::

    <exemplars>                      (the few-shot block, ends with a blank line; may be empty)
    <question>[ <instruction>]       (the YAML's doc_to_text; generation tasks add a request)
    a. <option>
    b. <option> ...
    [<hint>]                         (assertion / probe hints)
    [<reply format>]                 (generation tasks: the form the reply should take)
    [Assistant:]                     (generation tasks without a chat template: Appendix F's
                                      line before the reply; ``fewshot.ASSISTANT``)

A SPUQ dummy token goes before or after everything but the exemplars and the reply cue.

The fields below are what a document copy carries into lm-eval's ``fewshot_context`` (which renders
it through the task's ``doc_to_text``) and into a request's document for the verbalized parser.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from calidist_tasks.prompting.distractors import LETTERS

HINT = "_calidist_hint"  # the hint a hinted copy shows
CHOICES = "_calidist_choices"  # the options a corrupted copy shows (or a request's own options)
FEWSHOT = "_calidist_fewshot"  # the solved exemplars put in front (prompting.fewshot)
CUE = "_calidist_cue"  # the line that opens the reply in the plain layout ("Assistant:")
DUMMY = "_calidist_dummy"  # a SPUQ dummy token for the prompt: [text, "before" | "after"]


class PromptParts(NamedTuple):
    """What one prompt shows, part by part (``render`` puts them together)."""

    question: str
    options: tuple[str, ...] = ()
    hint: str | None = None
    exemplars: str = ""
    instruction: str = ""  # after the question, on its line (generation tasks)
    reply_format: str = ""  # the prompt's last line (generation tasks)
    dummy: tuple[str, str] | None = None  # SPUQ: (token, "before" | "after")
    cue: str = ""  # the line that opens the reply (plain layout, generation tasks)


def is_hinted(doc: dict[str, Any]) -> bool:
    """Whether ``doc`` is a hinted copy (a hint or corrupted options): its exemplars mislead too."""
    return HINT in doc or CHOICES in doc


def render(parts: PromptParts) -> str:
    """The prompt text of ``parts`` (module docstring), ending with a newline."""
    question = f"{parts.question} {parts.instruction}" if parts.instruction else parts.question
    lines = [f"{LETTERS[i]}. {option}" for i, option in enumerate(parts.options)]
    if parts.hint:
        lines.append(parts.hint)
    rest = "".join(f"\n{line}" for line in lines)
    if parts.reply_format:
        rest = rest.rstrip("\n") + f"\n{parts.reply_format}"
    body = question + rest
    if parts.dummy:
        token, position = parts.dummy
        body = token + body if position == "before" else body + token
    if parts.cue:  # after the dummy token: the reply follows it
        body = body.rstrip("\n") + f"\n{parts.cue}"
    return f"{parts.exemplars}{body}\n"
