#!/usr/bin/env bash
# README command 2: install (if needed), lint, and run the test suite offline.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
VENV=${CALIDIST_VENV:-.venv}
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
"$VENV/bin/ruff" check calidist_tasks metrics tests benchmarks
exec "$VENV/bin/python" -m pytest -q "$@"
