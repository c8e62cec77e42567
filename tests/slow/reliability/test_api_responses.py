"""Slow half of ``tests/reliability/test_api_responses.py`` (builds the tiny model or runs lm-eval).

What the module tests: the fast half's docstring."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import reliability.models  # noqa: F401  (registers calidist-fake)
from conftest import run_lm_eval
from openai_server import ModelServer
from reliability.test_api_responses import NAN, _recovered_lines

from calidist_tasks import cli
from calidist_tasks.runs.recovery import AggregationError
from calidist_tasks.scoring.records import line_record


class BrokenServer(ModelServer):
    """The test server (tests/openai_server.py), answering NaN or null log-probabilities for the
    hinted prompts."""

    mode = "nan"

    def _logprobs(self, ids: list[int], top: int) -> dict:
        out = super()._logprobs(ids, top)
        if "Hint:" in self.tokenizer.decode(ids):
            bad = NAN if self.mode == "nan" else None
            out["token_logprobs"] = [None] + [bad] * (len(ids) - 1)
        return out


@pytest.fixture(scope="module")
def server(tiny_model_dir: Path):
    srv = BrokenServer(tiny_model_dir, idle_timeout=300)
    srv.start()
    yield srv
    srv.stop()


def completions(server: ModelServer, tiny_model_dir: Path, ppdb_data_dir: Path) -> None:
    metadata = {"data_dir": str(ppdb_data_dir), "calib_size": 1, "eval_size": 1, "m": 1}
    args = (f"model=tiny,base_url={server.base_url}/completions,tokenizer={tiny_model_dir},"
            "tokenizer_backend=huggingface,max_retries=1")
    run_lm_eval(["calidist_ppdb_assertion"], tiny_model_dir, metadata, model="local-completions",
                model_args=args, batch_size=1, log_samples=False)


def test_api_nan_logprobs_stop_the_run_naming_the_document(server, tiny_model_dir, ppdb_data_dir,
                                                           tmp_path, monkeypatch):
    """JSON NaN passes lm-eval's response parser; calidist refuses it by document, keeping the
    records."""
    monkeypatch.setenv("CALIDIST_RECOVERED_DIR", str(tmp_path))
    server.mode = "nan"
    with pytest.raises(AggregationError, match=r"calidist_ppdb_assertion document 0 "
                       r"\(test\.tsv:\d+\) prompt [12]: the model returned non-finite") as failed:
        completions(server, tiny_model_dir, ppdb_data_dir)
    assert [line["doc_id"] for line in _recovered_lines(failed.value)] == [0, 1]


def test_api_null_logprobs_fail_inside_lm_eval_before_any_metric(server, tiny_model_dir,
                                                                 ppdb_data_dir):
    """Documented: a null log-probability fails in lm-eval's own parser (local-completions sums
    the token log-probabilities), a TypeError at the first such response, before calidist sees
    anything; the run stops, no metric is computed from it."""
    server.mode = "null"
    with pytest.raises(TypeError, match="NoneType"):
        completions(server, tiny_model_dir, ppdb_data_dir)


@pytest.mark.parametrize("bad_value", ["nan", "none", "inf"])
def test_a_backend_answering_nan_or_null_keeps_every_record(bad_value, ppdb_data_dir, tmp_path,
                                                            monkeypatch) -> None:
    """Through lm-eval: a backend whose answer to one hinted template is NaN / None / -inf. The
    run stops naming the documents; every document's record is saved (the bad ones with their
    error), and `calidist report` on the saved folder recomputes from the good ones."""
    monkeypatch.setenv("CALIDIST_RECOVERED_DIR", str(tmp_path))
    metadata = {"data_dir": str(ppdb_data_dir), "calib_size": 2, "eval_size": 2}
    args = f"bad_marker=I read online,bad_value={bad_value}"
    with pytest.raises(AggregationError) as failed:
        run_lm_eval(["calidist_ppdb_assertion"], Path("unused"), metadata, model="calidist-fake",
                    model_args=args, log_samples=False)
    assert re.search(r"documents have answers that cannot be used: calidist_ppdb_assertion "
                     r"document \d+ \(test\.tsv:\d+\) prompt [1-9]\d*: the model returned "
                     "non-finite", str(failed.value))
    lines = _recovered_lines(failed.value)
    assert [line["doc_id"] for line in lines] == [0, 1, 2, 3]
    failed_docs = [line["doc_id"] for line in lines if "error" in line_record(line)]
    good = [line for line in lines if "error" not in line_record(line)]
    assert failed_docs and f"{len(failed_docs)} of 4 documents" in str(failed.value)
    assert all(0 <= line_record(line)["confidence"] <= 1 and line_record(line)["hints"]
               for line in good)
    if bad_value != "nan":
        return
    report = tmp_path / "report"
    with pytest.raises(SystemExit) as done:
        cli.main(["report", str(failed.value.folder), "--out", str(report), "--no_figures",
                  "--bootstrap", "0"])
    assert done.value.code == 0
    text = (report / "report.md").read_text(encoding="utf-8")
    board = (report / "leaderboard.csv").read_text(encoding="utf-8")
    assert (",CaliDist (As.)," in board) == bool(good)  # no number from no usable document
    assert (f"{len(failed_docs)} of 4 documents have answers that cannot be used and are left "
            "out of every number: calidist\\_ppdb\\_assertion document ") in text
