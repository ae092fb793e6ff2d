"""The LM's failure policy under faults (issues 31, 32, 37 and 48), through the fault-injecting fake (`fakes.py`).

One policy for every LM call: a transient failure (a 200 that is no reply, empty choices or a null message included, a
5xx, a reset, a hang) is retried, then the question is degraded and redone on resume; a context overflow in any
server's shape teaches the window and the stage is refitted and retried, never left degraded; a call has a deadline (a
trickling server cannot hold it) that leaves no thread or socket behind, and a second Ctrl-C cuts the retry chain
short. Searches have the same total deadline, and DSPy's disk cache holds one connection per shard.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import dspy
import pytest

from clearmed.backbones.config import parse_backbone
from clearmed.backbones.factory import build_lm
from clearmed.backbones.failures import classify
from clearmed.core.retries import RetriesCut, cut_retries, reset_cut, retries_cut, second_interrupt_cuts_retries
from clearmed.retrieval.base import EvidenceError
from clearmed.retrieval.tavily import TavilyOptions, TavilySearch

from .fakes import FakeOpenAI, FakeTavilyServer
from .test_faults import evaluate, gold_of, mcq, outcome, write_config

pytestmark = pytest.mark.reliability

CATEGORY = "failing dependencies"


@pytest.fixture
def lm() -> FakeOpenAI:
    with FakeOpenAI(hang_s=3.0, trickle_s=0.5) as server:
        yield server


@pytest.fixture(autouse=True)
def _no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("clearmed.backbones.client.pause", lambda seconds: None)
    monkeypatch.setattr("clearmed.retrieval.tavily._sleep", lambda seconds: None)
    reset_cut()
    yield
    reset_cut()


@pytest.mark.parametrize(
    "fault", ["truncated_json", "html", "empty_200", "empty_choices", "null_content", "503", "reset"]
)
def test_a_reply_a_retry_would_mend_is_retried_then_degraded_and_redone(
    reliability, tmp_path: Path, lm: FakeOpenAI, fault: str
) -> None:
    """Issue 32 item 2: a 200 with a truncated JSON body or an HTML page was scored as the stage's answer. Issue 48
    item 2: empty choices or a null message were a parse error, never retried, and the pathway's answer was lost."""
    with reliability.case(CATEGORY, f"LM {fault}: retried, degraded after the retries, clean on resume") as case:
        questions = mcq(2)
        lm.gold = gold_of(questions)
        config = write_config(tmp_path, lm)  # num_retries = 1
        lm.inject(fault, times=2, stage="parametric")  # the first parametric call and its one retry
        counts = outcome(evaluate(config, questions, tmp_path / "run"), questions)
        case.flipped = counts["flipped"]
        assert counts == {"correct": 1, "degraded": 1, "missing": 0, "flipped": 0}
        assert outcome(evaluate(config, questions, tmp_path / "run"), questions)["correct"] == 2
        lm.inject(fault, times=1, stage="parametric")  # once: the retry mends it
        counts = outcome(evaluate(config, questions, tmp_path / "again"), questions)
        assert counts["correct"] == 2


@pytest.mark.parametrize(
    "fault", ["context_openai", "context_vllm", "context_sglang", "context_llamacpp", "context_anthropic"]
)
def test_every_servers_overflow_is_refitted_and_retried_never_degraded(
    reliability, tmp_path: Path, lm: FakeOpenAI, fault: str
) -> None:
    """Issues 32 item 2 and 37: vLLM's, SGLang's and llama.cpp's 400s were scored as answers; an overflow in OpenAI's
    shape was transient, so the question stayed degraded for ever."""
    with reliability.case(CATEGORY, f"LM {fault}: window learned, refitted, retried, clean") as case:
        questions = mcq(1)
        lm.gold = gold_of(questions)
        config = write_config(tmp_path, lm)
        lm.inject(fault, times=1, stage="local_answer")
        (record,) = evaluate(config, questions, tmp_path / "run")
        counts = outcome([record], questions)
        case.flipped = counts["flipped"]
        assert counts["correct"] == 1
        (row,) = [row for row in record.decision.usage if row.stage == "local_answer"]
        assert (row.refits, row.failed) == (1, False)
        assert row.passages_dropped >= 1


