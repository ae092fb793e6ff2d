"""Batch runs (issue 59): CLEAR through a provider's batch API in passes, against the fake of OpenAI's Files and Batch
APIs (tests/batch/fake_batch.py), which answers each line exactly as its synchronous endpoint answers the same body.

The whole-run test is the issue's "done when" (at 1,000 questions in CI's slow step; 60 in the fast suite): questions
run synchronously, then in batches in a child process
killed twice (once while a batch is in flight, once while a pass is recording questions) and rerun: the same decisions,
no line sent twice, the spend log at half the synchronous dollars, no synchronous call made. The other tests are the
ends a batch can come to: expired half done, completed with only failures, refused, and the run refused up front.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from clearmed import EvalRequest, evaluate
from clearmed.backbones.batch_api import BatchUnavailable
from clearmed.backbones.pricing import cost_usd
from clearmed.batch.store import BATCHES_FILE, BatchStore, BatchSubmitted
from clearmed.config import load_config
from clearmed.core.errors import UsageError
from clearmed.evaluation import read_records
from clearmed.evaluation.runner import BudgetReached
from clearmed.evaluation.spend_log import read_spend_log
from clearmed.signatures.records import Question
from clearmed.testing import demo_config_toml

from .fake_batch import FakeBatchOpenAI

pytestmark = pytest.mark.reliability

KEY_ENV = "CLEARMED_TEST_BATCH_KEY"
KEY = "sk-batch-test-0123456789"
OPTIONS = {"A": "Cortisol", "B": "Insulin", "C": "Thyroxine", "D": "Growth hormone"}
PROGRAM = 'parallel_pathways = "on"\njson_fallback = false\nsource_quality = "priors"'


def questions(n: int, tag: str) -> list[Question]:
    return [
        Question(
            id=f"q{i}",
            text=f"Question {i} ({tag}): which hormone is deficient in Addison disease (case {i})?",
            options=OPTIONS,
            gold_letters=["ABCD"[i % 4]],
        )
        for i in range(n)
    ]


def write_config(tmp: Path, api_base: str, *, kind: str = "hosted", poll_s: float = 0.05, extra: str = "") -> Path:
    model = "openai/gpt-4o-mini" if kind == "hosted" else "m"
    backbone = (
        f'kind = "{kind}"\nmodel = "{model}"\napi_base = "{api_base}"\napi_key_env = "{KEY_ENV}"\nnum_retries = 1'
        f"\n{extra}"
    )
    run = f'batch_poll_s = {poll_s}\nruns_dir = "{tmp / "runs"}"'
    path = tmp / f"{kind}.toml"
    path.write_text(demo_config_toml(backbone=backbone, program=PROGRAM, run=run), encoding="utf-8")
    return path


def decisions(run_dir: Path) -> dict[str, tuple[Any, ...]]:
    """What each question decided: its answer, route, status and degraded stages."""
    return {
        record.question_id: (
            record.decision.answer,
            record.decision.route,
            record.decision.status,
            tuple(record.degraded_stages),
        )
        for record in read_records(run_dir)
    }


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


# --------------------------------------------------------------------------------------------- the whole run

CHILD = r"""
import json, sys
from pathlib import Path
from clearmed import EvalRequest, evaluate
from clearmed.signatures.records import Question

config, questions_path, run_dir, batch = sys.argv[1:5]
qs = [Question.model_validate(row) for row in json.loads(Path(questions_path).read_text())]
evaluate(EvalRequest(program="clear", benchmark="batch", questions=qs, config=config, run_dir=run_dir,
                     batch=batch == "batch", threads=8, quiet=True))
