"""Failing dependencies: models that time out, refuse connections, rate-limit or talk nonsense; searches that
fail in every way; missing or corrupt indexes; a locked or corrupt search cache.

The question must still get a Decision with the failure in its trail (and the paper's conservative fallback
where one applies), or the command line must stop with one clear line.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from dspy import lm15

from clearmed.api import assemble
from clearmed.backbones.config import OpenAICompatibleBackbone
from clearmed.backbones.factory import build_lm
from clearmed.cli.main import main
from clearmed.core.endpoints import mark_reached
from clearmed.core.errors import FatalServiceError
from clearmed.programs.clear import CLEAR
from clearmed.retrieval.base import EvidenceError
from clearmed.retrieval.bm25_sparse import BM25sRetriever
from clearmed.retrieval.cache import CachedWebSearch
from clearmed.retrieval.config import CorpusConfig
from clearmed.retrieval.factory import build_retriever
from clearmed.retrieval.memory import InMemoryRetriever, InMemoryWebSearch
from clearmed.retrieval.tavily import TavilyOptions, TavilySearch
from clearmed.signatures.records import Decision, StepError
from clearmed.signatures.records.settings import ProgramSettings
from clearmed.testing import (
    GUARD_ALL_TRUE,
    LOCAL,
    QUESTION,
    WEB,
    build_toy_program,
    label_all,
    pathway_replies,
    scripted_lm,
    verifier_reply,
)

pytestmark = pytest.mark.reliability

CATEGORY = "failing dependencies"
SETTINGS = ProgramSettings(json_fallback=False, parallel_pathways="off")

HAPPY: dict[str, Any] = {
    **pathway_replies("A", "A", "A"),
    "source_quality": label_all("high"),
    "verifier": verifier_reply("consensus"),
    "followup_query": {"query": "hypothyroidism weight gain"},
}


def trail_errors(decision: Decision) -> list[StepError]:
    """Every failure recorded anywhere in a decision's trail."""
    errors = [c.error for c in decision.bundle.candidates if c.error is not None]
    errors += [s.error for s in decision.steps if s.error is not None]
    errors += [v.error for v in decision.verifier_outputs if v.error is not None]
    errors += [r.error for r in decision.bundle.followups if r.error is not None]
    return errors


def decide(program: CLEAR) -> Decision:
    decision = program(question=QUESTION).decision
    Decision.model_validate_json(decision.model_dump_json())  # the record survives a round trip to disk
    return decision


def timeout() -> BaseException:
    return lm15.TimeoutError("the model did not answer within 120 s")


# --------------------------------------------------------------------------------------------- LM failures (scripted)


def test_lm_timeout_on_every_stage_gives_a_failed_decision(reliability) -> None:
    with reliability.case(CATEGORY, "LM timeout on every call"):
        stages = ("parametric", "local_answer", "dynamic_answer", "source_quality", "verifier", "format_gate")
        program, _, _ = build_toy_program({stage: timeout() for stage in stages})
        decision = decide(program)
        assert decision.status == "failed"
        assert decision.answer is None
        assert decision.error is not None
        assert "timeout" in decision.error.lower()
        kinds = {c.error.kind for c in decision.bundle.candidates if c.error is not None}
        assert kinds == {"timeout"}


def test_lm_timeout_on_the_verifier_falls_back_to_the_heuristic(reliability) -> None:
    with reliability.case(CATEGORY, "LM timeout on the verifier"):
        program, _, _ = build_toy_program({**HAPPY, "verifier": timeout()})
        decision = decide(program)
        assert decision.status == "answered"
        assert decision.letters == ("A",)
        assert decision.deciding_rule.startswith("heuristic_")
        assert any(e.kind == "timeout" and e.stage == "verifier" for e in trail_errors(decision))


