"""LlamaCppEngine with a fake llama.cpp model: DSPy contract, sharing, serialization, limits."""

from __future__ import annotations

import asyncio
import copy
import sys
import threading
from typing import Any

import dspy
import pytest
from dspy.lm15 import ImagePart, Message, Request, TextPart

from clearmed.backbones import llama_runtime
from clearmed.backbones.embedded import AsyncLlamaCppEngine, LlamaCppEngine
from clearmed.backbones.llama_runtime import LlamaLoadArgs

from .conftest import FakeLlama, FakeLoader


def make_engine(loader: FakeLoader, *, n_ctx: int = 2048, path: str = "/models/fake.gguf") -> LlamaCppEngine:
    args = LlamaLoadArgs(model_path=path, n_ctx=n_ctx, n_threads=2, seed=7)
    return LlamaCppEngine(args, model_name="fake-coder", loader=loader)


def make_lm(engine: LlamaCppEngine, **kwargs: Any) -> dspy.LM:
    options: dict[str, Any] = {"cache": False, "num_retries": 0, "temperature": 0.0, "max_tokens": 64, **kwargs}
    return dspy.LM("local/fake-coder", engine=engine, async_engine=AsyncLlamaCppEngine(engine), **options)


def test_predict_round_trip_sends_chat_messages_and_sampling(fake_loader: FakeLoader) -> None:
    engine = make_engine(fake_loader)
    lm = make_lm(engine, top_p=0.9)
    pred = dspy.Predict("question -> answer")(question="Capital of France?", lm=lm)
    assert pred.answer == "Paris"
    (call,) = fake_loader.llm.calls
    roles = [m["role"] for m in call["messages"]]
    assert roles == ["system", "user"]
    assert "Capital of France?" in call["messages"][1]["content"]
    assert call["temperature"] == 0.0
    assert call["top_p"] == 0.9
    assert call["max_tokens"] == 64
    assert call["seed"] == 7  # the config seed when the request carries none


def test_usage_and_stats_come_from_llama(fake_loader: FakeLoader) -> None:
    engine = make_engine(fake_loader)
    lm = make_lm(engine)
    lm("hello")
    lm("hello again")
    assert lm.history[-1]["usage"]["prompt_tokens"] == 17
    assert lm.history[-1]["usage"]["completion_tokens"] == 5
    stats = engine.stats
    assert (stats.calls, stats.prompt_tokens, stats.completion_tokens) == (2, 34, 10)
    assert stats.seconds >= 0.0
    engine.reset_stats()
    assert engine.stats.calls == 0


def test_model_loads_lazily_once_and_is_shared(fake_loader: FakeLoader) -> None:
    main = make_engine(fake_loader)
    judge = make_engine(fake_loader)  # another role naming the same model file and settings
    assert fake_loader.loads == []
    make_lm(main)("a")
    make_lm(judge)("b")
    assert len(fake_loader.loads) == 1
    assert llama_runtime.loaded_models() == [main.load_args]
    make_lm(make_engine(fake_loader, n_ctx=4096))("c")  # different context: a different model instance
    assert len(fake_loader.loads) == 2


def test_deepcopy_and_copy_keep_one_engine_and_one_model(fake_loader: FakeLoader) -> None:
    engine = make_engine(fake_loader)
    lm = make_lm(engine)
    program = dspy.Predict("question -> answer")
    program.set_lm(lm)
    clone = program.deepcopy()
    assert clone.lm is not lm
    assert clone.lm.engine is engine
    assert copy.deepcopy(engine) is engine
    assert copy.copy(engine) is engine
    async_engine = AsyncLlamaCppEngine(engine)
    assert copy.deepcopy(async_engine) is async_engine
    clone(question="q")
    program(question="q")
    assert len(fake_loader.loads) == 1
    assert engine.stats.calls == 2


def test_calls_are_serialized_under_threads() -> None:
    loader = FakeLoader(FakeLlama(delay=0.02))
    engine = make_engine(loader)
    lm = make_lm(engine)
    errors: list[BaseException] = []

    def call(i: int) -> None:
        try:
            lm(f"question {i}")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert loader.llm.max_active == 1
    assert len(loader.loads) == 1
    assert engine.stats.calls == 6


def test_async_calls_work_and_stay_serialized() -> None:
    loader = FakeLoader(FakeLlama(delay=0.02))
    lm = make_lm(make_engine(loader))
    predict = dspy.Predict("question -> answer")

    async def run() -> list[Any]:
        return await asyncio.gather(*(predict.acall(question=f"q{i}", lm=lm) for i in range(4)))

    preds = asyncio.run(run())
    assert [p.answer for p in preds] == ["Paris"] * 4
    assert loader.llm.max_active == 1


