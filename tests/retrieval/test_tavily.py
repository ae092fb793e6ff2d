"""TavilySearch against a stdlib HTTP server on 127.0.0.1: success and every failure path, fully offline."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from clearmed.retrieval.base import EvidenceError, WebSearch
from clearmed.retrieval.tavily import TavilyOptions, TavilySearch
from clearmed.testing import QuietHTTPServer, ScriptedCall

KEY = "tvly-test-secret-123"

RESULTS = {
    "query": "measles rash",
    "answer": None,
    "results": [
        {
            "title": "Measles | CDC",
            "url": "https://www.cdc.gov/measles/index.html",
            "content": "Measles causes fever and a rash.",
            "score": 0.91,
            "published_date": "2024-02-01",
        },
        {"title": "no url", "content": "dropped"},
        {
            "title": "Measles - WHO",
            "url": "https://www.who.int/news-room/fact-sheets/detail/measles",
            "content": "Measles is a highly contagious viral disease.",
            "score": 0.8,
        },
        {"title": "Empty", "url": "https://example.org/empty", "content": "  "},
        {"title": "Third", "url": "https://en.wikipedia.org/wiki/Measles", "content": "Wiki text", "score": 0.5},
    ],
    "response_time": 0.4,
}


TAVILY_MAX_QUERY = 400


class FakeTavily:
    """Behaviour switch + request log for the handler."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.requests: list[dict[str, Any]] = []
        self.rejected: list[str] = []  # queries answered with Tavily's "Query is too long" 400


