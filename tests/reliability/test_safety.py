"""Safe by construction: no pickle or code execution on load, no shell, no trust_remote_code unless
the user passes it, calibrators and reports written as JSON / CSV / Markdown / PNG only, and report
text that dataset or model names cannot break."""

from __future__ import annotations

import ast
import csv
import functools
import importlib.util
import inspect
import json
import re
import tokenize
from pathlib import Path

import numpy as np
import pytest
import yaml

from calidist_metrics import CALIDIST_COLUMNS, CaliDistCalibrator, save_calibrator, stack_columns
from calidist_tasks import cli, task_folder
from calidist_tasks.data.yaml_configs import _parsed

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted([*ROOT.glob("calidist_tasks/**/*.py"), *ROOT.glob("metrics/**/*.py")])
UNSAFE_MODULES = {"pickle", "cPickle", "_pickle", "dill", "joblib", "marshal", "shelve",
                  "subprocess", "pty", "commands"}
UNSAFE_CALLS = {("os", "system"), ("os", "popen"), ("os", "execv"), ("os", "execvp"),
                ("os", "spawnv"), ("torch", "load"), ("np", "load"), ("numpy", "load"),
                ("yaml", "unsafe_load"), ("yaml", "full_load")}
UNSAFE_BUILTINS = {"eval", "exec", "compile", "__import__"}


@functools.cache
def tokens(path: Path) -> list[tokenize.TokenInfo]:
    """The code tokens of ``path``, read once for every test here."""
    with path.open("rb") as handle:
        return [t for t in tokenize.tokenize(handle.readline)
                if t.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE)]


def findings(path: Path) -> list[str]:
    """Unsafe constructs in one source file (code only: comments and docstrings do not count,
    method calls such as ``model.eval()`` or ``re.compile`` are not the builtins)."""
    found = []
    toks = tokens(path)
    for i, tok in enumerate(toks):
        prev = toks[i - 1].string if i else ""
        nxt = toks[i + 1].string if i + 1 < len(toks) else ""
        where = f"{path.relative_to(ROOT)}:{tok.start[0]}"
        if tok.type == tokenize.NAME:
            if prev in ("import", "from") and tok.string in UNSAFE_MODULES:
                found.append(f"{where} imports {tok.string}")
            if tok.string in UNSAFE_BUILTINS and nxt == "(" and prev != ".":
                found.append(f"{where} calls {tok.string}()")
            if prev == "." and i >= 2 and (toks[i - 2].string, tok.string) in UNSAFE_CALLS:
                found.append(f"{where} calls {toks[i - 2].string}.{tok.string}")
            if tok.string in ("shell", "allow_pickle") and nxt == "=" and \
                    toks[i + 2].string == "True":
                found.append(f"{where} passes {tok.string}=True")
        if "trust_remote_code" in tok.string:  # a name, keyword or string in code
            found.append(f"{where} mentions trust_remote_code")
    return found


def test_the_scanner_finds_what_it_looks_for(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import pickle\nimport subprocess as sp\nx = eval('1')\nos.system('ls')\n"
                   "sp.run('ls', shell=True)\nnp.load(f, allow_pickle=True)\n"
                   "m = AutoModel.from_pretrained(p, trust_remote_code=True)\n"
                   "model.eval()  # a method, fine\n", encoding="utf-8")
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        found = findings(bad)
    finally:
        ROOT = saved
    assert [f.split(" ", 1)[1] for f in found] == [
        "imports pickle", "imports subprocess", "calls eval()", "calls os.system",
        "passes shell=True", "calls np.load", "passes allow_pickle=True",
        "mentions trust_remote_code"]


def test_package_has_no_pickle_eval_exec_shell_or_remote_code() -> None:
    assert len(SOURCES) > 20
    assert [f for path in SOURCES for f in findings(path)] == []


def test_yaml_is_read_with_a_safe_loader_only() -> None:
    calls = []
    for path in SOURCES:
        toks = tokens(path)
        calls += [(path, t.start[0]) for i, t in enumerate(toks) if t.string == "load"
                  and toks[i - 1].string == "." and toks[i - 2].string == "yaml"]
    assert [(p.name, line) for p, line in calls] == [("yaml_configs.py", calls[0][1])]
    source = inspect.getsource(_parsed)  # the one yaml.load, task_configs' file reader
    # libyaml's CSafeLoader where installed, else the pure-Python SafeLoader: both safe
    assert ('class Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader))' in source
            and "Loader=Loader" in source)


def test_task_yaml_asks_for_no_remote_code_and_imports_only_our_adapters() -> None:
    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))
    files = [*Path(task_folder()).rglob("*.yaml"), *Path(task_folder()).rglob("_template_yaml")]
    assert len(files) > 50
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert "trust_remote_code" not in text, path
        config = yaml.load(text, Loader=Loader)  # noqa: S506 (a SafeLoader subclass)
        adapter = config.get("adapter")
        assert adapter is None or adapter.startswith("calidist_tasks.adapters."), path
        assert "dataset_kwargs" not in config, path


