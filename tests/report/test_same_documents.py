"""BENCHMARKS.md's reasoned rows beside the direct readout's on the same documents, and the
commands of the Table 4 section, from committed records written here (no model runs).

Each records file is written as ``benchmarks/records.py`` writes one: a reasoned run
(``calidist_ppdb_cot``, ``calidist_ppdb_assertion_cot``: the replies' letter log-probabilities
and their stated confidence, joined by the task's own ``join_document``) in
``<results>/<model>/``, its direct-readout counterparts (``calidist_ppdb``,
``calidist_ppdb_assertion``) in ``<results>/same-documents/<model>/``. The section's numbers
are checked against ECE and accuracy computed here with ``calidist_metrics`` on the records'
own confidences.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

MODEL = "tiny"
CALIB, EVAL = 20, 40
REASONED_COMMAND = ("python benchmarks/run.py --models tiny --benchmarks ppdb --steps reasoned "
                    "--variants cot,assertion_cot --gen-calib 20 --gen-eval 40")
DIRECT_COMMAND = ("python benchmarks/run.py --models tiny --benchmarks ppdb --steps reasoned "
                  "--gen-calib 20 --gen-eval 40")


def letters(rng: np.random.Generator, label: int) -> list[float]:
    """Two letters' log-probabilities, right about 60% of the time."""
    margin = rng.normal(0.6 if rng.random() < 0.6 else -0.6, 1.0)
    values = [margin, 0.0] if label == 0 else [0.0, margin]
    return [v - float(np.logaddexp(*values)) for v in values]


def ppdb_records(task: str, labels: list[int], seed: int) -> list[dict]:
    """One record per document as the task logs it; a reasoned task's also holds its reply's
    stated confidence (``verbalized``) and its replies; m = 1 hint per label where hinted."""
    from calidist_tasks.prompting.verbalized import outcome_from_parse
    from calidist_tasks.scoring.joining import (
        PromptPlan,
        join_document,
        outcome_from_loglikelihoods,
    )

    rng = np.random.default_rng(seed)
    plans = [PromptPlan()] + ([PromptPlan(0, 0), PromptPlan(1, 0)] if "assertion" in task
                              else [])
    reasoned = task.endswith("_cot")
    found = []
    for index, label in enumerate(labels):
        values = [letters(rng, label) for _ in plans]
        outcomes = [outcome_from_loglikelihoods(v, task) for v in values]
        record = join_document(plans, outcomes, label)
        place = {"index": index, "split": "calibration" if index < CALIB else "evaluation",
                 "requests": 2 * len(plans)}
        record.update(place)
        if reasoned:
            stated = [outcome_from_parse({"answer": o.prediction,
                                          "confidence": float(rng.integers(5, 20)) / 20}, 2)
                      for o in outcomes]
            record["verbalized"] = {**join_document(plans, stated, label), **place}
            record["replies"] = [
                {"hint_label": plan.hint_label, "template": plan.template, "counted": True,
                 "answer": o.prediction, "stated_confidence": s.confidence,
                 "letter_logprobs": v}
                for plan, o, s, v in zip(plans, outcomes, stated, values, strict=True)]
        found.append(record)
    return found


def write_records(folder: Path, task: str, sources: list[str], labels: list[int], seed: int,
                  benchmark_command: str) -> list[dict]:
    """``folder/<MODEL>/<task>.jsonl.gz`` as ``records.export`` writes it; returns the
    records."""
    from calidist_tasks.report.stored import FORMAT

    records = ppdb_records(task, labels, seed)
    metadata = {"calib_size": CALIB, "eval_size": EVAL, "seed": 0, "split_seed": 0,
                **({"m": 1} if "assertion" in task else {})}
    reasoned = task.endswith("_cot")
    header = {"format": FORMAT, "model": MODEL, "task": task, "requested": metadata,
              "command": f"calidist eval --model hf --tasks {task} --metadata "
                         f"'{json.dumps(metadata)}'",
              "benchmark_command": benchmark_command, "returncode": 0, "wall_s": 2.0,
              "finished": 1.0e9 + len(task), "exported_on": "test machine",
              "tokens": "characters / 4", "two_stage": False, "reply_tokens": reasoned,
              "lm_eval": {"metrics": {}, "filter": "none", "documents": len(records),
                          "config": {"output_type": "loglikelihood",
                                     "doc_to_choice": ["no", "yes"], "metadata": metadata},
                          "total_evaluation_time_seconds": "1.5"}}
    lines = [header] + [{"source": source, "record": record,
                         "prompts": [[120, 2] for _ in record.get("replies", [None])],
                         "generated": 0,
                         **({"replies": [[100, 40] for _ in record["replies"]]}
                            if reasoned else {})}
                        for source, record in zip(sources, records, strict=True)]
    path = folder / MODEL / f"{task}.jsonl.gz"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress("".join(json.dumps(line) + "\n" for line in lines).encode()))
    return records


