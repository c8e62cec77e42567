#!/usr/bin/env bash
# README command 1: install, then CaliDist (assertion hints) on a bundled Twitter URL Corpus sample
# with the offline SmolLM2-135M-Instruct, and print calibrated beside vanilla ECE / Brier / AUROC.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
exec "${CALIDIST_VENV:-.venv}/bin/calidist" demo "$@"
