"""Dataset loading and the calibration / evaluation split (docs/method.md, "Calibration split").

Each task evaluates one document list: the calibration documents first, marked
``calidist_split = "calibration"``, then the evaluation documents. Rows come from the Hugging
Face Hub by default, or from local files (``--metadata data_files=...`` / ``data_dir=...``). A
benchmark's adapter module may read its own file format (``read_file``) and map raw rows to the
task's schema (``process_row``); everything else here is shared by every benchmark.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import math
import random
import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from calidist_tasks.scoring.records import (
    CALIBRATION,
    EVALUATION,
    INDEX_FIELD,
    SOURCE_FIELD,
    SPLIT_FIELD,
    is_own_field,
)
from calidist_tasks.settings import RunSettings

log = logging.getLogger(__name__)
# (benchmark, eval_size, documents left) already warned about: once per process, not per task
_SHORT_WARNED: set[tuple[str, int, int]] = set()

SUFFIXES = (".jsonl", ".json", ".tsv", ".csv", ".parquet", ".txt")
# A line ends at LF, CRLF or a lone CR (as in Python's text mode and the csv module); never at
# U+2028 / U+0085, which str.splitlines() also breaks at (they occur inside JSON strings).
LINE_BREAK = re.compile(r"\r\n|\r|\n")
INT64 = range(-(2**63), 2**63)  # integers an Arrow table (lm-eval's document store) can hold
SURROGATE = re.compile("[\ud800-\udfff]")  # half of a UTF-16 pair: no UTF-8 text holds it
SHOWN_COPIES = 10  # duplicate rows named in the warning, beyond which they are counted
Row = tuple[str, dict[str, Any]]  # (where it came from, e.g. "dev.jsonl:12", the row)


@dataclass(frozen=True)
class Source:
    """Where a benchmark's data lives and how its rows become documents."""

    benchmark: str
    hub_path: str | None
    hub_name: str | None
    evaluation_split: str
    calibration_split: str | None
    data_dirs: Sequence[str]
    required_fields: Sequence[str]
    label_field: str
    n_labels: int | None  # None when the label space is per document (choices in the row)
    choices_field: str | None
    read_file: Callable[[Path], Iterable[Row]] | None = None
    process_row: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None
    # the gold answer two copies of a document must agree on: None is label_field (an open
    # answer's task has every document in one class and the answer in another field)
    answer_field: str | None = None
    # the YAML's few-shot exemplar documents: a row equal to one is neither evaluated nor calibrated
    exemplars: Sequence[dict[str, Any]] = ()


def read_rows(path: Path) -> list[Row]:
    """Read a local file in the Hub's own schema (jsonl, json, csv, tsv or parquet)."""
    if not path.is_file():
        raise FileNotFoundError(f"data file not found: {path}")
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import pyarrow
        import pyarrow.parquet

        try:
            table = pyarrow.parquet.read_table(path).to_pylist()
        except (pyarrow.ArrowException, OSError) as error:  # truncated, or not Parquet at all
            raise ValueError(f"{path}: not a readable Parquet file ({error})") from None
        return [(f"{path.name}:{i + 1}", row) for i, row in enumerate(table)]
    text = read_text(path)
    if suffix in (".tsv", ".csv"):
        return _read_table(path, text, "\t" if suffix == ".tsv" else ",")
    if suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            if text.lstrip().startswith("["):  # an array, not JSON lines: say where it breaks
                where = f"{path.name}:{error.lineno}"
                raise ValueError(f"{where}: not valid JSON ({error.msg})") from None
            data = None  # many "json" releases are really JSON lines
        if data is not None:
            data = data.get("data", data.get("rows", data)) if isinstance(data, dict) else data
            if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
                raise ValueError(f"{path}: expected a list of JSON objects")
            return [(f"{path.name}[{i}]", r) for i, r in enumerate(data)]
    rows = []
    for number, line in enumerate(split_lines(text), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path.name}:{number}: not valid JSON ({error.msg})") from None
        if not isinstance(row, dict):
            raise ValueError(
                f"{path.name}:{number}: expected a JSON object, got {type(row).__name__}"
            )
        rows.append((f"{path.name}:{number}", row))
    return rows


