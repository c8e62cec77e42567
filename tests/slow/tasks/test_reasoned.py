"""Slow half of ``tests/tasks/test_reasoned.py`` (builds the tiny model or runs lm-eval).

What the module tests: the fast half's docstring."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from conftest import run_lm_eval
from test_reasoned import COT, METADATA, REPLY_TASK

from calidist_tasks.scoring.records import MODEL_KEY, line_record

UNREADABLE = "I would rather not say."


def written_reply(doc: int, prompt: int) -> str:
    """A reasoned reply in the paper's form, every fifth one unreadable."""
    if (doc + prompt) % 5 == 0:
        return UNREADABLE
    return (f"Step 1: the sentences differ. Confidence: 40%\nSo the correct answer is "
            f"({'ab'[(doc + prompt) % 2]}) something. Overall Confidence: {50 + 5 * prompt}%")


@pytest.fixture(scope="module")
def replies_run(tiny_model_dir, ppdb_data_dir, tmp_path_factory):
    """A real calidist_ppdb_assertion_verbalized run (short replies), its replies rewritten."""
    from calidist_tasks.report import save_like_lm_eval

    metadata = {**METADATA, "data_dir": str(ppdb_data_dir)}
    results = run_lm_eval(["calidist_ppdb_assertion_verbalized"], tiny_model_dir, metadata,
                          gen_kwargs="max_gen_toks=2")
    folder = tmp_path_factory.mktemp("replies")
    save_like_lm_eval(results, folder / "raw")
    [file] = (folder / "raw").rglob("samples_*.jsonl")
    lines = [json.loads(line) for line in file.read_text().splitlines()]
    for n, line in enumerate(lines):
        line["resps"] = [[written_reply(n, i)] for i in range(len(line["resps"]))]
    (folder / file.name).write_text("".join(json.dumps(line) + "\n" for line in lines))
    return folder / file.name, lines, metadata


