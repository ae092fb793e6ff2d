"""The LM's failure policy under faults (issues 31, 32 and 37), through the fault-injecting fake (`fakes.py`).

One policy for every LM call: a transient failure (a 200 that is no reply, a 5xx, a reset, a hang) is retried, then
the question is degraded and redone on resume; a context overflow in any server's shape teaches the window and the
stage is refitted and retried, never left degraded; a call has a deadline (a trickling server cannot hold it), and a
second Ctrl-C cuts the retry chain short.
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
from clearmed.core.retries import RetriesCut, cut_retries, reset_cut, retries_cut, second_interrupt_cuts_retries

from .fakes import FakeOpenAI
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


@pytest.mark.parametrize("fault", ["truncated_json", "html", "empty_200", "503", "reset"])
def test_a_reply_a_retry_would_mend_is_retried_then_degraded_and_redone(
    reliability, tmp_path: Path, lm: FakeOpenAI, fault: str
) -> None:
    """Issue 32 item 2: a 200 with a truncated JSON body or an HTML page was scored as the stage's answer."""
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