@pytest.mark.parametrize("failure", ["timeout", "unparseable"])
def test_guard_failure_keeps_the_default(reliability, failure: str) -> None:
    with reliability.case(CATEGORY, f"guard LM call {failure}"):
        reply = timeout() if failure == "timeout" else "I would rather not say."
        program, _, _ = build_toy_program(
            {**HAPPY, **pathway_replies("B", "B", "A"), "verifier": verifier_reply("accept_dynamic"), "guard": reply}
        )
        decision = decide(program)
        assert decision.deciding_rule == "guard_assessment_failed"
        assert decision.letters == ("B",)  # the parametric-local consensus is kept
        assert any(e.stage == "guard" for e in trail_errors(decision))


@pytest.mark.parametrize("failure", ["timeout", "unparseable"])
def test_audit_failure_keeps_the_consensus(reliability, failure: str) -> None:
    with reliability.case(CATEGORY, f"audit LM call {failure}"):
        reply = timeout() if failure == "timeout" else "[[ ## rationale ## ]]\nhmm"
        program, _, _ = build_toy_program(
            {**HAPPY, **pathway_replies("B", "B", "A"), "verifier": verifier_reply("consensus", "B"), "audit": reply}
        )
        decision = decide(program)
        assert decision.deciding_rule == "audit_assessment_failed"
        assert decision.letters == ("B",)
        assert any(e.stage == "audit" for e in trail_errors(decision))


def test_rate_limit_with_retry_after_is_retried_within_budget(reliability) -> None:
    with reliability.case(CATEGORY, "LM rate limit with retry-after, then success"):
        import dspy

        from clearmed.testing import ScriptedEngine, _AsyncScriptedEngine

        failures = {"left": 2}

        def limited(reply: dict[str, Any]):  # the first two calls of the run are rate limited
            def answer(call):
                if failures["left"] > 0:
                    failures["left"] -= 1
                    return lm15.RateLimitError("too many requests", retry_after=0.05, status=429)
                return reply

            return answer

        script = {**HAPPY, "parametric": limited(HAPPY["parametric"])}
        engine = ScriptedEngine(script=script)
        lm = dspy.LM(
            "local/scripted", engine=engine, async_engine=_AsyncScriptedEngine(engine), cache=False, num_retries=2
        )
        program = CLEAR(InMemoryRetriever(LOCAL), InMemoryWebSearch(WEB), settings=SETTINGS, role_lms={"main": lm})
        started = time.perf_counter()
        decision = decide(program)
        assert time.perf_counter() - started >= 0.1  # both retry-after hints were honoured
        assert decision.status == "answered"
        assert decision.letters == ("A",)
        assert engine.stages().count("parametric") == 3
        assert trail_errors(decision) == []


def test_rate_limit_beyond_the_retry_budget_is_recorded(reliability) -> None:
    with reliability.case(CATEGORY, "LM rate limit beyond the retry budget"):
        limited = lm15.RateLimitError("too many requests", retry_after=0.01, status=429)
        program, _, _ = build_toy_program({**HAPPY, "dynamic_answer": limited})
        decision = decide(program)
        assert decision.status == "answered"
        assert decision.letters == ("A",)
        dynamic = decision.bundle.candidate("dynamic")
        assert dynamic.error is not None
        assert dynamic.error.kind == "lm_error"
        assert "too many requests" in dynamic.error.message


@pytest.mark.parametrize(
    ("name", "reply"),
    [
        ("prose with no fields", "I think the answer is probably something thyroid related."),
        ("empty output", ""),
        ("fields with garbage values", {"rationale": "?", "answer": "E) none of these", "cited_ids": ["L1"]}),
    ],
)
def test_unparseable_outputs_everywhere_are_recorded_never_guessed(reliability, name: str, reply: object) -> None:
    with reliability.case(CATEGORY, f"unparseable LM output on every call: {name}"):
        stages = ("parametric", "local_answer", "dynamic_answer", "source_quality", "verifier", "format_gate")
        program, _, _ = build_toy_program({stage: reply for stage in stages})
        decision = decide(program)
        assert decision.status in ("failed", "unparsed")
        assert decision.answer is None  # never mapped to an option by guesswork
        assert trail_errors(decision)
        assert {e.kind for e in trail_errors(decision)} <= {"parse_error", "invalid_answer", "lm_error"}


