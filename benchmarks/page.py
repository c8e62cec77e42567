"""BENCHMARKS.md: the short page, rewritten from the committed records alone.

    python benchmarks/run.py --steps analysis                  # BENCHMARKS.md
    python benchmarks/run.py --steps analysis --full runs/bench-analysis   # and the full analysis

The calibration tables are ``calidist report``'s interval table (``report.tables.intervals`` on
``report.cells.leaderboard_cells``), one per model and benchmark; Table 4 is counted by
``analysis.table4_rows`` beside the paper's numbers (``paper_numbers.json``); the backend table
is ``backend_speed.render`` of ``results/backend_speed.json``, the install times
``install_time.render`` of ``results/install_time.json``. Every number is computed from
those files, none typed in here.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks import analysis as an
from benchmarks.backend_speed import render as backend_table
from benchmarks.commands import BENCH_NAMES, MODELS, portable, without_markdown
from benchmarks.install_time import render as install_table
from benchmarks.records import Stored, load
from calidist_tasks.registry import ECE_BINNING
from calidist_tasks.report.cells import Cell
from calidist_tasks.report.identity import group_names
from calidist_tasks.report.tables import UNREADABLE, Table, benchmark_title, intervals
from calidist_tasks.scoring.aggregation import reasoning_metrics
from calidist_tasks.scoring.records import CALIBRATION, EVALUATION

COMMAND = "python benchmarks/run.py --steps analysis"
TABLE4_TITLE = "The paper's Table 4: cost and ECE of the reasoned protocol"
# Table 4's rows measured with the one-line exemplars the Appendix F exemplars replaced
ONE_LINE_EXEMPLARS = Path(__file__).with_name("results") / "one_line_exemplars.json"
# benchmarks/wrapped.py's records (results/wrapped/<model>/) and numbers
WRAPPED_RECORDS, WRAPPED_SUMMARY = "wrapped", "wrapped_aqua_mc.json"


def bench(benchmark: str) -> str:
    return BENCH_NAMES.get(benchmark, benchmark)


def made_by(stored: Sequence[Stored]) -> list[str]:
    """The benchmarks/run.py invocations that made ``stored``'s records (their headers'
    ``benchmark_command``), oldest first, each once."""
    headers = sorted((s.header for s in stored), key=lambda h: h.get("finished") or 0)
    return list(dict.fromkeys(without_markdown(h["benchmark_command"]) for h in headers
                              if h.get("benchmark_command")))


def command_blocks(stored: Sequence[Stored], together: bool = False) -> list[str]:
    """Each command that made ``stored``'s records in its own code block (``together``: all in
    one), then the records whose header does not say which command made them."""
    commands = made_by(stored)
    blocks = ([f"```\n{command}\n```\n" for command in commands] if not together else
              ["```\n" + "\n".join(commands) + "\n```\n"] if commands else [])
    unsaid = sorted({f"`{s.task}` ({s.model})" for s in stored
                     if not s.header.get("benchmark_command")})
    if unsaid:
        blocks.append("No `benchmark_command` in the header of the records of "
                      + ", ".join(unsaid) + ": the command that made them is not known (not "
                      "run by `benchmarks/run.py`).\n")
    return blocks


def sizes_table(stored: Sequence[Stored]) -> Table:
    """One row per model, benchmark and document sizes: the tasks run at those sizes."""
    groups: dict[tuple[str, str, int, int], list[str]] = {}
    for s in stored:
        calibration = sum(r["split"] == CALIBRATION for r in s.run.records)
        key = (s.model, s.benchmark, calibration, len(s.run.records) - calibration)
        groups.setdefault(key, []).append(s.suffix.lstrip("_") or "original")
    table = Table(["model", "weights", "benchmark", "calibration docs", "evaluation docs",
                   "tasks (calidist_<benchmark>_…)"])
    for (model, benchmark, calibration, evaluation), tasks in sorted(
            groups.items(), key=lambda item: (item[0][0], item[0][1], -item[0][3])):
        table.rows.append([model, MODELS.get(model, "?"), bench(benchmark), str(calibration),
                           str(evaluation), ", ".join(sorted(tasks))])
    return table


def split_by_block(wide: Table, accuracy: Mapping[tuple[str, str, str], float]
                   ) -> dict[tuple[str, str], Table]:
    """``intervals``' wide table as one table per model and benchmark (their columns dropped,
    the bold marks kept), with each row's accuracy (x100, keyed like the rows: model,
    benchmark, method) after its document count."""
    found: dict[tuple[str, str], Table] = {}
    for i, row in enumerate(wide.rows):
        table = found.setdefault((row[0], row[1]),
                                 Table([*wide.columns[2:4], "Acc", *wide.columns[4:]]))
        table.marks |= {(len(table.rows), j - 2 + (j >= 4)) for (r, j) in wide.marks if r == i}
        table.rows.append([*row[2:4], 100 * accuracy[tuple(row[:3])], *row[4:]])
    return found


def block_accuracy(cells: Sequence[Cell], names: Mapping[str, str]
                   ) -> dict[tuple[str, str, str], float]:
    """Each rebuilt cell's accuracy, keyed as ``intervals`` names its row."""
    return {(names[c.model], benchmark_title(c.benchmark),
             c.method.label + (f" {UNREADABLE}" if c.unreadable else "")): c.accuracy
            for c in cells if c.confidence is not None}


