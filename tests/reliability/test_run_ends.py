"""How a run ends when it is stopped or meets an edge (issue 58): Ctrl-C at one thread, merges, run folders, empty
web searches. Each case runs the real command (a subprocess where a signal is the fault) against the fakes."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from clearmed.evaluation.store import read_records

from .fakes import FakeOpenAI, FakeTavilyServer
from .test_faults import _medqa_file, gold_of, mcq, medqa_eval_args, write_config
from .test_faults import evaluate as evaluate_in_process

pytestmark = pytest.mark.reliability

CATEGORY = "failing dependencies"


@pytest.fixture
def lm() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(hang_s=10.0) as server:
        yield server


def eval_argv(config: Path, source: Path, run_dir: Path) -> list[str]:
    return [sys.executable, "-m", "clearmed.cli.main", *medqa_eval_args(config, source, run_dir)]


def with_timeout(config: Path, seconds: float) -> Path:
    """The config with its backbone's attempt timeout set to `seconds` (the fakes' configs give 2 s)."""
    text = config.read_text(encoding="utf-8")
    assert text.count("timeout = 2.0\n") == 1
    config.write_text(text.replace("timeout = 2.0\n", f"timeout = {seconds}\n"), encoding="utf-8")
    return config


def _wait_for(condition: object, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.01)


def test_ctrl_c_at_one_thread_finishes_the_question_in_flight_and_summarizes(
    reliability, tmp_path: Path, lm: FakeOpenAI
) -> None:
    with reliability.case("lost work", "SIGINT at one thread mid-question: it finishes, summary, exit 130") as case:
        questions = mcq(4)
        lm.gold = gold_of(questions)
        lm.delays["dynamic_answer"] = 1.5  # each question's dynamic pathway answers after a second and a half
        # num_threads = 1, as every config extending `embedded` runs
        config = with_timeout(write_config(tmp_path, lm, run="num_threads = 1"), 10.0)
        source, run_dir = _medqa_file(tmp_path, questions), tmp_path / "run"
        argv = eval_argv(config, source, run_dir)
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _wait_for(lambda: lm.in_flight > 0 and any(r["stage"] == "dynamic_answer" for r in lm.requests))
        assert lm.in_flight > 0, "the run never reached its first question's slow call"
        process.send_signal(signal.SIGINT)  # mid-question: its dynamic pathway's reply is a second away
        _out, err = process.communicate(timeout=60)
        records = list(read_records(run_dir))
        case.lost = 0 if len(records) == 1 else 1
        case.note = f"exit {process.returncode}, {len(records)} recorded; {err.strip().splitlines()[-1:]}"
        assert process.returncode == 130, err[-2000:]
        assert [r.index for r in records] == [0]  # the question in flight finished; no other started
        assert not records[0].degraded
        assert records[0].score is not None
        assert records[0].score.correct
        summary = json.loads((run_dir / "summary.json").read_text())
        assert (summary["interrupted"], summary["evaluated"], summary["planned"]) == (True, 1, 4)
        last = err.strip().splitlines()[-1]
        assert last == (
            "clearmed: interrupted: the questions in flight finished (1 of 4 questions recorded); "
            "rerun the same command to resume"
        )
        lm.delays.clear()
        again = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
        assert again.returncode == 0, again.stderr[-2000:]
        assert sorted(r.index for r in read_records(run_dir)) == [0, 1, 2, 3]
        assert json.loads((run_dir / "summary.json").read_text())["interrupted"] is False


def test_a_second_ctrl_c_at_one_thread_stops_at_once(reliability, tmp_path: Path, lm: FakeOpenAI) -> None:
    with reliability.case("lost work", "two SIGINTs at one thread: stops at once, exit 130, nothing half-written"):
        questions = mcq(2)
        lm.gold = gold_of(questions)
        lm.delays["dynamic_answer"] = 8.0  # a reply the second Ctrl-C must not wait for
        config = with_timeout(write_config(tmp_path, lm, run="num_threads = 1"), 20.0)
        source, run_dir = _medqa_file(tmp_path, questions), tmp_path / "run"
        process = subprocess.Popen(
            eval_argv(config, source, run_dir), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        _wait_for(lambda: any(r["stage"] == "dynamic_answer" for r in lm.requests))
        process.send_signal(signal.SIGINT)
        time.sleep(0.5)
        pressed = time.monotonic()
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
        assert time.monotonic() - pressed < 4.0, err[-2000:]  # not the 8 s reply
        assert process.returncode == 130, err[-2000:]
        assert list(read_records(run_dir)) == []
        assert err.strip().splitlines()[-1] == (
            "clearmed: interrupted (the questions in flight were cut short, not recorded); "
            "rerun the same command to resume"
        )


def test_a_web_search_with_no_results_is_marked_in_the_trail_and_counted(
    reliability, tmp_path: Path, lm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    with reliability.case(CATEGORY, "Tavily 200 with an empty results list: marked in the trail, counted"):
        import clearmed

        questions = mcq(3)
        lm.gold = gold_of(questions)
        with FakeTavilyServer() as web:
            monkeypatch.setenv("TAVILY_API_KEY", web.key)
            config = write_config(tmp_path, lm, web=web)
            web.state.script.append("empty_results")  # the first question's search finds nothing; the others pages
            summary = clearmed.evaluate(
                "clear-heuristic", questions, config=str(config), run_dir=tmp_path / "run", show_progress=False
            )
        records = sorted(read_records(tmp_path / "run"), key=lambda r: r.index)
        dynamic = [next(c for c in r.decision.bundle.candidates if c.pathway == "dynamic") for r in records]
        assert dynamic[0].error is not None
        assert dynamic[0].error.stage == "dynamic_search"
        assert dynamic[0].error.message == "the search found nothing"
        assert not dynamic[0].error.transient
        assert [d.error for d in dynamic[1:]] == [None, None]
        assert (summary.empty_searches, summary.degraded) == (1, 0)  # counted apart; no failure, so not degraded
        assert json.loads((tmp_path / "run" / "summary.json").read_text())["empty_searches"] == 1


def test_half_a_character_in_a_reply_a_later_prompt_quotes_keeps_that_step(
    reliability, tmp_path: Path, lm: FakeOpenAI
) -> None:
    with reliability.case("bad input", "a reply with half an emoji quoted by the verifier: the step runs, repaired"):
        questions = mcq(2)
        lm.gold = gold_of(questions)
        # Generated answers: the parametric reply's rationale (with the half character) is quoted by the verifier.
        config = write_config(tmp_path, lm, program='mcq_decoding = "generate"')
        lm.inject("lone_surrogate", times=1, stage="parametric", match="(case 0)")
        records = sorted(evaluate_in_process(config, questions, tmp_path / "run", "clear"), key=lambda r: r.index)
        first = records[0].decision
        assert "\ufffd" in first.bundle.candidate("parametric").rationale  # the reply did hold half a character
        verifier = [step for step in first.steps if step.mechanism == "verifier"]
        assert [(step.rule, step.error) for step in verifier] == [("verifier", None)]  # not dropped to a fallback
        asked = [r["body"] for r in lm.requests if r["stage"] == "verifier" and "(case 0)" in json.dumps(r["body"])]
        assert len(asked) == 1
        assert "\ufffd" in json.dumps(asked[0], ensure_ascii=False)
        assert all(r.score is not None and r.score.correct and not r.degraded for r in records)