def test_a_trickling_server_cannot_hold_a_call_past_its_deadline(reliability, lm: FakeOpenAI) -> None:
    """Issue 32 item 8: a server trickling a byte every half second held a 3-second call for minutes."""
    with reliability.case(CATEGORY, "LM trickling a byte at a time: the call ends at its deadline"):
        backbone = {"kind": "openai_compatible", "model": "m", "api_base": lm.api_base, "cache": False}
        client = build_lm(parse_backbone({**backbone, "timeout": 2.0, "num_retries": 0}))
        lm.inject("trickle", times=1)
        started = time.monotonic()
        with pytest.raises(dspy.LMTimeoutError, match="no complete reply within 2 s"):
            client("hi")
        assert time.monotonic() - started < 3.0
        assert client("hi")  # the next call is served at once


def _client(lm: FakeOpenAI, **settings: object) -> dspy.LM:
    backbone = {"kind": "openai_compatible", "model": "m", "api_base": lm.api_base, "cache": False}
    return build_lm(parse_backbone({**backbone, **settings}))


def _descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def _settled(count: object, target: int, within_s: float = 2.0) -> int:
    """``count()`` once it is at most ``target``, or its last value after ``within_s`` seconds."""
    ends = time.monotonic() + within_s
    while (value := count()) > target and time.monotonic() < ends:  # type: ignore[operator]
        time.sleep(0.05)
    return value  # type: ignore[no-any-return]


def test_an_attempt_given_up_at_its_deadline_leaves_no_thread_or_socket(reliability, lm: FakeOpenAI) -> None:
    """Issue 48 item 1: every attempt ran in a thread of its own, and one abandoned at its deadline kept its thread and
    its socket while the server trickled (110 threads and 389 descriptors after 12 questions)."""
    with reliability.case(CATEGORY, "LM trickling past the deadline 4 times: no thread, no socket left"):
        client = _client(lm, timeout=0.6, num_retries=0)
        assert client("warm up")  # the connection pool and the watchdog exist from here on
        threads, descriptors = threading.active_count(), _descriptors()
        lm.inject("trickle", times=4)
        for n in range(4):
            with pytest.raises(dspy.LMTimeoutError, match=r"no complete reply within 0\.6 s"):
                client(f"question {n}")
        # The fake runs in this process: its handler threads count too, each until it sees its client gone.
        assert _settled(lambda: lm.in_flight, 0) == 0  # the server saw each connection go: nothing trickles on
        assert _settled(threading.active_count, threads) <= threads
        assert _settled(_descriptors, descriptors) <= descriptors
        assert client("after")  # and the next call is served


def test_an_empty_reply_is_retried_and_never_cached(
    reliability, tmp_path: Path, lm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 48 item 2: DSPy cached an empty reply as an answer, so a retry or a resume was served it again."""
    with reliability.case(CATEGORY, "LM empty choices / null message with the cache on: retried live, not cached"):
        from dspy.clients.cache import Cache

        monkeypatch.setattr(dspy, "cache", Cache(True, True, str(tmp_path / "lm-cache")))
        client = _client(lm, cache=True, timeout=5.0, num_retries=1)
        lm.inject("null_content", times=1)
        assert client("first") == [client("first")[0]]  # the retry was answered, and that answer cached
        assert (lm.served["null_content"], lm.served["ok"]) == (1, 1)
        once = _client(lm, cache=True, timeout=5.0, num_retries=0)
        lm.inject("empty_choices", times=1)
        with pytest.raises(dspy.LMError) as raised:
            once("second")
        assert classify(raised.value) == "transient"
        assert once("second")  # asked again, not served the empty reply from the cache
        assert (lm.served["empty_choices"], lm.served["ok"]) == (1, 2)


def test_an_empty_reply_of_any_lm_is_recorded_as_a_transient_failure(reliability) -> None:
    """Issue 48 item 2: an LM that hands an empty reply to DSPy's adapter (any but `ClearmedLM`, which refuses it
    first) got "The LM returned an empty or null response", recorded as a parse error: never retried, never redone."""
    with reliability.case(CATEGORY, "scripted LM replying nothing: a transient failure, not a parse error"):
        from clearmed.signatures.records import Question
        from clearmed.testing import build_toy_program, pathway_replies

        program, _, _ = build_toy_program({**pathway_replies("B", "B", "B"), "parametric": ""})
        question = Question(id="q", text="Which hormone?", options={"A": "a", "B": "b", "C": "c"}, gold_letters=["B"])
        error = program(question=question).decision.bundle.candidate("parametric").error
        assert error is not None
        assert "empty or null response" in error.message
        assert (error.kind, error.transient) == ("lm_error", True)


def test_the_lm_cache_holds_one_connection_per_shard_whatever_the_threads(reliability, tmp_path: Path) -> None:
    """Issue 48 item 1: diskcache opened a SQLite connection to each shard for every thread that touched it (the
    database and its write-ahead log), and kept it: 218-363 descriptors at 8 threads, most of them the LM cache's."""
    with reliability.case(CATEGORY, "LM cache touched from 12 threads: one connection per shard"):
        from dspy.clients.cache import Cache

        from clearmed.evaluation.lm_cache import watch_lm_cache

        folder = tmp_path / "lm-cache"
        cache = Cache(enable_disk_cache=True, enable_memory_cache=False, disk_cache_dir=str(folder))
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(dspy, "cache", cache)
            watch_lm_cache()
        together = threading.Barrier(12)

        def touch(worker: int) -> None:
            for n in range(64):  # keys over all 16 shards
                request = {"model": "m", "messages": [worker, n]}
                cache.put(request, {"reply": n})
                assert cache.get(request) == {"reply": n}
            together.wait(timeout=30)  # all alive at once: a connection per thread would be open now

        def held() -> int:
            return sum(1 for fd in os.listdir("/proc/self/fd") if str(folder) in _target(f"/proc/self/fd/{fd}"))

        workers = [threading.Thread(target=touch, args=(n,)) for n in range(12)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=60)
        assert held() <= 16 * 3  # each shard's database, log and shared memory, once