def majority(cells: Sequence[Cell], benchmark: str) -> tuple[Cell, float] | None:
    """The original task's vanilla cell of ``benchmark`` among ``cells`` and its majority
    label's share of the evaluation documents (what an accuracy near chance is compared with);
    None without that task's records."""
    own = [c for c in cells if c.benchmark == benchmark and c.method.own
           and c.run.task == f"calidist_{benchmark}" and c.run.records]
    if not own:
        return None
    labels = [r["label"] for r in own[0].run.records if r["split"] == EVALUATION]
    return own[0], max(labels.count(label) for label in set(labels)) / len(labels)


def majority_share(cells: Sequence[Cell], benchmark: str) -> str:
    """``majority``'s share as a heading's suffix."""
    found = majority(cells, benchmark)
    if found is None:
        return ""
    cell, share = found
    return f" (majority label: {100 * share:.1f}% of {cell.run.task}'s {cell.n})"


def chance_caveat(cells: Sequence[Cell], names: Mapping[str, str]) -> str:
    """The caveat line: each model's direct-readout accuracy beside its majority label's
    share, per benchmark, and whether any model beats it."""
    found = sorted((names[model], benchmark, *majority_of)
                   for model, benchmark in {(c.model, c.benchmark) for c in cells}
                   if (majority_of := majority([c for c in cells if c.model == model],
                                               benchmark)) is not None)
    shown = "; ".join(f"{model} / {benchmark_title(benchmark)} {100 * cell.accuracy:.1f}% "
                      f"against {100 * share:.1f}%" for model, benchmark, cell, share in found)
    above = [f"{model} / {benchmark_title(benchmark)}" for model, benchmark, cell, share
             in found if cell.accuracy > share]
    verdict = (f"only {', '.join(above)} beats its majority label" if above
               else "no model beats the majority label on any benchmark")
    return (f"- **The models are near chance: {verdict}** (the direct readout's accuracy on "
            f"the evaluation documents against the majority label's share: {shown}; and "
            "compare each table's AUROC with 50): these rows prove the pipeline, the refits "
            "and the counting, not the method. The paper's models are 8B.\n")


def below_majority(result: an.Analysis, model: str, benchmark: str) -> str | None:
    """Why ``model`` has no reasoned run on ``benchmark`` where its direct readout does not beat
    the majority label there (the reasoned protocol is run on a model that does); None where it
    does, or where its direct readout has no records."""
    stored = result.runs.get((model, benchmark, ""))
    found = stored and majority([c for c in result.cells if c.run is stored.run], benchmark)
    if not found or found[0].accuracy > found[1]:
        return None
    cell, share = found
    return (f"not run: its direct readout is right on {100 * cell.accuracy:.1f}% of "
            f"{cell.run.task}'s {cell.n} evaluation documents, not above the majority label's "
            f"{100 * share:.1f}%, so its reasoned rows would show the protocol on a model that "
            "does not do the task.")


def _times(value: float, base: float | None) -> str:
    return f"{value / base:.2f}x" if base else "-"


