"""How long README command 1's install takes from nothing, as shipped and with pip compiling
every module, and what the stack's first start costs after each.

    python benchmarks/install_time.py

Per way, one after the other: a new virtual environment in a temporary folder and
``scripts/setup.sh`` with ``CALIDIST_VENV`` pointing at it, as shipped (``pip install
--no-compile``, then one process imports the modules calidist uses and writes their bytecode) and
with ``CALIDIST_PIP_COMPILE=1`` (pip byte-compiles every module it installs, its default); then two
fresh processes import what ``calidist eval --model hf`` imports (the first start compiles what is
left, the second finds the caches). Wall and CPU seconds (user + system, child processes
included) and the 1-minute load average before and after each step. pip reads the same local
wheels both ways; a first ever install also downloads them. The numbers and the command are
written to ``benchmarks/results/install_time.json`` (``--out``); BENCHMARKS.md shows them
(``render``, called by ``page.py``).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(ROOT))

from benchmarks.commands import RESULTS, measured_on, save_measurement  # noqa: E402

MEASURED_BY = "python benchmarks/install_time.py"
# what `calidist eval --model hf` imports before its first request
STARTUP = ("import calidist_tasks.cli, lm_eval.evaluator, lm_eval.tasks, "
           "lm_eval.models.huggingface, transformers.models.llama.modeling_llama")
WAYS = {"as shipped (--no-compile, then the modules calidist imports)": {},
        "pip compiles every module (CALIDIST_PIP_COMPILE=1)": {"CALIDIST_PIP_COMPILE": "1"}}


def _timed(command: list[str], env: dict[str, str]) -> dict[str, float]:
    """Wall and CPU seconds of ``command`` (a child process), load average before and after."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    load, start = os.getloadavg()[0], time.perf_counter()
    subprocess.run(command, check=True, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - used.ru_utime - used.ru_stime
    return {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "load_before": round(load, 2),
            "load_after": round(os.getloadavg()[0], 2)}


def measure_way(extra_env: dict[str, str]) -> dict[str, Any]:
    """``scripts/setup.sh`` into a new virtual environment, then two starts of the stack."""
    with tempfile.TemporaryDirectory(prefix="calidist-install-") as folder:
        venv = Path(folder) / "venv"
        env = {key: value for key, value in os.environ.items()
               if key not in ("PYTHONDONTWRITEBYTECODE", "CALIDIST_PIP_COMPILE")}
        env.update(extra_env, CALIDIST_VENV=str(venv), HF_HUB_OFFLINE="1",
                   TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1")
        install = _timed(["bash", "scripts/setup.sh"], env)
        starts = [_timed([str(venv / "bin" / "python"), "-c", STARTUP], env) for _ in range(2)]
    return {"install": install, "first_start": starts[0], "later_start": starts[1]}


def render(found: dict[str, Any]) -> str:
    """BENCHMARKS.md's section on ``install_time.json``."""
    rows = ["| way | install wall s | install CPU s | first start wall s | first start CPU s "
            "| later start wall s | load before / after the install |",
            "|---|---:|---:|---:|---:|---:|---|"]
    for way, m in found["ways"].items():
        install, first, later = m["install"], m["first_start"], m["later_start"]
        rows.append(f"| {way} | {install['wall_s']} | {install['cpu_s']} | {first['wall_s']} | "
                    f"{first['cpu_s']} | {later['wall_s']} | {install['load_before']} / "
                    f"{install['load_after']} |")
    return "\n".join([
        "## Install time: README command 1's `scripts/setup.sh` from nothing\n",
        f"Measured by `{found['measured_by']}` (`benchmarks/results/install_time.json`) on "
        f"{found['date']}; {found['cpus']} logical CPUs, {found['machine']}, Python "
        f"{found['python']}; pip read local wheels both ways. Each way: a new virtual "
        "environment and `scripts/setup.sh` into it, then two new processes importing what "
        "`calidist eval --model hf` imports (`" + found["startup"] + "`): the first start "
        "compiles what the install left uncompiled, the later one finds the caches. CPU s: user "
        "+ system, child processes included (wall times stretch with the machine's load; CPU "
        "seconds travel better).\n",
        *rows, ""])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=RESULTS / "install_time.json",
                        help="where to write the numbers ('-': print only)")
    args = parser.parse_args(argv)
    save_measurement({"measured_by": MEASURED_BY, "startup": STARTUP, **measured_on(),
                      "ways": {way: measure_way(extra) for way, extra in WAYS.items()}}, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
