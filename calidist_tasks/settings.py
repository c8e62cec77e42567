"""Run settings read from lm-eval's ``--metadata`` (merged by lm-eval into every task's config).

lm-eval also merges ``--model_args`` into the metadata, so keys we do not know are normal; only a
key that looks like a misspelling of ours, or another name for one of ours (``SYNONYMS``), is
refused (a key ignored in silence would change a paper's numbers).
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from calidist_metrics import DELTA_MODES, FIT_METHODS, LAMBDA_SCALES
from calidist_tasks.runs.prompt_logging import LOG_PROMPTS

SAMPLINGS = ("auto", "top_k", "temperature")  # consistency decoding (confidence.consistency)
BACKEND_KEY = "model_backend"  # the metadata key calidist_tasks.evaluate sets to the --model
# Verbalized prompt: "paper" is Appendix F's step-by-step wording, "short" asks for the option
# and one confidence only (cheaper, and easier for small models).
VERBALIZED_PROMPTS = ("paper", "short")
# --metadata stage: which part of a hinted task's prompts a run sends when they are split over
# two runs (docs/method.md, "Two-stage runs"): "all" every prompt (one run, not split);
# "original" only the original prompts; "hints" only the hints naming a label other than the
# prediction logged by an "original" (or "all") run of the same task (``original_run``).
SPLIT_STAGES = ("all", "original", "hints")
# Other names for our keys (other tools', the paper's wording) that difflib does not find close,
# or finds the wrong key for (calib_seed, load_calibrator): refused with ours suggested. None is a
# constructor argument of an lm-eval model backend (those arrive in the metadata too) or another
# metadata key we read (GSM8K's original_samples).
SYNONYMS = {
    "calib_size": ("calibration_size", "n_calib", "num_calib", "n_calibration",
                   "num_calibration", "calibration_docs", "calib_docs", "calib_n"),
    "eval_size": ("evaluation_size", "n_eval", "num_eval", "n_evaluation", "num_evaluation",
                  "eval_docs", "eval_n", "test_size", "n_test", "num_test"),
    "seed": ("template_seed", "hint_seed", "distractor_seed", "prompt_seed"),
    "split_seed": ("data_seed", "shuffle_seed", "calib_seed", "calibration_seed"),
    "m": ("num_distractors", "n_distractors", "distractors_per_label", "num_hints", "n_hints",
          "hints_per_label"),
    "data_dir": ("data_path", "data_folder", "data_root"),
    "data_files": ("files", "data_paths"),
    "calibrator": ("load_calibrator", "apply_calibrator"),
    "save_calibrator": ("calibrator_out", "calibrator_output"),
    "lambda_scale": ("lambda_mode",),
    "delta_mode": ("instability", "delta_type"),
    "original_run": ("stage1_run", "stage1_output", "stage1_path"),
    "log_prompts": ("prompt_logging", "prompts_logged"),
}
_MEANT = {name: key for key, names in SYNONYMS.items() for name in names}
NESTED = "metadata"  # {"metadata": {...}}: our keys one level too deep, never read


def _words(key: str) -> tuple[str, ...]:
    """A key's words in order of spelling, so that ``size_calib`` finds ``calib_size``."""
    return tuple(sorted(key.lower().replace("-", "_").split("_")))


