"""Every use of lm-eval internals, in one place: what to check when lm-eval changes.

``tests/test_lm_eval_compat.py`` exercises each function here against the installed lm-eval and
fails on a version outside ``TESTED_VERSIONS`` (checked against: 0.4.13). On a new lm-eval, run
that test, fix what fails here (nowhere else), and widen ``TESTED_VERSIONS``.

Task side (``lm_eval.api.task.ConfigurableTask``):

- ``_metric_fn_list``, ``_metric_fn_kwargs``, ``_aggregation_list``, ``_higher_is_better``: our
  tasks report metrics computed over all records by their own aggregation, not lm-eval's
  per-sample metric functions (``set_task_metrics``, ``task_metric_names``); their stderr is
  found as lm-eval finds its own metrics', by ``lm_eval.evaluator_utils.stderr_for_metric``
  (``STDERR_LOOKUP``), which ``register_stderr`` extends;
- the keywords ``build_all_requests`` passes to ``fewshot_context`` (``fewshot_context_kwargs``)
  and to ``construct_requests`` (``instance_kwargs``), and the ``Instance.metadata`` tuple
  ``(task, doc_id, repeats)`` (``metadata_repeats``, ``with_repeats``).

Task index (``lm_eval.tasks.TaskManager.task_index`` and its ``Entry``'s ``kind``, ``cfg``,
``tags`` and ``yaml_path``; ``lm_eval.tasks._yaml_loader.load_yaml``): the registered configs a
wrapped task is derived from (``registered_kind``, ``member_names``, ``task_config``), and whether
a run needs lm-eval's own folder indexed at all (``registered_in``).

Model registry (``lm_eval.api.registry.model_registry``: ``keys`` and the lazy
``register(name, target="module:Class")``, ``lm_eval.models`` filling it): ``hf-prefix-cache`` by
name (``register_prefix_cache_model``).

Model side (``lm_eval.models.huggingface.HFLM``, for ``calidist_tasks.backends.prefix_cache``): the
attributes ``backend``, ``cache_hook``, ``softmax_dtype`` and ``mixed_precision_dtype``
(``is_causal``, ``cache_loglikelihood``, ``softmax_dtype``, ``mixed_precision_dtype``).

Private lm-eval methods overridden in a subclass (``OVERRIDDEN``; the test checks they still exist
with these parameters): ``HFLM._loglikelihood_tokens`` and ``HFLM._model_generate``, both in
``prefix_cache.PrefixCacheHFLM``, which also call the originals through ``super()``.

API models (``lm_eval.models.openai_completions``, for ``backends.api_replies``): the reply
parsers ``parse_logprobs`` / ``parse_generations`` of ``LocalCompletionsAPI`` and
``LocalChatCompletion`` (``REPLY_PARSERS``), which lm-eval calls as ``self.parse_…(outputs=…,
…)`` with each decoded JSON reply; ``reply_parsers_wrapped`` replaces them on those classes for
the length of a run (``calidist eval``) and puts the originals back. The attribute ``base_url``
(the endpoint) and the registered names of those classes (``API_BACKENDS``). ``TemplateAPI``'s
``model_call`` / ``amodel_call`` (``API_CALLS``), which decode each HTTP reply as JSON, and the
chat classes' request builders ``_create_payload`` (``CHAT_PAYLOADS``), so that every chat
generation asks for token log-probabilities (``confidence.chat_logprobs``), wrapped the
same way (``methods_wrapped``).

Saving (``runs.recovery.results_saved``): ``EvaluationTracker.save_results_aggregated``
and ``save_results_samples`` (``TRACKER_SAVES``), which log a failure instead of raising it, and
the files they name from ``output_path``, ``date_id`` and the sanitized model name
(``tracker_file``).

Prompt building: ``lm_eval.utils.env``, the Jinja environment whose ``from_string`` lm-eval's
``utils.apply_template`` calls for every YAML template it renders (``cache_compiled_templates``).

Two-stage runs (``runs.two_stage``): ``simple_evaluate`` builds a model named by string
as ``lm_eval.api.registry.get_model(name).create_from_arg_string(...)`` (or
``create_from_arg_obj``), looked up on the registry module at call time; ``models_reused``
replaces ``get_model`` for the length of both stages so that the second gets the first's object.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import lru_cache, partial
from importlib import import_module
from pathlib import Path
from typing import Any

TESTED_VERSIONS = ("0.4.13", "0.4.13")  # the oldest and newest lm_eval.__version__ checked

# Private methods of lm-eval that our subclasses override: "Class.method" -> its parameters.
OVERRIDDEN = {
    "lm_eval.models.huggingface.HFLM._loglikelihood_tokens":
        ("self", "requests", "disable_tqdm", "override_bs"),
    "lm_eval.models.huggingface.HFLM._model_generate":
        ("self", "context", "max_length", "stop", "generation_kwargs"),
}

# What build_all_requests passes to fewshot_context besides the document and its prefix: kept by
# the task so that hinted prompts get the original's chat template and system prompt.
CONTEXT_KWARGS = ("system_instruction", "apply_chat_template", "fewshot_as_multiturn",
                  "chat_template")
# What build_all_requests passes to construct_requests that Instance does not take.
CHAT_KWARGS = ("apply_chat_template", "chat_template")


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", version)[:3])


def is_tested_version(version: str) -> bool:
    """Whether an ``lm_eval.__version__`` lies within ``TESTED_VERSIONS`` (major.minor.patch)."""
    oldest, newest = TESTED_VERSIONS
    return _release(oldest) <= _release(version) <= _release(newest)


# ---------------------------------------------------------------------- tasks
def set_task_metrics(task: Any, names: list[str], aggregate: Callable[[str, list], float],
                     higher_is_better: Callable[[str], bool],
                     stderr: Callable[[str, int], Callable[[list], Any] | None]) -> None:
    """Make ``task`` report ``names``: each aggregated by ``aggregate(name, records)`` over the
    records ``process_results`` returned under that name; no per-sample metric function. Its
    ``<name>_stderr`` is ``stderr(name, bootstrap_iters)``'s function of the same records (None:
    lm-eval prints N/A), found as lm-eval finds its own metrics' (``register_stderr``)."""
    register_stderr()
    task._metric_fn_list = dict.fromkeys(names)
    task._metric_fn_kwargs = {name: {} for name in names}
    task._aggregation_list = {}
    for name in names:
        aggregation = task._aggregation_list[name] = partial(aggregate, name)
        aggregation.calidist_stderr = partial(stderr, name)  # type: ignore[attr-defined]
    task._higher_is_better = {name: higher_is_better(name) for name in names}


