"""The paper's Table 4 from committed records: cost per document and ECE of the reasoned protocol.

Runs of the tiny model left as ``benchmarks/run.py --steps reasoned`` leaves them (each task's
output folder; a reasoned task's replies in its ``replies`` folder, rewritten into readable
replies as in test_reasoned.py, since the random model writes none), exported to committed
records; the Table 4 rows built from those alone are checked against the tokens counted here,
with the model's tokenizer, from the lm-eval samples themselves, and against the aggregation's
ECE."""

from __future__ import annotations

import pytest


def test_a_run_logged_with_more_hints_is_counted_on_the_first_per_label():
    """m=2 logged, m=1 counted: the original and the first hint of each label other than the
    original answer, and only their scored contexts (the scored replies' contexts in order)."""
    from benchmarks.analysis import reasoned_document_cost

    def reply(label, template, answer, scored):
        return {"hint_label": label, "template": template, "answer": answer,
                "counted": label != 0, "letter_logprobs": [-0.5, -1.0] if scored else None}

    replies = [reply(None, None, 0, True), reply(0, 0, 0, False), reply(0, 1, 1, False),
               reply(1, 0, None, False), reply(1, 1, 1, True), reply(2, 0, 2, True),
               reply(2, 1, 0, True)]
    replies[0]["counted"] = True
    tokens = [[100, 10], [110, 11], [120, 12], [130, 13], [140, 14], [150, 15], [160, 16]]
    contexts = [[105, 3], [145, 3], [155, 3], [165, 3]]  # replies 0, 4, 5, 6
    record = {"index": 7, "replies": replies}
    cost = reasoned_document_cost(record, {"prompts": contexts, "replies": tokens}, m=1)
    # read at m=1: reply 0, reply 3 (label 1's first; unreadable, not scored), reply 5
    assert cost == {"passes": 3, "input_tokens": 100 + 130 + 150,
                    "output_tokens": 10 + 13 + 15, "scoring_passes": 2,
                    "scoring_tokens": 105 + 155}
    whole = reasoned_document_cost(record, {"prompts": contexts, "replies": tokens})
    assert (whole["passes"], whole["scoring_passes"]) == (5, 4)
    with pytest.raises(ValueError, match="document 7: its reply run's tokens were not kept"):
        reasoned_document_cost(record, {"prompts": contexts})


def test_the_cost_table_says_whether_the_replies_reason(tmp_path):
    """issue #34 item 6: a reply run's reasoning and unreadable counts beside its cost."""
    from calidist_tasks.report.cost import REPLY_COLUMNS, cost_table
    from calidist_tasks.report.runs import TaskRun

    metrics = {"requests_per_doc": 5.0, "reasoned_rate": 0.8, "cut_rate": 0.25,
               "readable_rate": 0.9, "copied_rate": 0.5, "output_tokens_per_reply": 74.5,
               "unreadable_original": 2.0, "unreadable_hinted": 7.0}
    run = TaskRun("calidist_ppdb_assertion_verbalized", "m", "s", tmp_path / "r.json", metrics,
                  {})
    table = cost_table([run], {run.group: "model"})
    row = dict(zip(table.keys, table.rows[0], strict=True))
    assert [row[key] for key, _ in REPLY_COLUMNS] == [0.8, 0.25, 0.9, 0.5, 74.5, 2.0, 7.0]
