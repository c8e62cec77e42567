"""Slow half of ``tests/report/test_table4.py`` (builds the tiny model or runs lm-eval).

What the module tests: the fast half's docstring."""

from __future__ import annotations

import gzip
import json
import shlex
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import run_lm_eval

from calidist_tasks.scoring.records import line_record

METADATA = {"calib_size": 4, "eval_size": 4, "m": 1, "seed": 0, "split_seed": 0}


MODEL = "tiny"


def written_reply(doc: int, prompt: int) -> str:
    """A reasoned reply in the paper's form, of a length that varies, every fifth unreadable."""
    if (doc + prompt) % 5 == 0:
        return "I would rather not say."
    return ("Step 1: the sentences differ. Confidence: 40%\n" * (1 + prompt % 3)
            + f"So the correct answer is ({'ab'[(doc + prompt) % 2]}) something. Overall "
            f"Confidence: {50 + 5 * prompt}%")


def finished(folder: Path, results: dict, model_dir: Path, metadata: dict, budget: int) -> None:
    """lm-eval's files of ``results`` in ``folder``, and the run.json benchmarks/run.py writes."""
    from calidist_tasks.report import save_like_lm_eval

    save_like_lm_eval(results, folder)
    command = ["calidist", "eval", "--model", "hf", "--model_args",
               f"pretrained={model_dir},dtype=float32", "--tasks", *results["configs"],
               "--metadata", json.dumps(metadata), "--output_path", str(folder),
               "--gen_kwargs", f"max_gen_toks={budget}"]
    (folder / "run.json").write_text(json.dumps({"command": shlex.join(command),
                                                 "returncode": 0, "wall_s": 1.0,
                                                 "finished": 1.0}))


@pytest.fixture(scope="module")
def runs(tiny_model_dir, ppdb_data_dir, tmp_path_factory):
    """Vanilla (reasoned), CaliDist As. m=1 and 15-sample consistency on 8 PPDB documents,
    exported; CaliDist Sa. not run. Returns (results folder, {task: lm-eval results},
    {task: samples lines of its replies})."""
    from benchmarks import records
    from calidist_tasks.report import save_like_lm_eval

    root = tmp_path_factory.mktemp("table4")
    metadata = {**METADATA, "data_dir": str(ppdb_data_dir)}
    results, replies = {}, {}
    for task in ("calidist_ppdb_cot", "calidist_ppdb_assertion_cot"):
        folder = root / "runs" / MODEL / task
        reply_task = task.replace("_cot", "_verbalized")
        generated = run_lm_eval([reply_task], tiny_model_dir, metadata,
                                gen_kwargs="max_gen_toks=2")
        for n, line in enumerate(generated["samples"][reply_task]):
            line["resps"] = [[written_reply(n, i)] for i in range(len(line["resps"]))]
        replies[task] = generated["samples"][reply_task]
        save_like_lm_eval(generated, folder / "replies")
        results[task] = run_lm_eval([task], tiny_model_dir,
                                    {**metadata, "replies": str(folder / "replies")})
        finished(folder, results[task], tiny_model_dir, metadata, 2)
    task = "calidist_ppdb_consistency"
    results[task] = run_lm_eval([task], tiny_model_dir, metadata, gen_kwargs="max_gen_toks=3")
    finished(root / "runs" / MODEL / task, results[task], tiny_model_dir, metadata, 3)
    problems: list[str] = []
    written = records.export_finished(root / "runs", root / "results", problems)
    assert len(written) == 3, problems
    return root, results, replies


