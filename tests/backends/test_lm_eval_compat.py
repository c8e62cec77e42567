"""The lm-eval internals we rely on (``backends.lm_eval_compat``), against the installed
lm-eval.

Checked against lm-eval 0.4.13 (``lm_eval_compat.TESTED_VERSIONS``). On another version the first
test fails and says what to do; the others say which shim broke.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
from importlib import import_module
from pathlib import Path
from types import SimpleNamespace

import lm_eval
import pytest
from conftest import load_task
from lm_eval.api.instance import Instance
from lm_eval.api.task import ConfigurableTask

from calidist_tasks.backends import lm_eval_compat as compat


def test_installed_lm_eval_is_a_tested_version() -> None:
    version = lm_eval.__version__
    oldest, newest = compat.TESTED_VERSIONS
    assert compat.is_tested_version(version), (
        f"lm-eval {version} is outside the versions "
        "calidist_tasks/backends/lm_eval_compat.py was checked "
        f"against ({oldest} to {newest}): run tests/test_lm_eval_compat.py, fix the shims that "
        "fail (in lm_eval_compat.py only), then widen TESTED_VERSIONS")


def test_version_range() -> None:
    oldest, newest = compat.TESTED_VERSIONS
    assert compat.is_tested_version(oldest) and compat.is_tested_version(newest)
    assert not compat.is_tested_version("0.4.12") and not compat.is_tested_version("0.5.0")


def test_pyproject_allows_exactly_the_tested_versions() -> None:
    """pip installs only an lm-eval the shims were checked against: pyproject's requirement is
    TESTED_VERSIONS (one pinned version, or the range between them)."""
    import re
    from pathlib import Path

    text = (Path(__file__).parents[2] / "pyproject.toml").read_text(encoding="utf-8")
    (requirement,) = re.findall(r'"lm-eval\[hf,api\]([^"]*)"', text)
    oldest, newest = compat.TESTED_VERSIONS
    expected = f"=={oldest}" if oldest == newest else f">={oldest},<={newest}"
    assert requirement == expected, f"pyproject.toml allows lm-eval{requirement}"


# ---------------------------------------------------------------------- tasks
def test_set_task_metrics_is_what_lm_eval_aggregates() -> None:
    calls = []

    def aggregate(name: str, records: list) -> float:
        calls.append((name, records))
        return float(len(records))

    def stderr(name: str, iters: int):  # ECE's stderr: the number of records times iters
        return None if name == "acc" else (lambda records: float(len(records) * iters))

    task = SimpleNamespace()
    compat.set_task_metrics(task, ["acc", "ece"], aggregate, lambda name: name == "acc", stderr)
    assert compat.task_metric_names(task) == ["acc", "ece"]
    # lm-eval's own accessors (the evaluator aggregates through them)
    aggregation = ConfigurableTask.aggregation(task)
    assert set(aggregation) == {"acc", "ece"}
    assert aggregation["ece"]([{"a": 1}, {"a": 2}]) == 2.0
    assert calls == [("ece", [{"a": 1}, {"a": 2}])]
    assert ConfigurableTask.higher_is_better(task) == {"acc": True, "ece": False}
    # lm-eval's stderr lookup, as its evaluator calls it (by name, from evaluator_utils), finds
    # ours; --bootstrap_iters 0 gives none; lm-eval's own metrics keep theirs
    from lm_eval import evaluator_utils
    from lm_eval.api.metrics import mean, mean_stderr

    lookup = evaluator_utils.stderr_for_metric
    assert lookup(metric=aggregation["ece"], bootstrap_iters=10)([{}, {}, {}]) == 30.0
    assert lookup(metric=aggregation["acc"], bootstrap_iters=10) is None
    assert lookup(metric=aggregation["ece"], bootstrap_iters=0) is None
    assert lookup(metric=mean, bootstrap_iters=10) is mean_stderr


@pytest.fixture(scope="module")
def task(ppdb_data_dir):
    return load_task("calidist_ppdb_assertion",
                     {"data_dir": str(ppdb_data_dir), "calib_size": 3, "eval_size": 2})


def test_a_task_reports_its_metrics_through_lm_eval(task) -> None:
    from calidist_tasks.scoring.records import RECORD_KEY

    names = [RECORD_KEY, *task.reported_metrics()]  # the record first, under its own key
    assert compat.task_metric_names(task) == names
    assert list(task.aggregation()) == names and list(task.higher_is_better()) == names
    record = task.process_results(task.eval_docs[0], [(-1.0, False)] * 2 * 5)
    assert list(record) == names


def test_build_all_requests_keywords(task, monkeypatch: pytest.MonkeyPatch) -> None:
    """What lm-eval passes to fewshot_context and construct_requests, and the Instance it takes."""
    seen: dict[str, list[dict]] = {"fewshot_context": [], "construct_requests": []}
    for method in seen:
        original = getattr(task, method)

        def spy(*args, _original=original, _calls=seen[method], **kwargs):
            _calls.append(kwargs)
            return _original(*args, **kwargs)

        monkeypatch.setattr(task, method, spy)
    task.build_all_requests(limit=None, system_instruction="Be brief.")
    context = seen["fewshot_context"][0]
    assert set(compat.CONTEXT_KWARGS) <= set(context)
    kept = compat.fewshot_context_kwargs({"system_instruction": "Be brief.", "rank": 0})
    assert kept == {"system_instruction": "Be brief.", "apply_chat_template": None,
                    "fewshot_as_multiturn": None, "chat_template": None}
    parameters = inspect.signature(ConfigurableTask.build_all_requests).parameters
    assert set(compat.CONTEXT_KWARGS) <= set(parameters)

    kwargs = {k: v for k, v in seen["construct_requests"][0].items() if k not in ("doc", "ctx")}
    assert set(compat.CHAT_KWARGS) <= set(kwargs)
    passed = compat.instance_kwargs(kwargs)
    assert set(passed) == {"metadata"}
    metadata = passed["metadata"]
    assert metadata[0] == task.config.task and compat.metadata_repeats(metadata) == 1
    made = Instance(request_type="generate_until", doc={}, arguments=("", {}), idx=0,
                    **{**passed, "metadata": compat.with_repeats(metadata, 7)})
    assert (made.task_name, made.doc_id, made.repeats) == (metadata[0], metadata[1], 7)


def class_methods(module: str, owner: str) -> dict[str, ast.FunctionDef]:
    """``owner``'s methods in ``module``'s source, read without importing it (lm-eval's HF model
    and our prefix-cache backend import torch and transformers: seconds in a fast-tier process)."""
    source = Path(importlib.util.find_spec(module).origin).read_text(encoding="utf-8")
    (found,) = (node for node in ast.parse(source).body
                if isinstance(node, ast.ClassDef) and node.name == owner)
    return {node.name: node for node in found.body if isinstance(node, ast.FunctionDef)}


def parameter_names(method: ast.FunctionDef) -> tuple[str, ...]:
    """The parameter names ``inspect.signature`` gives, in its order."""
    args = method.args
    return tuple(a.arg for a in [*args.posonlyargs, *args.args, *filter(None, [args.vararg]),
                                 *args.kwonlyargs, *filter(None, [args.kwarg])])


@pytest.mark.parametrize("qualified", sorted(compat.OVERRIDDEN))
def test_overridden_private_methods_still_exist(qualified: str) -> None:
    module, owner, method = qualified.rsplit(".", 2)
    found = class_methods(module, owner).get(method)
    assert found is not None, f"lm-eval no longer has {qualified}, which prefix_cache overrides"
    names = parameter_names(found)
    assert names == compat.OVERRIDDEN[qualified], (
        f"{qualified} now takes {names}; prefix_cache.PrefixCacheHFLM overrides it with "
        f"{compat.OVERRIDDEN[qualified]}")


def test_overridden_list_is_complete() -> None:
    """Every private method of HFLM's own that PrefixCacheHFLM overrides is in OVERRIDDEN."""
    hflm = class_methods("lm_eval.models.huggingface", "HFLM")
    ours = class_methods("calidist_tasks.backends.prefix_cache", "PrefixCacheHFLM")
    overridden = {f"lm_eval.models.huggingface.HFLM.{name}" for name in ours
                  if name.startswith("_") and not name.startswith("__") and name in hflm}
    assert overridden == set(compat.OVERRIDDEN)