# lm-eval looks a metric's stderr function up by its aggregation function
# (``lm_eval.api.metrics.stderr_for_metric(metric=aggregation, bootstrap_iters=...)``: a bootstrap
# for median, F1, BLEU..., the closed form for mean), which ``lm_eval.evaluator_utils`` calls by
# this name once per metric with simple_evaluate's bootstrap_iters (0: none, N/A).
STDERR_LOOKUP = "lm_eval.evaluator_utils.stderr_for_metric"


def register_stderr() -> None:
    """Make lm-eval's stderr lookup also answer for our aggregations (``set_task_metrics``): an
    aggregation carrying ``calidist_stderr`` gets ``calidist_stderr(bootstrap_iters)``, unless
    --bootstrap_iters is 0; every other metric lm-eval's own answer. Idempotent."""
    module_name, _, attribute = STDERR_LOOKUP.rpartition(".")
    module = import_module(module_name)
    lookup = getattr(module, attribute)
    if getattr(lookup, "calidist", False):
        return

    def stderr_for_metric(metric: Callable[..., Any], bootstrap_iters: int) -> Any:
        ours = getattr(metric, "calidist_stderr", None)
        if ours is None:
            return lookup(metric=metric, bootstrap_iters=bootstrap_iters)
        return ours(bootstrap_iters) if bootstrap_iters > 0 else None

    stderr_for_metric.calidist = True  # type: ignore[attr-defined]
    setattr(module, attribute, stderr_for_metric)


def task_metric_names(task: Any) -> list[str]:
    """The metric names ``task`` reports (what ``process_results`` must return keys for)."""
    return list(task._metric_fn_list)


