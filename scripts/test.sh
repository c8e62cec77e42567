#!/usr/bin/env bash
# README command 2: install (if needed), lint, and run the test suite offline.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
VENV=${CALIDIST_VENV:-.venv}
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
# bytecode caches on: the two workers and the CLI subprocesses the tests start each compiled the
# package from source where the environment turned them off (about 20 CPU-s of the fast tier)
unset PYTHONDONTWRITEBYTECODE
"$VENV/bin/ruff" check calidist_tasks metrics tests benchmarks
# Two processes (pytest-xdist), one per core of CI's machine; each test module runs whole in one
# of them (its module-scoped lm-eval runs once). CALIDIST_TEST_WORKERS=0: one process.
# --durations: the slowest tests named at the end of every run (where CI time goes)
exec "$VENV/bin/python" -m pytest -q -n "${CALIDIST_TEST_WORKERS:-2}" --dist loadscope \
    --durations=25 "$@"