# ---------------------------------------------------------------------- models (API)
def defined(qualified: str) -> object:
    """What the class of "module.Class.method" itself defines under that name (None: nothing)."""
    module, owner, method = qualified.rsplit(".", 2)
    return vars(getattr(import_module(module), owner)).get(method)


@pytest.mark.parametrize("qualified", sorted(compat.REPLY_PARSERS))
def test_reply_parsers_still_exist(qualified: str) -> None:
    found = defined(qualified)
    assert found is not None, f"lm-eval no longer defines {qualified}, which " \
                              "calidist_tasks.backends.api_replies checks replies through"
    names = tuple(inspect.signature(getattr(found, "__func__", found)).parameters)
    assert names == compat.REPLY_PARSERS[qualified], names


@pytest.mark.parametrize("caller", ["_loglikelihood_tokens", "amodel_call", "generate_until"])
def test_lm_eval_calls_the_reply_parsers_on_the_model(caller: str) -> None:
    """What makes a parser replaced on the class reach every reply: lm-eval calls it through
    ``self`` with the replies as ``outputs=`` (both the one-at-a-time and the concurrent path)."""
    from lm_eval.models.api_models import TemplateAPI

    source = inspect.getsource(getattr(TemplateAPI, caller))
    calls = [f"self.parse_{kind}(" for kind in ("logprobs", "generations")]
    assert any(call in source for call in calls), caller
    assert "outputs=outputs" in source.replace(" ", ""), caller


