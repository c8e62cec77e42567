"""Benchmarks: calibration quality and cost of every calidist method on real models, offline.

    python benchmarks/run.py --help             # the usual commands, sizes, models and steps

Every task runs once per model through ``calidist eval`` with ``--log_samples`` (and lm-eval's
``--use_cache``, so a killed task resumes). After each finished task its per-document records go
to ``--results`` (``benchmarks/results/<model>/<task>.jsonl.gz``, committed; ``records.py``) and
BENCHMARKS.md is rewritten from those records alone (``page.py``; with ``--full FOLDER`` also the
full analysis, ``markdown.py``, into FOLDER/ANALYSIS.md). A task
whose committed records match the requested sizes is not run again, so a later session continues
where an earlier one stopped. Defaults and commands live in ``commands.py``.
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(ROOT))

from benchmarks import overhead, page, records  # noqa: E402
from benchmarks.commands import (  # noqa: E402
    DIRECT_READOUT,
    GENERATE,
    LOGIT,
    REASONED,
    available_tasks,
    machine,
    model_folder,
    parse_args,
    run_task,
    same_documents_metadata,
    task_command,
    task_commands,
    task_metadata,
)
from benchmarks.markdown import State, render  # noqa: E402
from benchmarks.records import SAME_DOCUMENTS  # noqa: E402

__all__ = ["main", "parse_args", "task_command"]


def write(state: State, export_problems: list[str]) -> bool:
    """Rewrite BENCHMARKS.md (and with ``--full`` the full analysis) from the committed records
    (a report bug never stops the runs)."""
    try:
        problems = list(export_problems)
        state.stored = records.load(state.args.results, problems)
        state.problems = problems
        Path(state.args.markdown).write_text(page.render(state.stored, state.args, problems),
                                             encoding="utf-8")
        if state.args.full:
            state.args.full.mkdir(parents=True, exist_ok=True)
            (state.args.full / "ANALYSIS.md").write_text(render(state), encoding="utf-8")
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        return False
    return True


def failed_runs(out: Path) -> list[str]:
    """Runs under ``out`` (a task's, its replies', a direct readout's on the reasoned documents)
    whose run.json says they did not finish."""
    found = []
    for done in sorted(Path(out).rglob("run.json")):
        try:
            info = json.loads(done.read_text())
        except (OSError, ValueError):
            continue
        if info.get("returncode"):
            found.append(f"{done.parent.relative_to(out).as_posix().replace('/', ' ')} (return "
                         f"code {info['returncode']} after {info.get('wall_s', 0):.0f} s)")
    return found


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    steps = set(args.steps.split(","))
    models = [m for m in args.models.split(",") if m]
    state = State(args=args, machine=machine())
    export_problems: list[str] = []
    model_steps = [(step, suffixes) for step, suffixes in (("logit", LOGIT),
                                                           ("generate", GENERATE),
                                                           ("reasoned", REASONED))
                   if step in steps]
    tasks = available_tasks() if model_steps else set()
    folders: dict[str, str] = {}
    variants = args.variants.split(",")
    for step, suffixes in model_steps:
        for model in models:
            for benchmark in args.benchmarks.split(","):
                for suffix in suffixes:
                    if (suffix.lstrip("_") or "original") not in variants:
                        continue
                    runs = [(suffix, task_metadata(args, benchmark, suffix), args.results,
                             args.out)]
                    if step == "reasoned" and suffix in DIRECT_READOUT:  # same documents
                        runs.append((DIRECT_READOUT[suffix],
                                     same_documents_metadata(args, benchmark, suffix),
                                     args.results / SAME_DOCUMENTS, args.out / SAME_DOCUMENTS))
                    for run_suffix, metadata, results, outs in runs:
                        task = f"calidist_{benchmark}{run_suffix}"
                        if task not in tasks:
                            print(f"[bench] {task} is not among `calidist tasks --full`: "
                                  "not run", flush=True)
                            state.missing.add(task)
                            continue
                        if records.matches(results, model, task, metadata):
                            print(f"[bench] {model} / {task}: committed records in {results} "
                                  "match the requested sizes; not run again", flush=True)
                            continue
                        folder = folders.setdefault(model, model_folder(model))
                        out = outs / model / task
                        for command, where in task_commands(args, model, folder, task,
                                                            run_suffix, benchmark, out,
                                                            metadata):
                            info = run_task(command, where)
                            if info["returncode"]:
                                break
                        if info["returncode"] == 0:
                            records.export(out, model, task, results, info, export_problems)
                        state.failed = failed_runs(args.out)
                        write(state, export_problems)
    # finished runs under --out (also of an earlier invocation) that are not committed yet
    records.export_finished(args.out, args.results, export_problems)
    records.export_finished(args.out / SAME_DOCUMENTS, args.results / SAME_DOCUMENTS,
                            export_problems)
    state.failed = failed_runs(args.out)
    saved = Path(args.results) / "overhead.json"  # committed, so the analysis alone shows it
    if "overhead" in steps:
        state.overhead = overhead.measure_overhead(args.overhead_docs)
        state.overhead["own_share"] = overhead.own_share(args.out / "own-share")
        saved.parent.mkdir(parents=True, exist_ok=True)
        saved.write_text(json.dumps(state.overhead, indent=1) + "\n")
    elif saved.exists():
        state.overhead = json.loads(saved.read_text())
    checked = Path(args.results) / "multiprocess.json"
    if "multiprocess" in steps:
        state.multiprocess = overhead.check_multiprocess(args.out / "multiprocess")
        checked.parent.mkdir(parents=True, exist_ok=True)
        checked.write_text(json.dumps({"summary": state.multiprocess["summary"]}, indent=1)
                           + "\n")
    elif checked.exists():
        state.multiprocess = json.loads(checked.read_text())
    written = write(state, export_problems)
    for problem in export_problems:
        print(f"[bench] {problem}", file=sys.stderr)
    if not written:
        raise SystemExit(f"[bench] {args.markdown} not written (see the error above)")
    print(f"[bench] wrote {args.markdown}"
          + (f" and {args.full / 'ANALYSIS.md'}" if args.full else ""))


if __name__ == "__main__":
    main()
