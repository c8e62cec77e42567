"""Cost per document of each task: model requests, distinct prompts, prompt tokens and the
tokens the model generated (replies of generation tasks, counted the same way as the prompts).

Prompts come from the samples files (lm-eval logs every request's prompt). Tokens are counted
with the model's own tokenizer when the model is a local folder holding one (no special
tokens added); otherwise, and for API models, as characters / 4, and the table says which.
A loglikelihood task sends each prompt once per option letter, a sampling task once per sample
(``repeats``): "requests" and "prompt tokens" count every request as sent, "distinct prompts"
counts the different texts (the forward passes a backend that scores every letter of a prompt
in one pass needs). "× original prompt" gives both, in prompt tokens relative to one original
prompt sent once: (forward passes) counts each distinct prompt once, (requests) every request.
A run that logged some prompts by their hash only (``--metadata log_prompts``) has its requests
and distinct prompts counted and its prompt tokens not (``HASHED``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

import numpy as np

from calidist_tasks.registry import SCORES, Method, Variant, methods_of, task_variant
from calidist_tasks.report.runs import TaskRun
from calidist_tasks.report.tables import Table
from calidist_tasks.runs.prompt_logging import is_prompt_marker
from calidist_tasks.scoring.records import LOGPROB

log = logging.getLogger(__name__)
CHARS_PER_TOKEN = 4
# "tokens counted as" of a run that logged prompts by their hash (--metadata log_prompts)
HASHED = "not counted: prompts logged by their hash (log_prompts)"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")


def token_counter(model: str) -> tuple[Callable[[str], float], str]:
    """(count tokens of a text, how they are counted) for ``model``."""
    folder = Path(model)
    if folder.is_dir() and any((folder / name).exists() for name in TOKENIZER_FILES):
        try:
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
            return (lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"]),
                    "model tokenizer")
        except Exception as error:  # noqa: BLE001 - any loading failure falls back to the estimate
            log.warning("cannot load the tokenizer of %s (%s); counting characters / %d",
                        model, error, CHARS_PER_TOKEN)
    return lambda text: len(text) / CHARS_PER_TOKEN, f"characters / {CHARS_PER_TOKEN}"


def prompt_groups(prompts: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """(prompt, times sent) per prompt of one document, in the order sent: consecutive requests
    with the same prompt (a log-likelihood prompt once per option letter) are one prompt."""
    groups: list[tuple[str, int]] = []
    for prompt, times in prompts:
        if groups and groups[-1][0] == prompt:
            groups[-1] = (prompt, groups[-1][1] + times)
        else:
            groups.append((prompt, times))
    return groups


def document_cost(prompts: list[tuple[str, int]], tokens: Callable[[str], float]
                  ) -> dict[str, float]:
    """One document's cost: ``requests`` and ``prompt_tokens`` count every request as sent,
    ``distinct_prompts`` and ``distinct_tokens`` each different prompt text once (forward
    passes), ``original_tokens`` the first prompt's."""
    distinct = {prompt for prompt, _ in prompts}
    return {"requests": float(sum(times for _, times in prompts)),
            "distinct_prompts": float(len(distinct)),
            "prompt_tokens": float(sum(tokens(p) * times for p, times in prompts)),
            "distinct_tokens": float(sum(tokens(p) for p in distinct)),
            "original_tokens": float(tokens(prompts[0][0])) if prompts else 0.0}


def counted_cost(groups: list[tuple[float, int]]) -> dict[str, float]:
    """``document_cost`` of a document whose prompts were counted already (committed benchmark
    records): (tokens, times sent) per distinct prompt, in the order sent."""
    return {"requests": float(sum(times for _, times in groups)),
            "distinct_prompts": float(len(groups)),
            "prompt_tokens": float(sum(tokens * times for tokens, times in groups)),
            "distinct_tokens": float(sum(tokens for tokens, _ in groups)),
            "original_tokens": float(groups[0][0]) if groups else 0.0}


def generation_cost(prompts: list[tuple[float, int]], output_tokens: float,
                    scorings: list[tuple[float, int]]) -> dict[str, float]:
    """One document's cost as the paper's Table 4 counts it, beside the letter scoring that
    follows a reply here (committed benchmark records: tokens counted already).

    ``prompts``: (tokens, replies generated) per generation prompt; ``output_tokens``: the
    tokens of those replies; ``scorings``: (tokens, letters) per context scored after a reply
    (``counted_cost``: one forward pass per distinct context). ``passes``, ``input_tokens`` and
    ``output_tokens`` are the paper's columns (one pass per reply generated); the scoring passes
    are apart, since an engine returning log-probabilities with its replies needs none."""
    scored = counted_cost(scorings)
    return {"passes": float(sum(times for _, times in prompts)),
            "input_tokens": float(sum(tokens * times for tokens, times in prompts)),
            "output_tokens": float(output_tokens),
            "scoring_passes": scored["distinct_prompts"],
            "scoring_tokens": scored["distinct_tokens"]}


