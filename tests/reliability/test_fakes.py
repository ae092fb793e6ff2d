"""The fakes themselves: faults switch on and off at run time, and the documented limits hold."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from .fakes import FakeOpenAI, FakeTavilyServer

pytestmark = pytest.mark.reliability


def post(url: str, body: object, token: str = "k") -> tuple[int, bytes]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def test_openai_fake_injects_then_recovers() -> None:
    with FakeOpenAI() as lm:
        lm.inject("503", times=2)
        url = lm.api_base + "/chat/completions"
        assert [post(url, CHAT)[0] for _ in range(3)] == [503, 503, 200]
        lm.inject("context_vllm", times=None)
        status, raw = post(url, CHAT)
        assert status == 400
        assert json.loads(raw)["object"] == "error"
        lm.clear()
        assert post(url, CHAT)[0] == 200
        assert lm.served["503"] == 2


def test_tavily_fake_keeps_the_query_limit_and_injects() -> None:
    with FakeTavilyServer() as web:
        url = web.url + "/search"
        status, raw = post(url, {"query": "x" * 401}, web.key)
        assert status == 400
        assert b"Query is too long" in raw
        web.inject("malformed")
        status, raw = post(url, {"query": "measles"}, web.key)
        assert status == 200
        assert raw.startswith(b"<html>")
        assert post(url, {"query": "measles"}, "wrong")[0] == 401