def fewshot_context_kwargs(build_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Of ``build_all_requests``' keywords, those it passes on to ``fewshot_context``."""
    return {key: build_kwargs.get(key) for key in CONTEXT_KWARGS}


def instance_kwargs(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """``construct_requests``' keywords without those ``Instance`` does not take."""
    return {key: value for key, value in kwargs.items() if key not in CHAT_KWARGS}


def metadata_repeats(metadata: tuple[Any, ...]) -> int:
    """The ``repeats`` of an ``Instance.metadata`` tuple ``(task, doc_id, repeats)``."""
    return metadata[2]


def with_repeats(metadata: tuple[Any, ...], repeats: int) -> tuple[Any, ...]:
    """``metadata`` with another ``repeats`` (the generations lm-eval asks for one request)."""
    return (metadata[0], metadata[1], repeats)


# ---------------------------------------------------------------------- models (HFLM)
def is_causal(lm: Any) -> bool:
    """Whether an HFLM runs a decoder-only model (its ``backend``; else seq2seq)."""
    return lm.backend == "causal"


def cache_loglikelihood(lm: Any, request: Any, result: tuple[float, bool]) -> None:
    """Record one log-likelihood result in lm-eval's request cache (``--use_cache``)."""
    lm.cache_hook.add_partial("loglikelihood", request, result)


def softmax_dtype(lm: Any) -> Any:
    """The dtype an HFLM takes log-softmaxes in (``softmax_dtype``; None: the logits')."""
    return lm.softmax_dtype


def mixed_precision_dtype(lm: Any) -> Any:
    """An HFLM's autocast dtype (``mixed_precision_dtype``; None: no autocast)."""
    return lm.mixed_precision_dtype


# ---------------------------------------------------------------------- models (API)
# lm-eval's reply parsers for the OpenAI formats: "module.Class.method" -> its parameters. lm-eval
# calls them on the model (``self.parse_logprobs(outputs=..., tokens=..., ctxlens=...)``,
# ``self.parse_generations(outputs=..., contexts=...)``, ``contexts`` on the one-at-a-time path
# only) with the decoded JSON replies of one batch; they return one answer per request.
REPLY_PARSERS = {
    "lm_eval.models.openai_completions.LocalCompletionsAPI.parse_logprobs":
        ("outputs", "tokens", "ctxlens", "kwargs"),
    "lm_eval.models.openai_completions.LocalCompletionsAPI.parse_generations":
        ("outputs", "kwargs"),
    "lm_eval.models.openai_completions.LocalChatCompletion.parse_generations":
        ("self", "outputs", "kwargs"),
}

# The names lm-eval registers its OpenAI-format API classes under (what --model says).
API_BACKENDS = {
    "lm_eval.models.openai_completions.LocalCompletionsAPI": "local-completions",
    "lm_eval.models.openai_completions.OpenAICompletionsAPI": "openai-completions",
    "lm_eval.models.openai_completions.LocalChatCompletion": "local-chat-completions",
    "lm_eval.models.openai_completions.OpenAIChatCompletion": "openai-chat-completions",
}

# The chat classes' request builders: lm-eval posts what ``self._create_payload(messages,
# generate=..., gen_kwargs=..., seed=..., eos=...)`` returns (a dict, the JSON body); the OpenAI
# class has its own. Every chat request is a generation (chat classes refuse loglikelihood).
CHAT_PAYLOADS = {
    "lm_eval.models.openai_completions.LocalChatCompletion._create_payload":
        ("self", "messages", "generate", "gen_kwargs", "seed", "eos", "kwargs"),
    "lm_eval.models.openai_completions.OpenAIChatCompletion._create_payload":
        ("self", "messages", "generate", "gen_kwargs", "seed", "eos", "kwargs"),
}

# A parser as ``reply_parsers_wrapped`` hands it to ``wrap``: called ``(lm, outputs, **kwargs)``.
Parser = Callable[..., Any]


API_CALLS = ("lm_eval.models.api_models.TemplateAPI.model_call",
             "lm_eval.models.api_models.TemplateAPI.amodel_call")
TRACKER_SAVES = ("lm_eval.loggers.evaluation_tracker.EvaluationTracker.save_results_aggregated",
                 "lm_eval.loggers.evaluation_tracker.EvaluationTracker.save_results_samples")


def _owner(qualified: str) -> tuple[type, str]:
    module, owner, method = qualified.rsplit(".", 2)
    return getattr(import_module(module), owner), method


@contextmanager
def reply_parsers_wrapped(wrap: Callable[[str, Parser], Parser]) -> Iterator[None]:
    """While the block runs, each parser of ``REPLY_PARSERS`` (named ``"Class.method"``) is
    ``wrap(name, original)`` on its class (subclasses that inherit it included): ``original`` and
    what ``wrap`` returns are called as ``(lm, outputs, **kwargs)``. Restored afterwards."""
    saved = []
    try:
        for qualified in REPLY_PARSERS:
            cls, method = _owner(qualified)
            stored = vars(cls)[method]  # a staticmethod object or a function
            if isinstance(stored, staticmethod):
                function = stored.__func__

                def original(lm, outputs, _function=function, **kwargs):
                    return _function(outputs=outputs, **kwargs)
            else:
                def original(lm, outputs, _function=stored, **kwargs):
                    return _function(lm, outputs=outputs, **kwargs)

            saved.append((cls, method, stored))
            setattr(cls, method, wrap(f"{cls.__name__}.{method}", original))
        yield
    finally:
        for cls, method, stored in reversed(saved):
            setattr(cls, method, stored)


@contextmanager
def methods_wrapped(qualified_names: tuple[str, ...],
                    wrap: Callable[[str, Callable[..., Any]], Callable[..., Any]]
                    ) -> Iterator[None]:
    """While the block runs, each plain method of ``qualified_names`` (``"module.Class.method"``)
    is ``wrap(method name, original function)`` on its class. Restored afterwards."""
    saved = []
    try:
        for qualified in qualified_names:
            cls, method = _owner(qualified)
            saved.append((cls, method, vars(cls)[method]))
            setattr(cls, method, wrap(method, vars(cls)[method]))
        yield
    finally:
        for cls, method, stored in reversed(saved):
            setattr(cls, method, stored)


def tracker_file(tracker: Any, task: str | None = None) -> Path | None:
    """The results file (or ``task``'s samples file) an ``EvaluationTracker`` wrote last, as
    lm-eval names it; None when it has no ``output_path`` or never got as far as naming one."""
    date = getattr(tracker, "date_id", None)
    if not tracker.output_path or date is None:
        return None
    path = Path(tracker.output_path)
    folder = path.parent if path.suffix == ".json" else (
        path / str(tracker.general_config_tracker.model_name_sanitized))
    if task is not None:
        return folder / f"samples_{task}_{date}.jsonl"
    return path.with_name(f"{path.stem}_{date}.json") if path.suffix == ".json" else (
        folder / f"results_{date}.json")


def api_backend(lm: Any) -> str:
    """The ``--model`` name of an lm-eval API model (its class name when not one of ours)."""
    for cls in type(lm).__mro__:
        name = API_BACKENDS.get(f"{cls.__module__}.{cls.__qualname__}")
        if name:
            return name if cls is type(lm) else f"{type(lm).__name__} ({name})"
    return type(lm).__name__


def api_endpoint(lm: Any) -> str:
    """The URL an lm-eval API model posts to (``base_url``)."""
    return str(getattr(lm, "base_url", None) or "(no base_url)")


# ---------------------------------------------------------------------- two-stage runs
# ``simple_evaluate`` builds its model as ``lm_eval.api.registry.get_model(name)
# .create_from_arg_string(model_args, additional_config)`` (or ``create_from_arg_obj`` for a dict);
# ``models_reused`` makes a second run with the same arguments get the first run's object.
MODEL_FACTORY = "lm_eval.api.registry.get_model"
MODEL_CONSTRUCTORS = ("create_from_arg_string", "create_from_arg_obj")


class _ReusingModelClass:
    """Stands in for a registered model class: its constructors return the object built for the
    same arguments before (within ``models_reused``); everything else is the class's."""

    def __init__(self, cls: type, name: str, loaded: dict[str, Any]) -> None:
        self._cls, self._name, self._loaded = cls, name, loaded

    def __getattr__(self, attribute: str) -> Any:
        found = getattr(self._cls, attribute)
        if attribute not in MODEL_CONSTRUCTORS:
            return found

        def build(arguments: Any, additional_config: Mapping[str, Any] | None = None) -> Any:
            key = repr((self._name, attribute, arguments, sorted(
                (str(k), repr(v)) for k, v in (additional_config or {}).items())))
            if key not in self._loaded:
                self._loaded[key] = found(arguments, additional_config)
            return self._loaded[key]

        return build


@contextmanager
def models_reused() -> Iterator[dict[str, Any]]:
    """While the block runs, lm-eval runs asking for a model by name with the same arguments
    (``--model``, ``--model_args``, batch size, device) share one loaded object: the two stages
    of a two-stage run load the model once. Yields the loaded models (key -> object)."""
    module_name, _, attribute = MODEL_FACTORY.rpartition(".")
    registry = import_module(module_name)
    original = getattr(registry, attribute)
    loaded: dict[str, Any] = {}

    def get_model(name: str) -> Any:
        found = original(name)
        return _ReusingModelClass(found, name, loaded) if isinstance(found, type) else found

    setattr(registry, attribute, get_model)
    try:
        yield loaded
    finally:
        setattr(registry, attribute, original)
        for model in loaded.values():
            stop_engine(model)
        loaded.clear()


# lm-eval's in-process vLLM (``lm_eval.models.vllm_causallms.VLLM``) keeps a ``vllm.LLM`` as
# ``.model``; its engine runs in a child process, stopped by ``llm_engine.engine_core.shutdown()``.
ENGINE_SHUTDOWN = ("model", "llm_engine", "engine_core", "shutdown")


def stop_engine(model: Any) -> bool:
    """Stop a model's engine process if it has one (vLLM); whether one was stopped.

    A model shared by ``models_reused`` outlives lm-eval's run, and a vLLM engine process still
    alive when Python exits makes the interpreter wait for it forever (multiprocessing joins its
    children at exit), after the results are printed but before the command returns."""
    found = model
    for attribute in ENGINE_SHUTDOWN:
        found = getattr(found, attribute, None)
        if found is None:
            return False
    found()
    return True


# ---------------------------------------------------------------------- --limit (document choice)
# lm-eval chooses a task's documents in ``Task.doc_iterator(*, rank, limit, world_size, samples)``
# (parameters ``DOC_ITERATOR_PARAMETERS``): ``build_all_requests`` and the evaluator's scoring loop
# both call it with the same arguments, and a task may override it (``CaliDistTask.doc_iterator``
# takes both splits under --limit). It yields (doc_id, doc), doc_id the position in ``eval_docs``;
# each rank keeps every ``world_size``-th pair from ``rank`` (``lm_eval.utils.create_iterator``,
# ``rank_share``). With ``cache_requests`` a cached run keeps the requests of the first ``limit``
# documents whatever doc_iterator chose, so a task choosing others builds its requests without
# that cache (``without_request_cache``, the ``REQUEST_CACHE_KWARGS`` of build_all_requests).
DOC_ITERATOR = "lm_eval.api.task.Task.doc_iterator"
DOC_ITERATOR_PARAMETERS = ("self", "rank", "limit", "world_size", "samples")
REQUEST_CACHE_KWARGS = ("cache_requests", "rewrite_requests_cache")


def rank_share(pairs: Iterator[Any], rank: int, world_size: int) -> Iterator[Any]:
    """The pairs of ``doc_iterator`` one rank takes, as lm-eval shares documents over ranks."""
    from lm_eval.utils import create_iterator

    return create_iterator(pairs, rank=int(rank), world_size=int(world_size), limit=None)


def without_request_cache(build_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """``build_all_requests``' keywords with lm-eval's request cache off."""
    return {**build_kwargs, **dict.fromkeys(REQUEST_CACHE_KWARGS, False)}


# ---------------------------------------------------------------------- prompt templates
TEMPLATE_ENV = "lm_eval.utils.env"


def cache_compiled_templates() -> None:
    """Make lm-eval compile each YAML template source once.

    ``lm_eval.utils.apply_template`` compiles its template with ``env.from_string`` on every
    call; compiling was nine tenths of building a CaliDist prompt, which renders the question and
    the answer prefix of every exemplar in every prompt. A compiled ``jinja2.Template`` keeps no
    state between renders, so reusing it renders the same text. Idempotent.
    """
    module_name, _, attribute = TEMPLATE_ENV.rpartition(".")
    env = getattr(import_module(module_name), attribute)
    if getattr(env.from_string, "compiled_once", False):
        return
    compile_source = env.from_string
    compiled = lru_cache(maxsize=4096)(compile_source)

    def from_string(source: Any, globals: Any = None, template_class: Any = None) -> Any:
        if globals is None and template_class is None and isinstance(source, str):
            return compiled(source)
        return compile_source(source, globals, template_class)

    from_string.compiled_once = True  # type: ignore[attr-defined]
    env.from_string = from_string


def is_api_backend(backend: str) -> bool:
    """Whether lm-eval's model ``backend`` (the ``--model`` name) is an HTTP API, one of its
    ``TemplateAPI`` models (local-completions, local-chat-completions, openai-completions,
    openai-chat-completions, anthropic-chat-completions, ...): there the paper samples at
    temperature 1.5 alone (Appendix I), whatever the model arguments hold. A name lm-eval does
    not know, or whose package is not installed (vllm on a machine without it), is not one."""
    from lm_eval.api.registry import get_model
    from lm_eval.models.api_models import TemplateAPI

    try:
        model_class = get_model(backend)
    except Exception:  # noqa: BLE001 - unknown name, or its package missing: not an API model
        return False
    return isinstance(model_class, type) and issubclass(model_class, TemplateAPI)


PREFIX_CACHE_MODEL = "hf-prefix-cache"  # calidist_tasks.backends.prefix_cache.PrefixCacheHFLM


def register_prefix_cache_model() -> None:
    """Make ``--model hf-prefix-cache`` known to lm-eval without importing it (torch and
    transformers: seconds, and nothing an API backend or a refused command needs) until a run
    asks for it: lm-eval's lazy registration by "module:Class". lm-eval's own models go first:
    its registry registers them itself only while it is empty."""
    import lm_eval.models  # noqa: F401
    from lm_eval.api.registry import model_registry

    if PREFIX_CACHE_MODEL not in model_registry.keys():
        model_registry.register(
            PREFIX_CACHE_MODEL, target="calidist_tasks.backends.prefix_cache:PrefixCacheHFLM")


# ---------------------------------------------------------------------- wrapped tasks
@lru_cache(maxsize=8)
def _task_index(include_path: tuple[str, ...], defaults: bool = True) -> dict[str, Any]:
    from lm_eval.tasks import TaskManager

    return TaskManager(include_path=list(include_path) or None,
                       include_defaults=defaults).task_index


def registered_in(names: Sequence[str], include_path: Sequence[str]) -> bool:
    """Whether ``include_path`` alone registers every one of ``names`` and every member of the
    groups among them (nested groups included), so that lm-eval's own task folder (about 14,700
    configs, some 16 CPU-s to index) need not be indexed to run them. A pattern, a YAML path or
    a name it does not register: False (lm-eval's full index decides)."""
    index = _task_index(tuple(str(p) for p in include_path), defaults=False)

    return bool(names) and not any(_unregistered(name, index)[0] for name in names)


def _listed(entry: Any) -> list[Any]:
    """The member names a group's config lists (an inline member: its task or group name); none
    for a task or a tag (a tag's tasks are its entry's ``tags``)."""
    listed = (entry.cfg or {}).get("task") or [] if entry.kind.name == "GROUP" else []
    return [m if isinstance(m, str) else m.get("task") or m.get("group") if isinstance(m, dict)
            else m for m in (listed if isinstance(listed, list) else [listed])]


def _index_for(name: str, include_path: tuple[str, ...]) -> dict[str, Any]:
    """A task index that registers ``name`` as lm-eval's whole index does, without indexing
    lm-eval's whole task tree (~16 CPU-s): the folders whose YAML text can define ``name`` and
    its groups' members (``yaml_configs.name_folders``' scan, under 1 CPU-s once), indexed as
    lm-eval indexes its tree, then ``include_path``. lm-eval's whole index where that leaves a name
    unregistered or meets a tag (a tag's tasks may take it from a template elsewhere)."""
    import lm_eval

    from calidist_tasks.data.yaml_configs import name_folders

    where = name_folders((str(Path(lm_eval.__file__).parent / "tasks"),))
    folders: frozenset[str] = frozenset()
    while True:
        index = _folders_index(folders, include_path)
        unregistered, tagged = _unregistered(name, index)
        if not unregistered and not tagged:
            return index
        more = frozenset(f for n in unregistered for f in where.get(n, ()))
        if tagged or not more - folders:  # lm-eval's whole index decides
            return _task_index(include_path)
        folders |= more


def _unregistered(name: str, index: Mapping[str, Any]) -> tuple[list[str], bool]:
    """The names among ``name`` and its groups' members (nested) that ``index`` does not
    register, and whether a tag is among them."""
    unregistered, seen, tagged, todo = [], set(), False, [name]
    while todo:
        current = todo.pop()
        if not isinstance(current, str):  # a member the group does not name: never registered
            unregistered.append(repr(current))
            continue
        if current in seen:
            continue
        seen.add(current)
        entry = index.get(current)
        if entry is None:
            unregistered.append(current)
            continue
        tagged |= entry.kind.name == "TAG"
        todo += _listed(entry)
    return unregistered, tagged


@lru_cache(maxsize=32)
def _folders_index(folders: frozenset[str], include_path: tuple[str, ...]) -> dict[str, Any]:
    """``TaskIndex.build`` over the YAML files directly in ``folders`` of lm-eval's task tree (one
    tree, in its path order: a name defined twice keeps the same entry), then ``include_path``
    (later paths override, as lm-eval's TaskManager merges them)."""
    from lm_eval.tasks._index import TaskIndex
    from lm_eval.tasks._yaml_loader import load_yaml

    index: dict[str, Any] = {}
    files = sorted((p for folder in folders for p in Path(folder).glob("*.yaml")),
                   key=lambda p: p.as_posix())
    for path in files:
        try:
            TaskIndex.process_cfg(load_yaml(path, resolve_func=False, recursive=True), path,
                                  index)
        except Exception:  # noqa: BLE001 - as lm-eval's own build skips a config it cannot read
            continue
    if include_path:
        index.update(TaskIndex.build([Path(p) for p in include_path]))
    return index


def registered_kind(name: str, include_path: Sequence[str] = ()) -> str | None:
    """What ``name`` is in lm-eval's task index ("task", "python task", "group", "tag"), or None
    when neither lm-eval's tasks nor ``include_path`` register it."""
    entry = _index_for(name, tuple(include_path)).get(name)
    return None if entry is None else entry.kind.name.lower().replace("py_task", "python task")


def member_names(name: str, include_path: Sequence[str] = ()) -> list[str]:
    """The leaf tasks of a registered group or tag (nested groups and tags expanded), in the
    order the group lists them; a task is its own only member."""
    index = _index_for(name, tuple(include_path))
    entry = index[name]
    kind = entry.kind.name
    if kind == "TAG":
        members: list[Any] = sorted(entry.tags)
    elif kind == "GROUP":
        members = _listed(entry)
    else:
        return [name]
    found: list[str] = []
    for member in members:
        if member not in index:
            raise ValueError(f"{name}: its member {member!r} is not a registered task")
        found += [n for n in member_names(member, include_path) if n not in found]
    return found


def task_config(name: str, include_path: Sequence[str] = ()) -> dict[str, Any]:
    """A registered task's whole config as lm-eval builds the task from it (includes merged,
    ``!function`` resolved: ``TaskFactory._load_full_config``)."""
    from lm_eval.tasks._yaml_loader import load_yaml

    entry = _index_for(name, tuple(include_path)).get(name)
    if entry is None:
        raise ValueError(f"{name!r} is not a registered lm-eval task (lm_eval ls tasks lists "
                         "them; a task of your own needs its folder in --include_path)")
    if entry.yaml_path is None:
        return dict(entry.cfg or {})
    return dict(load_yaml(entry.yaml_path, resolve_func=True))