def test_unparseable_verifier_route_falls_back(reliability) -> None:
    with reliability.case(CATEGORY, "verifier names a route that does not exist"):
        program, _, _ = build_toy_program({**HAPPY, "verifier": verifier_reply("overrule_everything")})
        decision = decide(program)
        assert decision.status == "answered"
        assert decision.letters == ("A",)
        assert decision.deciding_rule.startswith("heuristic_")
        assert any(e.stage == "verifier" for e in trail_errors(decision))


def test_quality_assessment_failure_counts_as_low(reliability) -> None:
    with reliability.case(CATEGORY, "source-quality LM call fails: conservative labels"):
        program, _, _ = build_toy_program(
            {
                **HAPPY,
                **pathway_replies("B", "B", "A"),
                "source_quality": timeout(),
                "verifier": verifier_reply("accept_dynamic"),
                "guard": GUARD_ALL_TRUE,
            }
        )
        decision = decide(program)
        assert decision.bundle.source_quality.n_high == 0
        assert decision.deciding_rule == "guard_rejected_few_high_quality"
        assert decision.letters == ("B",)


# --------------------------------------------------------------------------------------------- LM failures (HTTP)


def http_lm(url: str, **fields: Any):
    config = OpenAICompatibleBackbone(kind="openai_compatible", model="m", api_base=f"{url}/v1", cache=False, **fields)
    return build_lm(config)


def http_program(url: str, **fields: Any) -> CLEAR:
    return CLEAR(
        InMemoryRetriever(LOCAL),
        InMemoryWebSearch(WEB),
        settings=SETTINGS,
        role_lms={"main": http_lm(url, **fields)},
    )


def test_connection_refused_before_any_reply_stops_fast_with_one_line(reliability, closed_port: int) -> None:
    """Issue 50 item 2: a refused connection before the endpoint ever answered is a wrong address or a server not
    started, for every question alike: the run stops, instead of a failed decision per question."""
    with reliability.case(CATEGORY, "LM server refuses connections before any reply: the run stops, one line"):
        started = time.perf_counter()
        with pytest.raises(FatalServiceError) as stopped:
            decide(http_program(f"http://127.0.0.1:{closed_port}", num_retries=3))
        assert time.perf_counter() - started < 10
        assert f"http://127.0.0.1:{closed_port} refused the connection" in str(stopped.value)
        assert "\n" not in str(stopped.value)


def test_connection_refused_after_a_reply_gives_a_failed_decision_fast(reliability, closed_port: int) -> None:
    with reliability.case(CATEGORY, "LM server refuses connections after it answered (restarting)"):
        url = f"http://127.0.0.1:{closed_port}"
        mark_reached(url)
        started = time.perf_counter()
        decision = decide(http_program(url, num_retries=0))
        assert time.perf_counter() - started < 10
        assert decision.status == "failed"
        assert decision.error is not None
        assert "refused" in decision.error.lower()


def test_http_timeout_is_recorded_as_timeout(reliability, fake_server) -> None:
    with reliability.case(CATEGORY, "LM server too slow (HTTP timeout)"):
        server = fake_server()
        server.serve_chat(HAPPY)
        server.delay = 1.0
        started = time.perf_counter()
        decision = decide(http_program(server.url, num_retries=0, timeout=0.2))
        assert time.perf_counter() - started < 10
        assert decision.status == "failed"
        kinds = {c.error.kind for c in decision.bundle.candidates if c.error is not None}
        assert kinds == {"timeout"}, trail_errors(decision)


def test_http_rate_limit_with_retry_after_then_success(reliability, fake_server) -> None:
    with reliability.case(CATEGORY, "LM server answers 429 with Retry-After, then succeeds"):
        server = fake_server()
        server.serve_chat(HAPPY)
        server.fail_next(2, 429, {"error": {"message": "rate limited"}}, {"Retry-After": "0.1"})
        decision = decide(http_program(server.url, num_retries=2))
        assert decision.status == "answered"
        assert decision.letters == ("A",)
        assert trail_errors(decision) == []