def read_text(path: Path) -> str:
    """A data file's text: UTF-8, else a ValueError. Byte-order marks are dropped wherever they
    are (files joined with ``cat`` carry one at each join), so none is kept in a document."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8").replace("\ufeff", "")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise ValueError(
            f"{path}: not UTF-8 text (line {line}, bad byte at offset {error.start}); re-encode it"
        ) from None


def split_lines(text: str) -> list[str]:
    """A text file's lines, broken at LF, CRLF and a lone CR (``LINE_BREAK``)."""
    return LINE_BREAK.split(text)


def _read_table(path: Path, text: str, delimiter: str) -> list[Row]:
    """CSV / TSV with a header line. A row whose field count differs from the header's is refused:
    an unbalanced quote or a stray delimiter would otherwise shift or merge fields silently.
    Column names are stripped ("label, premise" names 'premise'), and so are the spaces after a
    CSV's commas."""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True,
                        skipinitialspace=delimiter == ",")
    rows: list[Row] = []
    header: list[str] | None = None
    while True:
        start = reader.line_num + 1  # a quoted field may span lines: name the record's first
        try:
            fields = next(reader, None)
        except csv.Error as error:
            where = f"{path.name}:{start}"
            raise ValueError(f"{where}: malformed {path.suffix[1:]} ({error})") from None
        if fields is None:
            return rows
        if not fields:
            continue
        if header is None:
            header = [name.strip() for name in fields]
            if len(set(header)) != len(header):
                raise ValueError(f"{path.name}:{start}: duplicate column names in {header}")
        elif len(fields) != len(header):
            raise ValueError(
                f"{path.name}:{start}: {len(fields)} field(s), the header has {len(header)} "
                f"({', '.join(header)}); check for a stray delimiter or an unbalanced quote"
            )
        else:
            rows.append((f"{path.name}:{start}", dict(zip(header, fields, strict=True))))


def _split_files(folder: Path, split: str) -> list[Path]:
    """The file of ``split`` in ``folder`` (none: []); two (``test.tsv`` and ``test.jsonl``, or
    ``validation`` and ``dev``) are refused: reading both would count every document twice."""
    names = {split, split.replace("validation", "dev")}
    found = sorted(p for p in folder.iterdir() if p.suffix.lower() in SUFFIXES and p.stem in names)
    if len(found) > 1:
        raise ValueError(f"{folder} has {len(found)} files for split '{split}' "
                         f"({', '.join(p.name for p in found)}); keep one")
    return found


def _local_files(source: Source, settings: RunSettings) -> dict[str, list[Path]] | None:
    """Map 'evaluation' / 'calibration' to local files, or None to use the Hub."""
    files = settings.data_files
    if files is not None:
        chosen = _data_files(source, files) if isinstance(files, dict) else {
            EVALUATION: [Path(p) for p in (files if isinstance(files, list) else [files])]}
        _check_listed_once(chosen)
        return chosen
    if settings.data_dir is not None:
        root = Path(settings.data_dir)
        if not root.is_dir():
            where = "" if root.is_absolute() else f" (relative to {Path.cwd()}: {root.resolve()})"
            raise FileNotFoundError(f"--metadata data_dir is not a folder: {root}{where}; give an "
                                    "absolute path or run from the folder it is relative to")
        for name in (source.benchmark, *source.data_dirs):
            folder = root / name
            if folder.is_dir():
                break
        else:
            names = ", ".join((source.benchmark, *source.data_dirs))
            raise FileNotFoundError(f"{root} has no sub-folder for {source.benchmark} ({names})")
        chosen = {EVALUATION: _split_files(folder, source.evaluation_split)}
        if not chosen[EVALUATION]:
            raise FileNotFoundError(
                f"{folder} has no file for split '{source.evaluation_split}' "
                f"(expected {source.evaluation_split}.jsonl, .json, .tsv, ...)"
            )
        if source.calibration_split and _split_files(folder, source.calibration_split):
            chosen[CALIBRATION] = _split_files(folder, source.calibration_split)
        return chosen
    return None


