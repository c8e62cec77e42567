"""Staged runs: a later stage reads an earlier run's logged samples.

lm-eval builds every request before the model answers, so a prompt that depends on an answer
(a hint naming another label than ŷ, a number near ŷ, the letters at a reply's answer) is sent by
a *later stage*: a run that reads the samples file an *earlier run* logged with
``--log_samples``. Three kinds of task are later stages, all through ``EarlierRun``
(docs/architecture.md, "Staged runs"):

- a two-stage run's stage ``hints`` (``two_stage``) reads stage ``original`` of the same task
  (``--metadata original_run``): each document's original answer;
- GSM8K's stages ``chains`` and ``score`` (``open_ended``) read the stage before
  (``--metadata original_samples``): ŷ and the worked answers;
- a reasoned ``_cot`` task (``reasoned``) reads its ``_verbalized`` task's run
  (``--metadata replies``): each document's prompts and replies; of a two-stage reply run, stage
  2's and, through the ``original_run`` its results file logged (``EarlierRun.metadata``), stage
  1's.

``EarlierRun.read`` finds the file (``files.samples_file_of``), refuses a run another model
answered or one that names no model (``check_model``: the records' own ``model``, else the
results file beside them), and matches every logged line to this run's document of the same
index, refusing another document (``same_document``); ``get`` / ``record`` give one document's
sample, ``check_prompt`` refuses a prompt that is not the one the earlier run sent. Every error
names the task, the metadata key, the file and (where there is one) the line and the document.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from calidist_tasks.prompting.distractors import document_key
from calidist_tasks.runs.files import (
    SAMPLES_NAME,
    model_name,
    read_jsonl,
    samples_file_of,
)
from calidist_tasks.runs.prompt_logging import same_prompt
from calidist_tasks.scoring.records import (
    INDEX_FIELD,
    MODEL_KEY,
    SOURCE_FIELD,
    is_failed,
    is_own_field,
    line_record,
)

UNKNOWN_MODEL = "unknown model"  # what run_files.model_name says when none is recorded
SAME_PROMPT = ("--num_fewshot, --apply_chat_template, --system_instruction and --metadata (seed, "
               "m, verbalized_prompt)")  # what makes a prompt


class Logged(NamedTuple):
    """One document's line of an earlier run's samples file."""

    line: int  # its line number in the file
    sample: dict[str, Any]  # the line as lm-eval logged it: doc, arguments, resps, prompt_hash
    record: dict[str, Any]  # the calidist record in it (``records.Record``)


def described(doc: Mapping[str, Any]) -> str:
    """How an error names a document: "document 3 (dev.jsonl:12)"."""
    return f"document {doc.get(INDEX_FIELD)} ({doc.get(SOURCE_FIELD)})"


def same_document(ours: Mapping[str, Any], logged: Mapping[str, Any]) -> bool:
    """Whether a logged document is this run's document: same index, same source, same content
    in every field both have (an earlier stage may have logged fields it added, GSM8K's ŷ; a run
    of an earlier version may lack a field added since)."""
    fields = [name for name in ours if name in logged and not is_own_field(name)]
    return (logged.get(INDEX_FIELD) == ours.get(INDEX_FIELD)
            and logged.get(SOURCE_FIELD) == ours.get(SOURCE_FIELD)
            and document_key(logged, fields) == document_key(ours, fields))


def results_beside(file: Path) -> tuple[Path, dict[str, Any]] | None:
    """The results file lm-eval wrote beside a samples file (same date stamp) and its content;
    None when there is none or it cannot be read."""
    match = SAMPLES_NAME.match(file.name)
    results = file.parent / f"results_{match['stamp']}.json" if match else None
    if results is None or not results.is_file():
        return None
    try:
        data = json.loads(results.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return (results, data) if isinstance(data, dict) else None


def check_model(file: Path, where: str, model: str | None,
                logged: Mapping[int, Logged]) -> None:
    """Refuse samples another model answered: the model each record names (``MODEL_KEY``,
    written since records carry it) and the one the results file lm-eval wrote beside them
    (same date stamp) names must be this run's ``model``. Samples that name no model anywhere
    are refused too, when this run knows its own: a stage answered by another model would be
    scored in silence."""
    if not model:
        return
    named = False
    for entry in logged.values():
        theirs = entry.record.get(MODEL_KEY)
        named = named or theirs is not None
        if theirs is not None and theirs != model:
            raise ValueError(f"{where} line {entry.line}: answered by model {theirs!r}, not this "
                             f"run's {model!r}; run it again with this model")
    found = results_beside(file)
    theirs = UNKNOWN_MODEL
    if found is not None:
        try:  # the model argument only, not the backend
            theirs = model_name({"config": {"model_args": found[1]["config"]["model_args"]}})
        except (ValueError, AttributeError, KeyError, TypeError):
            pass
    if theirs not in (UNKNOWN_MODEL, model):
        raise ValueError(f"{where} was answered by model {theirs!r} ({found[0].name}), not this "
                         f"run's {model!r}; run it again with this model")
    if theirs == UNKNOWN_MODEL and not named:
        raise ValueError(f"{where}: neither its records nor a results file beside it name the "
                         f"model that answered, so it cannot be checked against this run's "
                         f"{model!r}; keep the results_<date>.json lm-eval wrote beside the "
                         "samples, or run it again")


class EarlierRun:
    """An earlier run's samples of one task, each line matched to this run's document."""

    def __init__(self, task: str, key: str, earlier_task: str, file: Path,
                 logged: dict[int, Logged]) -> None:
        self.task = task  # this run's task
        self.key = key  # the --metadata key that named the earlier run
        self.earlier_task = earlier_task  # the task whose samples these are
        self.file = file
        self.logged = logged  # document index -> its line

    @classmethod
    def read(cls, path: str | Path, *, task: str, key: str, earlier_task: str, how: str,
             docs: Sequence[Mapping[str, Any]], model: str | None = None) -> EarlierRun:
        """``earlier_task``'s samples under ``path`` (its file, or the newest below a folder),
        read for ``task``. Refused (ValueError naming the file, the line and the document) when
        another model answered them, a line is not a sample of a calidist task run with
        --log_samples, its document is not this run's document of the same index (another
        data, calib_size, eval_size or split_seed), a document is logged twice, or the file
        holds no samples. ``how`` says how to produce the file, for the error of a folder
        without it."""
        file = samples_file_of(path, earlier_task, key, how)
        by_index = {doc[INDEX_FIELD]: doc for doc in docs}
        logged: dict[int, Logged] = {}
        for number, sample in enumerate(read_jsonl(file), start=1):
            where = f"{task}: {key} {file} line {number}"
            doc = sample.get("doc") if isinstance(sample, dict) else None
            record = line_record(sample) if isinstance(doc, dict) else None
            if record is None or INDEX_FIELD not in doc:
                raise ValueError(f"{where}: not a sample of {earlier_task} run with "
                                 "--log_samples (a calidist record and its document)")
            index = doc[INDEX_FIELD]
            ours = by_index.get(index)
            if ours is None or not same_document(ours, doc):
                raise ValueError(
                    f"{where}: {described(doc)} is not this run's document {index} "
                    f"({'no such document' if ours is None else ours.get(SOURCE_FIELD)}); run "
                    "both on the same data, calib_size, eval_size and split_seed")
            if index in logged:
                raise ValueError(f"{where}: {described(doc)} is logged twice (first at line "
                                 f"{logged[index].line}); run {earlier_task} again")
            logged[index] = Logged(number, sample, record)
        if not logged:
            raise ValueError(f"{task}: {key} {file} holds no samples")
        check_model(file, f"{task}: {key} {file}", model, logged)
        return cls(task, key, earlier_task, file, logged)

    def metadata(self) -> dict[str, Any]:
        """The earlier task's metadata as the results file beside its samples logged it (its
        ``--metadata``: a two-stage run's ``stage`` and ``original_run``); {} without one."""
        found = results_beside(self.file)
        config = ((found[1].get("configs") or {}).get(self.earlier_task) if found else None)
        metadata = config.get("metadata") if isinstance(config, dict) else None
        return dict(metadata) if isinstance(metadata, dict) else {}

    def where(self, logged: Logged) -> str:
        """How an error names one line: the task, the key, the file and the line."""
        return f"{self.task}: {self.key} {self.file} line {logged.line}"

    def missing(self, docs: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        """The documents of ``docs`` the earlier run did not log."""
        return [doc for doc in docs if doc[INDEX_FIELD] not in self.logged]

    def get(self, doc: Mapping[str, Any]) -> Logged:
        """``doc``'s line; refused naming the document and the file when the earlier run did
        not log it (it ran on fewer documents: another --limit)."""
        found = self.logged.get(doc[INDEX_FIELD])
        if found is None:
            raise ValueError(
                f"{self.task}: {described(doc)} has no sample in {self.key} {self.file}; run "
                f"{self.earlier_task} on every document this run takes (the same --limit, or "
                "none)")
        return found

    def record(self, logged: Logged) -> dict[str, Any]:
        """The record of one line, refused when the earlier run had no usable answer for its
        document (a failed record, from a recovered folder)."""
        if is_failed(logged.record):
            raise ValueError(
                f"{self.where(logged)}: {described(logged.sample['doc'])} has no usable answer "
                f"in {self.earlier_task}'s run ({logged.record['error']}); run it again")
        return logged.record

    def fields(self, logged: Logged, fields: Sequence[str]) -> dict[str, Any]:
        """``fields`` of a line's usable record (``record``); refused naming the line and the
        first missing field."""
        record = self.record(logged)
        lacking = [name for name in fields if name not in record]
        if lacking:
            raise ValueError(f"{self.where(logged)}: the record of "
                             f"{described(logged.sample['doc'])} lacks {lacking[0]!r} (not a "
                             f"record of {self.earlier_task})")
        return {name: record[name] for name in fields}

    def check_prompt(self, doc: Mapping[str, Any], ours: Any, theirs: Any,
                     which: str = "its prompt") -> None:
        """Refuse ``doc``'s prompt ``ours`` when the earlier run sent another (``theirs``: the
        logged prompt, or its hash; None: not logged). A chat prompt (not text) is not
        compared. A prompt the earlier run logged by its hash (``--metadata log_prompts``) is
        compared by its hash (``prompt_logging.same_prompt``)."""
        if theirs is None or not isinstance(ours, str) or same_prompt(ours, theirs):
            return
        raise ValueError(
            f"{self.task}: {described(doc)}: {which} is not the prompt {self.earlier_task} "
            f"answered in {self.key} {self.file}; run both with the same {SAME_PROMPT}")