def test_http_server_errors_are_retried_then_recorded(reliability, fake_server) -> None:
    with reliability.case(CATEGORY, "LM server answers 500 on every call"):
        server = fake_server()
        server.serve(500, {"error": {"message": "internal error"}}, {"Retry-After": "0.01"})
        decision = decide(http_program(server.url, num_retries=1))
        lm_calls = sum(1 for u in decision.usage if u.role != "tool")
        assert len(server.requests) == 2 * lm_calls  # each call tried twice
        assert decision.status == "failed"
        assert decision.error is not None
        assert "internal error" in decision.error


def test_http_auth_error_stops_the_question(reliability, fake_server) -> None:
    with reliability.case(CATEGORY, "LM server rejects the key (401): the question stops, nothing recorded"):
        server = fake_server()
        server.serve(401, {"error": {"message": "invalid api key", "code": "invalid_api_key"}})
        with pytest.raises(FatalServiceError) as raised:
            decide(http_program(server.url, num_retries=3))
        assert len(server.requests) == 1  # an auth failure is not retried, and no later stage is called
        assert "authentication failed (HTTP 401): invalid api key" in str(raised.value)


def test_http_malformed_body_is_recorded(reliability, fake_server) -> None:
    with reliability.case(CATEGORY, "LM server answers 200 with a body that is not a completion"):
        server = fake_server()
        server.serve(200, {"unexpected": True})
        decision = decide(http_program(server.url, num_retries=0))
        assert decision.status == "failed"
        assert trail_errors(decision)


# --------------------------------------------------------------------------------------------- web search failures


def tavily_program(url: str, *, timeout_s: float = 5.0) -> tuple[CLEAR, Any]:
    search = TavilySearch(TavilyOptions(api_base_url=url, search_depth="basic"), timeout=timeout_s)
    program, engine, _ = build_toy_program(HAPPY, web=search)
    return program, engine


TAVILY_RESULTS = {
    "results": [
        {"title": "Hypothyroidism", "url": "https://www.niddk.nih.gov/t", "content": "weight gain, cold intolerance"}
    ]
}


@pytest.mark.parametrize(
    ("name", "status", "payload", "delay", "expect"),
    [
        ("429 rate limit", 429, {"detail": {"error": "Too many requests"}}, 0.0, "rate_limit"),
        ("500 server error", 500, {"detail": {"error": "boom"}}, 0.0, "server"),
        ("timeout", 200, TAVILY_RESULTS, 1.5, "timeout"),
        ("body is not JSON", 200, None, 0.0, "malformed"),  # retried, then degraded: the next body may be JSON
        ("empty results", 200, {"results": []}, 0.0, "found nothing"),
    ],
)
def test_web_search_failures_leave_a_decision_with_the_failure_in_its_trail(
    reliability, fake_server, monkeypatch: pytest.MonkeyPatch, name: str, status: int, payload, delay: float, expect
) -> None:
    with reliability.case(CATEGORY, f"web search: {name}"):
        monkeypatch.setenv("TAVILY_API_KEY", "tvly-test-key")
        monkeypatch.setattr("clearmed.retrieval.tavily._sleep", lambda seconds: None)  # the backoff, not waited
        server = fake_server()
        if payload is None:
            server.respond = lambda request: (200, {}, b"<html>gateway</html>")
        else:
            server.serve(status, payload)
        server.delay = delay
        program, _ = tavily_program(server.url, timeout_s=0.3)
        decision = decide(program)
        assert decision.status == "answered"
        assert decision.letters == ("A",)
        dynamic = decision.bundle.candidate("dynamic")
        assert dynamic.error is not None
        assert dynamic.error.kind == "search_error"
        assert expect in dynamic.error.message
        assert dynamic.error.transient is (expect != "found nothing")  # degraded and redone, or a clean answer


@pytest.mark.parametrize(
    ("status", "cause"),
    [(401, "authentication failed"), (432, "billing or quota exhausted"), (433, "billing or quota exhausted")],
)
def test_web_search_refusals_stop_the_question(
    reliability, fake_server, monkeypatch: pytest.MonkeyPatch, status: int, cause: str
) -> None:
    with reliability.case(CATEGORY, f"web search: {status} stops the question, nothing recorded"):
        monkeypatch.setenv("TAVILY_API_KEY", "tvly-test-key-0123456789")
        server = fake_server()
        server.serve(status, {"detail": {"error": "Unauthorized: tvly-test-key-0123456789"}})
        program, _ = tavily_program(server.url)
        with pytest.raises(FatalServiceError) as raised:
            decide(program)
        assert str(raised.value).startswith(f"Tavily: {cause} (HTTP {status})")
        assert "tvly-test-key" not in str(raised.value)
        assert len(server.requests) == 1  # never retried