def _data_files(source: Source, files: dict[str, Any]) -> dict[str, list[Path]]:
    """``--metadata data_files`` given as {split: path(s)}: the files of each role. Two keys for
    one role ('evaluation' and 'test', 'validation' and 'dev') are refused naming both."""
    aliases = {
        EVALUATION: (EVALUATION, source.evaluation_split, "test"),
        CALIBRATION: (CALIBRATION, source.calibration_split, "validation", "dev"),
    }
    if "validation" in files and "dev" in files:  # one split's two names, whatever the role
        raise ValueError(f"--metadata data_files has both 'validation' and 'dev' for "
                         f"{source.benchmark}: they name one split; keep one")
    chosen, used = {}, {}
    for role, keys in aliases.items():
        # a key taken for evaluation is not also calibration (csqa: "validation")
        present = [k for k in dict.fromkeys(keys) if k in files and k not in used]
        if len(present) > 1:
            raise ValueError(f"--metadata data_files keys '{present[0]}' and '{present[1]}' both "
                             f"name the {role} documents of {source.benchmark}; keep one")
        if present:
            used[present[0]] = role
            value = files[present[0]]
            chosen[role] = [Path(p) for p in (value if isinstance(value, list) else [value])]
    unknown = set(files) - set(used)
    if unknown or EVALUATION not in chosen:
        raise ValueError(
            f"--metadata data_files keys {sorted(files)} for {source.benchmark}: use "
            f"'{source.evaluation_split}' (or 'evaluation') and optionally "
            f"'{source.calibration_split or 'calibration'}' (or 'calibration')"
        )
    return chosen


def _check_listed_once(files: dict[str, list[Path]]) -> None:
    """Refuse a data file named twice (in one list, or for both roles): its documents would be
    read twice."""
    seen: dict[Path, str] = {}
    for role, paths in files.items():
        for path in paths:
            key = path.resolve()
            if key in seen:
                roles = role if seen[key] == role else f"{seen[key]} and {role}"
                raise ValueError(f"--metadata data_files names {path} twice ({roles}); "
                                 "list each file once")
            seen[key] = role


def _hub_rows(source: Source) -> dict[str, list[Row]]:
    if source.hub_path is None:
        raise ValueError(
            f"{source.benchmark} has no Hugging Face Hub copy: pass local files with "
            f"--metadata '{{\"data_files\": ...}}' or '{{\"data_dir\": ...}}'"
        )
    import datasets

    try:
        loaded = datasets.load_dataset(source.hub_path, source.hub_name)
    except Exception as error:  # the Hub raises many kinds; all mean "not here"
        raise RuntimeError(
            f"could not load {source.hub_path} ({source.hub_name}) from the Hugging Face Hub: "
            f"{error}. Offline? Pass local files with --metadata data_files=... or data_dir=..."
        ) from error
    splits = {EVALUATION: source.evaluation_split, CALIBRATION: source.calibration_split}
    return {
        role: [(f"{source.hub_path}/{split}[{i}]", dict(r)) for i, r in enumerate(loaded[split])]
        for role, split in splits.items()
        if split is not None and split in loaded
    }


