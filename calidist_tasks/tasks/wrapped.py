"""CaliDist for any lm-eval multiple-choice task: a task derived from a registered one.

``calidist wrap TASK`` (``write_wrapped``) writes YAML naming ``WrappedTask`` with ``wraps: TASK``
(docs/wrap.md). At run time the wrapped task's own config is read from lm-eval's task index
(``lm_eval_compat.task_config``) and becomes this task's config, so lm-eval loads its documents
and renders its prompt (description, few-shot exemplars, chat template), choices and target as it
does for the task itself; nothing is copied into our YAML. What changes:

- the documents: the evaluated split's, calibration documents first: the task's validation split
  when it evaluates on its test split, else a seeded held-out slice (``split_documents``);
- each prompt's requests score the task's own continuations (its choices after its
  ``target_delimiter``), not our option letters; p = softmax over their log-likelihoods (as
  lm-eval's ``acc``), or over the log-likelihoods per character (``length_normalised``, as its
  ``acc_norm``);
- a hinted prompt names a choice as the task shows it (``distractors.hint_naming``), before the
  task's answer cue (``hinted_text``).

The plans, the joining of answers, the aggregation and two-stage runs are CaliDistTask's. Sample
corruption is written per benchmark (our YAML's ``corruption`` block) and is not derived.

A wrapped group (``calidist wrap mmlu``) is one calibration pool (``CalibrationPool``): each
member's YAML names the pool (``pool``, the group ``calidist wrap`` writes beside them) and its
members (``pool_members``); each member contributes its share of ``calib_size``
(``calibration_share``) and every member is fitted on the calibration documents of all the pool's
members that run in the same lm-eval run, in one order (member name, document), whatever the
order of the tasks. Each member reports its own evaluation documents' scores with that fit and,
under ``<metric>_pooled``, the scores over every member's evaluation documents, which the group's
row repeats (lm-eval's unweighted mean of equal numbers). With ``--metadata save_calibrator``
each member writes the pool's fit once, to its own path (``{task}`` in it, required in a pool),
recording its own name, so that ``--metadata calibrator`` applies it to that member.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import datasets

from calidist_tasks.backends import lm_eval_compat
from calidist_tasks.data.documents import SUFFIXES, split_documents
from calidist_tasks.prompting import distractors
from calidist_tasks.prompting.parts import HINT
from calidist_tasks.registry import LOGIT, metric_names
from calidist_tasks.scoring.aggregation import summarize_baselines, summarize_calidist
from calidist_tasks.scoring.joining import PromptPlan
from calidist_tasks.scoring.records import (
    CALIBRATED,
    CALIBRATED_CORRECT,
    CALIBRATION,
    EVALUATION,
    INDEX_FIELD,
    failed_documents,
)
from calidist_tasks.settings import RunSettings
from calidist_tasks.tasks.base import CaliDistTask

log = logging.getLogger(__name__)

# Keys of a wrapped task's YAML that neither lm-eval nor CaliDistTask knows.
OWN_KEYS = ("wraps", "include_path", "answer_cue", "length_normalised", "pool", "pool_members")
# Keys of the wrapped config that describe the wrapped task itself, not ours: its grouping, and
# its per-document metrics (ours are computed over all documents by CaliDistTask).
DROPPED_KEYS = ("tag", "group", "task_list", "task_alias", "metric_list", "process_results",
                "filter_list")
CUE_LENGTH = 40  # the longest last line taken for an answer cue ("Answer:", "A:")
CLASS = "calidist_tasks.tasks.wrapped.WrappedTask"
# variant suffix -> distractor style
VARIANTS = {"": "none", "_assertion": "assertion", "_probe": "probe"}
NORMALISED = "_norm"  # the suffix of the length-normalised tasks (lm-eval's acc_norm)
POOLED = "_pooled"  # the suffix of a pool member's scores over the whole pool
TASK_PLACEHOLDER = "{task}"  # in --metadata data_files: the wrapped task's name


def hinted_text(text: str, hint: str, cue: str | None = None) -> str:
    """``text`` (a wrapped task's prompt) with ``hint`` before its answer cue.

    Parameters
    ----------
    text : str
        The prompt lm-eval renders for the document (its ``doc_to_text``).
    hint : str
        The hint and the paper's note.
    cue : str, optional
        The YAML's ``answer_cue``: the hint goes before its last occurrence; "" puts the hint
        before the whole prompt. None: the prompt's last line when it is a short label ending in
        ":" ("Answer:", "A:"); a prompt without one (a sentence the choices complete, as
        HellaSwag's) gets the hint before it.

    Returns
    -------
    str
        The hinted prompt; ValueError when ``cue`` is given and not in ``text``.
    """
    if cue is None:
        head, _, last = text.rstrip().rpartition("\n")
        cue = last if head and last.endswith(":") and len(last) <= CUE_LENGTH else ""
    if not cue:
        return f"{hint}\n\n{text}"
    at = text.rfind(cue)
    if at < 0:
        raise ValueError(f"answer_cue {cue!r} is not in the prompt ...{text[-80:]!r}; "
                         "set answer_cue to text the prompt ends with, or \"\"")
    before = text[:at]
    if before and not before.endswith("\n"):
        before += "\n"
    return f"{before}{hint}\n{text[at:]}"


def calibration_share(calib_size: int, member: str, members: Sequence[str]) -> int:
    """``member``'s share of a pool's ``calib_size`` calibration documents: an even split over
    the members sorted by name, the first ``calib_size mod len(members)`` one more."""
    ordered = sorted(set(members))
    if member not in ordered:
        raise ValueError(f"{member}: its YAML's pool_members do not name it")
    base, extra = divmod(calib_size, len(ordered))
    return base + (ordered.index(member) < extra)


class CalibrationPool:
    """The members of one calibration pool in this process's current lm-eval run.

    lm-eval builds every task's requests (``build_all_requests``) before it scores any document
    (``process_results``) and scores every task's documents before it aggregates any; a member
    that joins after a member was scored starts a new run's pool, so an earlier run's members
    (the same process, another ``simple_evaluate``) never enter it.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.members: dict[str, WrappedTask] = {}
        self.scored = False
        self.pooled: tuple[tuple[int, ...], dict[str, float]] | None = None  # (ids, summary)

    def join(self, task: WrappedTask) -> None:
        if self.scored:
            self.members, self.scored, self.pooled = {}, False, None
        self.members[task.config.task] = task

    def records(self, asking: WrappedTask, own: list[dict[str, Any]]) -> dict[str, list]:
        """{member: its records} of the members scored in this run, ``asking``'s own being
        ``own``; a member with documents whose answers cannot be used refuses the pool."""
        found = {asking.config.task: own}
        for name, member in self.members.items():
            if member is asking or not member.pool_records:
                continue
            records = [member.pool_records[i] for i in sorted(member.pool_records)]
            if failed_documents(records):
                raise ValueError(f"{asking.config.task}: calibrates with the pool {self.name}, "
                                 f"whose member {name} has documents whose answers cannot be "
                                 "used (its own error names them)")
            found[name] = records
        return found


POOLS: dict[str, CalibrationPool] = {}  # by pool name, in this process


def _copy(record: dict[str, Any]) -> dict[str, Any]:
    """A record as its document's answers left it, without the confidences an aggregation
    logged on it (they stay the owner's)."""
    return {k: v for k, v in record.items() if k not in (CALIBRATED, CALIBRATED_CORRECT)}


def pooled_records(records: dict[str, list[dict[str, Any]]], own: str | None) -> list:
    """Every member's calibration records in one order (member name, then document) and then
    ``own``'s evaluation records (None: every member's); ``own``'s records are its own objects,
    the others' copies."""
    chosen = []
    for split in (CALIBRATION, EVALUATION):
        for name in sorted(records):
            if split == EVALUATION and own is not None and name != own:
                continue
            chosen += [r if name == own else _copy(r) for r in records[name]
                       if r.get("split") == split]
    return chosen


class WrappedTask(CaliDistTask):
    """CaliDistTask over a registered lm-eval multiple-choice task (``wraps``)."""

    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        config = dict(config or {})
        own = {key: config.pop(key, None) for key in OWN_KEYS}
        name = config.get("task")
        if not own["wraps"]:
            raise ValueError(f"{name}: a wrapped task needs 'wraps: <lm-eval task name>'")
        self.wrapped_name: str = own["wraps"]
        self.answer_cue: str | None = own["answer_cue"]
        self.length_normalised = bool(own["length_normalised"])
        self.pool_name: str | None = own["pool"]
        self.pool_members: list[str] = sorted(set(own["pool_members"] or []))
        if self.pool_name and name not in self.pool_members:
            raise ValueError(f"{name}: its YAML names the pool {self.pool_name} but not itself "
                             "among pool_members; write the tasks again with calidist wrap")
        self.pool_records: dict[int, dict[str, Any]] = {}  # this run's records, by index
        wrapped = lm_eval_compat.task_config(self.wrapped_name,
                                             include_folders(own["include_path"], config))
        self.evaluation_split, self.calibration_split_name = check_wrappable(
            name, self.wrapped_name, wrapped, config.get("distractor"))
        for key in DROPPED_KEYS:
            wrapped.pop(key, None)
        metadata = {**(wrapped.get("metadata") or {}), **(config.get("metadata") or {})}
        files = RunSettings.from_metadata(metadata).data_files
        if files is not None:  # lm-eval loads them: the dataset_path / kwargs of local files
            wrapped.update(local_dataset(name, files, self.wrapped_name))
        # our documents replace the evaluated split's (``CaliDistTask.download``)
        wrapped["test_split"] = self.evaluation_split
        benchmark = self.wrapped_name + (NORMALISED if self.length_normalised else "")
        super().__init__({**wrapped, **config, "metadata": metadata, "benchmark": benchmark},
                         **kwargs)
        saving = self.settings.save_calibrator
        if self.pool_name and len(self.pool_members) > 1 and saving and "{task}" not in saving:
            raise ValueError(f"{name}: --metadata save_calibrator={saving} has no {{task}}: each "
                             f"member of the calibration pool {self.pool_name} writes the pool's "
                             "fit under its own name (docs/wrap.md); put {task} in the path")
        if self.pool_name:  # logged in the results file's config, beside benchmark and style
            self.config.metadata = {**(self.config.metadata or {}), "calibration_pool": {
                "name": self.pool_name, "members": self.pool_members,
                "calib_share": self.document_settings().calib_size}}

    # ------------------------------------------------------------------ calibration pool
    def document_settings(self) -> RunSettings:
        """The settings the split takes: a pool member's ``calib_size`` is its share of the
        pool's (``calibration_share``)."""
        if not self.pool_name:
            return self.settings
        share = calibration_share(self.settings.calib_size, self.config.task, self.pool_members)
        return dataclasses.replace(self.settings, calib_size=share)

    def pool(self) -> CalibrationPool | None:
        """This task's pool, when it is in one."""
        if not self.pool_name:
            return None
        return POOLS.setdefault(self.pool_name, CalibrationPool(self.pool_name))

    def build_all_requests(self, *, limit: int | None = None, **kwargs: Any) -> None:
        """lm-eval's hook; a pool member joins its pool for this run, in one process only."""
        pool = self.pool()
        if pool is not None:
            if (kwargs.get("world_size") or 1) > 1:
                raise ValueError(f"{self.config.task}: a calibration pool ({self.pool_name}) is "
                                 "fitted in one process; run it without data parallelism, or "
                                 "write the tasks with calidist wrap --no-pool")
            self.pool_records = {}
            pool.join(self)
        super().build_all_requests(limit=limit, **kwargs)

    def process_results(self, doc: dict[str, Any], results: list[Any]) -> dict[str, Any]:
        """lm-eval's hook; a pool member keeps its record for the pool's fits."""
        found = super().process_results(doc, results)
        pool = self.pool()
        if pool is not None and pool.members.get(self.config.task) is self:
            self.pool_records[doc[INDEX_FIELD]] = next(iter(found.values()))
            pool.scored = True
        return found

    def reported_metrics(self) -> list[str]:
        names = super().reported_metrics()
        return names + [name + POOLED for name in names] if self.pool_name else names

    def summarize(self, items: list[dict[str, Any]]) -> dict[str, float]:
        """Every reported metric; a pool member's fitted on the calibration documents of every
        member scored in this run (``pooled_records``), its ``_pooled`` metrics over every
        member's evaluation documents (summarized once per run)."""
        pool = self.pool()
        if pool is None or pool.members.get(self.config.task) is not self:
            return super().summarize(items)
        members = pool.records(self, list(items))
        absent = sorted(set(self.pool_members) - set(members))
        if absent:
            log.warning("%s: its calibration pool %s has %d of its %d tasks in this run (not "
                        "run: %s%s); the pool is the tasks run", self.config.task, pool.name,
                        len(members), len(self.pool_members), ", ".join(absent[:3]),
                        " ..." if len(absent) > 3 else "")
        own = super().summarize(pooled_records(members, self.config.task))
        ids = tuple(sorted(id(r) for records in members.values() for r in records))
        if pool.pooled is None or pool.pooled[0] != ids:
            copies = {name: [_copy(r) for r in records] for name, records in members.items()}
            pool.pooled = (ids, self.summarize_pool(pooled_records(copies, None)))
        return {**own, **{name + POOLED: value for name, value in pool.pooled[1].items()}}

    def summarize_pool(self, records: list[dict[str, Any]]) -> dict[str, float]:
        """The pool's ``_pooled`` metrics: the same fit as every member's, not saved again
        (``save_calibrator``: each member writes it once, under its own name)."""
        summarize = summarize_calidist if self.sends_hints() else summarize_baselines
        settings = dataclasses.replace(self.settings, save_calibrator=None)
        return summarize(records, settings, self.calibrator_context())

    def _stderr(self, name: str, iters: int) -> Any:
        """No stderr for a ``_pooled`` metric (its records are the pool's)."""
        return None if name.endswith(POOLED) else super()._stderr(name, iters)

    # ------------------------------------------------------------------ data
    def kept_splits(self, dataset_kwargs: dict[str, Any] | None = None,
                    **kwargs: Any) -> dict[str, Any]:
        """lm-eval loads the wrapped task's data; its splits stay beside ours (the exemplars',
        the calibration split ``built_documents`` reads)."""
        return self.lm_eval_splits(dataset_kwargs, **kwargs)

    def built_documents(self) -> list[dict[str, Any]]:
        """The wrapped task's documents (its ``process_docs`` applied), calibration first."""
        rows: dict[str, list[tuple[str, dict[str, Any]]]] = {EVALUATION: [], CALIBRATION: []}
        calibration = self.calibration_split_name
        if calibration is not None and calibration not in self.dataset:
            log.warning("%s: the data has no %r split; the calibration documents are a seeded "
                        "held-out slice of %r", self.config.task, calibration,
                        self.evaluation_split)
            calibration = None
        for role, split in ((EVALUATION, self.evaluation_split), (CALIBRATION, calibration)):
            if split is None:
                continue
            if split not in self.dataset:
                raise ValueError(f"{self.config.task}: {self.wrapped_name} evaluates split "
                                 f"{split!r}, which its data lacks (splits: "
                                 f"{', '.join(self.dataset)}); name it in --metadata data_files")
            docs = self.config.process_docs(self.dataset[split]) if self.config.process_docs \
                else self.dataset[split]
            self.features = list(docs.features)  # lm-eval's doc_to_* read fields by name
            rows[role] = [(f"{self.wrapped_name}/{split}[{i}]", dict(doc))
                          for i, doc in enumerate(docs)]
        return split_documents(self.config.task, rows[EVALUATION], rows[CALIBRATION],
                               self.document_settings())

    def test_docs(self) -> datasets.Dataset:
        """Our marked documents (the wrapped task's ``process_docs`` already applied)."""
        return self.dataset[self.config.test_split]

    def option_count(self, doc: dict[str, Any]) -> int:
        return len(self.doc_to_choice(doc))

    def gold_label(self, doc: dict[str, Any]) -> int:
        """The index of the correct choice: the wrapped task's ``doc_to_target`` (an index, or
        the choice itself)."""
        target = self.doc_to_target(doc)
        choices = self.doc_to_choice(doc)
        if isinstance(target, str) and target.strip().isdigit():
            target = int(target)
        if isinstance(target, str) and target in choices:
            target = choices.index(target)
        if isinstance(target, bool) or not isinstance(target, int) \
                or not 0 <= target < len(choices):
            raise ValueError(f"{self.document_name(doc)}: target {target!r} is neither a choice "
                             f"nor the index of one of its {len(choices)} choices")
        return target

    # ------------------------------------------------------------------ prompts
    def doc_to_text(self, doc: dict[str, Any], doc_to_text: Any = None) -> str:
        """The wrapped task's prompt; a hinted copy's with its hint (``hinted_text``)."""
        text = self.question(doc, doc_to_text)  # lm-eval's rendering of the task's doc_to_text
        if not isinstance(text, str):
            raise ValueError(f"{self.config.task}: {self.wrapped_name}'s doc_to_text gives "
                             f"{type(text).__name__}, not a prompt (a task with one prompt per "
                             "choice, as Winogrande, cannot be wrapped)")
        hint = doc.get(HINT)
        return text if hint is None else hinted_text(text, hint, self.answer_cue)

    def fewshot_docs(self) -> Any:
        """The wrapped task's exemplars; None when its data lacks their split (local files
        without it), so that a zero-shot run needs none. Its prompt is lm-eval's: description,
        exemplars (unhinted), then the document (``doc_to_text``)."""
        try:
            return self.lm_eval_fewshot_docs()
        except KeyError as error:
            log.warning("%s: no few-shot exemplars (the data has no split %s); give it in "
                        "--metadata data_files to run with --num_fewshot", self.config.task, error)
            return None

    def fewshot_context(self, doc: dict[str, Any], num_fewshot: int, **kwargs: Any) -> Any:
        """lm-eval's prompt with the wrapped task's own exemplars (its sampler, unhinted)."""
        return self.lm_eval_fewshot_context(doc, num_fewshot, **kwargs)

    def fewshot_pool(self) -> list[dict[str, Any]]:
        """Empty: the exemplars are the wrapped task's own (lm-eval's sampler), not ours."""
        return []

    def distracted_doc(self, doc: dict[str, Any], plan: PromptPlan) -> dict[str, Any]:
        """The document with the hint naming choice ``plan.hint_label`` as the task shows it."""
        choice = self.doc_to_choice(doc)[plan.hint_label]
        return {**doc, HINT: distractors.hint_naming(str(choice), plan.template)}

    def continuations(self, doc: dict[str, Any]) -> list[str]:
        """The wrapped task's continuations: each choice after its target_delimiter."""
        return [f"{self.config.target_delimiter}{choice}" for choice in self.doc_to_choice(doc)]

    def option_loglikelihoods(self, doc: dict[str, Any], results: list[Any]) -> list[float]:
        """Log-likelihoods, per character of the choice when ``length_normalised`` (lm-eval's
        acc_norm: the choice without its delimiter)."""
        values = super().option_loglikelihoods(doc, results)
        if not self.length_normalised:
            return values
        lengths = [max(len(choice), 1) for choice in self.doc_to_choice(doc)]
        return [ll / lengths[i % len(lengths)] for i, ll in enumerate(values)]


def include_folders(include_path: Sequence[str] | None, config: dict[str, Any]) -> list[str]:
    """The YAML's ``include_path`` folders; a relative one is relative to the YAML's own folder
    (lm-eval logs it as ``metadata.config_source``), so a wrapped folder can move with them."""
    source = (config.get("metadata") or {}).get("config_source")
    base = Path(source).parent if source and source != "inline" else Path.cwd()
    return [str(base / folder) for folder in include_path or ()]


def check_wrappable(name: str, wrapped_name: str, config: dict[str, Any],
                    distractor: str | None) -> tuple[str, str | None]:
    """(evaluated split, calibration split or None) of a wrappable config; ValueError naming
    the task and the reason otherwise."""
    output_type = config.get("output_type")
    if output_type != "multiple_choice":
        raise ValueError(f"{name}: {wrapped_name} is a {output_type} task; only multiple_choice "
                         "tasks are wrapped")
    if "class" in config:
        raise ValueError(f"{name}: {wrapped_name} is a Python task class, not a YAML config; "
                         "only configs are wrapped")
    if distractor == "corruption":
        raise ValueError(f"{name}: sample corruption is task-specific and is not derived for "
                         "wrapped tasks; use assertion or probe")
    test, validation = config.get("test_split"), config.get("validation_split")
    if not (test or validation):
        raise ValueError(f"{name}: {wrapped_name} has neither a test nor a validation split")
    return (test, validation) if test else (validation, None)


def local_dataset(task: str, files: Any, wrapped: str = "") -> dict[str, Any]:
    """The config keys that make lm-eval load ``--metadata data_files`` for a wrapped task:
    {split: file or files} in the wrapped task's own schema and split names (jsonl, json, csv
    or parquet); "{task}" in a path is the wrapped task's name (``wrapped``), so that one
    mapping serves every member of a group ("mmlu/{task}_test.jsonl")."""
    if not isinstance(files, dict):
        raise ValueError(f"{task}: --metadata data_files must map the wrapped task's split names "
                         f"to files, e.g. {{\"test\": \"test.jsonl\"}}; got {files!r:.80}")
    paths = {split: [Path(str(p).replace(TASK_PLACEHOLDER, wrapped))
                     for p in (v if isinstance(v, list) else [v])]
             for split, v in files.items()}
    suffixes = {p.suffix.lower() for ps in paths.values() for p in ps}
    missing = [str(p) for ps in paths.values() for p in ps if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"{task}: --metadata data_files: no such file {missing[0]}")
    builder = {".jsonl": "json", ".json": "json", ".csv": "csv", ".parquet": "parquet"}
    if len(suffixes) != 1 or next(iter(suffixes)) not in builder:
        raise ValueError(f"{task}: --metadata data_files must all be one of .jsonl, .json, .csv "
                         f".parquet (got {sorted(suffixes)}; supported here: {SUFFIXES[:4]})")
    return {"dataset_path": builder[suffixes.pop()], "dataset_name": None,
            "dataset_kwargs": {"data_files": {s: [str(p) for p in ps] for s, ps in paths.items()}}}


# ---------------------------------------------------------------------- calidist wrap
def wrapped_yaml(task: str, wrapped: str, distractor: str, *, length_normalised: bool = False,
                 answer_cue: str | None = None, include_path: Sequence[str] = (),
                 pool: str | None = None, pool_members: Sequence[str] = ()) -> str:
    """The YAML of one wrapped task (JSON strings are YAML strings)."""
    lines = [
        f"# Written by `calidist wrap {wrapped}` (docs/wrap.md): the documents, prompt, choices,",
        f"# target and few-shot are {wrapped}'s own, read from lm-eval's config at run time.",
        f"task: {json.dumps(task)}",
        f"class: !function {CLASS}",
        f"wraps: {json.dumps(wrapped)}",
        f"distractor: {distractor}",
    ]
    if length_normalised:
        lines.append("length_normalised: true")
    if answer_cue is not None:
        lines.append(f"answer_cue: {json.dumps(answer_cue)}")
    if include_path:  # relative to the folder the YAML is written into (``include_folders``)
        lines.append(f"include_path: {json.dumps(list(include_path))}")
    if pool:  # one calibration pool with the group's other members (``CalibrationPool``)
        lines += [f"pool: {json.dumps(pool)}", f"pool_members: {json.dumps(list(pool_members))}"]
    return "\n".join(lines) + "\n"


def pool_group_yaml(group: str, members: Sequence[str], hinted: bool) -> str:
    """The YAML of a pool's lm-eval group: its members, and a row repeating their ``_pooled``
    metrics (equal in every member: lm-eval's unweighted mean of them is the number itself)."""
    lines = [
        "# Written by `calidist wrap` (docs/wrap.md): one calibration pool. Each member is fitted",
        "# on every member's calibration documents; its <metric>_pooled scores are over every",
        "# member's evaluation documents, and this group's row repeats them.",
        f"group: {json.dumps(group)}",
        f"task: {json.dumps(list(members))}",
        "aggregate_metric_list:",
    ]
    lines += [f"  - {{metric: {name}{POOLED}, aggregation: mean, weight_by_size: false}}"
              for name in metric_names(hinted, LOGIT)]
    return "\n".join(lines) + "\n"


def wrap(tasks: Sequence[str], out: str | Path = "calidist_wrapped", *,
         include_path: Sequence[str] = (), answer_cue: str | None = None,
         acc_norm: bool | None = None, pool: str | bool | None = None) -> list[Path]:
    """Write the CaliDist tasks of lm-eval multiple-choice tasks into ``out``.

    Parameters
    ----------
    tasks : sequence of str
        Registered lm-eval task, group or tag names (a group or tag: each of its tasks).
    out : str or Path
        The folder to write into; pass it to ``lm_eval --include_path``.
    include_path : sequence of str
        Folders of your own task configs (as ``lm_eval --include_path``), recorded in the YAML.
    answer_cue : str, optional
        Where the hint goes (``hinted_text``); None: the prompt's last line when it is a cue.
    acc_norm : bool, optional
        Also write the length-normalised tasks (``calidist_<task>_norm...``); None: when the
        wrapped task reports ``acc_norm``.
    pool : str or bool, optional
        Calibration pools. None (default): each group given (not a tag) with two or more
        wrappable tasks is one pool, named after it; a name: every task given is one pool of
        that name; False: no pool, each task calibrates on its own documents.

    Returns
    -------
    list of Path
        The files written: ``calidist_<task>`` (vanilla and the post-hoc calibrators),
        ``calidist_<task>_assertion`` and ``calidist_<task>_probe`` per task, and the
        ``_norm`` ones; per pool ``P`` its groups ``calidist_P``, ``calidist_P_assertion``, ...
        A task given that is not multiple choice is named in a ValueError; such a member of a
        group or tag given is named in a warning and skipped.
    """
    given: dict[str, list[str]] = {}  # name given -> its wrappable tasks
    tagged: set[str] = set()  # names given that are tasks or tags, not groups
    for name in tasks:
        if lm_eval_compat.registered_kind(name, include_path) is None:
            raise ValueError(f"{name!r} is not a registered lm-eval task, group or tag (lm_eval "
                             "ls tasks lists them; your own: give its folder in --include_path)")
        given[name] = lm_eval_compat.member_names(name, include_path)
        if lm_eval_compat.registered_kind(name, include_path) != "group":
            tagged.add(name)
    configs: dict[str, dict[str, Any]] = {}
    for name in dict.fromkeys(n for members in given.values() for n in members):
        config = lm_eval_compat.task_config(name, include_path)
        try:
            check_wrappable(f"calidist wrap {name}", name, config, None)
        except ValueError as error:
            if name in tasks:  # named by the user: refused
                raise
            log.warning("%s; skipped (a member of a group or tag given)", error)
            continue
        configs[name] = config
    pools = _pools({n: m for n, m in given.items() if pool or n not in tagged}, configs, pool)
    written: list[Path] = []
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    relative = [os.path.relpath(Path(p).resolve(), folder.resolve()) for p in include_path]
    for name, config in configs.items():
        pool_name = next((p for p, members in pools.items() if name in members), None)
        reports_norm = any(m.get("metric") == "acc_norm" for m in config.get("metric_list") or []
                           if isinstance(m, dict))
        for normalised in _norms(reports_norm, acc_norm):
            for suffix, distractor in VARIANTS.items():
                tail = f"{NORMALISED if normalised else ''}{suffix}"
                task = f"calidist_{name}{tail}"
                members = [f"calidist_{m}{tail}" for m in pools.get(pool_name, ())]
                path = folder / f"{task}.yaml"
                path.write_text(wrapped_yaml(task, name, distractor,
                                             length_normalised=normalised,
                                             answer_cue=answer_cue, include_path=relative,
                                             pool=pool_name and f"calidist_{pool_name}{tail}",
                                             pool_members=members),
                                encoding="utf-8")
                written.append(path)
    for pool_name, members in pools.items():
        norms = {n for m in members for n in _norms(any(
            x.get("metric") == "acc_norm" for x in configs[m].get("metric_list") or []
            if isinstance(x, dict)), acc_norm)}
        for normalised in sorted(norms):
            for suffix, distractor in VARIANTS.items():
                tail = f"{NORMALISED if normalised else ''}{suffix}"
                group = f"calidist_{pool_name}{tail}"
                path = folder / f"{group}.yaml"
                path.write_text(pool_group_yaml(group, [f"calidist_{m}{tail}" for m in members],
                                                distractor != "none"), encoding="utf-8")
                written.append(path)
    return written


def _norms(reports_norm: bool, acc_norm: bool | None) -> tuple[bool, ...]:
    return (False, True) if (reports_norm if acc_norm is None else acc_norm) else (False,)


def _pools(given: dict[str, list[str]], configs: dict[str, Any],
           pool: str | bool | None) -> dict[str, list[str]]:
    """{pool name: its wrappable tasks, sorted} (``wrap``'s ``pool``); ValueError when a task
    would be in two pools or a pool's name is one of its tasks' names."""
    if pool is False:
        return {}
    if isinstance(pool, str):
        if not pool.strip() or any(c in pool for c in " /\\"):
            raise ValueError(f"--pool {pool!r}: give a name (letters, digits, _)")
        chosen = {pool: [n for members in given.values() for n in members]}
    else:
        chosen = dict(given)
    pools: dict[str, list[str]] = {}
    owner: dict[str, str] = {}
    for name, members in chosen.items():
        members = sorted({m for m in members if m in configs})
        if len(members) < 2:
            continue
        if name in configs:
            raise ValueError(f"the pool {name!r} has a task of that name; name the pool another "
                             "way (--pool)")
        for member in members:
            if member in owner:
                raise ValueError(f"{member} would be in two calibration pools ({owner[member]} "
                                 f"and {name}); wrap them separately or give --pool NAME")
            owner[member] = name
        pools[name] = members
    return pools
