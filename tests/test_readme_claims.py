"""What the README says about SmolLM2's answers is what its committed PPDB run holds."""

from pathlib import Path

import numpy as np

from calidist_tasks.report.stored import read_stored

ROOT = Path(__file__).parents[1]


def test_readme_describes_smollm2s_ppdb_answers_as_the_committed_run_holds() -> None:
    run = read_stored(ROOT / "benchmarks/results/smollm2/calidist_ppdb.jsonl.gz")[1]
    documents = [r for r in run.records if r["split"] == "evaluation"]
    not_paraphrase = run.config["doc_to_choice"].index(
        "Sentence2 is not a paraphrase of Sentence1.")
    answered = sum(r["prediction"] == not_paraphrase for r in documents)
    majority = np.mean([r["label"] == not_paraphrase for r in documents])
    accuracy = np.mean([r["correct"] for r in documents])
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert (f'on {len(documents)} pairs of the full PPDB test split, '
            f'`benchmarks/results/smollm2`, it answers "not a paraphrase", the majority class, '
            f'{answered} times and "paraphrase" {len(documents) - answered} times, '
            f'{accuracy:.0%} accurate where always answering the majority class gives '
            f'{majority:.0%}') in readme