def _to_document(source: Source, where: str, row: dict[str, Any]) -> dict[str, Any] | None:
    if source.process_row is not None:
        try:
            row = source.process_row(row)
        except (KeyError, ValueError, TypeError, IndexError, AttributeError) as error:
            raise ValueError(f"{source.benchmark} {where}: {error}") from None
        if row is None:  # the adapter drops it by rule (e.g. PPDB pairs with 3 of 6 votes)
            return None
    reserved = [name for name in row if is_own_field(name)]
    if reserved:  # these would be overwritten, or (hint fields) injected into the prompt
        raise ValueError(f"{source.benchmark} {where}: field name(s) {reserved} are reserved")
    for name in source.required_fields:
        value = row.get(name)
        if value is None or is_blank(value):
            shown = f" (only invisible characters: {value!r})" if value else ""
            raise ValueError(f"{source.benchmark} {where}: missing or empty field '{name}'{shown}")
        if name == source.choices_field:
            if not isinstance(value, list) or len(value) < 2 or not all(
                isinstance(c, str) and not is_blank(c) for c in value
            ):
                raise ValueError(f"{source.benchmark} {where}: field '{name}' must be a list of "
                                 f"at least 2 non-empty option texts, got {value!r:.80}")
        elif not _is_text(value):  # a list or NaN would be printed into the prompt as-is
            raise ValueError(f"{source.benchmark} {where}: field '{name}' must be text, got "
                             f"{type(value).__name__} {value!r:.80}")
    label = row.get(source.label_field)
    if label is None or (isinstance(label, str) and not label.strip()):
        raise ValueError(f"{source.benchmark} {where}: missing label field '{source.label_field}'")
    if isinstance(label, str) and re.fullmatch(r"\s*-?[0-9]+\s*", label):  # "2" as in HellaSwag
        label = int(label)
    n_labels = source.n_labels
    if n_labels is None and source.choices_field is not None:
        n_labels = len(row[source.choices_field])
    if isinstance(label, bool) or not isinstance(label, int) or not 0 <= label < n_labels:
        raise ValueError(
            f"{source.benchmark} {where}: label {row.get(source.label_field)!r} in field "
            f"'{source.label_field}' is outside the label space 0..{n_labels - 1}"
        )
    return {**row, source.label_field: label}


def is_blank(value: Any) -> bool:
    """Whether a text shows nothing: empty, spaces, or only invisible format characters (zero-width
    space and joiners, word joiner, soft hyphen: Unicode category Cf)."""
    return isinstance(value, str) and all(
        c.isspace() or unicodedata.category(c) == "Cf" for c in value)


def _is_text(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, (str, int)) and not isinstance(value, bool)


def _documents(source: Source, rows: list[Row]) -> list[tuple[str, dict[str, Any]]]:
    docs = ((where, _to_document(source, where, row)) for where, row in rows)
    return [(where, doc) for where, doc in docs if doc is not None]


def _check_field_types(benchmark: str, docs: list[tuple[str, dict[str, Any]]]) -> None:
    """One kind of value per field across documents, no lone surrogate in a text, no integer
    beyond 64 bits: lm-eval stores the documents as an Arrow table, which otherwise fails with
    an error that names neither the field nor the row."""
    first: dict[str, tuple[str, str]] = {}
    for where, doc in docs:
        for name, value in doc.items():
            if value is None:
                continue
            if _has_surrogate(value):
                raise ValueError(f"{benchmark} {where}: field '{name}' holds a lone surrogate "
                                 "(an escape such as \\ud800 that is half of a character), "
                                 "which no text file can hold; correct the row")
            wide = _wide_integer(value)
            if wide is not None:
                raise ValueError(f"{benchmark} {where}: field '{name}' holds the integer {wide}, "
                                 "beyond the 64-bit integers a document table holds; write it "
                                 "as text")
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            kind = "number" if number else type(value).__name__
            seen_kind, seen_where = first.setdefault(name, (kind, where))
            if kind != seen_kind:
                raise ValueError(f"{benchmark} {where}: field '{name}' holds a {kind}, but "
                                 f"{seen_where} holds a {seen_kind}; use one type per field")


def _has_surrogate(value: Any) -> bool:
    """Whether a text in ``value`` (in a list or object too) holds a lone surrogate."""
    if isinstance(value, str):
        return SURROGATE.search(value) is not None
    inner = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return any(map(_has_surrogate, inner))


