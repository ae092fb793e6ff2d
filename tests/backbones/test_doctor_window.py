"""`clearmed doctor` prints each remote backbone's context window and where it came from (issue 37): the config, the
server (which reading), or unknown, when the first overflow will teach it."""

from __future__ import annotations

import pytest

from clearmed.api.doctor import check_endpoint
from clearmed.backbones.config import parse_backbone

from .replay_server import REPLIES, ReplayServer, Reply

WINDOWS = REPLIES["windows"]


def doctor_lines(server: ReplayServer, **table: object) -> list[str]:
    backbone = parse_backbone(
        {"kind": "openai_compatible", "model": "qwen2.5-coder-1.5b", "api_base": server.api_base, **table}
    )
    said: list[str] = []
    assert check_endpoint("main", backbone, say=said.append)
    return [line for line in said if "context window" in line]


@pytest.mark.parametrize(
    ("names", "table", "expected"),
    [
        (
            ("llama_server_models", "llama_server_props"),
            {},
            "main: context window 8,192 tokens (server: GET /props n_ctx)",
        ),
        (("vllm_models",), {}, "main: context window 32,768 tokens (server: GET /v1/models max_model_len)"),
        (("llama_server_models",), {"context_window": 4096}, "main: context window 4,096 tokens (config)"),
        (
            ("llama_cpp_python_models",),
            {},
            "main: context window unknown (the server does not report it): the first overflow will teach it",
        ),
    ],
)
def test_the_window_and_its_source(names: tuple[str, ...], table: dict[str, object], expected: str) -> None:
    with ReplayServer({WINDOWS[name]["path"]: Reply(200, WINDOWS[name]["body"]) for name in names}) as server:
        assert doctor_lines(server, **table) == [expected]