def write_runs(results: Path, moved: int = 0) -> dict[str, list[dict]]:
    """The reasoned runs and, in ``same-documents``, their direct readouts; ``moved``: that many
    of the direct readouts' evaluation documents are other documents than the reasoned runs'.
    The original reasoned run's header says which command made it, the assertion one's not."""
    from benchmarks.records import SAME_DOCUMENTS

    rng = np.random.default_rng(7)
    labels = [int(v) for v in rng.integers(2, size=CALIB + EVAL)]
    sources = [f"test.tsv:{3 * i + 2}" for i in range(CALIB + EVAL)]
    elsewhere = sources[:CALIB + EVAL - moved] + [f"dev.tsv:{i}" for i in range(moved)]
    return {
        "calidist_ppdb_cot": write_records(results, "calidist_ppdb_cot", sources, labels, 1,
                                           REASONED_COMMAND),
        "calidist_ppdb_assertion_cot": write_records(results, "calidist_ppdb_assertion_cot",
                                                     sources, labels, 2, ""),
        "calidist_ppdb": write_records(results / SAME_DOCUMENTS, "calidist_ppdb", elsewhere,
                                       labels, 3, DIRECT_COMMAND),
        "calidist_ppdb_assertion": write_records(results / SAME_DOCUMENTS,
                                                 "calidist_ppdb_assertion", sources, labels, 4,
                                                 DIRECT_COMMAND),
    }


def rendered(results: Path) -> str:
    from benchmarks import records
    from benchmarks.commands import parse_args
    from benchmarks.markdown import State, render

    args = parse_args(["--steps", "analysis", "--bootstrap", "20", "--models", MODEL,
                       "--benchmarks", "ppdb", "--results", str(results),
                       "--markdown", str(results.parent / "BENCHMARKS.md")])
    problems: list[str] = []
    return render(State(args=args, machine="test machine",
                        stored=records.load(results, problems), problems=problems))


def section(text: str, title: str) -> str:
    return text.split(f"## {title}")[1].split("\n## ")[0]


def cells(text: str, start: str) -> list[str]:
    line = next(line for line in text.splitlines() if line.startswith(start))
    return [cell.strip() for cell in line.split("|")[1:-1]]


def evaluation(records: list[dict], reading: str = "") -> tuple[np.ndarray, np.ndarray]:
    """(confidence, correct) of the evaluation records, of their ``reading`` when named."""
    chosen = [r[reading] if reading else r for r in records if r["split"] == "evaluation"]
    return (np.array([r["confidence"] for r in chosen]),
            np.array([r["correct"] for r in chosen], dtype=float))


def test_the_reasoned_rows_stand_beside_the_direct_readouts_on_the_same_documents(tmp_path):
    from benchmarks.markdown import SAME_DOCUMENTS_TITLE
    from calidist_metrics import expected_calibration_error

    logged = write_runs(tmp_path / "results")
    text = section(rendered(tmp_path / "results"), SAME_DOCUMENTS_TITLE)
    assert SAME_DOCUMENTS_TITLE == \
        "The reasoned reply beside the direct readout, on the same documents"
    assert (f"`calidist_ppdb_cot` and its direct readout `calidist_ppdb`: same {EVAL} "
            "evaluation documents") in text
    assert ("`calidist_ppdb_assertion_cot` and its direct readout `calidist_ppdb_assertion`: "
            f"same {EVAL} evaluation documents") in text
    assert "WARNING" not in text

    def ece(confidence, correct):
        return 100 * expected_calibration_error(confidence, correct, n_bins=10)

    found = {}
    for start, task, reading in (("| direct readout | Vanilla |", "calidist_ppdb", ""),
                                 ("| reasoned reply | Vanilla (reasoned) |",
                                  "calidist_ppdb_cot", ""),
                                 ("| reasoned reply | Verbalized (reasoned) |",
                                  "calidist_ppdb_cot", "verbalized")):
        confidence, correct = evaluation(logged[task], reading)
        row = cells(text, start)
        assert row[2:4] == [f"`{task}`", f"{EVAL} ⚠"], start
        assert row[4].startswith(f"{100 * correct.mean():.1f} ["), start  # accuracy
        assert row[5].startswith(f"{ece(confidence, correct):.2f} ["), start
        found[task, reading] = ece(confidence, correct)
    # reasoned - direct on the same documents, Vanilla with Vanilla
    paired = cells(text, "| Vanilla (reasoned) | Vanilla |")
    difference = found["calidist_ppdb_cot", ""] - found["calidist_ppdb", ""]
    assert paired[2] == f"{EVAL} ⚠" and paired[3].startswith(f"{difference:+.2f} [")
    # every CaliDist style pairs with the direct readout's of its style; the stated readings
    # (no direct counterpart) pair with nothing
    assert cells(text, "| CaliDist reasoned (As.) | CaliDist (As.) |")[2] == f"{EVAL} ⚠"
    assert cells(text, "| Temperature scaling (reasoned) | Temperature scaling |")
    assert "| Verbalized (reasoned) | Vanilla |" not in text
    assert "| reasoned reply | CaliDist reasoned verbalized (As.) |" in text
    assert f"```\n{DIRECT_COMMAND}\n```" in text