def test_trust_remote_code_stays_off_unless_the_user_passes_it() -> None:
    # HFLM's default read from lm-eval's source: importing it loads torch and transformers
    source = Path(importlib.util.find_spec("lm_eval.models.huggingface").origin)
    (hflm,) = (node for node in ast.parse(source.read_text(encoding="utf-8")).body
               if isinstance(node, ast.ClassDef) and node.name == "HFLM")
    (init,) = (node for node in hflm.body
               if isinstance(node, ast.FunctionDef) and node.name == "__init__")
    named = init.args.args[len(init.args.args) - len(init.args.defaults):]
    defaults = {**{a.arg: d for a, d in zip(named, init.args.defaults, strict=True)},
                **{a.arg: d for a, d in zip(init.args.kwonlyargs, init.args.kw_defaults,
                                            strict=True) if d is not None}}
    assert ast.literal_eval(defaults["trust_remote_code"]) is False
    argv = ["--model", "hf", "--model_args", "pretrained=x", "--tasks", "calidist_ppdb"]
    assert cli.with_include_path(argv) == [*argv, "--include_path", task_folder()]
    user = ["--model_args", "pretrained=x,trust_remote_code=True"]
    assert cli.with_include_path(user)[:2] == user  # passed through as given, never added


def test_saved_calibrators_are_plain_json(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    with pytest.warns(Warning):
        X = stack_columns(CALIDIST_COLUMNS, lambda_raw=rng.uniform(1, 9, 20),
                          confidence=rng.uniform(0.5, 1, 20))
        fit = CaliDistCalibrator().fit(X, rng.integers(0, 2, 20))
    path = save_calibrator(fit, tmp_path / "fit.json", task="t", labels=["a", "b"], model="m")
    text = path.read_text(encoding="utf-8")
    payload = json.loads(text)  # strict JSON: no NaN / Infinity tokens, no binary
    assert set(payload) == {"calibrator", "context"} and payload["calibrator"]["kind"] == "calidist"
    assert not re.search(r"\bNaN\b|Infinity", text)
    with pytest.raises(ValueError, match="JSON"):
        save_calibrator(fit, tmp_path / "bad.json", task="t", labels=np.array([1]))


EVIL = "evil|model\n## injected <img src=x onerror=alert(1)> `code` [link](http://x)"


def test_report_files_and_escaping(tmp_path: Path) -> None:
    """A model / run name with Markdown and table syntax: report.md keeps every table intact
    and the name inert; CSV round-trips it; every file written is .md / .csv / .json / .png."""
    from test_report import write_run  # the report tests' lm-eval folder builder

    from calidist_tasks.report import write_report

    results = write_run(tmp_path / "runs" / "a", "org/model-a", ["toy"],
                        "2026-01-01T00-00-00.000001")
    text = results.read_text(encoding="utf-8")
    results.write_text(text.replace("org/model-a", json.dumps(EVIL)[1:-1]), encoding="utf-8")
    (tmp_path / "runs" / "a" / "results_2026-01-02T00-00-00.000001.json").write_text(
        "{" + EVIL, encoding="utf-8")  # a damaged file: its problem line quotes its name
    # one task: its figures carry the name as the others would (drawing is most of the time)
    report = write_report([tmp_path / "runs"], tmp_path / "out", n_resamples=20,
                          tasks="calidist_toy_assertion")
    assert any("results_2026-01-02" in p for p in report.problems), report.problems
    assert {p.suffix for p in report.files} <= {".md", ".csv", ".tex", ".json", ".png", ".pdf",
                                               ".html"}
    assert any(p.suffix == ".png" for p in report.files)
    page = (tmp_path / "out" / "leaderboard.html").read_text(encoding="utf-8")
    assert "<img src=x" not in page and "&lt;img src=x" in page  # the name is escaped, inert
    markdown = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert not re.search(r"^\s*#+ injected|(?<!\\)<img|(?<!\\)`code", markdown, flags=re.M)
    for block in re.findall(r"(?:^\|.*\n)+", markdown, flags=re.M):
        rows = block.splitlines()
        widths = {len(re.findall(r"(?<!\\)\|", row)) for row in rows}
        assert len(widths) == 1, block  # no row gained or lost a column
    assert "evil\\|model" in markdown
    for name in ("leaderboard.csv", "cost.csv", "intervals.csv"):
        with open(tmp_path / "out" / name, encoding="utf-8", newline="") as handle:
            rows = list(csv.reader(handle))
        assert len(rows) > 1 and {len(r) for r in rows} == {len(rows[0])}, name
