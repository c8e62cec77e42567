"""How long ``calidist report benchmarks/results`` takes: wall and CPU seconds, with the load.

    python benchmarks/report_speed.py                  # once, figures included
    python benchmarks/report_speed.py --repeat 3 --no_figures

Runs the report on the committed per-document records (``benchmarks/results``, 45 tasks of two
models: refits, 1000-resample bootstrap intervals and tests, thresholds, 120 figures as PNG and
PDF) into a temporary folder, as a child process, and measures per run its wall seconds and the
CPU seconds (user + system) of it and of the figure processes it forks
(``resource.RUSAGE_CHILDREN``), beside the machine's CPU count and 1-minute load average before
and after: on a shared machine the wall time is the CPU time stretched by the load, the CPU time
is what the report costs. The numbers and the exact command are written to
``benchmarks/results/report_speed.json`` (``--out``) and printed.
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(ROOT))

from benchmarks.commands import RESULTS, measured_on, save_measurement  # noqa: E402


def calidist() -> list[str]:
    """The ``calidist`` command of this Python's environment (its console script, else the
    module)."""
    script = Path(sys.executable).with_name("calidist")
    return [str(script)] if script.exists() else [sys.executable, "-m", "calidist_tasks.cli"]


def cpu_seconds() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def time_report(records: Path, extra: list[str]) -> dict[str, float]:
    """One ``calidist report`` of ``records`` into a temporary folder: wall and CPU seconds,
    load average before and after."""
    with tempfile.TemporaryDirectory(prefix="calidist-report-speed-") as out:
        command = [*calidist(), "report", str(records), "--out", out, "--quiet", *extra]
        load, cpu, start = os.getloadavg()[0], cpu_seconds(), time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, cwd=ROOT,
                       env={**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
                            "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"})
        wall, cpu = time.perf_counter() - start, cpu_seconds() - cpu
        figures = len(list((Path(out) / "figures").glob("*"))) if "--no_figures" not in extra \
            else 0
    return {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "load_before": round(load, 2),
            "load_after": round(os.getloadavg()[0], 2), "figure_files": figures}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=Path, default=RESULTS,
                        help="the folder to report on (default: benchmarks/results)")
    parser.add_argument("--repeat", type=int, default=1, help="runs to time")
    parser.add_argument("--no_figures", action="store_true", help="tables only")
    parser.add_argument("--out", type=Path, default=RESULTS / "report_speed.json",
                        help="where to write the numbers ('-': print only)")
    args = parser.parse_args(argv)
    extra = ["--no_figures"] if args.no_figures else []
    runs = [time_report(args.records, extra) for _ in range(args.repeat)]
    shown = "benchmarks/results" if args.records.resolve() == RESULTS else str(args.records)
    found = {
        "command": shlex.join(["calidist", "report", shown, "--out", "OUT", "--quiet", *extra]),
        "measured_by": "python benchmarks/report_speed.py"
                       + (f" --repeat {args.repeat}" if args.repeat != 1 else "")
                       + (" --no_figures" if args.no_figures else ""),
        **measured_on(), "runs": runs,
    }
    save_measurement(found, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