def test_reply_parsers_wrapped_and_put_back(monkeypatch) -> None:
    from lm_eval.models.openai_completions import (
        LocalChatCompletion,
        LocalCompletionsAPI,
        OpenAIChatCompletion,
    )

    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    url = "http://127.0.0.1:9/v1"
    completions = LocalCompletionsAPI(model="m", base_url=f"{url}/completions",
                                      tokenizer_backend=None)
    chat = OpenAIChatCompletion(model="m", base_url=f"{url}/chat/completions")
    before = {qualified: defined(qualified) for qualified in compat.REPLY_PARSERS}
    seen = []

    def wrap(name, original):
        def parse(lm, outputs, **kwargs):
            seen.append((name, lm, kwargs))
            return original(lm, outputs, **kwargs)
        return parse

    reply = {"choices": [{"index": 0, "text": "x", "message": {"content": "y"},
                          "logprobs": {"token_logprobs": [None, -1.0, -2.0],
                                       "top_logprobs": [None, {"a": -1.0}, {"b": -1.0}]}}]}
    with compat.reply_parsers_wrapped(wrap):
        assert completions.parse_logprobs(outputs=reply, tokens=[[1, 2]], ctxlens=[1]) == [
            (-1.0, True)]
        assert completions.parse_generations(outputs=reply) == ["x"]
        assert chat.parse_generations(outputs=reply, contexts=["c"]) == ["y"]
    assert [(name, lm) for name, lm, _ in seen] == [
        ("LocalCompletionsAPI.parse_logprobs", completions),
        ("LocalCompletionsAPI.parse_generations", completions),
        ("LocalChatCompletion.parse_generations", chat)]
    assert seen[0][2] == {"tokens": [[1, 2]], "ctxlens": [1]}
    assert {qualified: defined(qualified) for qualified in compat.REPLY_PARSERS} == before
    assert isinstance(vars(LocalCompletionsAPI)["parse_logprobs"], staticmethod)
    assert "parse_generations" not in vars(OpenAIChatCompletion)
    assert LocalChatCompletion.parse_generations is before[
        "lm_eval.models.openai_completions.LocalChatCompletion.parse_generations"]
    assert compat.api_backend(completions) == "local-completions"
    assert compat.api_backend(chat) == "openai-chat-completions"
    assert compat.api_endpoint(chat) == f"{url}/chat/completions"


@pytest.mark.parametrize("qualified", sorted(compat.CHAT_PAYLOADS))
def test_chat_payload_builders_still_exist(qualified: str) -> None:
    found = defined(qualified)
    assert found is not None, f"lm-eval no longer defines {qualified}, through which " \
                              "backends.api_replies asks chat APIs for log-probabilities"
    assert tuple(inspect.signature(found).parameters) == compat.CHAT_PAYLOADS[qualified]


def test_chat_payloads_wrapped_reach_the_request_and_are_put_back(monkeypatch) -> None:
    """lm-eval posts what the (wrapped) builder returns, on both chat classes; restored after."""
    from lm_eval.models.openai_completions import LocalChatCompletion, OpenAIChatCompletion

    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    url = "http://127.0.0.1:9/v1/chat/completions"
    models = [LocalChatCompletion(model="m", base_url=url),
              OpenAIChatCompletion(model="m", base_url=url)]
    before = {qualified: defined(qualified) for qualified in compat.CHAT_PAYLOADS}

    def wrap(name, original):
        def payload(lm, *args, **kwargs):
            return {**original(lm, *args, **kwargs), "marked": (name, type(lm).__name__)}
        return payload

    messages = [{"role": "user", "content": "Hi"}]
    with compat.methods_wrapped(tuple(compat.CHAT_PAYLOADS), wrap):
        for lm in models:
            body = lm._create_payload(messages, generate=True, gen_kwargs={"until": ["x"]})
            assert body["marked"] == ("_create_payload", type(lm).__name__)
            assert body["messages"] == messages
    assert {qualified: defined(qualified) for qualified in compat.CHAT_PAYLOADS} == before
    for caller in ("model_call", "amodel_call"):
        from lm_eval.models.api_models import TemplateAPI

        assert "self._create_payload(" in inspect.getsource(getattr(TemplateAPI, caller))


