"""TavilySearch against a stdlib HTTP server on 127.0.0.1 that answers as Tavily documents (docs.tavily.com, POST
/search: 400 for a query over 400 characters, 401 for a bad key, 429 with Retry-After, 432 plan limit, 433
pay-as-you-go limit, credits by search depth): success, retries, fatal refusals and every failure path, offline."""

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

from clearmed.core.endpoints import mark_reached
from clearmed.core.errors import FatalServiceError
from clearmed.core.retries import count_retries
from clearmed.retrieval import tavily as tavily_module
from clearmed.retrieval.base import EvidenceError, WebSearch
from clearmed.retrieval.tavily import SEARCH_CREDITS, TavilyOptions, TavilySearch, search_credits
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
# Tavily's documented error bodies for POST /search.
UNAUTHORIZED = {"detail": {"error": "Unauthorized: missing or invalid API key."}}
RATE_LIMITED = {
    "detail": {"error": "Your request has been blocked due to excessive requests. Please reduce rate of requests."}
}
PLAN_LIMIT = {
    "detail": {
        "error": "This request exceeds your plan's set usage limit. Please upgrade your plan or contact support@tavily.com"
    }
}
PAYGO_LIMIT = {
    "detail": {
        "error": "This request exceeds the pay-as-you-go limit. You can increase your limit on the Tavily dashboard."
    }
}


class FakeTavily:
    """Behaviour switch + request log for the handler, and the account state Tavily enforces."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.mode = "ok"
        self.script: list[str] = []  # modes for the next requests, one each, before `mode` applies again
        self.requests: list[dict[str, Any]] = []
        self.rejected: list[str] = []  # queries answered with Tavily's "Query is too long" 400
        self.valid_key = KEY
        self.throttled = 0  # the next this many requests are rate-limited (429 with Retry-After)
        self.retry_after = "1"
        self.credits: int | None = None  # credits left on the plan; None: unlimited
        self.pay_as_you_go = False  # past the plan, pay-as-you-go until its own limit (433)
        self.spent = 0


def _handler(state: FakeTavily) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # keep pytest output clean
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
            mode = state.script.pop(0) if state.script else state.mode
            if mode == "echo_key":
                return self._send(401, {"detail": {"error": f"Unauthorized: key {KEY} is invalid"}})
            if self.headers.get("Authorization") != f"Bearer {state.valid_key}":
                return self._send(401, UNAUTHORIZED)
            if state.throttled > 0:
                state.throttled -= 1
                return self._send(429, RATE_LIMITED, {"Retry-After": state.retry_after})
            if len(body.get("query", "")) > TAVILY_MAX_QUERY:  # Tavily's documented limit and error body
                state.rejected.append(body["query"])
                return self._send(400, {"detail": {"error": "Query is too long. Max query length is 400 characters."}})
            cost = SEARCH_CREDITS[body.get("search_depth", "basic")]
            if state.credits is not None and state.credits < cost:
                return self._send(433, PAYGO_LIMIT) if state.pay_as_you_go else self._send(432, PLAN_LIMIT)
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
            statuses = {"403": 403, "400": 400, "500": 500, "502": 502, "503": 503, "404": 404}
            if mode in statuses:
                return self._send(statuses[mode], {"detail": {"error": f"fake {mode}"}})
            if mode == "429":
                return self._send(429, RATE_LIMITED)  # no Retry-After: the client backs off on its own
            if state.credits is not None:
                state.credits -= cost
            state.spent += cost
            results = dict(RESULTS, results=RESULTS["results"][: body.get("max_results", 5) + 2])
            if mode == "empty_results":  # a search that found nothing: billed, and a 200 with an empty list
                results = dict(RESULTS, results=[])
            return self._send(200, results)

        def _send(self, status: int, payload: object, headers: dict[str, str] | None = None) -> None:
            self._send_raw(status, json.dumps(payload).encode(), headers)

        def _send_raw(self, status: int, raw: bytes, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
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


@pytest.fixture(autouse=True)
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The backoff waits a search asked for, recorded instead of slept."""
    asked: list[float] = []
    monkeypatch.setattr(tavily_module, "_sleep", asked.append)
    return asked


