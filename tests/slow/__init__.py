"""The slow tier: tests that build the tiny model or run lm-eval, in folders that mirror
``tests/`` (``tests/slow/report/test_report.py`` is the slow half of
``tests/report/test_report.py``). ``tests/conftest.py`` marks every test here ``slow``; the fast
tier is ``pytest -m "not slow"``, or ``pytest tests --ignore=tests/slow``."""
