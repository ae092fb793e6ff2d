"""`clearmed.core.endpoints`: what names an endpoint (never a path or credentials), which failures mean "not there",
and the one-line error a never-reached endpoint's refusal is."""

from __future__ import annotations

import pytest
import requests

from clearmed.core.endpoints import connect_failure, endpoint_of, has_reached, mark_reached, unreachable_error


@pytest.mark.parametrize(
    ("url", "endpoint"),
    [
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000"),
        ("https://api.openai.com/v1/chat/completions?x=1", "https://api.openai.com:443"),
        ("http://user:sk-secret@host.example/v1", "http://host.example:80"),  # credentials never named
        ("http://[::1]:9/v1", "http://[::1]:9"),
        ("localhost:8080", "http://localhost:8080"),
    ],
)
def test_an_endpoint_is_scheme_host_and_port(url: str, endpoint: str) -> None:
    assert endpoint_of(url) == endpoint


def test_reaching_any_path_of_an_endpoint_reaches_it() -> None:
    mark_reached("http://127.0.0.1:8000/v1/models")
    assert has_reached("http://127.0.0.1:8000/v1")
    assert not has_reached("http://127.0.0.1:8001/v1")


def test_a_refusal_and_an_unknown_host_are_found_under_requests_wrapping(closed_port: int) -> None:
    with pytest.raises(requests.ConnectionError) as refused:
        requests.get(f"http://127.0.0.1:{closed_port}/", timeout=2)
    assert connect_failure(refused.value) == "refused"
    with pytest.raises(requests.ConnectionError) as unknown:
        requests.get("http://no-such-host.invalid/", timeout=2)
    assert connect_failure(unknown.value) == "not_found"
    assert connect_failure(requests.ReadTimeout("slow")) is None
    assert connect_failure(ConnectionResetError("reset")) is None  # a dropped connection: transient, never fatal


def test_the_error_names_the_endpoint_once_and_only_before_a_reply() -> None:
    url = "http://127.0.0.1:9/v1"
    error = unreachable_error("main backbone openai/m", url, ConnectionRefusedError(111, "refused"))
    assert error is not None
    assert str(error) == (
        "main backbone openai/m: unreachable: http://127.0.0.1:9 refused the connection before any reply "
        "(is the server up, and the address right?)"
    )
    assert unreachable_error("x", url, TimeoutError("slow")) is None
    mark_reached(url)
    assert unreachable_error("main backbone openai/m", url, ConnectionRefusedError(111, "refused")) is None