def _handler(state: FakeTavily) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # keep pytest output clean
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
            if len(body.get("query", "")) > TAVILY_MAX_QUERY:  # Tavily's documented limit and error body
                state.rejected.append(body["query"])
                return self._send(400, {"detail": {"error": "Query is too long. Max query length is 400 characters."}})
            mode = state.mode
            if mode == "slow":
                time.sleep(1.5)
                return self._send(200, RESULTS)
            if mode == "malformed":
                return self._send_raw(200, b"<html>not json</html>")
            if mode == "no_results":
                return self._send(200, {"query": body["query"]})
            if mode == "results_not_list":
                return self._send(200, {"results": "nope"})
            if mode == "all_bad":
                return self._send(200, {"results": [{"title": "x"}]})
            if mode == "echo_key":
                return self._send(401, {"detail": {"error": f"Unauthorized: key {KEY} is invalid"}})
            statuses = {"401": 401, "403": 403, "429": 429, "400": 400, "500": 500, "502": 502, "404": 404}
            if mode in statuses:
                return self._send(statuses[mode], {"detail": {"error": f"fake {mode}"}})
            results = dict(RESULTS, results=RESULTS["results"][: body.get("max_results", 5) + 2])
            return self._send(200, results)

        def _send(self, status: int, payload: object) -> None:
            self._send_raw(status, json.dumps(payload).encode())

        def _send_raw(self, status: int, raw: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    return Handler


@pytest.fixture(scope="module")
def fake() -> Iterator[tuple[FakeTavily, str]]:
    state = FakeTavily()
    server = QuietHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def tavily(fake: tuple[FakeTavily, str], monkeypatch: pytest.MonkeyPatch) -> tuple[FakeTavily, TavilySearch]:
    state, url = fake
    state.mode = "ok"
    state.requests.clear()
    state.rejected.clear()
    monkeypatch.setenv("TAVILY_API_KEY", KEY)
    options = TavilyOptions(api_base_url=url, search_depth="basic", include_domains=["cdc.gov", "who.int"])
    return state, TavilySearch(options, timeout=5)


def test_success_maps_results_to_dynamic_passages(tavily: tuple[FakeTavily, TavilySearch]) -> None:
    state, search = tavily
    assert isinstance(search, WebSearch)
    passages = search.search("measles rash", 8)
    assert [p.provenance.url for p in passages] == [
        "https://www.cdc.gov/measles/index.html",
        "https://www.who.int/news-room/fact-sheets/detail/measles",
        "https://en.wikipedia.org/wiki/Measles",
    ]
    first = passages[0]
    assert first.pathway == "dynamic"
    assert first.id.startswith("tavily:")
    assert first.title == "Measles | CDC"
    assert first.provenance.kind == "web"
    assert first.provenance.domain == "www.cdc.gov"
    assert str(first.provenance.published) == "2024-02-01"
    assert first.provenance.backend == "tavily"
    assert first.provenance.query == "measles rash"
    assert [p.provenance.rank for p in passages] == [1, 2, 3]
    assert first.provenance.score == pytest.approx(0.91)
    assert passages[1].provenance.published is None
    (request,) = state.requests
    assert request["path"] == "/search"
    assert request["auth"] == f"Bearer {KEY}"
    assert request["body"]["max_results"] == 8
    assert request["body"]["search_depth"] == "basic"
    assert request["body"]["include_domains"] == ["cdc.gov", "who.int"]


def test_max_results_is_honoured(tavily: tuple[FakeTavily, TavilySearch]) -> None:
    state, search = tavily
    assert len(search.search("measles", 2)) == 2
    assert state.requests[-1]["body"]["max_results"] == 2
    search.search("measles", 50)
    assert state.requests[-1]["body"]["max_results"] == 20  # Tavily's ceiling
    assert search.search("measles", 0) == []


def test_no_key_fails_before_any_request(
    tavily: tuple[FakeTavily, TavilySearch], monkeypatch: pytest.MonkeyPatch
) -> None:
    state, search = tavily
    monkeypatch.delenv("TAVILY_API_KEY")
    with pytest.raises(EvidenceError, match="TAVILY_API_KEY") as info:
        search.search("measles", 8)
    assert info.value.kind == "no_key"
    assert state.requests == []  # never ran keyless
    monkeypatch.setenv("TAVILY_API_KEY", "   ")
    with pytest.raises(EvidenceError) as info:
        search.search("measles", 8)
    assert info.value.kind == "no_key"


@pytest.mark.parametrize(
    ("mode", "kind", "text"),
    [
        ("401", "auth", "rejected the API key"),
        ("403", "forbidden", "refused"),
        ("429", "rate_limit", "rate or usage limit"),
        ("400", "bad_request", "invalid"),
        ("500", "server", "HTTP 500"),
        ("502", "server", "HTTP 502"),
        ("404", "other", "HTTP 404"),
        ("malformed", "bad_response", "not valid JSON"),
        ("no_results", "bad_response", None),
        ("results_not_list", "bad_response", "no 'results' list"),
        ("all_bad", "bad_response", "none had a URL"),
    ],
)
def test_failures_map_to_kinds(tavily: tuple[FakeTavily, TavilySearch], mode: str, kind: str, text: str | None) -> None:
    state, search = tavily
    state.mode = mode
    if mode == "no_results":
        # the client adds `results: []` when the key is missing: an empty answer, not an error
        assert search.search("measles", 3) == []
        return
    with pytest.raises(EvidenceError, match=text) as info:
        search.search("measles", 3)
    assert info.value.kind == kind
    assert info.value.backend == "tavily"
    assert KEY not in str(info.value)


def test_key_is_scrubbed_from_server_messages(tavily: tuple[FakeTavily, TavilySearch]) -> None:
    state, search = tavily
    state.mode = "echo_key"
    with pytest.raises(EvidenceError) as info:
        search.search("measles", 3)
    assert KEY not in str(info.value)
    assert "***" in str(info.value)


def test_timeout(fake: tuple[FakeTavily, str], monkeypatch: pytest.MonkeyPatch) -> None:
    state, url = fake
    state.mode = "slow"
    monkeypatch.setenv("TAVILY_API_KEY", KEY)
    search = TavilySearch(TavilyOptions(api_base_url=url), timeout=0.2)
    with pytest.raises(EvidenceError, match=r"within 0\.2 s") as info:
        search.search("measles", 3)
    assert info.value.kind == "timeout"
    state.mode = "ok"


def test_connection_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("TAVILY_API_KEY", KEY)
    search = TavilySearch(TavilyOptions(api_base_url=f"http://127.0.0.1:{port}"), timeout=2)
    with pytest.raises(EvidenceError, match="could not connect") as info:
        search.search("measles", 3)
    assert info.value.kind == "connection"


def test_empty_query_is_rejected(tavily: tuple[FakeTavily, TavilySearch]) -> None:
    state, search = tavily
    with pytest.raises(EvidenceError) as info:
        search.search("  ", 3)
    assert info.value.kind == "bad_request"
    assert state.requests == []


def test_options_forbid_unknown_keys_and_key_not_in_cache_params() -> None:
    with pytest.raises(ValueError, match="extra"):
        TavilyOptions.model_validate({"api_key": KEY})
    params = TavilySearch(TavilyOptions(api_base_url="http://x")).cache_params()
    assert "api_base_url" not in params
    assert params["search_depth"] == "advanced"


def test_the_fake_enforces_tavilys_query_limit(tavily: tuple[FakeTavily, TavilySearch]) -> None:
    _, search = tavily
    search.max_query_chars = None  # pretend the client knew no limit: the server's 400 must come back
    with pytest.raises(EvidenceError) as raised:
        search.search("q" * (TAVILY_MAX_QUERY + 1), 3)
    assert raised.value.kind == "bad_request"
    assert "Max query length is 400 characters" in str(raised.value)


def test_an_over_limit_query_is_refused_before_sending(tavily: tuple[FakeTavily, TavilySearch]) -> None:
    state, search = tavily
    sent = len(state.requests)
    with pytest.raises(EvidenceError, match="401 characters is longer than Tavily accepts") as raised:
        search.search("q" * 401, 3)
    assert raised.value.kind == "bad_request"
    assert len(state.requests) == sent
    assert search.search("q" * 400, 3)  # exactly at the limit is accepted


def test_the_limit_comes_from_config() -> None:
    from clearmed.retrieval.config import SearchConfig
    from clearmed.retrieval.factory import build_web_search

    assert build_web_search(SearchConfig(backend="tavily"), check_key=False).max_query_chars == 400
    assert build_web_search(SearchConfig(backend="tavily", max_query_chars=300), check_key=False).max_query_chars == 300


# ------------------------------------------------------------------ the dynamic pathway against the limit


def echo_the_vignette(call: ScriptedCall) -> dict[str, str]:
    """A query writer that ignores its brief: it writes back the whole question, behind an option letter."""
    asked = re.search(r"\[\[ ## question ## \]\]\n(.*?)\n\n\[\[ ## ", call.user, re.DOTALL)
    return {"query": "Option A: " + " ".join((asked.group(1) if asked else "").split())}


def run_online(questions: list, search: TavilySearch, web_query: str) -> list:
    """Each question through the dynamic pathway alone (the `online` program), with a scripted model."""
    from clearmed.programs.baselines import SinglePathway
    from clearmed.programs.settings import ProgramSettings
    from clearmed.retrieval.quality import QualityPriors
    from clearmed.testing import scripted_lm

    lm, _ = scripted_lm(
        {
            "dynamic_answer": {"rationale": "the pages say so", "cited_ids": ["W1"], "answer": "A"},
            "web_query": echo_the_vignette,
        }
    )
    settings = ProgramSettings(
        json_fallback=False, parallel_pathways="off", source_quality="priors", dynamic_k=3, web_query=web_query
    )
    # Pages labelled by the domain priors: no quality call, so the model answers and (lm) writes the query only.
    program = SinglePathway(
        "online", web_search=search, settings=settings, quality_priors=QualityPriors(), role_lms={"main": lm}
    )
    return [program(question=question).decision for question in questions]


@pytest.mark.parametrize("web_query", ["question", "lm"])
def test_every_shared_medqa_question_gets_a_query_tavily_accepts(
    tavily: tuple[FakeTavily, TavilySearch], shared_data: Path, web_query: str
) -> None:
    from clearmed.benchmarks import load_benchmark
    from clearmed.programs._web_query import clean_written_query

    state, search = tavily
    questions = load_benchmark("medqa", source=str(shared_data / "benchmarks" / "medqa" / "dev.jsonl")).questions
    long = [q for q in questions if len(q.text) > TAVILY_MAX_QUERY]
    assert len(long) > len(questions) / 2  # most vignettes are over the limit: the test means something
    decisions = run_online(questions, search, web_query)
    assert state.rejected == []  # 0 queries answered "Query is too long"
    assert len(state.requests) == len(questions)  # and none refused before sending: every question searched
    candidates = [d.bundle.candidate("dynamic") for d in decisions]
    assert [c.error for c in candidates if c.error is not None] == []
    assert all(c.query and len(c.query) <= TAVILY_MAX_QUERY for c in candidates)
    assert not [r for r in state.requests if re.search(r"\bOption [A-E]\b|\([A-E]\)", r["body"]["query"])]
    if web_query == "question":
        replaced = [c for c in candidates if c.query_source == "salient"]
        assert len(replaced) == len(long)
        assert all(c.query_replaced_chars and c.query_replaced_chars > TAVILY_MAX_QUERY for c in replaced)
        assert all(c.query_source == "question" for c in candidates if c not in replaced)
        return
    # The writer echoed each vignette: cut at a word boundary where it was over the limit, and recorded.
    cut = 0
    for question, candidate in zip(questions, candidates, strict=True):
        written = clean_written_query("Option A: " + " ".join(question.text.split()), question)  # what was written
        assert candidate.query_source == "lm"
        assert written.startswith(candidate.query)
        if len(written) > TAVILY_MAX_QUERY:
            cut += 1
            assert candidate.query_cut_chars == len(written)
            assert written[len(candidate.query)] == " "  # never mid-word
        else:
            assert (candidate.query, candidate.query_cut_chars) == (written, None)
    assert cut >= len(long) - 5  # (stripping letters may bring a vignette just over the limit under it)


def test_qpis_and_the_follow_up_never_send_an_over_limit_query(
    tavily: tuple[FakeTavily, TavilySearch], shared_data: Path
) -> None:
    """The other two searches a vignette reaches: planned sub-queries and the guard's follow-up, both written by a
    model that echoes the vignette, on the longest shared MedQA questions."""
    from clearmed.benchmarks import load_benchmark
    from clearmed.programs.settings import ProgramSettings
    from clearmed.testing import GUARD_ALL_TRUE, build_toy_program, label_all, pathway_replies, verifier_reply

    state, search = tavily
    questions = load_benchmark("medqa", source=str(shared_data / "benchmarks" / "medqa" / "dev.jsonl")).questions
    longest = sorted(questions, key=lambda q: -len(q.text))[:20]
    script = {
        **pathway_replies("B", "B", "A"),
        "qpis_plan": lambda call: {"subqueries": [echo_the_vignette(call)["query"], "(C) short one"]},
        "qpis_check": lambda call: {"sufficient": False, "missing": "more", "next_query": "A. " + "sign " * 150},
        "source_quality": label_all("high"),
        "verifier": verifier_reply("accept_dynamic"),
        "followup_query": lambda call: {"query": "Option B: " + "finding " * 80},
        "guard": GUARD_ALL_TRUE,
    }
    settings = ProgramSettings(json_fallback=False, parallel_pathways="off", dynamic_search_mode="qpis")
    program, engine, _ = build_toy_program(script, settings=settings, web=search)
    for question in longest:
        decision = program(question=question).decision
        plan = decision.bundle.candidate("dynamic").search_plan
        assert plan is not None
        assert plan.rounds[0].query_cut_chars  # the echoed vignette was cut, and the cut recorded
        assert decision.bundle.followups[0].query_cut_chars is not None
    assert engine.stages().count("followup_query") == len(longest)
    assert state.rejected == []
    assert all(len(r["body"]["query"]) <= TAVILY_MAX_QUERY for r in state.requests)
    assert not [r for r in state.requests if re.search(r"\bOption [A-E]\b|\([A-E]\)|^[A-E]\.", r["body"]["query"])]
