"""``--metadata log_prompts`` (``runs.prompt_logging``) and the rows a report hides for a run.

The whole path (a tiny-model run, its sizes, ``calidist report`` on it, later runs reading it)
is ``tests/backends/test_lm_eval_loggers.py``; these are its parts, without a model.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from lm_eval.api.instance import Instance
from lm_eval.utils import hash_string

from calidist_tasks.registry import VARIANTS, metric_names
from calidist_tasks.report.cost import HASHED, cost_table, shown_methods
from calidist_tasks.report.loading import _prompts
from calidist_tasks.report.runs import TaskRun
from calidist_tasks.runs.prompt_logging import (
    first_prompt_hash,
    is_prompt_marker,
    logged_prompts,
    prompt_marker,
    resolved,
    same_prompt,
    shorten,
)
from calidist_tasks.settings import RunSettings


def instances() -> list[Instance]:
    """Two documents: an original prompt and a hinted one, each once per letter."""
    found = []
    for doc_id in (0, 1):
        prompts = [f"doc {doc_id} original", f"doc {doc_id} hinted"]
        requests = [(p, f" ({letter})") for p in prompts for letter in "ab"]
        found += [Instance("loglikelihood", {}, args, i, ("t", doc_id, 1))
                  for i, args in enumerate(requests)]
    return found[::-1]  # any order: shortened per document in request order


@pytest.mark.parametrize("how", ["all", "first", "hash"])
def test_shorten_keeps_what_the_setting_says(how: str) -> None:
    requests = instances()
    full = {(i.doc_id, i.idx): i.arguments for i in requests}
    shorten(requests, how)
    for instance in requests:
        prompt, letter = full[(instance.doc_id, instance.idx)]
        kept = how == "all" or (how == "first" and instance.idx == 0)
        assert instance.arguments == ((prompt if kept else prompt_marker(prompt)), letter)
    assert prompt_marker("x") == "calidist-prompt-sha256:" + hash_string("x")  # lm-eval's hash


def test_markers_resolve_within_a_line_and_compare_by_hash() -> None:
    line = {"arguments": {"gen_args_0": {"arg_0": "P", "arg_1": " (a)"},
                          "gen_args_1": {"arg_0": prompt_marker("P"), "arg_1": " (b)"},
                          "gen_args_2": {"arg_0": prompt_marker("H"), "arg_1": " (a)"}},
            "resps": [[[-1.0, False]]] * 3, "prompt_hash": hash_string("P")}
    assert logged_prompts(line) == ["P", prompt_marker("P"), prompt_marker("H")]
    assert resolved(logged_prompts(line)) == ["P", "P", None]
    assert _prompts(line) == [("P", 1), ("P", 1), (prompt_marker("H"), 1)]
    assert same_prompt("H", prompt_marker("H")) and same_prompt("P", "P")
    assert not same_prompt("G", prompt_marker("H")) and not same_prompt("G", "H")
    assert first_prompt_hash(line) == hash_string("P")
    hashed = {"arguments": [(prompt_marker("P"), " (a)")], "prompt_hash": "of the marker"}
    assert first_prompt_hash(hashed) == hash_string("P")
    assert is_prompt_marker(prompt_marker("")) and not is_prompt_marker("P")


def test_log_prompts_is_a_checked_setting() -> None:
    assert RunSettings.from_metadata({}).log_prompts == "all"
    assert RunSettings.from_metadata({"log_prompts": "hash"}).log_prompts == "hash"
    with pytest.raises(ValueError, match=r"log_prompts must be one of \('all', 'first', 'hash'\)"):
        RunSettings.from_metadata({"log_prompts": "none"})
    with pytest.raises(ValueError, match="did you mean 'log_prompts'"):
        RunSettings.from_metadata({"prompt_logging": "first"})


def test_calidist_eval_help_lists_the_key_and_its_values(capsys) -> None:
    from calidist_tasks import cli

    with pytest.raises(SystemExit):
        cli.main(["eval", "--help"])
    text = capsys.readouterr().out
    assert "log_prompts" in text and "all, first, hash" in text.replace("|", ", ")


def verbalized_run(metrics: list[str], prompts: list[list[tuple[str, int]]]) -> TaskRun:
    config = {"task": "calidist_ppdb_verbalized", "output_type": "generate_until",
              "metadata": {"benchmark": "ppdb", "distractor": "none",
                           "confidence": "verbalized"}}
    return TaskRun("calidist_ppdb_verbalized", "m", "2020-01-01T00-00-00", Path("r.json"),
                   dict.fromkeys(metrics, 0.5), config, prompts=prompts,
                   generations=[[] for _ in prompts])


def test_rows_a_run_cannot_have_are_hidden_with_a_note() -> None:
    """A verbalized run on a backend without log-probabilities (hf, vllm) reports none of the
    log-prob reading's metrics: the cost table does not list those rows, and a note says which
    and why; a run that has them (a chat API with logprobs) lists them."""
    without = metric_names(False, "verbalized")
    variant = next(v for v in VARIANTS if v.name == "verbalized")
    plain = verbalized_run(without, [[("prompt", 1)]])
    shown, hidden = shown_methods(plain, variant)
    assert hidden and all(m.reading == "logprob" for m in hidden)
    assert not any(m.reading == "logprob" for m in shown) and shown
    notes: list[str] = []
    table = cost_table([plain], {plain.group: "m"}, notes)
    listed = table.rows[0][2]
    assert all(m.label not in listed.split(", ") for m in hidden)
    assert len(notes) == 1 and "rows not listed" in notes[0]
    assert all(m.label in notes[0] for m in hidden) and "log-probabilities" in notes[0]

    api = verbalized_run([*without, *(m.metric("ece") for m in hidden)], [[("prompt", 1)]])
    assert shown_methods(api, variant)[1] == []
    notes = []
    cost_table([api], {api.group: "m"}, notes)
    assert notes == []


def test_the_cost_of_hashed_prompts_counts_requests_not_tokens() -> None:
    metrics = metric_names(False, "verbalized")
    full = verbalized_run(metrics, [[("a prompt", 1)], [("b prompt", 1)]])
    hashed = verbalized_run(metrics, [[(prompt_marker("a prompt"), 1)], [("b prompt", 1)]])
    rows = [cost_table([run], {run.group: "m"}).rows[0] for run in (full, hashed)]
    assert rows[0][4:6] == rows[1][4:6]  # requests, distinct prompts
    assert rows[0][6] is not None and rows[1][6] is None and rows[1][10] == HASHED