"""

# The scale runs in CI's own step (slow); the fast suite runs the same kills at a smaller one.
SCALES = [pytest.param(60, id="60"), pytest.param(1000, id="1000", marks=pytest.mark.slow)]


def _child(tmp: Path, config: Path, run_dir: Path, mode: str, cache: str) -> subprocess.Popen[str]:
    env = {**os.environ, "DSPY_CACHEDIR": str(tmp / cache), KEY_ENV: KEY}
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(config), str(tmp / "questions.json"), str(run_dir), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _finish(child: subprocess.Popen[str]) -> str:
    _, err = child.communicate(timeout=900)
    assert child.returncode == 0, err[-3000:]
    return err


def _kill_when(child: subprocess.Popen[str], ready: Any, what: str) -> None:
    deadline = time.monotonic() + 600
    while not ready():
        assert child.poll() is None, (
            f"the run ended before {what}: {child.stderr.read()[-2000:] if child.stderr else ''}"
        )
        assert time.monotonic() < deadline, f"never {what}"
        time.sleep(0.01)
    child.send_signal(signal.SIGKILL)
    child.wait()


def _lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    rows = []
    for raw in path.read_text().splitlines():
        try:
            rows.append(json.loads(raw))
        except ValueError:  # a torn last line
            continue
    return rows


@pytest.mark.parametrize("n", SCALES)
def test_questions_in_batches_killed_twice_decide_as_the_synchronous_run(tmp_path: Path, n: int) -> None:
    qs = questions(n, "whole")
    (tmp_path / "questions.json").write_text(json.dumps([q.model_dump(mode="json") for q in qs]), encoding="utf-8")
    with FakeBatchOpenAI(gold={q.text: q.gold_letters[0] for q in qs}, api_key=KEY, advance_per_poll=1) as lm:
        config = write_config(tmp_path, lm.api_base, poll_s=0.2)
        sync_dir, batch_dir = tmp_path / "sync", tmp_path / "batch"
        _finish(_child(tmp_path, config, sync_dir, "sync", "cache-sync"))
        sync_calls = lm.chat_requests
        assert sync_calls > 0
        assert not lm.created_batches

        batches = batch_dir / BATCHES_FILE
        # Kill 1: while the first batch is in flight (submitted, not collected).
        first = _child(tmp_path, config, batch_dir, "batch", "cache-batch")
        _kill_when(
            first,
            lambda: any(row.get("event") == "submitted" for row in _lines(batches)),
            "a batch was submitted",
        )
        assert not any(row.get("event") == "collected" for row in _lines(batches))
        # Kill 2: in a later pass, while questions are being recorded.
        second = _child(tmp_path, config, batch_dir, "batch", "cache-batch")
        _kill_when(
            second,
            lambda: 0 < len(_lines(batch_dir / "results.jsonl")) < n // 2,
            "questions were being recorded",
        )
        _finish(_child(tmp_path, config, batch_dir, "batch", "cache-batch"))

        assert lm.chat_requests == sync_calls, "a batch run sent a synchronous call"
        resent = {key: times for key, times in lm.submitted.items() if times > 1}
        assert resent == {}, f"{len(resent)} lines sent twice"
    sync, batched = decisions(sync_dir), decisions(batch_dir)
    assert len(sync) == len(batched) == n
    assert [qid for qid in sync if sync[qid] != batched[qid]] == []
    assert all(record.score is not None and record.score.correct for record in read_records(batch_dir))
    sync_usd = sum(entry.usd or 0.0 for entry in read_spend_log(sync_dir))
    batch_entries = read_spend_log(batch_dir)
    batch_usd = sum(entry.usd or 0.0 for entry in batch_entries)
    assert all(entry.batch_id for entry in batch_entries)  # every dollar is a batch's, named by its id
    assert batch_usd == pytest.approx(sync_usd / 2, rel=1e-3)
    print(  # shown with -s: the figures of the closing note
        f"batch run of {n}: {len(lm.created_batches)} batches, "
        f"{sum(lm.submitted.values())} lines, {sync_calls} synchronous calls in the synchronous run, "
        f"${batch_usd:.4f} against ${sync_usd:.4f}, 0 of {n} decisions differ"
    )


# --------------------------------------------------------------------------------------------- how batches end


def _run(tmp: Path, lm: FakeBatchOpenAI, qs: list[Question], name: str = "run", **request: Any) -> Path:
    config = write_config(tmp, lm.api_base)
    run_dir = tmp / name
    evaluate(
        EvalRequest(
            program="clear",
            benchmark="batch",
            questions=qs,
            config=str(config),
            run_dir=run_dir,
            batch=True,
            threads=4,
            quiet=True,
            **request,
        )
    )
    return run_dir


def test_a_batch_that_expires_half_done_keeps_its_answers_and_sends_the_rest_again(tmp_path: Path) -> None:
    qs = questions(6, f"expire {tmp_path.name}")
    with FakeBatchOpenAI(gold={q.text: q.gold_letters[0] for q in qs}, api_key=KEY) as lm:
        lm.script("expire_half")
        run_dir = _run(tmp_path, lm, qs)
        first = lm.created_batches[0]
    half = len(first.custom_ids) // 2
    answered_first = set(first.custom_ids[:half])
    later = [batch for batch in lm.created_batches[1:]]
    sent_again = {cid for batch in later for cid in batch.custom_ids}
    assert set(first.custom_ids[half:]) <= sent_again  # the unrun half, sent again
    assert not answered_first & sent_again  # the answered half, never
    assert all(record.score is not None and record.score.correct for record in read_records(run_dir))
    collected = [row for row in _lines(run_dir / BATCHES_FILE) if row.get("event") == "collected"]
    assert collected[0]["status"] == "expired"
    assert collected[0]["answered"] == half


def test_a_completed_batch_of_only_failures_sends_each_line_again(tmp_path: Path) -> None:
    qs = questions(3, f"failures {tmp_path.name}")
    with FakeBatchOpenAI(gold={q.text: q.gold_letters[0] for q in qs}, api_key=KEY) as lm:
        lm.script("only_failures")
        run_dir = _run(tmp_path, lm, qs)
        first = lm.created_batches[0]
        # num_retries = 1: a failed line goes out once more, in a later batch, and is then answered.
        assert all(lm.submitted[cid] == 2 for cid in first.custom_ids)
    records = list(read_records(run_dir))
    assert len(records) == 3
    assert all(record.score is not None and record.score.correct for record in records)


def test_a_line_that_fails_beyond_its_retries_degrades_its_question_as_a_synchronous_failure_would(
    tmp_path: Path,
) -> None:
    qs = questions(3, f"degrade {tmp_path.name}")
    with FakeBatchOpenAI(gold={q.text: q.gold_letters[0] for q in qs}, api_key=KEY) as lm:
        lm.fail_lines(match="(case 1)", status=500, times=None)
        run_dir = _run(tmp_path, lm, qs)
    by_id = {record.question_id: record for record in read_records(run_dir)}
    assert len(by_id) == 3
    assert by_id["q1"].degraded
    assert not by_id["q0"].degraded
    assert not by_id["q2"].degraded


def test_a_refused_batch_stops_the_run_in_one_line(tmp_path: Path) -> None:
    qs = questions(2, f"refused {tmp_path.name}")
    with FakeBatchOpenAI(gold={q.text: q.gold_letters[0] for q in qs}, api_key=KEY) as lm:
        lm.script("fail_validation")
        config = write_config(tmp_path, lm.api_base)
        argv = ["eval", "--benchmark", "demo", "--batch", "-c", str(config), "--run-dir", str(tmp_path / "r")]
        result = _cli(argv)
        assert result.returncode == 2
        # The run's progress lines, then the one line that says why it stopped.
        last = result.stderr.strip().splitlines()[-1]
        assert "failed at the provider" in last
        assert "the run stopped" in last
        assert "Traceback" not in result.stderr
        assert sum("error" in line for line in result.stderr.splitlines()) == 1


def _cli(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "clearmed.cli.main", *argv],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, KEY_ENV: KEY},
        check=False,
    )


@pytest.mark.parametrize("kind", ["openai_compatible", "embedded"])
def test_a_backbone_without_a_batch_api_is_refused_in_one_line(tmp_path: Path, kind: str) -> None:
    config = "embedded" if kind == "embedded" else str(write_config(tmp_path, "http://127.0.0.1:9/v1", kind=kind))
    result = _cli(["eval", "--benchmark", "demo", "--batch", "-c", config, "--run-dir", str(tmp_path / "r")])
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "batch API" in lines[0], lines[0]
    assert "num_threads" in lines[0], lines[0]  # it says to use concurrency instead


def test_the_budget_counts_a_batchs_worst_case_before_sending_it(tmp_path: Path) -> None:
    qs = questions(4, f"budget {tmp_path.name}")
    with FakeBatchOpenAI(gold={q.text: q.gold_letters[0] for q in qs}, api_key=KEY) as lm:
        with pytest.raises(BudgetReached):
            _run(tmp_path, lm, qs, max_cost=0.0001)
        assert lm.created_batches == []  # refused before it was sent


def test_each_collected_batch_is_one_spend_entry_at_the_batch_price(tmp_path: Path) -> None:
    qs = questions(2, f"ledger {tmp_path.name}")
    with FakeBatchOpenAI(gold={q.text: q.gold_letters[0] for q in qs}, api_key=KEY) as lm:
        run_dir = _run(tmp_path, lm, qs)
        created = [batch.id for batch in lm.created_batches]
    entries = read_spend_log(run_dir)
    assert [entry.batch_id for entry in entries] == created
    backbone = load_config(tmp_path / "hosted.toml").backbones["main"]
    for entry in entries:
        full = cost_usd(backbone, entry.row.prompt_tokens, entry.row.completion_tokens)
        assert entry.usd == pytest.approx(full / 2)  # gpt-4o-mini's batch price is half its price (LiteLLM's map)
    store = BatchStore(run_dir)
    assert store.batches_in_flight() == []
    assert set(store.collected) == set(created)


def test_the_python_door_refuses_a_batch_run_without_a_batch_api(tmp_path: Path) -> None:
    config = write_config(tmp_path, "http://127.0.0.1:9/v1", kind="openai_compatible")
    with pytest.raises(UsageError, match="no batch API"):
        evaluate(EvalRequest(benchmark="demo", config=str(config), run_dir=tmp_path / "r", batch=True, quiet=True))


def test_the_estimate_shows_the_synchronous_and_the_batch_price_side_by_side(tmp_path: Path) -> None:
    from clearmed.evaluation.spend import Prices
    from clearmed.numbers.estimate import estimate

    qs = questions(2, f"estimate {tmp_path.name}")
    with FakeBatchOpenAI(gold={q.text: q.gold_letters[0] for q in qs}, api_key=KEY) as lm:
        run_dir = _run(tmp_path, lm, qs)
    config = load_config(tmp_path / "hosted.toml")
    result = estimate(list(read_records(run_dir)), Prices.of(config), questions=10, threads=1, basis_runs=["run"])
    assert result.usd is not None
    assert result.batch_usd == pytest.approx(result.usd / 2)
    assert f"with --batch ${result.batch_usd * 10:,.2f}" in result.render("batch")
    # A config with no batch API has no batch price to show.
    local = load_config(write_config(tmp_path, "http://127.0.0.1:9/v1", kind="openai_compatible"))
    assert (
        estimate(list(read_records(run_dir)), Prices.of(local), questions=10, threads=1, basis_runs=["run"]).batch_usd
        is None
    )


class _SlowClient:
    """A batch client whose one batch stays in progress for `polls` status checks."""

    provider = "openai"

    def __init__(self, polls: int) -> None:
        self.polls = polls

    def handles(self, url: str) -> bool:
        return True

    def status(self, batch_id: str) -> Any:
        from clearmed.backbones.batch_api import BatchState, RequestCounts

        self.polls -= 1
        status = "in_progress" if self.polls > 0 else "completed"
        return BatchState(
            id=batch_id, provider="openai", status=status, request_counts=RequestCounts(total=4, completed=1)
        )

    def results(self, state: Any) -> list[Any]:
        return []


def test_waiting_says_one_progress_line_a_minute_at_most(tmp_path: Path) -> None:
    from rich.console import Console

    from clearmed.batch.run import _Batches
    from clearmed.evaluation.folder import EvalSpec
    from clearmed.evaluation.spend import Prices

    config = load_config(write_config(tmp_path, "http://127.0.0.1:9/v1"))
    store = BatchStore(tmp_path)
    store.record_submitted(BatchSubmitted(batch_id="b1", provider="openai", role="main", keys=["k1"]))
    now = [0.0]
    console = Console(record=True, width=200)
    spec = EvalSpec(program="clear", benchmark="b", source="s", questions=[], run_dir=tmp_path)
    batches = _Batches(
        spec, config, {"main": _SlowClient(polls=30)}, store, Prices.of(config), console, None, poll_s=10.0,
        sleep=lambda s: now.__setitem__(0, now[0] + s), clock=lambda: now[0],
    )  # fmt: skip
    batches.wait(2)  # 30 polls, 10 s apart: five minutes
    lines = [line for line in console.export_text().splitlines() if "in flight" in line]
    assert 4 <= len(lines) <= 5, lines
    assert lines[0] == "batch pass 2: 1 batch in flight, 1 of 4 requests done, 0 failed, oldest 0:00:00"
    assert store.batches_in_flight() == []


def test_another_role_without_a_batch_api_is_called_synchronously_and_said_once(tmp_path: Path) -> None:
    from clearmed.batch.run import batch_clients

    main_config = write_config(tmp_path, "http://127.0.0.1:9/v1").read_text()
    judge = '\n[backbones.judge]\nkind = "openai_compatible"\nmodel = "m"\napi_base = "http://127.0.0.1:9/v1"\n'
    path = tmp_path / "two.toml"
    path.write_text(main_config + judge, encoding="utf-8")
    notes: list[str] = []
    clients = batch_clients(load_config(path), note=notes.append)
    assert set(clients) == {"main"}
    assert len(notes) == 1
    assert "judge" in notes[0]
    assert "synchronously" in notes[0]


def test_a_batch_service_that_stops_answering_stops_the_run_in_one_line_and_the_rerun_reattaches(
    tmp_path: Path,
) -> None:
    qs = questions(2, f"unavailable {tmp_path.name}")
    with FakeBatchOpenAI(gold={q.text: q.gold_letters[0] for q in qs}, api_key=KEY) as lm:
        config = write_config(tmp_path, lm.api_base)
        # num_retries = 1: a status asked twice, answered 503 both times, and the wait gives up.
        lm.fail_next("status", "503", times=2)
        run_dir = tmp_path / "r"
        with pytest.raises(BatchUnavailable, match="HTTP 503") as stopped:
            evaluate(
                EvalRequest(program="clear", benchmark="batch", questions=qs, config=str(config), run_dir=run_dir,
                            batch=True, quiet=True)
            )  # fmt: skip
        assert "\n" not in str(stopped.value)
        assert BatchStore(run_dir).batches_in_flight()  # recorded before the wait: a rerun finds it
        evaluate(
            EvalRequest(program="clear", benchmark="batch", questions=qs, config=str(config), run_dir=run_dir,
                        batch=True, quiet=True)
        )  # fmt: skip
        assert all(times == 1 for times in lm.submitted.values())  # reattached: nothing sent twice
    assert len(list(read_records(run_dir))) == 2


def test_an_anthropic_backbone_runs_in_batches_and_decides_as_its_synchronous_run(tmp_path: Path) -> None:
    """The same run through Anthropic's Messages API and through its Message Batches (the fake answers both alike)."""
    from .fake_anthropic import FakeBatchAnthropic

    qs = questions(4, f"anthropic {tmp_path.name}")
    with FakeBatchAnthropic(gold={q.text: q.gold_letters[0] for q in qs}, api_key=KEY) as lm:
        backbone = (
            f'kind = "hosted"\nmodel = "anthropic/claude-3-5-haiku-latest"\napi_base = "{lm.api_base}"\n'
            f'api_key_env = "{KEY_ENV}"\nnum_retries = 1\nprice = {{input = 0.8, output = 4.0}}'
        )
        run = f'batch_poll_s = 0.05\nruns_dir = "{tmp_path / "runs"}"'
        config = tmp_path / "anthropic.toml"
        config.write_text(demo_config_toml(backbone=backbone, program=PROGRAM, run=run), encoding="utf-8")
        for name, batch in (("sync", False), ("batch", True)):
            evaluate(
                EvalRequest(program="clear", benchmark="batch", questions=qs, config=str(config), run_dir=tmp_path / name,
                            batch=batch, threads=4, quiet=True)
            )  # fmt: skip
            if not batch:
                sync_calls = lm.chat_requests
        assert lm.chat_requests == sync_calls  # the batch run made no synchronous call
        assert lm.created_batches
        assert all(times == 1 for times in lm.submitted.values())
    assert decisions(tmp_path / "batch") == decisions(tmp_path / "sync")
    sync_usd = sum(entry.usd or 0.0 for entry in read_spend_log(tmp_path / "sync"))
    batch_usd = sum(entry.usd or 0.0 for entry in read_spend_log(tmp_path / "batch"))
    assert batch_usd == pytest.approx(sync_usd / 2)  # a configured price is discounted as the list price is


