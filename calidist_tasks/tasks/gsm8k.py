"""Open-ended answers (GSM8K, paper Appendix K) in three explicit stages; see docs/gsm8k.md.

The harness builds every request before the model answers, and an open answer's distractors
("numbers near the predicted answer") depend on that answer, so each step that needs an answer
is its own run, reading the previous run's logged samples
(``--metadata '{"original_samples": PATH}'``, the samples file or the output folder):

1. ``calidist_gsm8k`` (generate_until) writes a worked answer C0; ŷ is its final number
   (``parse_number``). Reports accuracy and the share of unreadable answers.
2. ``calidist_gsm8k_assertion_chains`` (generate_until) reads stage 1's samples, draws
   ``HINT_NUMBERS`` numbers near ŷ and builds ``m`` assertion-hinted prompts per number ("Hint:
   {S} {number}." and the paper's note); the model reasons again under each hint (greedy, as in
   stage 1), and ỹ_j is the final number of that regenerated chain.
3. ``calidist_gsm8k_assertion`` (loglikelihood) reads stage 2's samples (which carry stage 1's
   answer) and scores every chain after its own reasoning: the prompt and the chain up to where
   its number starts, continued by each candidate number [ŷ, h_1, ..., and the chain's own
   number when it is none of these]. p (C0) and every p'_j (hinted chain j) are the softmax over
   those candidates' log-likelihoods, taken at the chain's own number (``chain_outcome``).
   Agreement is numeric equality (ỹ_j = ŷ); μ, δ, λ and the calibration are those of the paper's
   Methodology section (``joining.join_document``).

An answer with no readable number (none, a fraction, malformed thousands groups, more than
``MAX_DIGITS`` digits; ``read_number``) is counted (``parse_fail_rate``). A stage-1 answer
without one is wrong, has confidence 0 and is maximally unreliable (μ = δ = 1, so λ_raw = 0); it
gets one placeholder request per later stage so that lm-eval still logs the document. A hinted
chain without one is a changed answer whose confidence is read after the chain and ``READOUT``.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from copy import deepcopy
from decimal import Decimal, InvalidOperation
from typing import Any, NamedTuple

from lm_eval.api.instance import Instance

from calidist_tasks.backends import lm_eval_compat
from calidist_tasks.prompting import distractors
from calidist_tasks.prompting.parts import HINT
from calidist_tasks.runs.earlier_runs import EarlierRun, described
from calidist_tasks.scoring.aggregation import parse_fail_rate
from calidist_tasks.scoring.joining import (
    Outcome,
    PromptPlan,
    join_document,
    outcome_at,
    outcome_from_loglikelihoods,
)
from calidist_tasks.scoring.records import (
    EVALUATION,
    SOURCE_FIELD,
    Record,
    bookkeeping,
    unreadable_record,
)
from calidist_tasks.tasks.answer_modes import OpenNumbers
from calidist_tasks.tasks.base import CaliDistTask

HINT_NUMBERS = 4  # distinct numbers near ŷ that hints assert (the "other labels" of the paper)
# No GSM8K answer comes near this; beyond it a number is unreadable (the hints' arithmetic and
# its sampling range stay exact and small; Python refuses int() of over 4,300 digits).
MAX_DIGITS = 18
# A number as a reply writes it, read whole so that what is not one number can be refused
# (docs/gsm8k.md, "The rule for numbers"): a minus sign (ASCII or U+2212), "$", digits with every
# comma group and every space group of three ("1 000 000"), every dotted part ("1.2.3",
# "192.168.1.1"), a "/" part ("1/2") or a mixed fraction's ("5 1/2"), and an exponent or hex
# tail ("1e5", "0x12"). Each quantifier is followed by a character it cannot match, so nothing
# backtracks.
_WRITTEN = (r"[-\u2212]?\$?\d+(?:,\d+)*(?: \d{3}(?!\d))*(?:\.\d+)*(?: \d+/\d+|/\d+)?"
            r"(?:[eE][-+]?\d+|[xX][0-9a-fA-F]+)?")
NUMBER = re.compile(r"(?<![\w.])" + _WRITTEN)
# One readable number: thousands groups of three, at most one decimal point (docs/gsm8k.md).
_READABLE = re.compile(r"([-\u2212]?)\$?(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?")
# "The answer is $1,234.", "Answer: 18", "#### 18": the number a stated answer gives.
STATED = re.compile(
    r"(?:\banswer\s*(?:is|:|=)|####)(?:\s*:)?(?:\s*\$)?\s*(" + _WRITTEN + ")", re.I)
# A second number offered beside the answer's: "18 or 19", "18-19", "18 to 19" name no one number.
_ALTERNATIVE_AFTER = re.compile(r"\s*(?:or|to|-|\u2013|/)\s*[-\u2212]?\$?\d", re.I)
_ALTERNATIVE_BEFORE = re.compile(r"\d\s*(?:or|to|-|\u2013)\s*$", re.I)
READOUT = "\nThe answer is"  # stage 3: asks a hinted chain that wrote no number for one
GSM8K_STAGES = ("answer", "chains", "score")  # the YAML's ``stage``: 1, 2, 3
# Document fields a later stage adds from the earlier stage's records.
ANSWER_FIELD = "original_answer"  # ŷ ("" when stage 1's answer had no readable number)
CHAIN_FIELD = "original_chain"  # stage 1's worked answer C0
HINTED_FIELD = "hinted_chains"  # stage 3: stage 2's regenerated chains, in prompt_plans order


def canonical_number(text: str) -> str | None:
    """'1,234.50' -> '1234.5', '18.' -> '18', '-0' -> '0'; None when it is not a number or is
    written with more than ``MAX_DIGITS`` digits."""
    text = str(text).strip().replace(",", "").rstrip(".")
    try:
        value = Decimal(text)
    except InvalidOperation:
        return None
    if not value.is_finite():
        return None
    digits = max(value.adjusted() + 1, 1) + max(-value.as_tuple().exponent, 0)
    if digits > MAX_DIGITS:
        return None
    if value == value.to_integral_value():
        return str(int(value))
    return format(value.normalize(), "f")


def read_number(written: str) -> str | None:
    """The canonical value of one number as a reply writes it ('−$1,234.50' -> '-1234.5'); None
    when it is not one readable number: a fraction ('1/2', '5 1/2'), commas that are not
    thousands groups ('1,2345', '3,4'), space groups ('1 000'), several dots ('1.2.3'), an
    exponent or hex form ('1e5', '0x12'), more than ``MAX_DIGITS`` digits."""
    match = _READABLE.fullmatch(written)
    if match is None:
        return None
    sign, whole, decimals = match.groups()
    return canonical_number(("-" if sign else "") + whole + (decimals or ""))


def answer_span(text: str) -> tuple[int, str] | None:
    """(where the answer's number starts in ``text``, the number) for ``parse_number``'s answer;
    None when the text has no number or the answer's is unreadable (``read_number``)."""
    text = str(text or "")
    found = STATED.search(text) if "####" in text or "answer" in text.lower() else None
    if found:
        start, written = found.start(1), found.group(1)
    else:
        last = _last_number(text)
        if last is None:
            return None
        start, written = last.start(), last.group()
    end = start + len(written)
    if (_ALTERNATIVE_AFTER.match(text, end)
            or _ALTERNATIVE_BEFORE.search(text, max(0, start - 12), start)):
        return None  # "18 or 19": two numbers offered, neither is the answer
    number = read_number(written)
    return (start, number) if number is not None else None


# A run of what a written number (``_WRITTEN``) may hold, read backwards from a digit.
_NUMBER_RUN = re.compile(r"[0-9,. /$\-\u2212eExXa-fA-F]*")
_LAST_DIGIT = re.compile(r"\d")


def _last_number(text: str) -> re.Match[str] | None:
    """The text's last number (``NUMBER``), found from its last digit: the scan starts where
    the run of number characters holding that digit starts, so a reply of 25,000 numbers costs
    one backward scan, not 25,000 matches."""
    backwards = text[::-1]
    found = _LAST_DIGIT.search(backwards)
    if found is None:
        return None
    start = len(text) - _NUMBER_RUN.match(backwards, found.start()).end()
    last = None
    for last in NUMBER.finditer(text, start):  # noqa: B007 - the last one is wanted
        pass
    return last


def parse_number(text: str) -> str | None:
    """The final answer of a worked solution: the first stated answer ("The answer is N", as
    the prompt asks; what follows it is the model running on, often repeating itself until the
    token limit cuts a number short), else the last number in the text (lm-eval's gsm8k-cot
    strict and flexible matches, in that order). None when there is none or it is unreadable:
    a fraction, malformed thousands groups, more than ``MAX_DIGITS`` digits (docs/gsm8k.md)."""
    span = answer_span(text)
    return span[1] if span else None


def same_number(a: str | None, b: str | None) -> bool:
    """Numeric equality of two answers ('18' == '18.0' == '18.00')."""
    if a is None or b is None:
        return False
    return Decimal(a) == Decimal(b)


def near_numbers(answer: str, n: int, key: str, seed: int) -> list[str]:
    """``n`` distinct numbers near ``answer`` (same precision; never negative if it is not),
    chosen from the document's content ``key`` and ``seed`` (deterministic)."""
    value = Decimal(answer)
    exponent = value.as_tuple().exponent
    step = Decimal(1).scaleb(min(int(exponent), 0))
    width = max(n, math.ceil(abs(value) / 4 / step))  # within ±25% (at least ±n steps)
    low = -width if value < 0 else max(-width, -int(value / step))
    digest = hashlib.sha256(f"{seed}|{key}|{answer}".encode()).digest()
    # sampling a range draws indices, so a huge answer does not build a huge list
    offsets = random.Random(int.from_bytes(digest[:8], "big")).sample(range(low, width + 1), n + 1)
    return [canonical_number(str(value + k * step)) for k in offsets if k != 0][:n]


def logged_answer(prediction: Any, where: str) -> str:
    """ŷ of an earlier stage's record, canonical; "" when it has none or it is unreadable (more
    than ``MAX_DIGITS`` digits, which earlier versions of stage 1 logged). Anything that is not a
    number is refused, naming ``where``."""
    if prediction is None or prediction == "":
        return ""
    try:
        Decimal(str(prediction))
    except InvalidOperation:
        raise ValueError(f"{where}: the logged answer {prediction!r:.40} is not a number") from None
    return canonical_number(str(prediction)) or ""


def number_hint(template: int, number: str) -> str:
    """'Hint: {S} {number}.' and the paper's note (assertion style, Appendix E)."""
    return f"Hint: {distractors.ASSERTION_TEMPLATES[template]} {number}.\n{distractors.HINT_NOTE}"


class Scoring(NamedTuple):
    """How one worked answer is scored in stage 3: ``candidates`` as continuations of the prompt
    and ``text`` (the chain cut where its number starts, or the whole chain and ``READOUT``);
    ``answer`` is the index of the chain's own number, None when it wrote no number."""

    text: str
    candidates: list[str]
    answer: int | None


def chain_scoring(chain: str, base: list[str]) -> Scoring:
    """The scoring of one chain over [ŷ, h_1, ...] (``base``), plus its own number when that is
    none of them."""
    span = answer_span(chain)
    if span is None:
        return Scoring(chain.rstrip() + READOUT, base, None)
    start, number = span
    index = next((i for i, c in enumerate(base) if same_number(c, number)), None)
    if index is None:
        return Scoring(chain[:start], [*base, number], len(base))
    return Scoring(chain[:start], base, index)


def chain_outcome(loglikelihoods: list[float], scoring: Scoring, where: str) -> Outcome:
    """p of a chain: the softmax over its candidates' log-likelihoods, taken at the chain's own
    number. A chain without a number is a changed answer (prediction -1, unparsed) at the
    probability of the readout's most likely candidate."""
    best = outcome_from_loglikelihoods(loglikelihoods, where)  # checks the values
    if scoring.answer is None:
        return Outcome(-1, best.confidence, best.letter_logprobs, parsed=False)
    return outcome_at(loglikelihoods, scoring.answer, where)


class OpenEndedTask(CaliDistTask):
    """One stage of GSM8K (YAML ``stage``): ``answer`` (stage 1), ``chains`` (stage 2) or
    ``score`` (stage 3)."""

    answer_mode = OpenNumbers()

    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        config = dict(config or {})
        self.original_task: str = config.pop("original_task", None) or "calidist_gsm8k"
        self.original_samples = (config.get("metadata") or {}).get("original_samples")
        hinted = config.get("distractor", "none") != "none"
        self.gsm8k_stage: str = config.pop("stage", None) or ("chains" if hinted else "answer")
        if config.get("distractor", "none") not in ("none", "assertion"):
            raise ValueError(f"{config.get('task')}: open-ended tasks have the assertion style "
                             f"only, got {config.get('distractor')!r}")
        if self.gsm8k_stage not in GSM8K_STAGES or hinted != (self.gsm8k_stage != "answer"):
            raise ValueError(f"{config.get('task')}: stage must be one of {GSM8K_STAGES} ('answer' "
                             f"exactly when there is no distractor), got {self.gsm8k_stage!r}")
        super().__init__(config=config, **kwargs)

    def splits_in_stages(self) -> bool:
        """GSM8K runs in the stages its YAML names (``stage``; docs/gsm8k.md), not in those of
        ``--metadata stage``: ``registry.splits_in_stages``, which the planner reads, says so
        from the same YAML key."""
        return False

    @property
    def stage2(self) -> bool:
        """Whether this stage has hints (reads an earlier stage's samples)."""
        return self.distractor != "none"

    # ------------------------------------------------------------------ data
    def documents(self) -> list[dict[str, Any]]:
        docs = super().documents()
        return self._with_original_answers(docs) if self.stage2 else docs

    def _with_original_answers(self, docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``docs`` with the fields this stage adds from the earlier stage's records
        (``original_fields``), each checked (``check_original``); refused naming the file and
        the documents when the earlier stage's run did not log all of them."""
        if not self.original_samples:
            raise ValueError(
                f"{self.config.task} reads the samples of {self.original_task}: pass that run's "
                f"samples with --metadata '{{\"original_samples\": \"PATH\"}}' (its "
                "--output_path folder or samples_*.jsonl file; see docs/gsm8k.md)"
            )
        run = EarlierRun.read(self.original_samples, task=self.config.task,
                              key="original_samples", earlier_task=self.original_task,
                              how="--log_samples and --output_path", docs=docs,
                              model=self.settings.model)
        missing = [d[SOURCE_FIELD] for d in run.missing(docs)]
        if missing:
            raise ValueError(
                f"{self.config.task}: {len(missing)} document(s) have no answer in {run.file} "
                f"(first: {', '.join(missing[:3])}); run {self.original_task} on the same data, "
                "calib_size, eval_size and split_seed"
            )
        out = []
        for doc in docs:
            logged = run.get(doc)
            record = run.fields(logged, self.original_record_fields())
            doc = {**doc, **self.original_fields(record)}
            where = f"{run.where(logged)}: {described(doc)}"
            doc[ANSWER_FIELD] = logged_answer(doc[ANSWER_FIELD], where)
            self.check_original(doc, record, where)
            out.append(doc)
        return out

    def original_record_fields(self) -> tuple[str, ...]:
        """What this stage reads of the earlier stage's record."""
        if self.gsm8k_stage == "score":
            return ("prediction", "chain", "candidates", "chains")
        return ("prediction", "chain")

    def original_fields(self, record: dict[str, Any]) -> dict[str, Any]:
        """The document fields this stage adds from the earlier stage's record."""
        fields = {ANSWER_FIELD: record["prediction"] or "", CHAIN_FIELD: record["chain"] or ""}
        if self.gsm8k_stage == "score":
            fields[HINTED_FIELD] = [c or "" for c in record["chains"]]
        return fields

    def check_original(self, doc: dict[str, Any], record: dict[str, Any], where: str) -> None:
        """Refuse an earlier record these prompts do not fit (another seed or m, a hand-edited
        answer), naming ``where`` (the file, line and document)."""
        if doc[ANSWER_FIELD] and not same_number(parse_number(doc[CHAIN_FIELD]), doc[ANSWER_FIELD]):
            raise ValueError(f"{where}: the answer {doc[ANSWER_FIELD]!r} is not the number of its "
                             "logged worked answer ('chain')")
        if self.gsm8k_stage != "score":
            return
        if list(record["candidates"]) != self.candidates(doc):
            raise ValueError(f"{where}: the hinted numbers {record['candidates'][1:]} are not "
                             f"this run's {self.candidates(doc)[1:]}; use the same seed as stage 2")
        if len(doc[HINTED_FIELD]) != len(self.prompt_plans(doc)) - 1:
            raise ValueError(f"{where}: {len(doc[HINTED_FIELD])} hinted chains, this run has "
                             f"{len(self.prompt_plans(doc)) - 1} hinted prompts; use the same m")

    # ------------------------------------------------------------------ prompts
    def doc_to_text(self, doc: dict[str, Any], doc_to_text: Any = None) -> str:
        """The question (YAML ``doc_to_text``), then any hint; no options."""
        lines = [self.question(doc, doc_to_text)]
        if doc.get(HINT):
            lines.append(doc[HINT])
        return "\n".join(lines) + "\n"

    def fewshot_context(self, doc: dict[str, Any], num_fewshot: int, **kwargs: Any) -> Any:
        if num_fewshot:
            raise ValueError(f"{self.config.task}: few-shot prompts are not implemented for "
                             "open-ended tasks; run with --num_fewshot 0")
        return super().fewshot_context(doc, num_fewshot=0, **kwargs)

    def candidates(self, doc: dict[str, Any]) -> list[str]:
        """[ŷ, then the numbers the hints assert]; empty when stage 1 found no number."""
        answer = doc.get(ANSWER_FIELD)
        if not answer:
            return []
        key = distractors.document_key(doc, ["question"])
        return [answer, *near_numbers(answer, HINT_NUMBERS, key, self.settings.seed)]

    def prompt_plans(self, doc: dict[str, Any]) -> list[PromptPlan]:
        """The original prompt, then ``m`` assertion prompts per hinted number (candidate >= 1)."""
        plans = [PromptPlan()]
        if not self.stage2 or not doc.get(ANSWER_FIELD):
            return plans
        key = distractors.document_key(doc, ["question"])
        for label in range(1, HINT_NUMBERS + 1):
            templates = distractors.choose_templates(key, self.settings.seed, label, self.m)
            plans += [PromptPlan(label, t) for t in templates]
        return plans

    def distracted_doc(self, doc: dict[str, Any], plan: PromptPlan) -> dict[str, Any]:
        return {**doc, HINT: number_hint(plan.template, self.candidates(doc)[plan.hint_label])}

    def hinted_prompts(self, doc: dict[str, Any]) -> list[Any]:
        """The hinted prompts, in ``prompt_plans`` order, built as lm-eval built the original."""
        return [self.copy_prompt(self.distracted_doc(doc, plan))
                for plan in self.prompt_plans(doc)[1:]]

    def scorings(self, doc: dict[str, Any]) -> list[Scoring]:
        """Stage 3: how C0 and then each hinted chain are scored."""
        base = self.candidates(doc)
        return [chain_scoring(chain, base) for chain in [doc[CHAIN_FIELD], *doc[HINTED_FIELD]]]

    def construct_requests(self, doc: dict[str, Any], ctx: str, **kwargs: Any) -> list[Instance]:
        kwargs = lm_eval_compat.instance_kwargs(kwargs)
        generation = deepcopy(self.config.generation_kwargs)
        if self.gsm8k_stage == "answer":
            requests = [("generate_until", (ctx, generation))]
        elif not self.candidates(doc):  # no number to distract from: a placeholder, to be logged
            requests = [("generate_until", (ctx, {**generation, "max_gen_toks": 1}))
                        if self.gsm8k_stage == "chains" else ("loglikelihood", (ctx, " 0"))]
        elif self.gsm8k_stage == "chains":
            requests = [("generate_until", (prompt, deepcopy(generation)))
                        for prompt in self.hinted_prompts(doc)]
        else:
            prompts = [ctx, *self.hinted_prompts(doc)]
            requests = [("loglikelihood", (prompt + scoring.text, candidate))
                        for prompt, scoring in zip(prompts, self.scorings(doc), strict=True)
                        for candidate in scoring.candidates]
        return [Instance(request_type=kind, doc=doc, arguments=arguments, idx=i, **kwargs)
                for i, (kind, arguments) in enumerate(requests)]

    # ------------------------------------------------------------------ results
    def document_record(self, doc: dict[str, Any], results: list[Any]) -> Record:
        target = doc[self.config.doc_to_target]
        where = bookkeeping(doc, len(results))
        if self.gsm8k_stage == "answer":
            answer = parse_number(results[0])
            record = Record(label=target, prediction=answer, parsed=answer is not None,
                            correct=int(same_number(answer, target)), chain=results[0],
                            generations=1, parse_failures=int(answer is None), **where)
        elif not self.candidates(doc):
            record = unreadable_record(target, where)
            if self.gsm8k_stage == "chains":  # carried on to stage 3
                record.update(chain=doc[CHAIN_FIELD], candidates=[], chains=[], answers=[])
        elif self.gsm8k_stage == "chains":
            record = self.chains_record(doc, results, target, where)
        else:
            record = self.scored_record(doc, results, target, where)
        return record

    def chains_record(self, doc: dict[str, Any], chains: list[str], target: str,
                      where: Record) -> Record:
        """Stage 2: the hinted chains and their numbers, with what stage 3 needs of stage 1."""
        self._check_count(doc, len(chains), len(self.prompt_plans(doc)) - 1)
        answers = [parse_number(chain) for chain in chains]
        return Record(label=target, prediction=doc[ANSWER_FIELD], chain=doc[CHAIN_FIELD],
                      correct=int(same_number(doc[ANSWER_FIELD], target)),
                      candidates=self.candidates(doc), chains=list(chains), answers=answers,
                      parsed=None not in answers, generations=1 + len(chains),
                      parse_failures=answers.count(None), **where)

    def scored_record(self, doc: dict[str, Any], results: list[Any], target: str,
                      where: Record) -> Record:
        """Stage 3: p and every p'_j (``chain_outcome``), joined into CaliDist's record."""
        scorings = self.scorings(doc)
        self._check_count(doc, len(results), sum(len(s.candidates) for s in scorings))
        outcomes, start = [], 0
        for j, scoring in enumerate(scorings):
            values = [ll for ll, _ in results[start:start + len(scoring.candidates)]]
            start += len(scoring.candidates)
            name = "original chain" if j == 0 else f"hinted chain {j}"
            outcomes.append(chain_outcome(values, scoring, f"{self.config.task} document "
                                          f"{doc[SOURCE_FIELD]} {name}"))
        correct = same_number(doc[ANSWER_FIELD], target)
        record = join_document(self.prompt_plans(doc), outcomes, 0 if correct else -1,
                               self.settings.delta_mode)
        answers = [s.candidates[s.answer] if s.answer is not None else None for s in scorings]
        record.update(label=target, prediction=doc[ANSWER_FIELD], candidates=self.candidates(doc),
                      answers=answers[1:], generations=len(outcomes),
                      parse_failures=sum(not o.parsed for o in outcomes), **where)
        return record

    def _check_count(self, doc: dict[str, Any], got: int, expected: int) -> None:
        if got != expected:
            raise ValueError(f"{self.config.task} document {doc[SOURCE_FIELD]}: expected "
                             f"{expected} answers, got {got}")

    # ------------------------------------------------------------------ metrics
    def reported_metrics(self) -> list[str]:
        if self.gsm8k_stage == "score":
            return [*super().reported_metrics(), "parse_fail_rate"]
        return ["acc", "parse_fail_rate", "requests_per_doc", "n_calibration", "n_evaluation"]

    def summarize(self, items: list[dict[str, Any]]) -> dict[str, float]:
        evaluation = [r for r in items if r["split"] == EVALUATION]
        if not evaluation:
            raise ValueError(f"{self.config.task}: no evaluation documents reached the aggregation")
        summary = {
            "parse_fail_rate": parse_fail_rate(evaluation),
            "acc": sum(r["correct"] for r in evaluation) / len(evaluation),
            "requests_per_doc": sum(r["requests"] for r in evaluation) / len(evaluation),
            "n_calibration": float(len(items) - len(evaluation)),
            "n_evaluation": float(len(evaluation)),
        }
        return {**super().summarize(items), **summary} if self.gsm8k_stage == "score" else summary

    def calibrator_context(self) -> dict[str, Any]:
        return {**super().calibrator_context(), "labels": "open-ended numbers"}
