"""The real loader path (`load_llama`) against a fake ``llama_cpp`` module: arguments, cache, counting."""

from __future__ import annotations

import sys
import types
from collections import OrderedDict
from typing import Any

import numpy as np
import pytest

from clearmed.backbones.llama_runtime import (
    MIN_RESTORE_GAIN,
    LlamaLoadArgs,
    _lean_save_state,
    common_prefix_length,
    load_llama,
)


class FakeRAMCache:
    """Stands in for ``llama_cpp.LlamaRAMCache``: stores states, returns the longest-prefix one."""

    def __init__(self, capacity_bytes: int = 0) -> None:
        self.capacity_bytes = capacity_bytes
        self.cache_state: OrderedDict[tuple[int, ...], Any] = OrderedDict()

    def __setitem__(self, key: Any, value: Any) -> None:
        self.cache_state[tuple(key)] = value

    def __getitem__(self, key: Any) -> Any:
        scored = [(common_prefix_length(k, key), v) for k, v in self.cache_state.items()]
        best = max(scored, key=lambda kv: kv[0], default=(0, None))
        if best[0] == 0:
            raise KeyError("Key not found")
        return best[1]


def state(tokens: list[int], n_ctx: int = 4096) -> types.SimpleNamespace:
    """A saved state as llama.cpp makes one: the whole input_ids buffer, logits rows, n_tokens."""
    buffer = np.full(n_ctx, 7, dtype=np.intc)  # stale tokens beyond n_tokens must not count
    buffer[: len(tokens)] = tokens
    return types.SimpleNamespace(
        input_ids=buffer, n_tokens=len(tokens), scores=np.ones((512, 10), dtype=np.single), llama_state_size=100
    )


class FakeFormatterResult:
    def __init__(self, prompt: str) -> None:
        self.prompt = prompt
        self.added_special = True


class FakeFormatter:
    def __init__(self, template: str, eos_token: str, bos_token: str) -> None:
        self.template = template

    def __call__(self, messages: list[dict[str, str]]) -> FakeFormatterResult:
        return FakeFormatterResult("".join(f"<{m['role']}> {m['content']} </s> " for m in messages) + "<assistant>")


class FakeModelHandle:
    def token_get_text(self, token_id: int) -> str:
        return {0: "<bos>", 1: "</s>"}[token_id]


class FakeLlamaClass:
    def __init__(self, **kwargs: Any) -> None:
        if kwargs["model_path"].endswith("broken.gguf"):
            raise ValueError(f"Failed to load model from file: {kwargs['model_path']}")
        self.kwargs = kwargs
        self.cache: Any = None
        self.metadata = {"tokenizer.chat_template": "{{ messages }}"} if "chat" in kwargs["model_path"] else {}
        self._model = FakeModelHandle()
        self._input_ids = np.zeros(0, dtype=np.intc)

    def set_cache(self, cache: Any) -> None:
        self.cache = cache

    def token_eos(self) -> int:
        return 1

    def token_bos(self) -> int:
        return 0

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        return list(range(len(text.split()) + (1 if add_bos else 0)))


@pytest.fixture
def fake_llama_cpp(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    module = types.ModuleType("llama_cpp")
    module.Llama = FakeLlamaClass  # type: ignore[attr-defined]
    module.LlamaRAMCache = FakeRAMCache  # type: ignore[attr-defined]
    module.llama_chat_format = types.SimpleNamespace(Jinja2ChatFormatter=FakeFormatter)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "llama_cpp", module)
    return module


def args(path: str = "/m/chat.gguf", cache_mb: int = 64) -> LlamaLoadArgs:
    return LlamaLoadArgs(model_path=path, n_ctx=4096, n_batch=256, n_threads=3, seed=5, prompt_cache_mb=cache_mb)


def test_loads_with_the_recommended_arguments(fake_llama_cpp: types.ModuleType) -> None:
    shared = load_llama(args())
    assert shared.llm.kwargs == {  # type: ignore[attr-defined]
        "model_path": "/m/chat.gguf",
        "n_ctx": 4096,
        "n_batch": 256,
        "n_threads": 3,
        "n_threads_batch": 3,
        "flash_attn": True,
        "seed": 5,
        "verbose": False,
    }
    assert shared.load_seconds >= 0.0


