"""Model answers that are not numbers: NaN, infinite or null log-probabilities from an API (or any
backend) stop the run with an error naming the task, the document, its source line and the
prompt, and never reach a metric. tests/test_joining.py has the basic NaN case of the joining."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from conftest import load_task, run_lm_eval
from hypothesis import given, settings
from hypothesis import strategies as st
from openai_server import ModelServer

import reliability.models  # noqa: F401  (registers calidist-fake)
from calidist_tasks.joining import outcome_from_loglikelihoods

NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("values", [
    [NAN, -1.0], [-1.0, NAN], [-INF, -1.0], [INF, -1.0], [None, -0.5], [None, None],
    ["high", -1.0], [[-1.0], -2.0], [{"logprob": -1.0}, -2.0], [], [-1.0],
], ids=repr)
def test_bad_loglikelihoods_are_refused_naming_the_place(values) -> None:
    with pytest.raises(ValueError, match=r"^doc 7 prompt 2: "):
        outcome_from_loglikelihoods(values, "doc 7 prompt 2")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.floats(), st.none(), st.integers(-10**6, 0)), max_size=6))
def test_any_answer_gives_a_valid_outcome_or_a_value_error(values) -> None:
    try:
        outcome = outcome_from_loglikelihoods(values, "where")
    except ValueError as error:
        assert str(error).startswith("where: ")
        return
    assert 0 <= outcome.prediction < len(values)
    assert 1 / len(values) - 1e-12 <= outcome.confidence <= 1.0
    assert all(math.isfinite(v) for v in outcome.letter_logprobs)


@pytest.fixture(scope="module")
def ppdb_task(ppdb_data_dir: Path):
    return load_task("calidist_ppdb_assertion", {"data_dir": str(ppdb_data_dir),
                                                 "calib_size": 2, "eval_size": 2})


@pytest.mark.parametrize(("prompt", "letter", "value"), [
    (0, 0, NAN), (3, 1, None), (4, 0, -INF),
])
def test_process_results_names_document_source_and_prompt(ppdb_task, prompt, letter, value):
    doc = ppdb_task.eval_docs[3]
    n_prompts = len(ppdb_task.prompt_plans(doc))
    results = [(-1.0 - 0.1 * i, False) for i in range(n_prompts * 2)]
    results[prompt * 2 + letter] = (value, False)
    with pytest.raises(ValueError) as error:
        ppdb_task.process_results(doc, results)
    assert (f"calidist_ppdb_assertion document 3 ({doc['calidist_source']}) prompt {prompt}:"
            in str(error.value))
    with pytest.raises(ValueError, match="document 3: expected 10 answers, got 9"):
        ppdb_task.process_results(doc, results[:-1])


@pytest.mark.parametrize("bad_value", ["nan", "none", "inf"])
def test_a_backend_answering_nan_or_null_stops_the_run(bad_value, ppdb_data_dir) -> None:
    """Through lm-eval: a backend whose answer to one hinted prompt is NaN / None / -inf."""
    metadata = {"data_dir": str(ppdb_data_dir), "calib_size": 2, "eval_size": 2}
    args = f"bad_marker=I read online,bad_value={bad_value}"
    with pytest.raises(ValueError, match=r"calidist_ppdb_assertion document \d+ \(test\.tsv:\d+\) "
                                         r"prompt [1-9]\d*: the model returned non-finite"):
        run_lm_eval(["calidist_ppdb_assertion"], Path("unused"), metadata, model="calidist-fake",
                    model_args=args, log_samples=False)


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


def test_api_nan_logprobs_stop_the_run_naming_the_document(server, tiny_model_dir, ppdb_data_dir):
    """JSON NaN passes lm-eval's response parser; calidist refuses it by document."""
    server.mode = "nan"
    with pytest.raises(ValueError, match=r"calidist_ppdb_assertion document 0 \(test\.tsv:\d+\) "
                                         r"prompt [12]: the model returned non-finite"):
        completions(server, tiny_model_dir, ppdb_data_dir)


def test_api_null_logprobs_fail_inside_lm_eval_before_any_metric(server, tiny_model_dir,
                                                                 ppdb_data_dir):
    """Documented: a null log-probability fails in lm-eval's own parser (local-completions sums
    the token log-probabilities), a TypeError at the first such response, before calidist sees
    anything; the run stops, no metric is computed from it."""
    server.mode = "null"
    with pytest.raises(TypeError, match="NoneType"):
        completions(server, tiny_model_dir, ppdb_data_dir)