class _Killed(BaseException):
    """A SIGKILL's stand-in, in the one place a kill can fall between the provider's answer and the folder's record."""


def test_a_batch_accepted_just_before_a_kill_is_found_by_its_intent_and_not_sent_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from clearmed.batch import run as batch_run

    qs = questions(3, f"intent {tmp_path.name}")
    with FakeBatchOpenAI(gold={q.text: q.gold_letters[0] for q in qs}, api_key=KEY) as lm:
        recorded = batch_run._Batches.record

        def killed(self: Any, sending: Any, batch_id: str) -> None:
            raise _Killed(batch_id)

        monkeypatch.setattr(batch_run._Batches, "record", killed)
        with pytest.raises(_Killed):
            _run(tmp_path, lm, qs)
        assert len(lm.created_batches) == 1  # the provider made it; the folder has no id for it
        assert BatchStore(tmp_path / "run").batches_in_flight() == []
        monkeypatch.setattr(batch_run._Batches, "record", recorded)
        run_dir = _run(tmp_path, lm, qs)
        assert all(times == 1 for times in lm.submitted.values()), lm.submitted  # found, not sent again
    assert len(list(read_records(run_dir))) == 3
    submitted = [row for row in _lines(run_dir / BATCHES_FILE) if row.get("event") == "submitted"]
    assert submitted[0]["batch_id"] == lm.created_batches[0].id
    assert submitted[0]["intent"] == lm.created_batches[0].metadata["clearmed_intent"]
