.PHONY: demo test bench bench-quick

demo:
	bash scripts/demo.sh

test:
	bash scripts/test.sh

bench:
	bash scripts/setup.sh && .venv/bin/python benchmarks/run.py

bench-quick:
	bash scripts/setup.sh && .venv/bin/python benchmarks/run.py --quick