def _target(link: str) -> str:
    try:
        return os.readlink(link)
    except OSError:
        return ""


def test_a_tavily_timeout_bounds_the_whole_search(reliability) -> None:
    """Issue 48 item 11: the timeout bounded only the wait for the next byte, so a trickling reply held a 3-second
    search for 20 seconds."""
    with (
        reliability.case(CATEGORY, "Tavily trickling past the timeout: the search ends at its deadline"),
        FakeTavilyServer(hang_s=6.0, trickle_s=0.2) as web,
        pytest.MonkeyPatch.context() as patch,
    ):
        patch.setenv("TAVILY_API_KEY", web.key)
        search = TavilySearch(TavilyOptions(api_base_url=web.url), timeout=1.0, max_retries=0)
        assert search.search("warm up", 2)  # a pooled keep-alive connection, reused below
        web.inject("trickle")
        started = time.monotonic()
        with pytest.raises(EvidenceError) as raised:
            search.search("measles rash", 2)
        assert time.monotonic() - started < 2.0
        assert (raised.value.kind, str(raised.value)) == ("timeout", "Tavily did not answer within 1 s")
        assert search.search("after", 2)


def test_cut_retries_end_a_hanging_attempt_and_its_retry_chain_at_once(reliability, lm: FakeOpenAI) -> None:
    with reliability.case(CATEGORY, "LM retry chain and hang: a second Ctrl-C cuts them short"):
        backbone = {"kind": "openai_compatible", "model": "m", "api_base": lm.api_base, "cache": False}
        client = build_lm(parse_backbone({**backbone, "timeout": 60.0, "num_retries": 8}))
        lm.inject("timeout", times=None)  # every attempt hangs
        outcome_: list[BaseException] = []

        def call() -> None:
            try:
                client("hi")
            except BaseException as exc:  # the cut is a KeyboardInterrupt
                outcome_.append(exc)

        worker = threading.Thread(target=call)
        started = time.monotonic()
        worker.start()
        time.sleep(0.3)
        cut_retries()
        worker.join(timeout=2.0)
        assert not worker.is_alive()
        assert time.monotonic() - started < 1.5
        assert isinstance(outcome_[0], RetriesCut)


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals need the main thread")
def test_the_second_ctrl_c_cuts_the_retries() -> None:
    def press_ctrl_c() -> None:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1.0)  # the handler runs here

    with second_interrupt_cuts_retries():
        with pytest.raises(KeyboardInterrupt):
            press_ctrl_c()
        assert not retries_cut()  # the first lets the questions in flight finish
        with pytest.raises(KeyboardInterrupt):
            press_ctrl_c()
        assert retries_cut()