def direct_letter_logprobs(model_dir: Path, context: str, letters: list[str]) -> list[float]:
    """log P(letter | context) with transformers alone (lm-eval's split: the context's tokens,
    then the rest of context + letter's; lm-eval's cut of a longer sequence: its last
    context-length + 1 tokens)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    values = []
    for letter in letters:
        whole = tokenizer(context + letter, add_special_tokens=False).input_ids
        n = len(tokenizer(context, add_special_tokens=False).input_ids)
        cut = max(0, len(whole) - model.config.max_position_embeddings - 1)
        whole, n = whole[cut:], n - cut
        with torch.no_grad():
            logits = model(torch.tensor([whole])).logits[0].log_softmax(-1)
        values.append(sum(float(logits[i - 1, whole[i]]) for i in range(n, len(whole))))
    return values


def test_a_reasoned_task_scores_the_letters_of_each_reply_through_lm_eval(
        tiny_model_dir, replies_run):
    file, logged, metadata = replies_run
    results = run_lm_eval(["calidist_ppdb_assertion_cot"], tiny_model_dir,
                          {**metadata, "replies": str(file)})
    metrics = results["results"]["calidist_ppdb_assertion_cot"]
    samples = results["samples"]["calidist_ppdb_assertion_cot"]
    by_index = {line["doc"]["calidist_index"]: line for line in logged}
    unreadable = checked = 0
    for sample in samples:
        record = line_record(sample)
        line = by_index[record["index"]]
        prompts = [arg["arg_0"] for arg in line["arguments"].values()]
        assert [r["reply"] for r in record["replies"]] == [r[0] for r in line["resps"]]
        for prompt, entry in zip(prompts, record["replies"], strict=True):
            if entry["reply"] == UNREADABLE:  # the documented rule, not a crash
                unreadable += 1
                assert entry["answer"] is None and entry["letter_logprobs"] is None
                continue
            assert entry["answer"] in (0, 1) and 0.5 <= entry["stated_confidence"] <= 0.6
            if not entry["counted"]:  # a hint naming the original answer: not scored
                assert entry["hint_label"] == record["prediction"]
                continue
            cut = entry["reply"].index("(", entry["reply"].index("correct answer")) + 1
            expected = direct_letter_logprobs(tiny_model_dir, prompt + entry["reply"][:cut],
                                              ["a", "b"])
            # a batched lm-eval forward pass vs one unbatched: float32 sums over the longer
            # exemplar prompts differ in the 4th decimal
            assert entry["letter_logprobs"] == pytest.approx(expected, abs=1e-3)
            checked += 1
        original = record["replies"][0]
        if original["answer"] is None:
            assert (record["prediction"], record["correct"]) == (-1, 0)
            assert record["confidence"] == pytest.approx(0.5)
        else:  # p: the softmax at the letter the reply wrote
            values = original["letter_logprobs"]
            p = math.exp(values[original["answer"]]) / sum(map(math.exp, values))
            assert record["confidence"] == pytest.approx(p)
            assert record["verbalized"]["confidence"] == pytest.approx(
                original["stated_confidence"])
    assert checked >= 8 and unreadable >= 2
    assert 0 < metrics["parse_fail_rate,none"] < 0.5
    for name in ("ece", "ece_vanilla", "ece_verbalized", "ece_vanilla_verbalized"):
        assert 0.0 <= metrics[f"{name},none"] <= 1.0, name


def test_a_prompt_the_reply_did_not_answer_is_refused(tiny_model_dir, replies_run):
    file, _, metadata = replies_run
    with pytest.raises(ValueError, match="not the prompt"):
        run_lm_eval(["calidist_ppdb_assertion_cot"], tiny_model_dir,
                    {**metadata, "replies": str(file)}, num_fewshot=0)


def test_a_one_stage_reply_run_missing_prompts_is_refused_naming_the_document(replies_run,
                                                                              tmp_path):
    from conftest import load_task

    from calidist_tasks.runs.earlier_runs import EarlierRun

    file, logged, metadata = replies_run
    short = [{**line, "resps": line["resps"][:1], "arguments": dict(
        list(line["arguments"].items())[:1])} if i == 0 else line for i, line in enumerate(logged)]
    copy = tmp_path / file.name
    copy.write_text("".join(json.dumps(line) + "\n" for line in short))
    task = load_task("calidist_ppdb_assertion_cot", {**metadata, "replies": str(copy)})
    task._replies = EarlierRun.read(copy, task=task.config.task, key="replies",
                                    earlier_task=task.reply_task, how="", docs=task.eval_docs)
    first = short[0]["doc"]["calidist_index"]
    with pytest.raises(ValueError, match=f"document {first} .*1 replies logged, 3 prompts"):
        task.logged(task.eval_docs[first])


def test_calidist_eval_runs_the_replies_and_the_scoring_in_one_command(
        tiny_model_dir, ppdb_data_dir, tmp_path):
    from calidist_tasks.cli import main

    out = tmp_path / "out"
    main(["eval", "--model", "hf", "--model_args", f"pretrained={tiny_model_dir},dtype=float32",
          "--device", "cpu", "--batch_size", "8", "--tasks", "calidist_ppdb_probe_cot",
          "--gen_kwargs", "max_gen_toks=4", "--output_path", str(out), "--log_samples",
          "--metadata", json.dumps({**METADATA, "data_dir": str(ppdb_data_dir)})])
    [replies] = (out / "replies").rglob("samples_calidist_ppdb_probe_verbalized_*.jsonl")
    [scored] = [p for p in out.rglob("samples_calidist_ppdb_probe_cot_*.jsonl")
                if "replies" not in p.parts]
    generated = {json.loads(line)["doc"]["calidist_index"]: json.loads(line)["resps"]
                 for line in replies.read_text().splitlines()}
    for line in scored.read_text().splitlines():
        record = line_record(json.loads(line))
        assert [r["reply"] for r in record["replies"]] == [
            r[0] for r in generated[record["index"]]]
    # calidist report finds both runs' rows in the registry and rebuilds lm-eval's numbers
    # from the records with the aggregation's own fits
    from conftest import assert_report_rebuilds_results

    from calidist_tasks.report import write_report

    assert sorted(assert_report_rebuilds_results(out)) == [
        "calidist_ppdb_probe_cot", "calidist_ppdb_probe_verbalized"]
    report = write_report([out], tmp_path / "report", n_resamples=20, figures=False)
    assert not [p for p in report.problems if "rebuild" in p or "no leaderboard row" in p], \
        report.problems
    rows = (tmp_path / "report" / "leaderboard.csv").read_text(encoding="utf-8")
    for label in ("Vanilla (reasoned)", "Verbalized (reasoned)", "CaliDist reasoned (Pr.)",
                  "CaliDist reasoned verbalized (Pr.)", "CaliDist verbalized (Pr.)"):
        assert f",{label}" in rows, label  # (⚠: mostly unreadable replies of the tiny model)


def test_evaluate_runs_the_replies_first_and_returns_every_selected_task(
        tiny_model_dir, ppdb_data_dir, tmp_path):
    import calidist_tasks

    results = calidist_tasks.evaluate(
        "hf", ["calidist_ppdb_cot", "calidist_ppdb_verbalized"],
        metadata={**METADATA, "data_dir": str(ppdb_data_dir)},
        model_args=f"pretrained={tiny_model_dir},dtype=float32", device="cpu", batch_size=8,
        gen_kwargs="max_gen_toks=4", bootstrap_iters=0, replies_dir=str(tmp_path / "replies"))
    assert {"calidist_ppdb_cot", "calidist_ppdb_verbalized"} <= set(results["results"])
    assert list((tmp_path / "replies").rglob("samples_calidist_ppdb_verbalized_*.jsonl"))
    record = line_record(results["samples"]["calidist_ppdb_cot"][0])
    assert set(record["replies"][0]) >= {"reply", "answer", "stated_confidence",
                                         "letter_logprobs"}


# counts that differ when the replies to the hints naming the answer are not generated
COUNTS = ("requests", "generations", "parse_failures", "reply_shape")  # per reply generated


RUN = {"device": "cpu", "batch_size": 8, "bootstrap_iters": 0, "num_fewshot": 0}


def scripted_reply(prompt: str) -> str:
    """A reasoned reply fixed by its prompt (the same in every run), every fifth unreadable."""
    import hashlib

    n = int(hashlib.sha256(prompt.encode()).hexdigest(), 16)
    if n % 5 == 0:
        return UNREADABLE
    return (f"Step 1: compare. Confidence: 40%\nSo the correct answer is ({'ab'[n % 2]}) "
            f"something. Overall Confidence: {50 + n % 40}%")


@pytest.fixture(scope="module")
def scripted_model():
    """hf's generation replaced by ``scripted_reply`` (the tiny model writes no readable answer):
    yields the number of prompts each generation call got."""
    from lm_eval.models.huggingface import HFLM

    sent: list[int] = []

    def generate_until(self, requests, disable_tqdm=False):
        sent.append(len(requests))
        return [scripted_reply(request.args[0]) for request in requests]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(HFLM, "generate_until", generate_until)
        yield sent


def cot_records(samples: list[dict]) -> dict[int, dict]:
    """The records of a run's samples, as its samples file holds them (lists, not tuples), less
    the model they name (a run through ``run_lm_eval`` does not merge --model_args into the
    metadata, so its records name none)."""
    return {line_record(sample)["index"]: json.loads(json.dumps(
        {k: v for k, v in line_record(sample).items() if k != MODEL_KEY})) for sample in samples}


def without_counts(record: dict) -> dict:
    """A record less the counts of what was generated (``COUNTS``)."""
    kept = {k: v for k, v in record.items() if k not in COUNTS}
    return {**kept, "verbalized": {k: v for k, v in record["verbalized"].items()
                                   if k not in COUNTS}}


@pytest.fixture(scope="module")
def one_and_two_stage(tiny_model_dir, ppdb_data_dir, scripted_model, tmp_path_factory):
    """The reasoned task through calidist_tasks.evaluate, its replies in one stage and in two:
    (one-stage results, prompts it generated, two-stage results, prompts, two-stage replies)."""
    import calidist_tasks

    metadata = {**METADATA, "data_dir": str(ppdb_data_dir)}
    args = f"pretrained={tiny_model_dir},dtype=float32"
    runs = []
    for two_stage in (False, True):
        folder = tmp_path_factory.mktemp("replies")
        scripted_model.clear()
        results = calidist_tasks.evaluate("hf", [COT], metadata, model_args=args,
                                          two_stage=two_stage, replies_dir=str(folder), **RUN)
        runs.append((results, sum(scripted_model), folder))
    (one, one_sent, _), (two, two_sent, folder) = runs
    return one, one_sent, two, two_sent, folder


def test_a_two_stage_reply_run_sends_only_the_hints_naming_another_answer(one_and_two_stage):
    one, one_sent, two, two_sent, _ = one_and_two_stage
    records = cot_records(one["samples"][COT])
    assert len(records) == 8 and one_sent == 8 * 3  # every prompt: the original, one hint a label
    # the original reply's answer (None: unreadable, every hint is sent)
    wanted = sum(1 + sum(r["hint_label"] != record["replies"][0]["answer"]
                         for r in record["replies"][1:]) for record in records.values())
    assert two_sent == wanted < one_sent
    assert sum(record["replies"][0]["answer"] is None for record in records.values()) >= 1


def test_a_two_stage_reasoned_run_has_the_one_stage_records_less_the_uncounted_replies(
        one_and_two_stage):
    one, _, two, _, _ = one_and_two_stage
    first, second = cot_records(one["samples"][COT]), cot_records(two["samples"][COT])
    assert first.keys() == second.keys()
    dropped = 0
    for index, record in first.items():
        counted = [r for r in record["replies"] if r["counted"]]
        dropped += len(record["replies"]) - len(counted)
        assert second[index]["replies"] == counted
        assert without_counts({**second[index], "replies": None}) == without_counts(
            {**record, "replies": None})
        assert second[index]["generations"] == len(counted)
    assert dropped >= 1
    # CaliDist reads only the hints naming another label: the same numbers
    compared = 0
    for name, value in one["results"][COT].items():
        # over the replies generated (two stages generate fewer): not CaliDist's numbers
        if not isinstance(value, float) or name.startswith((
                "requests_per_doc", "parse_fail_rate", "reasoned_rate", "cut_rate",
                "readable_rate", "copied_rate", "output_tokens_per_reply")):
            continue
        other = two["results"][COT][name]
        assert (math.isnan(value) and math.isnan(other)) or other == pytest.approx(value), name
        compared += not math.isnan(value)
    assert compared >= 10


def test_calidist_eval_two_stage_runs_reasoned_tasks_in_one_command_or_two(
        tiny_model_dir, ppdb_data_dir, one_and_two_stage, tmp_path):
    from benchmarks.records import reply_tokens
    from calidist_tasks.cli import main
    from calidist_tasks.report.loading import load_runs

    _, _, two, _, _ = one_and_two_stage
    metadata = {**METADATA, "data_dir": str(ppdb_data_dir)}
    model = ["--model", "hf", "--model_args", f"pretrained={tiny_model_dir},dtype=float32",
             "--device", "cpu", "--batch_size", "8", "--num_fewshot", "0", "--log_samples",
             "--metadata", json.dumps(metadata)]
    out = tmp_path / "out"
    main(["eval", "--two-stage", "--tasks", COT, "--output_path", str(out), *model])
    assert list((out / "replies" / "stage1").rglob(f"samples_{REPLY_TASK}_*.jsonl"))
    [scored] = [p for p in out.rglob(f"samples_{COT}_*.jsonl") if "replies" not in p.parts]
    samples = [json.loads(line) for line in scored.read_text().splitlines()]
    assert cot_records(samples) == cot_records(two["samples"][COT])
    # Table 4 counts the replies as run: both stages' prompts and replies, in the records' order
    loaded, problems = load_runs([out]), []
    [run] = [r for r in loaded.runs if r.task == COT]
    counted = reply_tokens(loaded.runs, run, len, problems)  # "tokens": characters
    assert not problems
    for record, replies in zip(run.records, counted, strict=True):
        assert [reply for _, reply in replies] == [len(r["reply"]) for r in record["replies"]]
    # calidist report rebuilds both runs' numbers from their records (stage 1's not counted)
    from conftest import assert_report_rebuilds_results

    assert sorted(assert_report_rebuilds_results(out)) == [COT, REPLY_TASK]
    # the two-command form: the reply tasks with --two-stage, then the reasoned tasks reading
    # them; a task without hints ran whole in stage 2, and its replies are read so
    replies = tmp_path / "replies"
    main(["eval", "--two-stage", "--tasks", f"{REPLY_TASK},calidist_ppdb_verbalized",
          "--output_path", str(replies), *model])
    results = run_lm_eval([COT], tiny_model_dir, {**metadata, "replies": str(replies)},
                          num_fewshot=0)
    assert cot_records(results["samples"][COT]) == cot_records(two["samples"][COT])
    plain = run_lm_eval(["calidist_ppdb_cot"], tiny_model_dir,
                        {**metadata, "replies": str(replies)}, num_fewshot=0)
    assert [len(line_record(s)["replies"])
            for s in plain["samples"]["calidist_ppdb_cot"]] == [1] * 8


def test_a_two_stage_reply_run_missing_a_hint_it_sends_is_refused_naming_the_document(
        one_and_two_stage, ppdb_data_dir, tmp_path):
    from conftest import load_task

    from calidist_tasks.runs.earlier_runs import EarlierRun
    from calidist_tasks.runs.files import SAMPLES_NAME

    *_, two, _, folder = one_and_two_stage
    [file] = [p for p in folder.rglob(f"samples_{REPLY_TASK}_*.jsonl")
              if "stage1" not in p.parts]
    lines = [json.loads(line) for line in file.read_text().splitlines()]
    record = next(r for r in cot_records(two["samples"][COT]).values()
                  if r["replies"][0]["answer"] is not None)
    line = next(line for line in lines if line["doc"]["calidist_index"] == record["index"])
    line["resps"], line["arguments"] = [], {}  # stage 2's one hint, gone
    copy = tmp_path / file.name
    copy.write_text("".join(json.dumps(line) + "\n" for line in lines))
    # the results file beside the samples names stage 1's folder
    results = file.parent / f"results_{SAMPLES_NAME.match(file.name)['stamp']}.json"
    (tmp_path / results.name).write_text(results.read_text())
    task = load_task(COT, {**METADATA, "replies": str(copy), "data_dir": str(ppdb_data_dir)})
    task._replies = EarlierRun.read(copy, task=COT, key="replies", earlier_task=REPLY_TASK,
                                    how="", docs=task.eval_docs)
    task._originals = task.stage1_of(task._replies, task.eval_docs)
    assert task._originals is not None
    with pytest.raises(ValueError, match=f"document {record['index']} .*1 replies logged, 2 "
                                         "prompts sent by two stages"):
        task.logged(task.eval_docs[record["index"]])
    other = next(d for d in task.eval_docs if d["calidist_index"] != record["index"])
    assert task.logged(other).replies == [r["reply"] for r in cot_records(
        two["samples"][COT])[other["calidist_index"]]["replies"]]