def table4_table(rows: Sequence[an.Table4Row], paper: Mapping[str, Mapping[str, Any]],
                 before: Mapping[str, Mapping[str, Any]] | None = None,
                 not_rerun: frozenset[str] = frozenset()) -> Table:
    """Our Table 4 rows of one model and benchmark, with the paper's beside (ratios to our
    Vanilla row, as the paper gives them) and ``before``'s (the one-line exemplars' rows,
    ``ONE_LINE_EXEMPLARS``) for comparison; a task in ``not_rerun`` is still the one-line
    exemplars' run, said in its task cell."""
    table = Table(["method", "task", "documents", "forward passes/doc", "× Vanilla",
                   "input tokens/doc", "× Vanilla", "output tokens/doc", "× Vanilla",
                   "letter-scoring passes/doc", "scoring input tokens/doc", "ECE",
                   "paper: passes", "paper: output tokens", "paper: input tokens", "paper: ECE",
                   "one-line exemplars: output tokens/doc", "one-line exemplars: ECE"])
    vanilla = rows[0].cost  # TABLE4 lists Vanilla first
    for row in rows:
        theirs = paper[row.method.label]
        stale = row.task in not_rerun
        old = None if stale else (before or {}).get(row.method.label)
        theirs = [theirs["passes"], theirs["output_tokens"], theirs["input_tokens"],
                  f"{theirs['ece']:.2f}",
                  *([f"{old['output_tokens']:.0f}", "NaN" if old["ece"] is None
                     else f"{old['ece']:.2f}"] if old else ["-", "-"])]
        if row.cost is None:
            table.rows.append([row.method.label, row.why, *["-"] * 10, *theirs])
            continue
        cost = row.cost
        task = row.task + (f" ({row.why})" if row.why else "") + (
            " (one-line exemplars: not rerun yet)" if stale else "")
        ece = (f"{100 * row.ece:.2f}" if math.isfinite(row.ece)
               else "NaN (replies mostly unreadable)")
        table.rows.append([
            row.method.label, task, str(row.documents), f"{cost['passes']:.1f}",
            _times(cost["passes"], vanilla and vanilla["passes"]), f"{cost['input_tokens']:.0f}",
            _times(cost["input_tokens"], vanilla and vanilla["input_tokens"]),
            f"{cost['output_tokens']:.0f}",
            _times(cost["output_tokens"], vanilla and vanilla["output_tokens"]),
            f"{cost['scoring_passes']:.1f}", f"{cost['scoring_tokens']:.0f}", ece, *theirs])
    return table


def table4_section(result: an.Analysis, wanted: Sequence[tuple[str, str]],
                   commands_above: bool = False) -> list[str]:
    """Table 4 per model and benchmark; for those ``wanted`` without reasoned records, why
    (``below_majority``) or "not measured yet". ``commands_above``: its records' commands are not
    repeated (the page lists them above)."""
    found = an.table4_rows(result)
    paper = an.paper_numbers()["table4"]
    before = json.loads(ONE_LINE_EXEMPLARS.read_text(encoding="utf-8"))
    counted = [stored for model, benchmark in found for method in an.TABLE4
               if (stored := result.runs.get((model, benchmark, method.suffix)))]
    parts = [
        f"## {TABLE4_TITLE}\n",
        "Means per document over the documents each reasoned run logged, counted from the "
        "records (`benchmarks/analysis.py` `table4_rows`), beside the paper's own row "
        f"({paper['model']} on {paper['dataset']}: another model and dataset). Forward passes: "
        "replies generated (Vanilla: one reply; self-consistency: 15 samples; CaliDist: the "
        "original reply and one hinted reply per other label, 1 + (c − 1)·m, where the paper "
        "counts (c − 1)·m). Letter-scoring passes (ours, not in the paper's count): reading p "
        "from the option letters after each reply. "
        f"ECE x100 on the evaluation documents ({ECE_BINNING}). Made by"
        + (" the reasoned commands of \"Models and sizes\" above.\n" if commands_above else ":\n"),
        *(command_blocks(counted) if counted and not commands_above else []),
    ]
    if not counted:
        parts.append("No committed records of a reasoned task yet.\n")
    for model, benchmark in wanted:
        rows = found.get((model, benchmark))
        if rows is None:
            parts.append(f"**{model} / {bench(benchmark)}**: "
                         + (below_majority(result, model, benchmark)
                            or "not measured yet (no committed records of a reasoned `_cot` "
                               "task).") + "\n")
            continue
        parts += [f"**{model} / {bench(benchmark)}**\n",
                  table4_table(rows, paper["rows"], before["rows"].get(f"{model}/{benchmark}"),
                               not_rerun(result, model, before)).markdown() + "\n"]
    shapes = reasoning_table(result)
    if shapes.rows:
        parts += ["**Does the model reason?** Over each reasoned run's evaluation replies "
                  "(`reasoning_metrics`): replies with two or more step lines before their "
                  "answer, cut where they ran on, readable (answer and overall confidence), "
                  "repeating a line of an exemplar word for word (copied steps are the "
                  "exemplar's reasoning, not the model's), and output tokens per reply beside "
                  "Table 4's 74.\n", shapes.markdown() + "\n"]
    return parts