@pytest.mark.parametrize(("qualified", "name"), sorted(compat.API_BACKENDS.items()))
def test_api_backend_names_are_lm_evals(qualified: str, name: str) -> None:
    from lm_eval.api.registry import get_model

    module, owner = qualified.rsplit(".", 1)
    assert get_model(name) is getattr(import_module(module), owner)


def test_templates_compile_once_and_render_what_lm_eval_renders():
    from lm_eval import utils

    template = "{{sentence1}} / {{sentence2 | upper}}"
    doc = {"sentence1": "a", "sentence2": "b"}
    expected = utils.Environment(loader=utils.BaseLoader, undefined=utils.StrictUndefined,
                                 keep_trailing_newline=True).from_string(template).render(**doc)
    compat.cache_compiled_templates()
    compat.cache_compiled_templates()  # idempotent: wrapped once
    assert utils.apply_template(template, doc) == expected == "a / B"
    assert utils.env.from_string(template) is utils.env.from_string(template)
    assert utils.env.from_string(template, globals={"x": 1}) is not \
        utils.env.from_string(template, globals={"x": 1})  # other arguments: not cached
    with pytest.raises(Exception, match="sentence2"):  # StrictUndefined kept
        utils.apply_template(template, {"sentence1": "a"})


def test_models_reused_share_one_object_and_stop_its_engine_at_the_end(monkeypatch) -> None:
    """Two runs asking for the same model get one object; leaving the block stops an engine
    process the object holds (vLLM's), else Python waits for it at exit."""
    stopped = []

    class Engine:
        def shutdown(self) -> None:
            stopped.append(self)

    class Model:
        built = 0

        def __init__(self) -> None:
            Model.built += 1
            self.model = SimpleNamespace(llm_engine=SimpleNamespace(engine_core=Engine()))

        @classmethod
        def create_from_arg_string(cls, arguments, additional_config=None):
            return cls()

    module_name, _, attribute = compat.MODEL_FACTORY.rpartition(".")
    monkeypatch.setattr(import_module(module_name), attribute, lambda name: Model)
    factory = import_module(module_name)
    with compat.models_reused() as loaded:
        first = getattr(factory, attribute)("vllm").create_from_arg_string("pretrained=x")
        second = getattr(factory, attribute)("vllm").create_from_arg_string("pretrained=x")
        assert first is second and Model.built == 1 and not stopped
    assert stopped == [first.model.llm_engine.engine_core] and loaded == {}
    assert getattr(factory, attribute)("vllm") is Model  # the factory is lm-eval's again
    assert not compat.stop_engine(SimpleNamespace(model=object()))  # hf: nothing to stop


def test_a_plain_calidist_eval_stops_the_engine_of_its_model(monkeypatch) -> None:
    """``calidist eval`` of one ordinary task (no stages, no replies) still stops the model's
    engine process when the run ends: a live vLLM engine kept the command from returning."""
    from calidist_tasks import cli

    stopped = []

    class Model:
        def __init__(self) -> None:
            engine = SimpleNamespace(shutdown=lambda: stopped.append(engine))
            self.model = SimpleNamespace(llm_engine=SimpleNamespace(engine_core=engine))

        @classmethod
        def create_from_arg_string(cls, arguments, additional_config=None):
            return cls()

    module_name, _, attribute = compat.MODEL_FACTORY.rpartition(".")
    factory = import_module(module_name)
    monkeypatch.setattr(factory, attribute, lambda name: Model)
    built = []

    def lm_eval(argv, table=True):  # lm-eval's evaluator: builds the model through the registry
        built.append(getattr(factory, attribute)("vllm").create_from_arg_string("pretrained=x"))
        return None

    monkeypatch.setattr(cli, "lm_eval_main", lm_eval)
    monkeypatch.setattr(cli, "print_summary", lambda results: None)
    cli.main(["eval", "--model", "vllm", "--model_args", "pretrained=x",
              "--tasks", "calidist_ppdb"])
    assert len(built) == 1 and stopped == [built[0].model.llm_engine.engine_core]
