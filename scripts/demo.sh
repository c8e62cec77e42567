#!/usr/bin/env bash
# README command 1: install, then CaliDist (assertion hints) on a bundled Twitter URL Corpus sample
# with the offline SmolLM2-135M-Instruct, and print calibrated beside vanilla ECE / Brier / AUROC.
# The run (lm-eval's results and per-document samples) goes to runs/demo in this clone.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
echo "[demo] converting SmolLM2 once (into ~/.cache/calidist), then running the demo" >&2
exec "${CALIDIST_VENV:-.venv}/bin/calidist" demo --output_path runs/demo "$@"