def not_rerun(result: an.Analysis, model: str, before: Mapping[str, Any]) -> frozenset[str]:
    """``model``'s reasoned tasks whose records were made with the one-line exemplars
    (finished before ``before["finished_before"]``, ``ONE_LINE_EXEMPLARS``)."""
    return frozenset(stored.task for stored in result.stored if stored.model == model
                     and stored.task.endswith(("_cot", "_consistency"))
                     and (stored.header.get("finished") or 0) < before["finished_before"])


def reasoning_table(result: an.Analysis) -> Table:
    """The reply shapes of every reasoned run whose records carry them, in percent."""
    table = Table(["model", "task", "replies", "≥ 2 steps", "cut", "readable",
                   "copying an exemplar", "output tokens/reply (paper: 74)"])
    for stored in result.stored:
        evaluation = [r for r in stored.run.records if r.get("split") == EVALUATION]
        shape = reasoning_metrics(evaluation)
        if not shape:
            continue
        replies = sum(r["reply_shape"]["replies"] for r in evaluation if r.get("reply_shape"))
        table.rows.append([stored.model, stored.task, f"{replies:.0f}",
                           *(f"{100 * shape[key]:.0f}%" for key in (
                               "reasoned_rate", "cut_rate", "readable_rate", "copied_rate")),
                           f"{shape['output_tokens_per_reply']:.0f}"])
    return table


def refits_and_intervals(stored: Sequence[Stored], bootstrap: int, notes: list[str]
                         ) -> tuple[an.Analysis, dict[str, str], Table]:
    """The refits of ``stored`` (once), the models' display names, and ``calidist report``'s
    wide interval table of them."""
    result = an.Analysis(list(stored), n_boot=0)
    names = group_names(s.run for s in stored)
    wide, _ = intervals(result.cells, names, bootstrap, 0, notes)
    return result, names, wide


def calibration_blocks(stored: Sequence[Stored], bootstrap: int, notes: list[str]
                       ) -> tuple[an.Analysis, dict[str, str], list[str]]:
    """The refits of ``stored``, the models' display names, and their interval table, one
    headed block per model and benchmark (the majority label's share in the heading)."""
    result, names, wide = refits_and_intervals(stored, bootstrap, notes)
    blocks = split_by_block(wide, block_accuracy(result.cells, names))
    titles = {benchmark_title(b): b for b in {c.benchmark for c in result.cells}}
    parts = []
    for (model, title), table in sorted(blocks.items()):
        mine = [c for c in result.cells if names[c.model] == model]
        parts += [f"### {model} / {title}{majority_share(mine, titles[title])}\n",
                  table.markdown() + "\n"]
    return result, names, parts


WRAPPED_METHODS = ("Vanilla", "Temperature scaling", "CaliDist (As.)", "CaliDist (Pr.)")


def wrapped_section(results: Path, bootstrap: int, problems: list[str]) -> list[str]:
    """The wrapped-task evidence of ``benchmarks/wrapped.py`` in one row per model: an lm-eval
    config with no calidist in it, wrapped by ``calidist wrap``; ECE with its interval per
    method, AUROC, and how far ``calidist report`` on the plain lm-eval run is from the wrapped
    task's own numbers."""
    stored = load(results / WRAPPED_RECORDS, problems)
    if not stored:
        return []
    result, names, wide = refits_and_intervals(stored, bootstrap, problems)
    ece, auroc = (wide.columns.index(f"{title} (95% CI)") for title in ("ECE", "AUROC"))
    accuracy = block_accuracy(result.cells, names)
    summary_file = results / WRAPPED_SUMMARY
    summary = json.loads(summary_file.read_text(encoding="utf-8")) if summary_file.exists() \
        else {}
    table = Table(["model", "docs (calibration + evaluation)", "Acc",
                   *(f"ECE {method}" for method in WRAPPED_METHODS),
                   "AUROC vanilla / CaliDist (As.)", "plain run rebuilt: max abs. difference"])
    for model in sorted({row[0] for row in wide.rows}):
        rows = {row[2]: row for row in wide.rows if row[0] == model}
        mine = next(s for s in stored if names[s.run.model] == model)
        calibration = sum(r["split"] == CALIBRATION for r in mine.run.records)
        differences = summary.get("models", {}).get(mine.model, {}).get(
            "plain_report_max_abs_difference")
        table.rows.append([
            model, f"{calibration} + {len(mine.run.records) - calibration}",
            f"{100 * accuracy[(model, rows['Vanilla'][1], 'Vanilla')]:.2f}",
            *(rows[m][ece] if m in rows else "–" for m in WRAPPED_METHODS),
            " / ".join(rows[m][auroc] if m in rows else "–"
                       for m in ("Vanilla", "CaliDist (As.)")),
            f"{max(differences.values()):.0e} over {len(differences)} methods"
            if differences else "not run"])
    return ["## A wrapped lm-eval task: AQuA as a plain multiple-choice config\n",
            "`benchmarks/wrapped/aqua_mc.yaml` is an lm-eval config with no calidist in it "
            "(MMLU-style prompt, choices A to E, this machine's 508 AQuA questions); `calidist "
            "wrap aqua_mc` derived `calidist_aqua_mc` (vanilla, post-hoc), `_assertion` and "
            "`_probe` (docs/wrap.md); 200 seeded held-out calibration documents. x100, 95% "
            "intervals as above; last column: `calidist report` on the plain `lm_eval --tasks "
            "aqua_mc --log_samples` run against the wrapped task's own accuracy, ECE, Brier and "
            "AUROC (vanilla and post-hoc rows; x100, leaderboard.csv rounds to 1e-4). Made by `"
            + "`, `".join(made_by(stored)) + "` (records: `benchmarks/results/wrapped/`).\n",
            table.markdown() + "\n"]