# Does the model reason? (aggregation.reasoning_metrics, unreadable_counts): a _verbalized /
# _cot run's replies, beside its cost; the paper's Table 4 reports 74 output tokens per Vanilla
# reply (GPT-4o-mini).
REPLY_COLUMNS = (("reasoned_rate", "replies with ≥ 2 steps"), ("cut_rate", "replies cut"),
                 ("readable_rate", "replies readable"),
                 ("copied_rate", "replies copying an exemplar"),
                 ("output_tokens_per_reply", "output tokens / reply (paper: 74)"),
                 ("unreadable_original", "unreadable originals"),
                 ("unreadable_hinted", "unreadable hinted replies"))


def shown_methods(run: TaskRun, variant: Variant) -> tuple[list[Method], list[Method]]:
    """(the rows a run has numbers for, the rows hidden): a row of the run's variant whose
    metrics its results file lacks while it holds other rows' is hidden (a verbalized run whose
    backend gave no log-probabilities has no log-prob reading). A results file without any
    row's metrics (a recovered run, a plain lm-eval run) hides none."""
    methods = methods_of(variant)
    has = [m for m in methods if any(m.metric(score) in run.metrics for score in SCORES)]
    if not has:
        return methods, []
    return has, [m for m in methods if m not in has]


def hidden_note(run: TaskRun, hidden: list[Method]) -> str:
    """The report's note naming the rows ``shown_methods`` hid for ``run``, and why."""
    logprob = [m.label for m in hidden if m.reading == LOGPROB]
    other = [m.label for m in hidden if m.reading != LOGPROB]
    why = []
    if logprob:
        why.append(f"{', '.join(logprob)} (they need the log-probabilities of the replies' "
                   "letters, which this backend did not return: a chat API with logprobs "
                   "gives them)")
    if other:
        why.append(f"{', '.join(other)} (the run reports none of their metrics)")
    return f"{run.name}: rows not listed for this run: {'; '.join(why)}"


def cost_table(runs: list[TaskRun], names: dict[str, str],
               notes: list[str] | None = None) -> Table:
    """One row per model and task: requests, distinct prompts, prompt tokens and generated
    tokens (generation tasks; – for tasks that score the letters) per document, and, for a run
    of replies, how they reasoned and how many were unreadable (``REPLY_COLUMNS``; empty for a
    task that reports none). Its "methods" are the rows the run has numbers for
    (``shown_methods``); ``notes`` gets one line per run naming the rows hidden, and why."""
    table = Table(["model", "task", "methods", "documents", "requests / doc",
                   "distinct prompts / doc", "prompt tokens / doc",
                   "× original prompt (forward passes)", "× original prompt (requests)",
                   "generated tokens / doc", "tokens counted as",
                   *(label for _, label in REPLY_COLUMNS)], digits=1,
                  keys=["model", "task", "methods", "documents", "requests_per_doc",
                        "distinct_prompts_per_doc", "prompt_tokens_per_doc",
                        "forward_passes_vs_original_prompt", "requests_vs_original_prompt",
                        "generated_tokens_per_doc", "token_count",
                        *(key for key, _ in REPLY_COLUMNS)])
    counters: dict[str, tuple[Callable[[str], float], str]] = {}
    for run in sorted(runs, key=lambda r: (names[r.group], r.task)):
        variant = task_variant(run.task, run.config)[1]
        shown, hidden = shown_methods(run, variant) if variant else ([], [])
        methods = ", ".join(m.label for m in shown)
        if hidden and notes is not None:
            notes.append(hidden_note(run, hidden))
        if run.prompt_tokens:  # committed benchmark records: counted when they were written
            docs, how = run.prompt_tokens, run.token_count or "counted by the benchmark"
            costs, generated = [counted_cost(doc) for doc in docs], None
        elif run.prompts:
            if run.model not in counters:
                count, how = token_counter(run.model)
                counters[run.model] = (lru_cache(maxsize=None)(count), how)  # prompts repeat
            tokens, how = counters[run.model]
            docs = run.prompts
            counted = tokens
            if any(is_prompt_marker(p) for doc in docs for p, _ in doc):  # only hashes logged
                counted, how = (lambda text: math.nan), HASHED
            costs = [document_cost(doc, counted) for doc in docs]
            replies = run.generations or []  # a scored task logs its log-likelihoods there
            generated = (float(np.mean([sum(map(tokens, doc)) for doc in replies]))
                         if run.config.get("output_type") == "generate_until" and any(replies)
                         else None)
        else:  # no usable samples: the results file's request count only
            table.rows.append([names[run.group], run.task, methods, None,
                               run.metrics.get("requests_per_doc"), None, None, None, None,
                               None, "no usable samples", *replies_of(run)])
            continue
        requests, distinct, total, passes = (
            np.mean([c[key] for c in costs]) for key in
            ("requests", "distinct_prompts", "prompt_tokens", "distinct_tokens"))
        original = np.mean([c["original_tokens"] for c, doc in zip(costs, docs, strict=True)
                            if doc])
        if math.isnan(total):  # tokens not counted (HASHED)
            total = passes = original = None
        table.rows.append([names[run.group], run.task, methods, str(len(docs)),
                           float(requests), float(distinct),
                           None if total is None else float(total),
                           float(passes / original) if original else None,
                           float(total / original) if original else None, generated, how,
                           *replies_of(run)])
    return table


def replies_of(run: TaskRun) -> list[float | None]:
    """The run's ``REPLY_COLUMNS`` metrics (None where it reports none)."""
    return [run.metrics.get(key) for key, _ in REPLY_COLUMNS]
