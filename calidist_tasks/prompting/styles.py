"""The distractor styles (YAML ``distractor:``) as small strategy objects.

A task picks its style once, in ``__init__`` (``distractor_style``), and asks it:

- ``m``: distractors per label (``--metadata m``, else the style's default; checked here);
- ``plans``: a document's prompts, the original first, then ``m`` hinted prompts per label;
- ``hinted_copy``: the document as a hinted prompt shows it (a hint, or corrupted input);
- ``exemplar_plan``: the misleading distraction a few-shot exemplar gets in a hinted prompt.

The hints themselves are built by ``calidist_tasks.prompting.distractors`` (paper, Appendix E).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from calidist_tasks.prompting import distractors
from calidist_tasks.prompting.parts import CHOICES, HINT
from calidist_tasks.scoring.joining import PromptPlan
from calidist_tasks.scoring.records import is_own_field


def content_key(doc: Mapping[str, Any]) -> str:
    """A document's content key: every field but ours (``records.is_own_field``): the seed of its
    distractor choices."""
    return distractors.document_key(doc, [f for f in doc if not is_own_field(f)])


def misleading_label(key: str, label: int, n_labels: int, seed: int) -> int:
    """A label other than ``label``, drawn from an exemplar's content ``key`` and the seed."""
    digest = hashlib.sha256(f"{seed}|fewshot|{key}".encode()).digest()
    return (label + 1 + digest[0] % (n_labels - 1)) % n_labels


class DistractorStyle:
    """A distractor style; this base one is ``distractor: none``: the original prompt only."""

    name = "none"
    hinted = False  # whether the style builds hinted prompts
    default_m = 0  # distractors per label without --metadata m

    def __init__(self, m: int | None = None, corruption: Mapping[str, Any] | None = None) -> None:
        self.m: int = m or self.default_m
        self.corruption = corruption

    def plans(self, doc: Mapping[str, Any], n_labels: int, seed: int) -> list[PromptPlan]:
        """The document's prompts: the original, then the hinted ones (deterministic)."""
        return [PromptPlan()]

    def hinted_copy(self, doc: dict[str, Any], plan: PromptPlan,
                    choices: list[str]) -> dict[str, Any]:
        """The document as the hinted prompt ``plan`` shows it."""
        raise ValueError("distractor: none builds no hinted prompts")

    def exemplar_plan(self, key: str, label: int, n_labels: int, seed: int) -> PromptPlan:
        """The distraction of a few-shot exemplar (content ``key``, gold ``label``) in a hinted
        prompt: towards another label, the answer staying the gold one."""
        return PromptPlan()


class _Hinted(DistractorStyle):
    """What the hinted styles share: ``label_plans`` for every label."""

    hinted = True
    default_m = 1

    def plans(self, doc: Mapping[str, Any], n_labels: int, seed: int) -> list[PromptPlan]:
        key = content_key(doc)
        plans = [PromptPlan()]
        for label in range(n_labels):
            plans += self.label_plans(key, seed, label, self.m)
        return plans

    def label_plans(self, key: str, seed: int, label: int, m: int) -> list[PromptPlan]:
        """The hinted prompts towards ``label`` (a fixed template: one)."""
        return [PromptPlan(label)]

    def exemplar_plan(self, key: str, label: int, n_labels: int, seed: int) -> PromptPlan:
        return self.label_plans(key, seed, misleading_label(key, label, n_labels, seed), 1)[0]


class _FixedTemplate(_Hinted):
    def __init__(self, m: int | None = None, corruption: Mapping[str, Any] | None = None) -> None:
        super().__init__(m, corruption)
        if self.m != 1:
            raise ValueError(f"the {self.name} style has one fixed template, so m must be 1 "
                             f"(got m={self.m}); m > 1 is for assertion")


class Assertion(_Hinted):
    """``distractor: assertion``: "Hint: {S} (x) option." with ``m`` distinct templates S."""

    name = "assertion"
    default_m = 2  # paper, Appendix G

    def __init__(self, m: int | None = None, corruption: Mapping[str, Any] | None = None) -> None:
        super().__init__(m, corruption)
        distractors.check_m(self.m)

    def label_plans(self, key: str, seed: int, label: int, m: int) -> list[PromptPlan]:
        return [PromptPlan(label, t) for t in distractors.choose_templates(key, seed, label, m)]

    def hinted_copy(self, doc: dict[str, Any], plan: PromptPlan,
                    choices: list[str]) -> dict[str, Any]:
        label = plan.hint_label
        hint = distractors.assertion_hint(plan.template, distractors.LETTERS[label], choices[label])
        return {**doc, HINT: hint}


class Probe(_FixedTemplate):
    """``distractor: probe``: "Hint: Do you think the answer could be (x) option? Elaborate."."""

    name = "probe"

    def hinted_copy(self, doc: dict[str, Any], plan: PromptPlan,
                    choices: list[str]) -> dict[str, Any]:
        label = plan.hint_label
        return {**doc, HINT: distractors.probe_hint(distractors.LETTERS[label], choices[label])}


class Corruption(_FixedTemplate):
    """``distractor: corruption``: the input corrupted towards a label (the YAML's
    ``corruption`` block, ``distractors.corrupt``)."""

    name = "corruption"

    def __init__(self, m: int | None = None, corruption: Mapping[str, Any] | None = None) -> None:
        if not corruption:
            raise ValueError("the corruption style needs a 'corruption' block in its YAML")
        super().__init__(m, corruption)

    def hinted_copy(self, doc: dict[str, Any], plan: PromptPlan,
                    choices: list[str]) -> dict[str, Any]:
        corrupted, shown = distractors.corrupt(doc, plan.hint_label, choices, self.corruption)
        return {**corrupted, CHOICES: shown}


# YAML ``distractor`` -> its class; a new style is one more entry (docs/architecture.md)
STYLES: dict[str, type[DistractorStyle]] = {
    style.name: style for style in (DistractorStyle, Assertion, Probe, Corruption)
}


def distractor_style(name: str, m: int | None = None,
                     corruption: Mapping[str, Any] | None = None) -> DistractorStyle:
    """The style the YAML's ``distractor`` names, with ``m`` (None: its default) checked."""
    if name not in STYLES:
        raise ValueError(f"unknown distractor style {name!r}; use one of {tuple(STYLES)}")
    return STYLES[name](m, corruption)