def _wide_integer(value: Any) -> int | None:
    """An integer beyond 64 bits in ``value`` (in a list or object too), else None."""
    if isinstance(value, int) and not isinstance(value, bool):
        return None if value in INT64 else value
    inner = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return next((w for w in map(_wide_integer, inner) if w is not None), None)


def _content(doc: dict[str, Any], fields: Sequence[str]) -> str:
    """What makes two rows the same document: the fields the prompt shows, each text as it
    reads (NFKC-normalised, invisible format characters such as U+200B removed, stripped), so
    that a copy differing only in such characters is a copy."""
    def shown(value: Any) -> Any:
        if isinstance(value, list):
            return [shown(v) for v in value]
        if not isinstance(value, str):
            return value
        text = unicodedata.normalize("NFKC", value)
        return "".join(c for c in text if unicodedata.category(c) != "Cf").strip()

    return json.dumps([shown(doc.get(name)) for name in fields], default=str)


def _unique(source: Source, evaluation: list[Row], calibration: list[Row]
            ) -> tuple[list[Row], list[Row]]:
    """Each document once: of copies (same ``_content``, same label) the first in list order is
    kept, the others dropped with one warning naming every copy. Evaluation documents come first,
    so a copy of an evaluation document in the calibration split is the one dropped. Copies with
    different labels are refused. A row equal to a few-shot exemplar (``source.exemplars``) is
    dropped, whatever its label, with one log line."""
    kept: dict[str, tuple[str, Any]] = {}
    copies: list[str] = []
    unique: dict[str, list[Row]] = {EVALUATION: [], CALIBRATION: []}
    shown = {_content(e, source.required_fields) for e in source.exemplars}
    exemplars: list[str] = []
    for role, docs in ((EVALUATION, evaluation), (CALIBRATION, calibration)):
        for where, doc in docs:
            key = _content(doc, source.required_fields)
            label = doc[source.answer_field or source.label_field]
            if key in shown:
                exemplars.append(where)
            elif key not in kept:
                kept[key] = where, label
                unique[role].append((where, doc))
            elif kept[key][1] != label:
                raise ValueError(
                    f"{source.benchmark} {kept[key][0]} and {where}: the same document "
                    f"({', '.join(source.required_fields)}) with different labels "
                    f"({kept[key][1]!r} and {label!r}); correct or remove one")
            else:
                copies.append(f"{where} (same as {kept[key][0]})")
    if copies:
        copies.sort(key=lambda text: [int(t) if t.isdigit() else t
                                      for t in re.split(r"(\d+)", text)])  # file, line order
        more = f"; and {len(copies) - SHOWN_COPIES} more" if len(copies) > SHOWN_COPIES else ""
        log.warning("%s: %d duplicate row(s) dropped (same %s and label as a row kept): %s%s",
                    source.benchmark, len(copies), ", ".join(source.required_fields),
                    "; ".join(copies[:SHOWN_COPIES]), more)
    if exemplars:
        log.info("%s: %d row(s) dropped for being a few-shot exemplar of the YAML (an exemplar is "
                 "never evaluated or calibrated on): %s", source.benchmark, len(exemplars),
                 "; ".join(sorted(exemplars)))
    return unique[EVALUATION], unique[CALIBRATION]
def warn_short_evaluation(benchmark: str, eval_size: int, available: int) -> None:
    """One warning per process that ``eval_size`` asks for more evaluation documents than the
    data holds (AQuA's test split: 254), so the run evaluates fewer than asked."""
    key = (benchmark, eval_size, available)
    if key not in _SHORT_WARNED:
        _SHORT_WARNED.add(key)
        log.warning("%s: eval_size=%d but only %d evaluation documents are left after the "
                    "calibration documents; evaluating those %d (--metadata eval_size=all "
                    "says so without this warning)", benchmark, eval_size, available, available)