def test_a_revoked_tavily_key_stops_a_run_which_resumes_once_it_is_mended(
    reliability, fake_server, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with reliability.case(CATEGORY, "web search: 401 in a run: the run stops, nothing recorded, it resumes"):
        from clearmed.config import parse_config
        from clearmed.evaluation import EvalSpec, read_records, run_evaluation

        monkeypatch.setenv("TAVILY_API_KEY", "tvly-test-key")
        server = fake_server()
        served = {"n": 0}

        def respond(request: dict[str, Any]):  # two searches answer, then the key is revoked
            served["n"] += 1
            if served["n"] <= 2:
                return 200, {}, json.dumps(TAVILY_RESULTS).encode()
            return 401, {}, json.dumps({"detail": {"error": "Unauthorized"}}).encode()

        server.respond = respond
        program, _ = tavily_program(server.url)
        questions = [QUESTION.model_copy(update={"id": f"q{i}"}) for i in range(5)]
        run_dir = tmp_path / "run"
        spec = EvalSpec(program="clear", benchmark="toy", source="memory", questions=questions, run_dir=run_dir)
        config = parse_config(
            {"backbones": {"main": {"kind": "openai_compatible", "model": "m", "api_base": "http://127.0.0.1:9/v1"}}},
            source="t",
        )
        with pytest.raises(FatalServiceError, match="Tavily: authentication failed"):
            run_evaluation(spec, config, program, show_progress=False)
        assert [r.question_id for r in read_records(run_dir)] == ["q0", "q1"]
        server.serve(200, TAVILY_RESULTS)  # the key is mended
        records = run_evaluation(spec, config, program, show_progress=False)
        assert [r.question_id for r in records] == [f"q{i}" for i in range(5)]
        assert not any(r.degraded for r in records)


def test_web_search_connection_refused(reliability, closed_port: int, monkeypatch: pytest.MonkeyPatch) -> None:
    with reliability.case(CATEGORY, "web search: connection refused before any reply: the run stops, one line"):
        monkeypatch.setenv("TAVILY_API_KEY", "tvly-test-key")
        monkeypatch.setattr("clearmed.retrieval.tavily._sleep", lambda seconds: None)
        program, _ = tavily_program(f"http://127.0.0.1:{closed_port}")
        with pytest.raises(FatalServiceError, match=r"^Tavily: unreachable: .*refused the connection"):
            decide(program)


def test_web_search_connection_refused_after_a_reply(
    reliability, closed_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    with reliability.case(CATEGORY, "web search: connection refused after Tavily answered (a blip)"):
        monkeypatch.setenv("TAVILY_API_KEY", "tvly-test-key")
        monkeypatch.setattr("clearmed.retrieval.tavily._sleep", lambda seconds: None)
        mark_reached(f"http://127.0.0.1:{closed_port}")
        program, _ = tavily_program(f"http://127.0.0.1:{closed_port}")
        decision = decide(program)
        assert decision.status == "answered"
        dynamic = decision.bundle.candidate("dynamic")
        assert dynamic.error is not None
        assert "connection" in dynamic.error.message


def test_web_search_without_a_key_is_one_clear_line(
    reliability, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    with reliability.case(CATEGORY, "cli ask: Tavily configured but no key in the environment"):
        monkeypatch.delenv("TAVILY_API_KEY", raising=False)
        lm, _ = scripted_lm(HAPPY)
        monkeypatch.setattr(assemble, "build_role_lms", lambda config, roles=("main", "assessor"): {"main": lm})
        config = tmp_path / "tavily.toml"
        config.write_text(
            '[backbones.main]\nkind = "openai_compatible"\nmodel = "m"\napi_base = "http://127.0.0.1:9/v1"\n'
            '[search]\nbackend = "tavily"\n',
            encoding="utf-8",
        )
        code = main(["ask", "Which hormone?", "-o", "A: x", "-o", "B: y", "-c", str(config)])
        err = capsys.readouterr().err
        assert code == 2
        assert "TAVILY_API_KEY" in err
        assert "Traceback" not in err


# --------------------------------------------------------------------------------------------- indexes


def built_index(tmp_path: Path) -> Path:
    directory = tmp_path / "index"
    BM25sRetriever.build(LOCAL, name="toy", directory=directory)
    return directory


def test_missing_index_is_a_clear_error(reliability, tmp_path: Path) -> None:
    with reliability.case(CATEGORY, "local index missing"):
        with pytest.raises(EvidenceError, match="no corpus source configured") as info:
            build_retriever(CorpusConfig(index_dir=tmp_path / "nowhere"))
        assert info.value.kind == "index"


@pytest.mark.parametrize("damage", ["manifest is not JSON", "score arrays are garbage", "passages file is gone"])
def test_corrupt_index_is_a_clear_error(reliability, tmp_path: Path, damage: str) -> None:
    with reliability.case(CATEGORY, f"local index corrupt: {damage}"):
        directory = built_index(tmp_path)
        if damage == "manifest is not JSON":
            (directory / "manifest.json").write_text("{not json", encoding="utf-8")
        elif damage == "score arrays are garbage":
            for path in (directory / "bm25s").iterdir():
                path.write_bytes(b"\x00garbage" * 10)
        else:
            (directory / "passages.jsonl").unlink()
        with pytest.raises(EvidenceError) as info:
            build_retriever(CorpusConfig(index_dir=directory))
        assert info.value.kind == "index"
        assert str(directory) in str(info.value)


def test_an_index_corrupted_under_a_running_program_stops_the_run(reliability, tmp_path: Path) -> None:
    with reliability.case(CATEGORY, "local index passages corrupted while in use: the run stops, one line"):
        directory = built_index(tmp_path)
        retriever = BM25sRetriever.load(directory)
        passages = directory / "passages.jsonl"
        passages.write_bytes(b"\x00" * passages.stat().st_size)
        program, _, _ = build_toy_program(HAPPY, retriever=retriever)
        # Every later question would meet the same index: not an answer without the local pathway.
        with pytest.raises(FatalServiceError, match=r"local index: unusable: .*corrupt") as info:
            program(question=QUESTION)
        assert "\n" not in str(info.value)


def test_cli_ask_with_a_corrupt_index_is_one_clear_line(
    reliability, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    with reliability.case(CATEGORY, "cli ask: corrupt local index"):
        directory = built_index(tmp_path)
        (directory / "offsets.npy").write_bytes(b"not numpy")
        lm, _ = scripted_lm(HAPPY)
        monkeypatch.setattr(assemble, "build_role_lms", lambda config, roles=("main", "assessor"): {"main": lm})
        config = tmp_path / "index.toml"
        config.write_text(
            '[backbones.main]\nkind = "openai_compatible"\nmodel = "m"\napi_base = "http://127.0.0.1:9/v1"\n'
            f'[corpus]\nindex_dir = "{directory}"\n[search]\nbackend = "none"\n',
            encoding="utf-8",
        )
        code = main(["ask", "Which hormone?", "-o", "A: x", "-o", "B: y", "-c", str(config)])
        err = capsys.readouterr().err
        assert code == 2, err
        assert err.startswith("clearmed: error:")
        assert "Traceback" not in err
        assert str(directory) in err


# --------------------------------------------------------------------------------------------- search cache


def test_corrupt_search_cache_is_a_clear_error(reliability, tmp_path: Path) -> None:
    with reliability.case(CATEGORY, "search cache file corrupt"):
        path = tmp_path / "cache.sqlite"
        path.write_bytes(b"this is not a database" * 100)
        with pytest.raises(EvidenceError, match="corrupt") as info:
            CachedWebSearch(InMemoryWebSearch(WEB), path)
        assert info.value.kind == "cache"


def test_a_search_cache_row_damaged_mid_run_is_dropped_and_searched_again(reliability, tmp_path: Path) -> None:
    with reliability.case(CATEGORY, "search cache row corrupted mid-run: dropped, refetched, warned"):
        from clearmed.retrieval.cache import DamagedCacheEntryWarning

        path = tmp_path / "cache.sqlite"
        cache = CachedWebSearch(InMemoryWebSearch(WEB), path)
        program, _, _ = build_toy_program(HAPPY, web=cache)
        first = decide(program)  # records the search
        with sqlite3.connect(path) as conn:
            conn.execute("UPDATE searches SET passages = '{broken'")
        with pytest.warns(DamagedCacheEntryWarning, match="dropped and searched again"):
            decision = decide(program)
        dynamic = decision.bundle.candidate("dynamic")
        assert dynamic.error is None
        assert decision.bundle.dynamic_passages == first.bundle.dynamic_passages
        assert decision.letters == ("A",)
        cache.close()


def test_a_search_cache_that_turns_corrupt_mid_run_stops_the_run(reliability, tmp_path: Path) -> None:
    with reliability.case(CATEGORY, "search cache file corrupted mid-run: the run stops, one line"):
        path = tmp_path / "cache.sqlite"
        cache = CachedWebSearch(InMemoryWebSearch(WEB), path)
        program, _, _ = build_toy_program(HAPPY, web=cache)
        decide(program)
        cache.close()  # the next search opens the file anew, and finds it overwritten
        path.write_bytes(b"this is not a database" * 200)
        for suffix in ("-wal", "-shm"):
            path.with_name(path.name + suffix).unlink(missing_ok=True)
        with pytest.raises(FatalServiceError, match="corrupt"):
            program(question=QUESTION)


def test_locked_search_cache_is_recorded(reliability, tmp_path: Path) -> None:
    with reliability.case(CATEGORY, "search cache locked by another process"):
        path = tmp_path / "cache.sqlite"
        cache = CachedWebSearch(InMemoryWebSearch(WEB), path, busy_timeout=0.2)
        holder = sqlite3.connect(path, timeout=0.1)
        holder.execute("BEGIN EXCLUSIVE")
        try:
            program, _, _ = build_toy_program(HAPPY, web=cache)
            started = time.perf_counter()
            decision = decide(program)
            assert time.perf_counter() - started < 10
        finally:
            holder.rollback()
            holder.close()
            cache.close()
        dynamic = decision.bundle.candidate("dynamic")
        assert dynamic.error is not None
        assert "locked" in dynamic.error.message
        assert dynamic.error.transient  # degraded, and redone on resume: never a clean answer without the search
        assert decision.status == "answered"
        assert decision.letters == ("A",)


def test_replay_cache_miss_is_recorded(reliability, tmp_path: Path) -> None:
    with reliability.case(CATEGORY, "search cache in replay mode misses"):
        path = tmp_path / "cache.sqlite"
        CachedWebSearch(InMemoryWebSearch(WEB), path).close()
        cache = CachedWebSearch(InMemoryWebSearch(WEB), path, mode="replay")
        program, _, _ = build_toy_program(HAPPY, web=cache)
        decision = decide(program)
        dynamic = decision.bundle.candidate("dynamic")
        assert dynamic.error is not None
        assert "replay mode never searches live" in dynamic.error.message
        assert decision.status == "answered"
        cache.close()


def test_unparseable_output_is_retried_once_in_json(reliability) -> None:
    with reliability.case(CATEGORY, "unparseable output retried once with the JSON adapter"):
        replies = iter(["I think it is the thyroid.", '{"rationale": "low thyroxine", "answer": "A"}'])
        program, engine, _ = build_toy_program(
            {**HAPPY, "parametric": lambda call: next(replies)},
            settings=ProgramSettings(json_fallback=True, parallel_pathways="off"),
        )
        decision = decide(program)
        assert engine.stages().count("parametric") == 2  # one retry, within the budget
        parametric = decision.bundle.candidate("parametric")
        assert parametric.answer is not None
        assert parametric.answer.letters == ("A",)
        assert decision.status == "answered"
