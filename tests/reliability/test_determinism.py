"""Determinism: the same command gives byte-identical prompts (lm-eval's prompt_hash, and a hash of
every request's arguments) and identical metrics, across runs, across PYTHONHASHSEED values, and
with 1 or 2 processes. ``--metadata seed`` changes the assertion templates and nothing else
(tests/test_dataset.py::test_seed_changes_assertion_templates_and_nothing_else for PPDB; here for
MNLI with m=3, checking documents and split too).

Two processes: ``accelerate launch --num_processes 2 --cpu`` starts ONE process in accelerate
1.15 (with --cpu it always uses its simple launcher; a multi-process CPU launch needs
--mpirun_hostfile and an MPI install, which this machine lacks), and lm-eval's ``hf`` model shards
documents over processes only when it sees more than one GPU. The test therefore launches with
``torchrun --standalone --nproc_per_node 2`` (the launcher accelerate's multi-GPU mode uses) and
the ``calidist-hf-cpu-dp`` model (tests/reliability/models.py): lm-eval's ``hf`` with rank and world
size taken from accelerate, so lm-eval's real multi-process path runs (documents sharded by rank,
padded, per-document items gathered to rank 0 before our aggregation).
"""

from __future__ import annotations

from pathlib import Path

from conftest import load_task


def test_seed_changes_the_templates_and_nothing_else(mnli_data_dir: Path) -> None:
    base = {"data_dir": str(mnli_data_dir), "calib_size": 5, "eval_size": 6, "m": 3}
    tasks = [load_task("calidist_mnli_assertion", {**base, "seed": seed}) for seed in (0, 1)]
    docs = [list(t.eval_docs) for t in tasks]
    assert docs[0] == docs[1]  # same documents, same split, same order
    templates = [[[p.template for p in t.prompt_plans(d)] for d in t.eval_docs] for t in tasks]
    assert templates[0] != templates[1]
    changed = 0
    for doc in docs[0]:
        prompts = []
        for task in tasks:
            plans = task.prompt_plans(doc)
            prompts.append([task.doc_to_text(doc)] + [task.doc_to_text(task.distracted_doc(doc, p))
                                                      for p in plans[1:]])
        assert prompts[0][0] == prompts[1][0]  # the original prompt
        for a, b in zip(prompts[0][1:], prompts[1][1:], strict=True):
            diff = [(x, y) for x, y in zip(a.splitlines(), b.splitlines(), strict=True) if x != y]
            assert all(x.startswith("Hint: ") and y.startswith("Hint: ") for x, y in diff)
            changed += bool(diff)
    assert changed > 0