def build_documents(source: Source, settings: RunSettings) -> list[dict[str, Any]]:
    """Calibration documents first, then evaluation documents, each marked and numbered."""
    files = _local_files(source, settings)
    if files is None:
        raw = _hub_rows(source)
    else:
        raw = {}
        for role, paths in files.items():
            for path in paths:
                reader = source.read_file or read_rows
                try:
                    rows = list(reader(path))
                except (KeyError, TypeError, AttributeError, IndexError) as error:
                    # an adapter's reader met a structure it did not expect (a list for an
                    # object...): still a data error, named by file
                    raise ValueError(f"{path}: not in the {source.benchmark} format "
                                     f"({type(error).__name__}: {error})") from None
                if not rows:
                    raise ValueError(f"{path}: no rows (an empty file?)")
                raw.setdefault(role, []).extend(rows)
    evaluation = _documents(source, raw.get(EVALUATION, []))
    calibration = _documents(source, raw.get(CALIBRATION, []))

    def unique(evaluated: list[Row], calibrating: list[Row]) -> tuple[list[Row], list[Row]]:
        given = len(calibrating)
        evaluated, calibrating = _unique(source, evaluated, calibrating)
        if given and not calibrating:  # never calibrate on the evaluation file in silence
            names = ", ".join(str(p) for p in (files or {}).get(CALIBRATION, [])) or "calibration"
            raise ValueError(
                f"{source.benchmark}: every one of the {given} calibration rows ({names}) is also "
                "an evaluation row (a copy or a link of the evaluation file?); give calibration "
                "documents that are not evaluated")
        return evaluated, calibrating

    return split_documents(source.benchmark, evaluation, calibration, settings, unique)


def split_documents(
    benchmark: str,
    evaluation: list[Row],
    calibration: list[Row],
    settings: RunSettings,
    unique: Callable[[list[Row], list[Row]], tuple[list[Row], list[Row]]] | None = None,
) -> list[dict[str, Any]]:
    """Calibration documents first, then evaluation documents, each marked and numbered.

    Parameters
    ----------
    benchmark : str
        The name errors and warnings give.
    evaluation, calibration : list of (where, document)
        The documents of each role; ``calibration`` empty: the first ``calib_size`` of the
        shuffled evaluation documents calibrate (a seeded held-out slice).
    settings : RunSettings
        ``split_seed``, ``calib_size`` and ``eval_size``.
    unique : callable, optional
        Drops copies of a document after the shuffle (``build_documents``: ``_unique``).
    """
    evaluation, calibration = list(evaluation), list(calibration)
    rng = random.Random(settings.split_seed)
    rng.shuffle(evaluation)
    rng.shuffle(calibration)
    # copies are dropped after the shuffle, so that every other document keeps the order it had
    # before copies were caught (the same documents and split, but for the copies)
    if unique is not None:
        evaluation, calibration = unique(evaluation, calibration)
    where = "the calibration split" if calibration else "the evaluation pool"
    if not calibration:  # no separate split: the first calib_size shuffled documents
        calibration = evaluation[: settings.calib_size]
        evaluation = evaluation[settings.calib_size :]
    if len(calibration) < settings.calib_size:
        raise ValueError(
            f"{benchmark}: calib_size={settings.calib_size} but {where} has only "
            f"{len(calibration)} documents; lower --metadata calib_size"
        )
    calibration = calibration[: settings.calib_size]
    if settings.eval_size is not None and settings.eval_size > len(evaluation):
        warn_short_evaluation(benchmark, settings.eval_size, len(evaluation))
    evaluation = evaluation[: settings.eval_size]
    if not evaluation:
        raise ValueError(
            f"{benchmark}: no evaluation documents left after {len(calibration)} "
            "calibration documents; lower calib_size or add data"
        )
    marked = [(CALIBRATION, d) for d in calibration] + [(EVALUATION, d) for d in evaluation]
    _check_field_types(benchmark, [doc for _, doc in marked])
    return [
        {**doc, SPLIT_FIELD: role, INDEX_FIELD: i, SOURCE_FIELD: origin}
        for i, (role, (origin, doc)) in enumerate(marked)
    ]