def test_ram_prompt_cache_is_sized_and_drops_the_logits_copy(fake_llama_cpp: types.ModuleType) -> None:
    shared = load_llama(args(cache_mb=64))
    cache = shared.llm.cache  # type: ignore[attr-defined]
    assert isinstance(cache, FakeRAMCache)
    assert cache.capacity_bytes == 64 * 1024 * 1024
    cache[(1, 2, 3)] = state([1, 2, 3])
    assert cache.cache_state[(1, 2, 3)].scores.shape == (1, 10)  # one row survives for load_state's broadcast


def test_ram_prompt_cache_restores_only_when_it_saves_work(fake_llama_cpp: types.ModuleType) -> None:
    shared = load_llama(args(cache_mb=64))
    cache, llm = shared.llm.cache, shared.llm  # type: ignore[attr-defined]
    header = [1, 2, 3]  # every prompt starts with the same chat-template tokens
    long_a = header + list(range(100, 100 + MIN_RESTORE_GAIN + 10))
    cache[[*long_a, 9, 9]] = state([*long_a, 9, 9])
    llm._input_ids = np.array([*header, 500, 501], dtype=np.intc)  # the live context: another prompt
    assert cache[[*long_a, 42]].n_tokens == len(long_a) + 2  # resumes A: saves MIN_RESTORE_GAIN+ tokens
    short = [*header, 100, 101, 5, 5, 5]  # shares only a few tokens with A beyond the header
    with pytest.raises(KeyError):
        cache[short]
    llm._input_ids = np.array(long_a[:-5], dtype=np.intc)  # the live context already holds most of A
    with pytest.raises(KeyError):
        cache[[*long_a, 42]]


def test_common_prefix_length() -> None:
    assert common_prefix_length([1, 2, 3], [1, 2, 4, 5]) == 2
    assert common_prefix_length([1, 2], [1, 2, 3]) == 2
    assert common_prefix_length([], [1]) == 0
    assert common_prefix_length(np.array([9, 2]), [1, 2]) == 0


def test_ram_prompt_cache_off(fake_llama_cpp: types.ModuleType) -> None:
    assert load_llama(args(cache_mb=0)).llm.cache is None  # type: ignore[attr-defined]


def test_token_count_uses_the_chat_template(fake_llama_cpp: types.ModuleType) -> None:
    shared = load_llama(args("/m/chat.gguf"))
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "one two three"}]
    # "<system> be brief </s> <user> one two three </s> <assistant>": 10 words, no extra BOS
    assert shared.count_tokens(messages) == 10


def test_token_count_without_a_template_adds_framing(fake_llama_cpp: types.ModuleType) -> None:
    shared = load_llama(args("/m/plain.gguf"))
    assert shared.count_tokens([{"role": "user", "content": "one two three"}]) == 3 + 8 * 2


def test_unloadable_file_is_one_clear_line(fake_llama_cpp: types.ModuleType) -> None:
    with pytest.raises(RuntimeError, match=r"^llama\.cpp could not load /m/broken\.gguf: Failed to load model"):
        load_llama(args("/m/broken.gguf"))


class FakeState:
    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


def test_lean_save_state_skips_the_logits_copy(fake_llama_cpp: types.ModuleType) -> None:
    def get_data(ctx: Any, buffer: Any, size: int) -> int:
        buffer[0:3] = [1, 2, 3]
        return 3

    fake_llama_cpp.llama_state_get_size = lambda ctx: 8  # type: ignore[attr-defined]
    fake_llama_cpp.llama_state_get_data = get_data  # type: ignore[attr-defined]
    fake_llama_cpp.llama = types.SimpleNamespace(LlamaState=FakeState)  # type: ignore[attr-defined]
    llm = types.SimpleNamespace(
        _ctx=types.SimpleNamespace(ctx=object()),
        input_ids=np.arange(6, dtype=np.intc),
        scores=np.ones((512, 10), dtype=np.single),
        n_tokens=4,
        _seed=9,
    )
    saved = _lean_save_state(fake_llama_cpp, llm)
    assert saved.llama_state == bytes([1, 2, 3])
    assert saved.llama_state_size == 3
    assert saved.scores.shape == (1, 10)
    assert (saved.n_tokens, saved.seed) == (4, 9)
    llm.input_ids[0] = 99
    assert saved.input_ids[0] == 0  # a copy, not a view of the live buffer


def test_lean_save_state_falls_back_when_internals_change(fake_llama_cpp: types.ModuleType) -> None:
    class Changed:
        def save_state(self) -> str:
            return "stock"

    assert _lean_save_state(fake_llama_cpp, Changed()) == "stock"