def counted(model_dir: Path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    return lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"])


def expected_reasoned(sample: dict, reply_line: dict, tokens) -> dict[str, float]:
    """One document's Table 4 cost counted from its lm-eval samples: the replies CaliDist read
    (m=1: every hint is the first of its label; read: the original and the hints naming another
    label than the original answer), their prompts and texts, and the distinct scored contexts
    after them."""
    record = line_record(sample)
    prompts = [argument[0] for argument in reply_line["arguments"]]
    texts = [resp[0] for resp in reply_line["resps"]]
    answer = record["replies"][0]["answer"]
    read = [j for j, reply in enumerate(record["replies"])
            if reply["hint_label"] is None or reply["hint_label"] != answer]
    contexts = list(dict.fromkeys(argument[0] for argument in sample["arguments"]))
    return {"passes": len(read), "input_tokens": sum(tokens(prompts[j]) for j in read),
            "output_tokens": sum(tokens(texts[j]) for j in read),
            "scoring_passes": len(contexts),
            "scoring_tokens": sum(tokens(context) for context in contexts)}


def mean(costs: list[dict[str, float]]) -> dict[str, float]:
    return {key: float(np.mean([c[key] for c in costs])) for key in costs[0]}


def table4(root: Path):
    from benchmarks import analysis, records

    problems: list[str] = []
    result = analysis.Analysis(records.load(root / "results", problems), n_boot=20)
    return analysis.table4_rows(result), result, problems


def test_table4_counts_the_logged_replies_and_scorings_and_shows_the_aggregations_ece(
        runs, tiny_model_dir):
    root, results, replies = runs
    found, result, problems = table4(root)
    rows = {row.method.label: row for row in found[(MODEL, "ppdb")]}
    tokens = counted(tiny_model_dir)
    for label, task, metric in (("Vanilla (reasoned)", "calidist_ppdb_cot", "ece_vanilla"),
                                ("CaliDist As. (m=1)", "calidist_ppdb_assertion_cot", "ece")):
        by_index = {line["doc"]["calidist_index"]: line for line in replies[task]}
        samples = results[task]["samples"][task]
        expected = mean([expected_reasoned(s, by_index[line_record(s)["index"]], tokens)
                         for s in samples])
        row = rows[label]
        assert (row.task, row.documents) == (task, len(samples))
        assert row.cost == pytest.approx(expected), label
        assert row.ece == pytest.approx(results[task]["results"][task][f"{metric},none"])
    # the rewritten replies are read: some scored, some not (unreadable, or naming the answer)
    assert 1 < rows["CaliDist As. (m=1)"].cost["scoring_passes"] < \
        rows["CaliDist As. (m=1)"].cost["passes"]
    task = "calidist_ppdb_consistency"
    samples = results[task]["samples"][task]
    expected = mean([{"passes": sum(len(r) for r in s["resps"]),
                      "input_tokens": sum(tokens(a[0]) * len(r) for a, r in
                                          zip(s["arguments"], s["resps"], strict=True)),
                      "output_tokens": sum(tokens(text) for r in s["resps"] for text in r),
                      "scoring_passes": 0, "scoring_tokens": 0} for s in samples])
    row = rows["Self-consistency (entropy), 15 samples"]
    assert expected["passes"] == 15 and row.cost == pytest.approx(expected)
    assert "max_gen_toks=3, the Vanilla reply at 2" in row.why  # not the paper's 15 x reply
    # NaN: the random model's samples are unreadable (the aggregation's rule), in both
    assert row.ece == pytest.approx(results[task]["results"][task]["ece_entropy,none"],
                                    nan_ok=True)
    missing = rows["CaliDist Sa."]
    assert missing.cost is None and "not measured" in missing.why
    assert "calidist_ppdb_corruption_cot" in missing.why


def test_table4_is_rendered_beside_the_papers_with_ratios_to_vanilla(runs, tmp_path):
    from benchmarks import records
    from benchmarks.commands import parse_args
    from benchmarks.markdown import State, render

    root, _, _ = runs
    found, _, problems = table4(root)
    args = parse_args(["--steps", "analysis", "--bootstrap", "20", "--models", f"{MODEL},other",
                       "--benchmarks", "ppdb", "--results", str(root / "results"),
                       "--markdown", str(tmp_path / "BENCHMARKS.md")])
    text = render(State(args=args, machine="test machine",
                        stored=records.load(root / "results", problems)))
    section = text.split("## The paper's Table 4")[1].split("\n## ")[0]
    rows = {row.method.label: row for row in found[(MODEL, "ppdb")]}
    vanilla, assertion = rows["Vanilla (reasoned)"].cost, rows["CaliDist As. (m=1)"].cost
    line = next(line for line in section.splitlines() if line.startswith("| CaliDist As."))
    cells = [cell.strip() for cell in line.split("|")[1:-1]]
    assert cells[4] == f"{assertion['passes'] / vanilla['passes']:.2f}x"
    assert cells[6] == f"{assertion['input_tokens'] / vanilla['input_tokens']:.2f}x"
    assert cells[8] == f"{assertion['output_tokens'] / vanilla['output_tokens']:.2f}x"
    assert cells[-6:-2] == ["3", "3 × 98", "3 × 1402", "8.02"]  # the paper's, beside
    assert cells[-2:] == ["-", "-"]  # no one-line-exemplar run of this model to compare with
    assert "| CaliDist Sa. | not measured: no committed records of" in section
    assert "**other / PPDB**: not measured yet" in section
    assert "10 equal-width bins" in section
    # the fixture's run.json holds no benchmarks/run.py command: said, none made up
    unsaid = next(line for line in section.splitlines() if line.startswith(
        "No `benchmark_command` in the header of the records of "))
    assert f"`calidist_ppdb_cot` ({MODEL})" in unsaid
    assert "```\npython benchmarks/run.py" not in section


def test_reasoned_records_exported_without_their_replies_tokens_are_exported_again(runs,
                                                                                    tmp_path):
    """Records written before the replies' tokens were kept: the next export of the same
    finished run writes them again, with the tokens; others are left as they are."""
    from benchmarks import records

    root, _, _ = runs
    shutil.copytree(root / "results", tmp_path / "results")
    path = records.path_for(tmp_path / "results", MODEL, "calidist_ppdb_cot")
    lines = [json.loads(line) for line in gzip.decompress(path.read_bytes()).splitlines()]
    del lines[0][records.REPLY_TOKENS]
    for line in lines[1:]:
        del line["replies"]
    path.write_bytes(gzip.compress("".join(json.dumps(line) + "\n" for line in lines).encode()))
    written = records.export_finished(root / "runs", tmp_path / "results", [])
    assert written == [path]
    assert path.read_bytes() == records.path_for(root / "results", MODEL,
                                                 "calidist_ppdb_cot").read_bytes()
