"""Fakes for the backbone tests: a llama.cpp stand-in and a clean model registry per test."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from clearmed.backbones import llama_runtime
from clearmed.backbones.llama_runtime import LlamaLoadArgs, SharedModel, fallback_token_counter

CHAT_REPLY = "[[ ## answer ## ]]\nParis\n\n[[ ## completed ## ]]"


class FakeLlama:
    """Shape of ``llama_cpp.Llama`` the engine uses; one token per whitespace-separated word."""

    def __init__(self, reply: str = CHAT_REPLY, delay: float = 0.0, usage: tuple[int, int] = (17, 5)) -> None:
        self.reply = reply
        self.delay = delay
        self.usage = usage
        self.calls: list[dict[str, Any]] = []
        self.active = 0
        self.max_active = 0
        self._guard = threading.Lock()
        self.closed = False

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        return list(range(len(text.split())))

    def create_chat_completion(self, **kwargs: Any) -> dict[str, Any]:
        with self._guard:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        try:
            time.sleep(self.delay)
            self.calls.append(kwargs)
            return {
                "id": "chatcmpl-fake",
                "choices": [{"message": {"role": "assistant", "content": self.reply}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": self.usage[0], "completion_tokens": self.usage[1]},
            }
        finally:
            with self._guard:
                self.active -= 1

    def close(self) -> None:
        self.closed = True


class FakeLoader:
    """Counts loads; every load returns the same FakeLlama so tests can inspect its calls."""

    def __init__(self, llm: FakeLlama | None = None) -> None:
        self.llm = llm or FakeLlama()
        self.loads: list[LlamaLoadArgs] = []

    def __call__(self, args: LlamaLoadArgs) -> SharedModel:
        self.loads.append(args)
        return SharedModel(llm=self.llm, args=args, count_tokens=fallback_token_counter(self.llm))


@pytest.fixture(autouse=True)
def _empty_model_registry() -> Iterator[None]:
    llama_runtime.unload_models()
    yield
    llama_runtime.unload_models()


@pytest.fixture
def fake_loader() -> FakeLoader:
    return FakeLoader()


@pytest.fixture
def fake_gguf(tmp_path: Any) -> Any:
    path = tmp_path / "tiny.gguf"
    path.write_bytes(b"GGUF fake")
    return path