@pytest.fixture
def tavily(fake: tuple[FakeTavily, str], monkeypatch: pytest.MonkeyPatch) -> tuple[FakeTavily, TavilySearch]:
    state, url = fake
    state.reset()
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
    ("mode", "kind", "text", "attempts"),
    [
        ("429", "rate_limit", "rate limit exceeded \\(HTTP 429\\).* \\(after 3 retries\\)", 4),
        ("400", "bad_request", "invalid", 1),
        ("500", "server", "HTTP 500.*after 3 retries", 4),
        ("502", "server", "HTTP 502", 4),
        ("404", "other", "HTTP 404", 1),
        ("malformed", "malformed", "not valid JSON.*after 3 retries", 4),
        ("no_results", "bad_response", None, 1),
        ("results_not_list", "bad_response", "no 'results' list", 1),
        ("all_bad", "bad_response", "none had a URL", 1),
    ],
)
def test_failures_map_to_kinds(
    tavily: tuple[FakeTavily, TavilySearch], mode: str, kind: str, text: str | None, attempts: int
) -> None:
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
    assert len(state.requests) == attempts  # transient failures (429, 5xx) retried, the rest sent once


def test_key_is_scrubbed_from_server_messages(tavily: tuple[FakeTavily, TavilySearch]) -> None:
    state, search = tavily
    state.mode = "echo_key"
    with pytest.raises(FatalServiceError) as info:
        search.search("measles", 3)
    assert KEY not in str(info.value)
    assert "***" in str(info.value)


# ------------------------------------------------------------------ retries and fatal refusals


def test_a_rate_limit_is_retried_after_the_wait_tavily_asks_and_counted(
    tavily: tuple[FakeTavily, TavilySearch], waits: list[float]
) -> None:
    state, search = tavily
    state.throttled = 2  # tavily-python raises UsageLimitExceededError for these 429s: transient all the same
    with count_retries() as retries:
        passages = search.search("measles rash", 3)
    assert len(passages) == 3
    assert len(state.requests) == 3
    assert retries.by_service == {"tavily": 2}
    assert len(waits) == 2
    assert all(1.0 <= wait <= 2.0 for wait in waits)  # Retry-After: 1, plus at most a second of jitter
    assert retries.waited_s == pytest.approx(sum(waits))


def test_a_rate_limit_without_retry_after_backs_off_exponentially(
    tavily: tuple[FakeTavily, TavilySearch], waits: list[float]
) -> None:
    state, search = tavily
    state.script = ["429", "429", "429"]
    assert search.search("measles", 3)
    assert len(waits) == 3
    assert [0.5 <= waits[0] <= 1, 1 <= waits[1] <= 2, 2 <= waits[2] <= 4] == [True, True, True]


def test_server_errors_and_timeouts_are_retried(fake: tuple[FakeTavily, str], monkeypatch: pytest.MonkeyPatch) -> None:
    state, url = fake
    state.reset()
    monkeypatch.setenv("TAVILY_API_KEY", KEY)
    search = TavilySearch(TavilyOptions(api_base_url=url), timeout=0.5)
    state.script = ["503", "slow", "502"]  # an outage, a read timeout, a bad gateway; then an answer
    with count_retries() as retries:
        assert search.search("measles", 3)
    assert retries.total == 3
    assert len(state.requests) == 4


def test_a_bad_key_stops_with_one_line_and_no_retry(
    tavily: tuple[FakeTavily, TavilySearch], monkeypatch: pytest.MonkeyPatch
) -> None:
    state, search = tavily
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-revoked-0123456789abcdef")
    with pytest.raises(FatalServiceError) as info:
        search.search("measles", 3)
    assert str(info.value) == (
        "Tavily: authentication failed (HTTP 401): Unauthorized: missing or invalid API key; "
        "check the key in TAVILY_API_KEY"
    )
    assert (info.value.service, info.value.cause, info.value.status) == ("Tavily", "auth", 401)
    assert len(state.requests) == 1  # never retried
    assert "revoked" not in str(info.value)


