"""The prompt builder (``prompts``), the distractor styles (``styles``) and the confidence sources
(``confidence_sources``) on their own, without a task."""

from __future__ import annotations

import pytest

from calidist_tasks.confidence.sources import SOURCES
from calidist_tasks.prompting import styles
from calidist_tasks.prompting.parts import CHOICES, HINT, PromptParts, is_hinted, render
from calidist_tasks.scoring.joining import PromptPlan
from calidist_tasks.settings import RunSettings


def test_render_puts_the_parts_in_order() -> None:
    parts = PromptParts("Q?", ("yes", "no"))
    assert render(parts) == "Q?\na. yes\nb. no\n"
    hinted = parts._replace(hint="Hint: it is (b) no.", exemplars="Solved.\n\n")
    assert render(hinted) == "Solved.\n\nQ?\na. yes\nb. no\nHint: it is (b) no.\n"
    asked = hinted._replace(instruction="Say how sure.", reply_format="Reply: (x).")
    assert render(asked) == ("Solved.\n\nQ? Say how sure.\na. yes\nb. no\nHint: it is (b) no.\n"
                             "Reply: (x).\n")
    # a SPUQ dummy token wraps everything but the exemplars
    assert render(asked._replace(dummy=("...", "before"))).startswith("Solved.\n\n...Q?")
    assert render(asked._replace(dummy=(" um", "after"))).endswith("Reply: (x). um\n")


def test_is_hinted() -> None:
    assert not is_hinted({"q": 1})
    assert is_hinted({HINT: "Hint"}) and is_hinted({CHOICES: ["a"]})


def test_styles_are_looked_up_by_name_and_check_m() -> None:
    assert {name: s.hinted for name, s in styles.STYLES.items()} == {
        "none": False, "assertion": True, "probe": True, "corruption": True}
    assert styles.distractor_style("assertion").m == 2
    assert styles.distractor_style("probe").m == 1
    with pytest.raises(ValueError, match="unknown distractor style 'loud'"):
        styles.distractor_style("loud")
    with pytest.raises(ValueError, match=r"m must be 1 \(got m=2\)"):
        styles.distractor_style("probe", 2)
    with pytest.raises(ValueError, match="m must be between 1 and 12"):
        styles.distractor_style("assertion", 13)
    with pytest.raises(ValueError, match="needs a 'corruption' block"):
        styles.distractor_style("corruption")


def test_plans_and_hinted_copies() -> None:
    doc = {"q": "Q?", "calidist_index": 3}
    assert styles.distractor_style("none").plans(doc, 3, 0) == [PromptPlan()]
    assertion = styles.distractor_style("assertion", 2)
    plans = assertion.plans(doc, 3, 0)
    assert plans[0] == PromptPlan() and [p.hint_label for p in plans[1:]] == [0, 0, 1, 1, 2, 2]
    assert assertion.plans({**doc, "calidist_index": 9}, 3, 0) == plans  # content, not index
    copy = assertion.hinted_copy(doc, plans[3], ["x", "y", "z"])
    assert copy[HINT].startswith("Hint: ") and "(b) y." in copy[HINT]
    probe = styles.distractor_style("probe").hinted_copy(doc, PromptPlan(2), ["x", "y", "z"])
    assert "(c) z?" in probe[HINT]
    corruption = styles.distractor_style("corruption", corruption={"option_suffix": "Surely"})
    assert corruption.hinted_copy(doc, PromptPlan(1), ["x", "y"])[CHOICES] == ["x", "y Surely."]


@pytest.mark.parametrize("name", ["assertion", "probe", "corruption"])
def test_exemplar_plans_mislead(name: str) -> None:
    style = styles.distractor_style(name, corruption={"option_suffix": "Surely"})
    for key in ("k1", "k2", "k3", "k4"):
        for label in range(4):
            plan = style.exemplar_plan(key, label, 4, seed=0)
            assert plan.hint_label != label and 0 <= plan.hint_label < 4
            assert (plan.template is not None) == (name == "assertion")
    assert styles.distractor_style("none").exemplar_plan("k", 0, 4, 0) == PromptPlan()


def test_confidence_sources() -> None:
    settings = RunSettings.from_metadata({})
    assert list(SOURCES) == ["verbalized", "consistency", "spuq"]
    assert [s.evaluation_only for s in SOURCES.values()] == [False, True, True]
    verbalized = SOURCES["verbalized"]
    asks = verbalized.asks({"q": 1}, [{"q": 1, HINT: "h"}], {"max_gen_toks": 9}, 1, settings)
    assert [(a.prompt_doc, a.shown) for a in asks] == [(None, None), ({"q": 1, HINT: "h"},) * 2]
    spuq = SOURCES["spuq"].asks({"q": 1}, [], {}, 1, settings)
    assert len(spuq) == 10 and spuq[0].prompt_doc is None
    assert all(a.shown is None for a in spuq)  # the parser sees the original document
    record, failures = SOURCES["consistency"].record(
        [{"answer": 1}, {"answer": 1}, {"answer": None}], [PromptPlan()], 2, 1, settings, "doc")
    assert record["prediction"] == 1 and failures == 1
    assert record["confidences"]["consistency"] == pytest.approx(2 / 3)
