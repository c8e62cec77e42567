"""``--model hf-prefix-cache`` gives the ``hf`` backend's log-likelihoods while computing less."""

from __future__ import annotations

import random
from collections.abc import Sequence

from calidist_tasks.backends.prefix_groups import prefix_groups, shared_prefix_length


def computed_tokens(inputs: Sequence[Sequence[int]], groups: list[tuple[list[int], int]]) -> int:
    """Tokens the backend runs for ``groups`` (``prefix_groups``), padding not counted."""
    total, previous = 0, ()
    for members, shared in groups:
        prefix = tuple(inputs[members[0]][:shared])
        total += shared - min(shared, shared_prefix_length(previous, prefix))
        total += sum(len(inputs[i]) - shared for i in members)
        previous = prefix
    return total


def document_prompts(n_docs: int, hints: int, seed: int = 0) -> list[list[int]]:
    """Token lists shaped like a CaliDist task's: a document, then an answer prefix or a hint."""
    rng = random.Random(seed)
    prompts = []
    for _ in range(n_docs):
        doc = [rng.randrange(50, 1000) for _ in range(rng.randint(60, 90))]
        prompts.append(doc + [7, 8, 9])
        prompts += [doc + [5] + [rng.randrange(50, 1000) for _ in range(rng.randint(30, 50))]
                    for _ in range(hints)]
    rng.shuffle(prompts)
    return prompts


def test_prefix_groups_batch_each_documents_prompts_over_their_shared_prefix() -> None:
    prompts = document_prompts(n_docs=5, hints=6)
    groups = prefix_groups(prompts, [1] * len(prompts), batch_size=8)
    assert sorted(i for members, _ in groups for i in members) == list(range(len(prompts)))
    for members, shared in groups:
        assert len(members) == 7  # one document: its original prompt and its 6 hints
        assert all(prompts[i][:shared] == prompts[members[0]][:shared] for i in members)
        assert shared >= 60  # the whole document, not just a chance common start
    assert computed_tokens(prompts, groups) == sum(
        shared + sum(len(prompts[i]) - shared for i in members) for members, shared in groups)
    assert computed_tokens(prompts, groups) < 0.6 * sum(map(len, prompts))


def test_prefix_groups_respect_the_batch_size_and_the_scored_tokens() -> None:
    prompts = document_prompts(n_docs=3, hints=10)
    scored = [len(p) if i % 5 == 0 else 3 for i, p in enumerate(prompts)]
    groups = prefix_groups(prompts, scored, batch_size=4)
    assert max(len(members) for members, _ in groups) == 4
    for members, shared in groups:
        # every input keeps its scored tokens out of the prefix; one scored whole shares nothing
        assert all(len(prompts[i]) - shared >= scored[i] for i in members)


def test_unrelated_prompts_are_batched_together_with_no_prefix() -> None:
    rng = random.Random(1)
    prompts = [[rng.randrange(1000) for _ in range(rng.randint(5, 40))] for _ in range(19)]
    groups = prefix_groups(prompts, [1] * 19, batch_size=8)
    assert [len(members) for members, _ in groups] == [8, 8, 3]
    assert computed_tokens(prompts, groups) == sum(map(len, prompts))


def test_shared_prefix_length() -> None:
    assert shared_prefix_length([1, 2, 3], [1, 2, 4, 5]) == 2
    assert shared_prefix_length([1, 2], [1, 2, 3]) == 2
    assert shared_prefix_length([], [1]) == 0


def test_the_model_is_registered_without_importing_torch() -> None:
    """``calidist eval`` and ``calidist_tasks.evaluate`` make ``hf-prefix-cache`` known to lm-eval
    by "module:Class" (torch and transformers load only when a run asks for it), beside lm-eval's
    own models, and the name points at the class the module defines."""
    import ast
    import importlib.util
    import subprocess
    import sys

    code = ("import sys; from calidist_tasks.backends.lm_eval_compat import "
            "register_prefix_cache_model as r; r(); r()\n"
            "from lm_eval.api.registry import model_registry as m\n"
            "print(m._objs['hf-prefix-cache'], 'hf' in m.keys(), 'torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    target, hf, torch = done.stdout.split()
    assert (hf, torch) == ("True", "False")
    module, _, name = target.partition(":")
    source = importlib.util.find_spec(module).origin
    tree = ast.parse(open(source, encoding="utf-8").read())
    assert name in {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