@pytest.mark.parametrize(
    ("pay_as_you_go", "status", "said"),
    [(False, 432, "exceeds your plan's set usage limit"), (True, 433, "exceeds the pay-as-you-go limit")],
)
def test_an_exhausted_plan_stops_the_search_instead_of_returning_nothing(
    tavily: tuple[FakeTavily, TavilySearch], pay_as_you_go: bool, status: int, said: str
) -> None:
    state, search = tavily
    state.credits, state.pay_as_you_go = 2, pay_as_you_go
    assert search.search("measles", 3)  # basic search: 1 credit
    assert search.search("measles", 3)
    with pytest.raises(FatalServiceError) as info:
        search.search("measles", 3)
    message = str(info.value)
    assert message.startswith(f"Tavily: billing or quota exhausted (HTTP {status}): This request {said}")
    assert message.endswith("raise the plan or the pay-as-you-go limit, or wait for the credits to renew")
    assert "\n" not in message
    assert info.value.cause == "billing"
    assert len(state.requests) == 3  # the refusal is not retried


def test_a_forbidden_key_is_fatal(tavily: tuple[FakeTavily, TavilySearch]) -> None:
    state, search = tavily
    state.mode = "403"
    with pytest.raises(FatalServiceError, match=r"^Tavily: authentication failed \(HTTP 403\)"):
        search.search("measles", 3)


@pytest.mark.parametrize(("depth", "credits"), [("basic", 1), ("fast", 1), ("ultra-fast", 1), ("advanced", 2)])
def test_credits_per_search_depth(
    fake: tuple[FakeTavily, str], monkeypatch: pytest.MonkeyPatch, depth: str, credits: int
) -> None:
    state, url = fake
    state.reset()
    monkeypatch.setenv("TAVILY_API_KEY", KEY)
    search = TavilySearch(TavilyOptions.model_validate({"api_base_url": url, "search_depth": depth}))
    assert search_credits(depth) == search.credits_per_search == credits
    search.search("measles", 3)
    search.search("rash", 3)
    assert state.spent == 2 * credits  # what the fake account was charged, as Tavily documents it


def test_timeout(fake: tuple[FakeTavily, str], monkeypatch: pytest.MonkeyPatch) -> None:
    state, url = fake
    state.reset()
    state.mode = "slow"
    monkeypatch.setenv("TAVILY_API_KEY", KEY)
    search = TavilySearch(TavilyOptions(api_base_url=url), timeout=0.2, max_retries=1)
    with pytest.raises(EvidenceError, match=r"within 0\.2 s \(after 1 retry\)") as info:
        search.search("measles", 3)
    assert info.value.kind == "timeout"
    assert len(state.requests) == 2
    state.mode = "ok"


def test_connection_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("TAVILY_API_KEY", KEY)
    search = TavilySearch(TavilyOptions(api_base_url=f"http://127.0.0.1:{port}"), timeout=2)
    # Before Tavily ever answered: a wrong address (issue 50 item 2), the run stops, nothing retried.
    with count_retries() as retries, pytest.raises(FatalServiceError, match=f"127.0.0.1:{port} refused the connection"):
        search.search("measles", 3)
    assert retries.total == 0
    mark_reached(f"http://127.0.0.1:{port}")  # it answered once: now a dropped connection, which may be a blip
    with count_retries() as retries, pytest.raises(EvidenceError, match="could not connect") as info:
        search.search("measles", 3)
    assert info.value.kind == "connection"
    assert retries.total == 3  # retried before it is recorded


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
    from clearmed.retrieval.priors import QualityPriors
    from clearmed.signatures.records.settings import ProgramSettings
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
    from clearmed.programs.pathways.web_query import clean_written_query

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
    from clearmed.signatures.records.settings import ProgramSettings
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
