"""How ``--model hf-prefix-cache`` (``backends.prefix_cache``) batches prompts over their shared
prefixes: plain token arithmetic, without torch or lm-eval's HF model, so that it is tested (and
imported) without them."""

from __future__ import annotations

from collections.abc import Sequence


def shared_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    """Number of leading tokens ``a`` and ``b`` have in common."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def prefix_groups(inputs: Sequence[Sequence[int]], scored: Sequence[int],
                  batch_size: int) -> list[tuple[list[int], int]]:
    """Batches of ``inputs`` that share a prefix: ``(indices, shared prefix length)`` in run order.

    Inputs are taken in token order, so that those with a common prefix are neighbours. Neighbours
    sharing at least half of the shorter one are one family (a document's prompts); a family is
    run in batches of ``batch_size``, and inputs that share little with their neighbours (unrelated
    prompts) are batched together. A batch's prefix is what all its inputs share, but never an
    input's last ``scored[i]`` tokens, whose log-probabilities must be computed.
    """
    order = sorted(range(len(inputs)), key=lambda i: tuple(inputs[i]))
    families: list[list[int]] = []
    for i in order:
        if families:
            last = inputs[families[-1][-1]]
            if 2 * shared_prefix_length(last, inputs[i]) >= min(len(last), len(inputs[i])):
                families[-1].append(i)
                continue
        families.append([i])
    batches: list[list[int]] = []
    loose: list[int] = []
    for family in families:
        if len(family) == 1:
            loose += family
        else:
            batches += [family[k:k + batch_size] for k in range(0, len(family), batch_size)]
    batches += [loose[k:k + batch_size] for k in range(0, len(loose), batch_size)]
    groups = []
    for batch in batches:
        first = inputs[batch[0]]
        shared = min(min(shared_prefix_length(first, inputs[i]), len(inputs[i]) - scored[i])
                     for i in batch)
        groups.append((batch, max(shared, 0)))
    return groups