def test_context_overflow_is_a_dspy_error_before_llama_runs(fake_loader: FakeLoader) -> None:
    lm = make_lm(make_engine(fake_loader, n_ctx=600), max_tokens=100)
    with pytest.raises(dspy.ContextWindowExceededError, match=r"exceeds the embedded model's context window n_ctx=600"):
        lm("word " * 550)
    assert fake_loader.llm.calls == []
    lm("short prompt")  # the engine stays usable
    assert len(fake_loader.llm.calls) == 1


def test_llama_context_guard_is_translated_too() -> None:
    class Overflowing(FakeLlama):
        def create_chat_completion(self, **kwargs: Any) -> dict[str, Any]:
            raise ValueError("Requested tokens (9000) exceed context window of 8192")

    lm = make_lm(make_engine(FakeLoader(Overflowing())))
    with pytest.raises(dspy.ContextWindowExceededError, match="n_ctx=2048"):
        lm("hi")


def test_other_llama_failures_surface_as_dspy_errors() -> None:
    class Broken(FakeLlama):
        def create_chat_completion(self, **kwargs: Any) -> dict[str, Any]:
            raise RuntimeError("llama_decode returned -3")

    with pytest.raises(dspy.LMError, match="llama_decode returned -3"):
        make_lm(make_engine(FakeLoader(Broken())))("hi")


def test_tool_calls_and_non_text_parts_are_refused(fake_loader: FakeLoader) -> None:
    engine = make_engine(fake_loader)
    tool_request = Request(
        model="local/fake-coder",
        messages=(Message.user("hi"),),
        tools=(dspy.lm15.FunctionTool(name="f", description="d", parameters={"type": "object"}),),
    )
    with pytest.raises(dspy.lm15.UnsupportedFeatureError, match="tool calls"):
        engine.complete(tool_request)
    image_turn = Request(
        model="local/fake-coder",
        messages=(Message.user([TextPart("look"), ImagePart(url="https://example.org/x.png")]),),
    )
    with pytest.raises(dspy.lm15.UnsupportedFeatureError, match="'user' message with ImagePart, TextPart"):
        engine.complete(image_turn)
    assert fake_loader.llm.calls == []


def test_request_level_seed_stop_and_json_format_reach_llama(fake_loader: FakeLoader) -> None:
    engine = make_engine(fake_loader)
    config = dspy.lm15.Config(
        seed=3,
        stop=("\n\n",),
        response_format={"type": "json_schema", "schema": {"type": "object"}},
    )
    request = Request(model="local/fake-coder", messages=(Message.user("hi"),), system="be brief", config=config)
    response = engine.complete(request)
    assert response.text == fake_loader.llm.reply
    assert response.finish_reason == "stop"
    (call,) = fake_loader.llm.calls
    assert call["messages"][0] == {"role": "system", "content": "be brief"}
    assert call["seed"] == 3
    assert call["stop"] == ["\n\n"]
    assert call["response_format"] == {"type": "json_object", "schema": {"type": "object"}}
    assert "temperature" not in call  # unset values keep llama.cpp's defaults


def test_engine_state_round_trips_for_saved_programs(fake_loader: FakeLoader) -> None:
    engine = make_engine(fake_loader)
    restored = LlamaCppEngine.load_state(engine.dump_state())
    assert restored.load_args == engine.load_args
    assert restored.model_name == "fake-coder"
    async_restored = AsyncLlamaCppEngine.load_state(AsyncLlamaCppEngine(engine).dump_state())
    assert async_restored.sync.load_args == engine.load_args


def test_missing_llama_cpp_says_which_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # makes `import llama_cpp` raise ImportError
    engine = LlamaCppEngine(LlamaLoadArgs(model_path="/x.gguf", n_ctx=512, n_threads=1))
    with pytest.raises(ImportError, match=r"pip install 'clearmed\[embedded\]'"):
        make_lm(engine)("hi")


def test_unload_models_closes_and_allows_reload(fake_loader: FakeLoader) -> None:
    engine = make_engine(fake_loader)
    make_lm(engine)("a")
    llama_runtime.unload_models()
    assert fake_loader.llm.closed
    assert llama_runtime.loaded_models() == []
    make_lm(engine)("b")
    assert len(fake_loader.loads) == 2


def test_repr_shows_model_not_internals(fake_loader: FakeLoader) -> None:
    assert repr(make_engine(fake_loader)) == "LlamaCppEngine(model='fake-coder', path='/models/fake.gguf')"