def _option(default: Any, text: str, *, choices: tuple[str, ...] | None = None,
            shown: str | None = None, internal: bool = False) -> Any:
    """A RunSettings field with its ``calidist eval --help`` text beside it: ``text`` (one line,
    stored as ``help``), ``choices`` (the very tuple ``validate`` checks against), ``shown`` (the
    default as printed, where the value says little, e.g. None), ``internal`` (set by us from
    --model_args, not a --metadata key)."""
    meta: dict[str, Any] = {"help": text, "internal": internal}
    if choices is not None:
        meta["choices"] = choices
    if shown is not None:
        meta["shown"] = shown
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class RunSettings:
    """What a user can set per run with ``--metadata '{"key": value}'``.

    Every field carries its help (``dataclasses.fields(RunSettings)[i].metadata``); ``calidist
    eval --help`` prints it, so a new key is documented where it is declared.
    """

    calib_size: int = _option(200, "calibration documents (from the benchmark's calibration "
                              "split, or the first N of the shuffled pool where there is none)")
    eval_size: int | None = _option(1000, 'evaluation documents; "all" for every remaining one')
    m: int | None = _option(None, "distractors per label (probe and corruption have one fixed "
                            "template, so only 1)", shown="2 assertion, 1 probe/corruption")
    seed: int = _option(0, "chooses the assertion templates and SPUQ perturbations, offsets API "
                        "sample seeds")
    split_seed: int = _option(0, "shuffles documents into calibration / evaluation")
    data_files: Any = _option(None, 'a file, a list, or {"<eval split>": ..., "<calibration '
                              'split>": ...} for the task being run', shown="the Hub dataset")
    data_dir: str | None = _option(None, "a folder with one sub-folder per benchmark (ppdb/, "
                                   "aqua/, ...) holding <split>.jsonl/.json/.tsv/.csv/.parquet",
                                   shown="the Hub dataset")
    calibrator: str | None = _option(None, "apply a saved CaliDist fit (JSON) instead of "
                                     "fitting; {task} in the path is replaced by the task's name",
                                     shown="none: fit on the calibration documents")
    save_calibrator: str | None = _option(None, "write this run's fit to a JSON file ({task} in "
                                          "the path: one file per task)", shown="none")
    lambda_scale: str = _option("minmax", "lambda scaling: minmax (the paper), log (min-max of "
                                "log lambda_raw), rank (quantile on the calibration set)",
                                choices=LAMBDA_SCALES)
    delta_mode: str = _option("mean", "confidence instability: mean = |p - mean p'| (the paper), "
                              "worst_case = max(0, p - min p')", choices=DELTA_MODES)
    fit: str = _option("grid", "how alpha and beta are chosen: grid (the paper's grid search), "
                       "refine (grid, then a bounded L-BFGS-B step kept only if not worse), "
                       "default_sigmoid (alpha 0, beta 1 fixed)", choices=FIT_METHODS)
    verbalized_prompt: str = _option("paper", "verbalized tasks: paper (Appendix F, step by "
                                     "step, max_gen_toks 512) or short (one confidence, "
                                     "max_gen_toks 128)", choices=VERBALIZED_PROMPTS)
    allow_transfer: bool = _option(False, "let calibrator come from another task with the same "
                                   "labels (out-of-domain transfer)")
    stage: str = _option("all", "hinted tasks: all (original and every hint in one run), "
                         "original (the original prompts only: stage 1 of a two-stage run), "
                         "hints (only the hints naming a label other than original_run's "
                         "prediction: stage 2); calidist eval --two-stage runs both",
                         choices=SPLIT_STAGES)
    original_run: str | None = _option(None, "stage hints: the stage-1 run of the same task (its "
                                       "--output_path folder or samples_<task>_*.jsonl file)",
                                       shown="none")
    replies: str | None = _option(None, "reasoned (_cot) tasks: the run of the matching "
                                  "_verbalized task whose replies they score (its --output_path "
                                  "folder or samples file); calidist eval runs it first itself",
                                  shown="none")
    log_prompts: str = _option("all", "prompts kept in the samples file (--log_samples): all "
                               "(lm-eval's copy of every request's), first (each document's "
                               "first request in full, the others by their hash), hash (every "
                               "prompt by its hash); calidist report reads each (docs/outputs.md)",
                               choices=LOG_PROMPTS)
    # recorded in saved calibrators (from --model_args pretrained/model)
    model: str | None = _option(None, "the model, from --model_args pretrained= or model=",
                                internal=True)
    sampling: str = _option("auto", "consistency decoding: top_k (top_k 50 / top_p 0.95), "
                            "temperature (1.5 alone), auto (temperature on an HTTP API backend "
                            "such as local-chat-completions, else top_k)", choices=SAMPLINGS)
    # the --model name (calidist_tasks.evaluate passes it; a plain lm_eval run does not)
    model_backend: str | None = _option(None, "the model backend (--model), set by calidist",
                                        internal=True)
    # an HTTP API backend, by model_backend's kind (else a base_url in --model_args)
    # an HTTP endpoint in --model_args (a run that does not name its backend); None when the
    # backend is named: its kind decides (confidence.sources.is_api)
    api: bool | None = _option(False, "an HTTP API backend", internal=True)

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any] | None) -> RunSettings:
        metadata = dict(metadata or {})
        known = {f.name for f in fields(cls) if not f.metadata.get("internal")}
        if isinstance(metadata.get(NESTED), Mapping):
            raise ValueError(
                f"--metadata holds an object under {NESTED!r} ({sorted(metadata[NESTED])}): its "
                f"keys are never read there; give them at the top level, "
                f"--metadata '{{\"calib_size\": 50}}'")
        for key in metadata:
            if key in known:
                continue
            key = str(key)
            meant = _MEANT.get(key.lower().replace("-", "_")) or next(
                (name for name in sorted(known) if _words(name) == _words(key)), None) or next(
                iter(difflib.get_close_matches(key, known, n=1, cutoff=0.8)), None)
            if meant:
                raise ValueError(
                    f"unknown --metadata key {key!r}; did you mean {meant!r}? "
                    f"calidist keys: {', '.join(sorted(known))}"
                )
        values = {k: metadata[k] for k in known if k in metadata and metadata[k] is not None}
        values["model"] = metadata.get("pretrained") or metadata.get("model")
        backend = metadata.get(BACKEND_KEY)
        values["model_backend"] = backend
        if backend:  # its kind decides, at task build (confidence.sources.is_api)
            values["api"] = None
        else:  # a run that does not say its backend: an HTTP endpoint in --model_args
            values["api"] = bool(metadata.get("base_url"))
        settings = cls(**values)
        settings.validate()
        return settings

    def validate(self) -> None:
        def positive_int(name: str, value: Any) -> None:
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"--metadata {name} must be a positive integer, got {value!r}")

        positive_int("calib_size", self.calib_size)
        if self.eval_size == "all":
            object.__setattr__(self, "eval_size", None)
        elif self.eval_size is not None:
            positive_int("eval_size", self.eval_size)
        if self.m is not None:
            positive_int("m", self.m)
        for name in ("seed", "split_seed"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"--metadata {name} must be an integer, got {value!r}")
        if self.split_seed < 0:  # random.Random(-k) shuffles as random.Random(k) does
            raise ValueError(f"--metadata split_seed must be 0 or more, got {self.split_seed} "
                             f"(a negative seed would give the split of {-self.split_seed})")
        for name in ("data_dir", "calibrator", "save_calibrator", "original_run", "replies"):
            value = getattr(self, name)
            if value is not None and not _is_path(value):
                raise ValueError(f"--metadata {name} must be a path (a non-empty string), "
                                 f"got {value!r}")
        if self.data_files is not None and not _is_data_files(self.data_files):
            raise ValueError(
                "--metadata data_files must be a path, a list of paths, or an object mapping "
                f"split names to a path or a list of paths; got {self.data_files!r}"
            )
        if not isinstance(self.allow_transfer, bool):
            raise ValueError(
                f"--metadata allow_transfer must be true or false, got {self.allow_transfer!r}"
            )
        if self.lambda_scale not in LAMBDA_SCALES:
            raise ValueError(
                f"--metadata lambda_scale must be one of {LAMBDA_SCALES}, got {self.lambda_scale!r}"
            )
        if self.sampling not in SAMPLINGS:
            raise ValueError(
                f"--metadata sampling must be one of {SAMPLINGS}, got {self.sampling!r}"
            )
        if self.fit not in FIT_METHODS:
            raise ValueError(f"--metadata fit must be one of {FIT_METHODS}, got {self.fit!r}")
        if self.verbalized_prompt not in VERBALIZED_PROMPTS:
            raise ValueError(f"--metadata verbalized_prompt must be one of {VERBALIZED_PROMPTS}, "
                             f"got {self.verbalized_prompt!r}")
        if self.stage not in SPLIT_STAGES:
            raise ValueError(f"--metadata stage must be one of {SPLIT_STAGES}, got {self.stage!r}")
        if self.log_prompts not in LOG_PROMPTS:
            raise ValueError(f"--metadata log_prompts must be one of {LOG_PROMPTS}, got "
                             f"{self.log_prompts!r}")
        if self.delta_mode not in DELTA_MODES:
            raise ValueError(
                f"--metadata delta_mode must be one of {DELTA_MODES}, got {self.delta_mode!r}"
            )


def _is_path(value: Any) -> bool:
    return isinstance(value, os.PathLike) or (isinstance(value, str) and bool(value.strip()))


def _is_data_files(value: Any) -> bool:
    """A path, a non-empty list of paths, or {split: path or list of paths}."""
    def paths(v: Any) -> bool:
        return _is_path(v) or (isinstance(v, list) and bool(v) and all(map(_is_path, v)))

    if isinstance(value, dict):
        return bool(value) and all(paths(v) for v in value.values())
    return paths(value)