def test_a_direct_readout_on_other_documents_is_named_and_paired_only_where_shared(tmp_path):
    from benchmarks.markdown import SAME_DOCUMENTS_TITLE

    write_runs(tmp_path / "results", moved=5)
    whole = rendered(tmp_path / "results")
    text = section(whole, SAME_DOCUMENTS_TITLE)
    assert ("**WARNING: `calidist_ppdb_cot` and its direct readout `calidist_ppdb` scored "
            f"different documents**: 5 of the reasoned run's {EVAL} evaluation documents are "
            f"not among the direct readout's {EVAL}, and 5 of these not among") in text
    assert ("`calidist_ppdb_assertion_cot` and its direct readout `calidist_ppdb_assertion`: "
            f"same {EVAL} evaluation documents") in text
    assert cells(text, "| Vanilla (reasoned) | Vanilla |")[2] == f"{EVAL - 5} ⚠"
    problems = section(whole, "Problems and warnings of this analysis")
    assert "WARNING: `calidist_ppdb_cot` and its direct readout `calidist_ppdb`" in problems


def test_without_direct_readouts_on_their_documents_the_section_says_how_to_get_them(
        tmp_path):
    import shutil

    from benchmarks.markdown import SAME_DOCUMENTS_TITLE
    from benchmarks.records import SAME_DOCUMENTS

    write_runs(tmp_path / "results")
    shutil.rmtree(tmp_path / "results" / SAME_DOCUMENTS)
    text = section(rendered(tmp_path / "results"), SAME_DOCUMENTS_TITLE)
    assert f"**{MODEL} / PPDB**: not measured yet" in text
    assert f"```\n{REASONED_COMMAND}\n```" in text
    assert "| direct readout |" not in text


def test_table4_names_the_commands_its_records_say_made_them(tmp_path):
    write_runs(tmp_path / "results")
    text = section(rendered(tmp_path / "results"), "The paper's Table 4")
    assert text.count(f"```\n{REASONED_COMMAND}\n```") == 1
    assert ("No `benchmark_command` in the header of the records of "
            f"`calidist_ppdb_assertion_cot` ({MODEL})") in text
    assert "--consistency-calib 100" not in text  # no command that never ran


@pytest.mark.parametrize("reasoned, direct", [("cot", ""), ("assertion_cot", "assertion"),
                                               ("probe_cot", "probe"),
                                               ("corruption_cot", "corruption")])
def test_each_reasoned_variant_has_the_direct_readout_of_its_style(reasoned, direct):
    from benchmarks.analysis import direct_counterpart
    from benchmarks.commands import DIRECT_READOUT
    from calidist_tasks.registry import METHODS, direct_readout, variant_named

    assert direct_readout(reasoned).name == direct
    assert DIRECT_READOUT[f"_{reasoned}"] == (f"_{direct}" if direct else "")
    short = variant_named(reasoned).short
    if short:
        by_label = {m.label: m for m in METHODS}
        assert direct_counterpart(by_label[f"CaliDist reasoned ({short})"]).label == \
            f"CaliDist ({short})"
        assert direct_counterpart(by_label[f"CaliDist reasoned verbalized ({short})"]) is None