def render(stored: Sequence[Stored], args: Any, problems: Sequence[str] = ()) -> str:
    """BENCHMARKS.md from the committed records ``stored`` (``records.load``) and
    ``args.results/backend_speed.json`` and ``install_time.json``."""
    notes: list[str] = []
    result, names, blocks = calibration_blocks(stored, args.bootstrap, notes)
    wanted = sorted({(s.model, s.benchmark) for s in stored}
                    | {(model, benchmark) for model in args.models.split(",") if model
                       for benchmark in args.benchmarks.split(",") if benchmark})
    parts: list[Any] = [
        "# Benchmarks: calibration and cost on small models\n",
        f"Written by `{COMMAND}` from the committed per-document records in "
        "`benchmarks/results/` alone (no model runs; benchmarks/README.md says how long it "
        "takes). The full per-method analysis (paired tests against temperature scaling, "
        "calibrator variants, ablations, cost with m-subsets, the reasoned reply beside the "
        f"direct readout) is written on demand, not committed: `{COMMAND} --full "
        "runs/bench-analysis`.\n",
        "## Caveats\n",
        chance_caveat(result.cells, names)
        + "- The document counts are small (below), and the reasoned runs tiny: read the "
        "intervals, not the points. Many comparisons share the same documents.\n"
        "- The model runs shared 2 CPU cores with other jobs at a lowered priority: wall times "
        "are upper bounds; request and token counts are exact.\n",
        "## Models and sizes\n",
        sizes_table(stored).markdown() + "\n",
        "The commands that made the records (each record's header also holds its exact "
        "`calidist eval` command; the model folder is `$(calidist model NAME)`):\n",
        *command_blocks(stored, together=True),
        "## Calibration on the held-out evaluation documents\n",
        f"`calidist report`'s interval table, x100: Acc: accuracy; {ECE_BINNING}; Brier: "
        "binary top-label; "
        "AUROC: confidence as a detector of correct answers. Brackets: 95% percentile "
        f"bootstrap over documents ({args.bootstrap} resamples, seed 0). Δ = method − the "
        "same task's vanilla confidence on the same documents, with the paired bootstrap "
        "p-value (**bold**: p < 0.05); – where the method changes the predictions (no paired "
        "vanilla).\n",
    ]
    parts += blocks
    parts += table4_section(result, wanted, commands_above=True)
    problems = list(problems)
    parts += wrapped_section(Path(args.results), args.bootstrap, problems)
    saved = Path(args.results) / "backend_speed.json"
    if saved.exists():
        parts.append(backend_table(json.loads(saved.read_text(encoding="utf-8"))) + "\n")
    saved = Path(args.results) / "install_time.json"
    if saved.exists():
        parts.append(install_table(json.loads(saved.read_text(encoding="utf-8"))))
    problems = list(dict.fromkeys([*problems, *result.problems]))
    if problems:
        parts += ["## Problems of this analysis\n", *(f"- {p}" for p in problems), ""]
    return portable("\n".join(str(p) for p in parts)).rstrip("\n") + "\n"
