"""Fakes for the backbone tests: a llama.cpp stand-in, Qwen2.5's chat template as vLLM applies it, and a clean
model registry per test."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import jinja2.sandbox
import pytest

from clearmed.backbones import llama_runtime
from clearmed.backbones.llama_runtime import LlamaLoadArgs, SharedModel, fallback_token_counter
from clearmed.core.endpoints import forget_reached

CHAT_REPLY = "[[ ## answer ## ]]\nParis\n\n[[ ## completed ## ]]"

# Qwen2.5-Instruct's own chat template, verbatim (tokenizer_config.json's chat_template; the same text llama.cpp
# vendors as models/templates/Qwen-Qwen2.5-7B-Instruct.jinja), compiled as transformers compiles templates.
QWEN2_5_CHAT_TEMPLATE = (Path(__file__).parent / "fixtures" / "qwen2_5_instruct_chat_template.jinja").read_text()
_QWEN2_5 = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True).from_string(
    QWEN2_5_CHAT_TEMPLATE
)


class ChatTemplateError(ValueError):
    """A request vLLM refuses (HTTP 400) before any token is computed."""


def logprob_completion(model: str, top: dict[str, float], prompt_tokens: int) -> dict[str, Any]:
    """A vLLM chat completion of one token for a scoring request: the most likely token of ``top`` as the reply, and
    ``top`` as its first token's ``top_logprobs`` (each with its bytes, as vLLM sends them)."""
    items = [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in top.items()]
    first = max(top, key=top.__getitem__)
    return {
        "id": "chatcmpl-1", "object": "chat.completion", "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": first},
                     "logprobs": {"content": [{"token": first, "logprob": top[first], "top_logprobs": items}]},
                     "finish_reason": "length"}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 1, "total_tokens": prompt_tokens + 1},
    }  # fmt: skip


def render_as_vllm(
    messages: Sequence[dict[str, str]], *, add_generation_prompt: bool = True, continue_final_message: bool = False
) -> str:
    """The prompt vLLM builds for a chat request on Qwen2.5-Instruct (transformers' ``apply_chat_template``).

    - ``continue_final_message`` with ``add_generation_prompt`` -> 400 (vLLM's request validation);
    - ``continue_final_message`` without a final assistant message -> 400 (stricter than vLLM, which would
      continue the user's turn: the scorer must never ask for that);
    - ``continue_final_message``: the chat is rendered and cut right after the final message's content, so the
      prompt ends inside the open assistant turn; trailing whitespace the template kept stays (transformers'
      rule). An empty final message is "found" at the very end, after its ``<|im_end|>\n``: nothing is cut.
    - ``add_generation_prompt``: the template appends ``<|im_start|>assistant\n``.
    """
    if continue_final_message and add_generation_prompt:
        raise ChatTemplateError("Cannot set both `continue_final_message` and `add_generation_prompt` to True.")
    if continue_final_message and (not messages or messages[-1]["role"] != "assistant"):
        raise ChatTemplateError("continue_final_message needs a final assistant message")
    rendered = _QWEN2_5.render(messages=list(messages), tools=None, add_generation_prompt=add_generation_prompt)
    if continue_final_message:
        final = messages[-1]["content"]
        if final.strip() not in rendered:
            raise ChatTemplateError("continue_final_message is set but the final message does not appear in the chat")
        at = rendered.rindex(final.strip())
        kept = final.lstrip() if rendered[at : at + len(final.lstrip())] == final else final.strip()
        rendered = rendered[: at + len(kept)]
    return rendered


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


@pytest.fixture(autouse=True)
def _no_endpoint_reached() -> Iterator[None]:
    """Each test starts as a run does: no endpoint has answered yet (`clearmed.core.endpoints`)."""
    forget_reached()
    yield
    forget_reached()


@pytest.fixture
def closed_port() -> int:
    """A port that was free a moment ago: nothing listens there, so a connection to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def fake_loader() -> FakeLoader:
    return FakeLoader()


@pytest.fixture
def fake_gguf(tmp_path: Any) -> Any:
    path = tmp_path / "tiny.gguf"
    path.write_bytes(b"GGUF fake")
    return path
