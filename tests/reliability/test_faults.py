"""Faults at scale (issue 32): a run through the fault-injecting fakes (`fakes.py`), one case per fault.

The fake answers with the gold, so for every fault each answer is correct, marked degraded, or the run stopped with one
line (`outcome` sorts them); anything else is a silent flip and fails the case. Each numbered part of the issue has its
section; the LM's own failure policy is tested in test_lm_*.py.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from clearmed.api.assemble import build_program
from clearmed.config import load_config
from clearmed.core.errors import FatalServiceError
from clearmed.evaluation import EvalSpec, run_evaluation
from clearmed.evaluation.store import EvalRecord, read_records
from clearmed.numbers.scoring import grader_for
from clearmed.signatures.records import Question
from clearmed.testing import demo_config_toml

from .fakes import FakeOpenAI, FakeTavilyServer

pytestmark = pytest.mark.reliability

CATEGORY = "failing dependencies"
OPTIONS = {"A": "Cortisol", "B": "Insulin", "C": "Thyroxine", "D": "Growth hormone"}


def mcq(count: int, start: int = 0) -> list[Question]:
    return [
        Question(
            id=f"q{i}",
            text=f"Question {i}: which hormone is deficient in Addison disease (case {i})?",
            options=OPTIONS,
            gold_letters=["ABCD"[i % 4]],
        )
        for i in range(start, start + count)
    ]


def free_text(count: int) -> list[Question]:
    return [
        Question(
            id=f"ft{i}",
            text=f"Case {i}: a patient with fatigue and hyperpigmentation. What is the diagnosis?",
            answer_mode="free_text",
            gold_text="Addison disease",
            metadata={"task": "diagnosis"},
        )
        for i in range(count)
    ]


def gold_of(questions: Sequence[Question]) -> dict[str, str]:
    return {q.text: ",".join(q.gold_letters) if q.gold_letters else (q.gold_text or "") for q in questions}


def backbone(lm: FakeOpenAI, **extra: str) -> str:
    lines = ['kind = "openai_compatible"', 'model = "m"', f'api_base = "{lm.api_base}"', "cache = false"]
    lines += ["num_retries = 1", "timeout = 2.0", *(f"{k} = {v}" for k, v in extra.items())]
    return "\n".join(lines)


def write_config(
    tmp: Path,
    lm: FakeOpenAI,
    *,
    judge: FakeOpenAI | None = None,
    web: FakeTavilyServer | None = None,
    program: str = "",
    run: str = "",
    main: dict[str, str] | None = None,
) -> Path:
    settings = {"parallel_pathways": '"on"', "json_fallback": "false", "source_quality": '"priors"'}
    settings.update(line.split(" = ", 1) for line in program.splitlines() if line.strip())  # type: ignore[arg-type]
    sections: dict[str, str | None] = {
        "program": "\n".join(f"{key} = {value}" for key, value in settings.items()),
    }
    if judge is not None:
        sections["backbones.judge"] = backbone(judge)
    if web is not None:
        sections["search"] = (
            'backend = "tavily"\n'
            f'cache_path = "{tmp / "search.sqlite"}"\n'
            f'tavily = {{ api_base_url = "{web.url}", search_depth = "basic" }}'
        )
    if run:
        sections["run"] = run
    text = demo_config_toml(backbone=backbone(lm, **(main or {})), **sections)
    if web is None:  # the demo pages, with the record cache
        text = text.replace('date = "published" }', f'date = "published" }}\ncache_path = "{tmp / "search.sqlite"}"', 1)
    path = tmp / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def evaluate(
    config_path: Path, questions: Sequence[Question], run_dir: Path, program: str = "clear-heuristic", **kwargs: object
) -> list[EvalRecord]:
    config = load_config(str(config_path))
    built = build_program(program, config)
    spec = EvalSpec(program=program, benchmark="faults", source="faults", questions=questions, run_dir=run_dir)
    return run_evaluation(spec, config, built, scorer=grader_for(config), show_progress=False, **kwargs)  # type: ignore[arg-type]


def outcome(records: Sequence[EvalRecord], questions: Sequence[Question]) -> dict[str, int]:
    """Each question: correct, degraded or missing (not run: the run stopped); a wrong clean answer is a flip."""
    by_id = {r.question_id: r for r in records}
    counts = {"correct": 0, "degraded": 0, "missing": 0, "flipped": 0}
    for question in questions:
        record = by_id.get(question.id)
        if record is None:
            counts["missing"] += 1
        elif record.degraded:
            counts["degraded"] += 1
        elif record.score is not None and (
            record.score.correct or (record.score.rubric_grade and record.score.rubric_grade.score == 1.0)
        ):
            counts["correct"] += 1
        else:
            counts["flipped"] += 1
    return counts


@pytest.fixture
def lm() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture(autouse=True)
def _no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("clearmed.retrieval.tavily._sleep", lambda seconds: None)


# --------------------------------------------------------------------------------------------- 1. caches at scale


def test_a_locked_search_cache_degrades_and_the_resume_searches(reliability, tmp_path: Path, lm: FakeOpenAI) -> None:
    with reliability.case(CATEGORY, "search cache locked mid-run: degraded, searched on resume") as case:
        questions = mcq(3)
        lm.gold = gold_of(questions)
        config = write_config(tmp_path, lm)
        evaluate(config, questions[:1], tmp_path / "warm")  # creates the cache
        holder = sqlite3.connect(tmp_path / "search.sqlite", timeout=0.1)
        holder.execute("BEGIN EXCLUSIVE")
        try:
            import clearmed.retrieval.cache as cache_module

            original = cache_module.CachedWebSearch.__init__

            def short_busy(self, *args, **kwargs):  # type: ignore[no-untyped-def]
                original(self, *args, **{**kwargs, "busy_timeout": 0.1})

            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(cache_module.CachedWebSearch, "__init__", short_busy)
                records = evaluate(config, questions, tmp_path / "run")
        finally:
            holder.rollback()
            holder.close()
        counts = outcome(records, questions)
        case.flipped = counts["flipped"]
        # q0's search was stored before the lock (WAL readers pass it); the others cannot store theirs: degraded,
        # never a clean answer without the web.
        assert counts == {"correct": 1, "degraded": 2, "missing": 0, "flipped": 0}
        assert all("dynamic_search" in r.degraded_stages for r in records if r.degraded)
        records = evaluate(config, questions, tmp_path / "run")
        assert outcome(records, questions) == {"correct": 3, "degraded": 0, "missing": 0, "flipped": 0}
        assert all(r.decision.bundle.dynamic_passages for r in records)


def medqa_eval_args(config: Path, source: Path, run_dir: Path) -> list[str]:
    """`clearmed eval` of clear-heuristic over a MedQA file into ``run_dir``: the arguments from the command's name on."""
    return [
        "eval", "--config", str(config), "--program", "clear-heuristic", "--benchmark", "medqa",
        "--source", str(source), "--run-dir", str(run_dir),
    ]  # fmt: skip


def _medqa_file(tmp: Path, questions: Sequence[Question]) -> Path:
    path = tmp / "medqa.jsonl"
    rows = [
        {"question": q.text, "options": q.options, "answer_idx": q.gold_letters[0]} for q in questions if q.gold_letters
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


# --------------------------------------------------------------------------------------------- 2. replies a retry mends


def test_a_tavily_200_that_is_not_json_degrades_then_resumes_clean(
    reliability, tmp_path: Path, lm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    with reliability.case(CATEGORY, "Tavily 200 with an HTML body: retried, degraded, clean on resume") as case:
        questions = mcq(2)
        lm.gold = gold_of(questions)
        with FakeTavilyServer() as web:
            monkeypatch.setenv("TAVILY_API_KEY", web.key)
            config = write_config(tmp_path, lm, web=web)
            web.inject("malformed", times=4)  # the first search and its three retries
            records = evaluate(config, questions, tmp_path / "run")
            counts = outcome(records, questions)
            case.flipped = counts["flipped"]
            assert counts == {"correct": 1, "degraded": 1, "missing": 0, "flipped": 0}
            records = evaluate(config, questions, tmp_path / "run")
            assert outcome(records, questions)["correct"] == 2


def test_a_damaged_cache_entry_is_refetched_with_a_warning(reliability, tmp_path: Path, lm: FakeOpenAI) -> None:
    with reliability.case(CATEGORY, "one damaged search-cache entry: dropped, refetched, later searches fine") as case:
        from clearmed.retrieval.cache import DamagedCacheEntryWarning

        questions = mcq(4)
        lm.gold = gold_of(questions)
        config = write_config(tmp_path, lm)
        evaluate(config, questions[:2], tmp_path / "first")
        with sqlite3.connect(tmp_path / "search.sqlite") as conn:
            conn.execute("UPDATE searches SET passages = '[{\"broken' WHERE rowid = (SELECT MIN(rowid) FROM searches)")
        with pytest.warns(DamagedCacheEntryWarning):
            records = evaluate(config, questions, tmp_path / "second")
        counts = outcome(records, questions)
        case.flipped = counts["flipped"]
        assert counts["correct"] == 4, counts
        assert all(r.decision.bundle.dynamic_passages for r in records)


# --------------------------------------------------------------------------------------------- 3. graders


@pytest.mark.parametrize("fault", ["401", "insufficient_quota"])
def test_a_dead_judge_key_stops_the_run(reliability, tmp_path: Path, lm: FakeOpenAI, fault: str) -> None:
    with reliability.case(CATEGORY, f"judge {fault}: the run stops, nothing scored wrong") as case:
        questions = free_text(3)
        lm.gold = gold_of(questions)
        with FakeOpenAI(gold=gold_of(questions)) as judge:
            config = write_config(tmp_path, lm, judge=judge)
            judge.inject(fault, times=None)
            with pytest.raises(FatalServiceError) as info:
                evaluate(config, questions, tmp_path / "run", program="clear")
            assert "\n" not in str(info.value)
            records_path = tmp_path / "run" / "results.jsonl"
            written = records_path.read_text().splitlines() if records_path.exists() else []
            case.flipped = sum(not json.loads(line)["score"]["correct"] for line in written)
            assert written == []


@pytest.mark.parametrize("fault", ["503", "timeout"])
def test_a_judge_503_or_timeout_degrades_and_the_resume_regrades(
    reliability, tmp_path: Path, lm: FakeOpenAI, fault: str
) -> None:
    with reliability.case(CATEGORY, f"judge {fault}: degraded, regraded on resume") as case:
        questions = free_text(2)
        lm.gold = gold_of(questions)
        with FakeOpenAI(gold=gold_of(questions), hang_s=3.0) as judge:
            config = write_config(tmp_path, lm, judge=judge)
            judge.inject(fault, times=None)
            records = evaluate(config, questions, tmp_path / "run", program="clear")
            counts = outcome(records, questions)
            case.flipped = counts["flipped"]
            assert counts == {"correct": 0, "degraded": 2, "missing": 0, "flipped": 0}
            assert all(r.degraded_stages == ["grading"] for r in records)
            judge.clear()
            records = evaluate(config, questions, tmp_path / "run", program="clear")
            assert outcome(records, questions)["correct"] == 2


@pytest.mark.parametrize("failure", ["fatal", "transient"])
def test_the_rubric_grader_stops_on_a_dead_key_and_marks_a_503_for_regrading(reliability, failure: str) -> None:
    with reliability.case(CATEGORY, f"HealthBench rubric grader: {failure} judge failure"):
        from clearmed.backbones.config import OpenAICompatibleBackbone
        from clearmed.backbones.factory import build_lm
        from clearmed.metrics import RubricGrader, score_rubric_decision
        from clearmed.signatures.records import ChatTurn, Decision, EvidenceBundle, RubricItem

        server = FakeOpenAI()
        server.inject("401" if failure == "fatal" else "503", times=None)
        judge = OpenAICompatibleBackbone(
            kind="openai_compatible", model="m", api_base=server.api_base, cache=False, num_retries=0
        )
        judge_lm = build_lm(judge, role="judge")
        question = Question(
            id="hb1",
            text="My head hurts.",
            answer_mode="free_text",
            conversation=[ChatTurn(role="user", content="My head hurts.")],
            rubric=[RubricItem(criterion="Asks about red flags", points=5)],
        )
        decision = Decision(
            question_id="hb1",
            status="answered",
            response="Any fever or stiff neck?",
            bundle=EvidenceBundle(question=question, candidates=[]),
            program="clear",
        )
        grader = RubricGrader(judge_lm, max_attempts=2)
        try:
            if failure == "fatal":
                with pytest.raises(FatalServiceError):
                    score_rubric_decision(grader, question, decision)
                assert server.chat_requests == 1  # no retry of a dead key, no second criterion
                return
            score = score_rubric_decision(grader, question, decision)
        finally:
            server.close()
        assert score.judge_transient  # the runner marks it degraded: regraded on resume, never scored
        assert score.rubric_grade is not None
        assert score.rubric_grade.score is None


# --------------------------------------------------------------------------------------------- 5. spend across kills

# Fake prices: 100 prompt and 20 completion tokens a call at $1,000 / $5,000 per million = $0.20 a call.
CALL_USD = 0.2
PRICE = "{ input = 1000.0, output = 5000.0 }"


def billed_usd(lm: FakeOpenAI) -> float:
    """What the fake provider billed: every completion it sent."""
    return round(lm.served["ok"] * CALL_USD, 6)


def logged_usd(run_dir: Path) -> float:
    lines = (run_dir / "spend.jsonl").read_text().splitlines() if (run_dir / "spend.jsonl").exists() else []
    return round(sum(json.loads(line)["usd"] or 0 for line in lines if line.endswith("}")), 6)


def test_three_sigkills_under_max_cost_stay_within_the_documented_overshoot(
    reliability, tmp_path: Path, lm: FakeOpenAI
) -> None:
    with reliability.case(
        "lost work", "three SIGKILLs under --max-cost: spend within the documented overshoot"
    ) as case:
        import os
        import signal
        import subprocess
        import sys
        import time

        questions = mcq(60)
        lm.gold = gold_of(questions)
        # Parametric and local answer at once, the dynamic pathway after a second: at every kill the questions in
        # flight have paid calls that no record holds yet.
        lm.delays["dynamic_answer"] = 1.0
        threads, budget = 4, 8.0
        config = write_config(tmp_path, lm, main={"price": PRICE}, run=f"num_threads = {threads}")
        source = _medqa_file(tmp_path, questions)
        run_dir = tmp_path / "run"
        argv = [sys.executable, "-m", "clearmed.cli.main", *medqa_eval_args(config, source, run_dir)]
        argv += ["--max-cost", str(budget)]
        in_flight_at_kills = 0
        for _ in range(3):
            process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            billed_before = lm.served["ok"]
            deadline = time.monotonic() + 60
            while lm.served["ok"] == billed_before and time.monotonic() < deadline:
                time.sleep(0.01)
            # A second and a half into its billing: the first questions are written, the next ones half done.
            time.sleep(1.5)
            in_flight_at_kills += lm.in_flight  # sent and not yet answered: billed after the kill, never seen
            os.kill(process.pid, signal.SIGKILL)
            process.wait()
        final = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
        assert final.returncode == 3, final.stderr[-2000:]  # the budget stopped it, with one line
        assert "budget reached" in final.stderr
        billed = billed_usd(lm)
        question_usd = 3 * CALL_USD  # clear-heuristic: three pathway calls
        # The documented overshoot: the questions in flight when the budget stops new ones (num_threads of them),
        # plus the calls in flight at each kill (paid, and never answered to the process that made them).
        overshoot = threads * question_usd + in_flight_at_kills * CALL_USD
        case.note = (
            f"billed ${billed:.2f} for a ${budget:.2f} budget (allowed ${budget + overshoot:.2f}, "
            f"{in_flight_at_kills} calls in flight at the kills); logged ${logged_usd(run_dir):.2f}; "
            f"{len(list(read_records(run_dir)))} records"
        )
        print(case.note)
        assert billed <= budget + overshoot + 1e-9, case.note
        # Every call answered to the process is in the log, kills or not.
        assert logged_usd(run_dir) == pytest.approx(billed - in_flight_at_kills * CALL_USD, abs=1e-6)


def test_tavily_dollars_and_grading_reach_the_budget(
    reliability, tmp_path: Path, lm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    with reliability.case("lost work", "Tavily credits and grading count toward --max-cost"):
        questions = free_text(2)
        lm.gold = gold_of(questions)
        with FakeOpenAI(gold=gold_of(questions)) as judge, FakeTavilyServer() as web:
            monkeypatch.setenv("TAVILY_API_KEY", web.key)
            config = write_config(
                tmp_path, lm, judge=judge, web=web, main={"price": PRICE}, run="tavily_usd_per_credit = 0.5"
            )
            text = config.read_text().replace(
                f'api_base = "{judge.api_base}"', f'api_base = "{judge.api_base}"\nprice = {PRICE}'
            )
            config.write_text(text)
            records = evaluate(config, questions, tmp_path / "run", program="clear")
        entries = [json.loads(line) for line in (tmp_path / "run" / "spend.jsonl").read_text().splitlines()]
        stages = {entry["row"]["stage"] for entry in entries}
        assert "grading" in stages
        assert "dynamic_search" in stages
        search = [e for e in entries if e["row"]["stage"] == "dynamic_search"]
        assert all(e["usd"] == pytest.approx(0.5) for e in search)  # one basic credit at $0.50
        assert all(r.cost_usd is not None and r.cost_usd >= 0.5 for r in records)  # the record prices its search


def test_the_estimate_prices_tavily(reliability, tmp_path: Path) -> None:
    with reliability.case("lost work", "--estimate prices Tavily credits"):
        from clearmed.evaluation.spend import DEFAULT_USD_PER_CREDIT, Prices
        from clearmed.numbers.estimate import estimate
        from clearmed.signatures.records import CallUsage, EvidenceBundle
        from clearmed.signatures.records import Decision as DecisionRecord

        question = mcq(1)[0]
        decision = DecisionRecord(
            question_id=question.id,
            status="failed",
            bundle=EvidenceBundle(question=question, candidates=[]),
            usage=[CallUsage(stage="dynamic_search", role="tool", model="tavily", credits=2.0)],
            program="clear",
        )
        record = EvalRecord(
            question_id=question.id,
            index=0,
            program="clear",
            decision=decision,
            seconds=1.0,
            finished="2026-01-01T00:00:00+00:00",
        )
        result = estimate(
            [record],
            Prices({}, usd_per_credit=DEFAULT_USD_PER_CREDIT),
            questions=100,
            threads=1,
            basis_runs=["r"],
            credits_per_search=2.0,
        )
        assert result.search_usd == pytest.approx(2 * 0.008)
        assert "= $1.60" in result.render("medqa")


def test_a_kill_between_the_set_aside_writes_counts_the_degraded_question_once(
    reliability, tmp_path: Path, lm: FakeOpenAI
) -> None:
    with reliability.case("lost work", "kill between the degraded set-aside's two writes: written once"):
        from clearmed.evaluation.store import DEGRADED, RESULTS, RunStore, read_set_aside_degraded

        questions = mcq(2)
        lm.gold = gold_of(questions)
        lm.inject("503", times=None, stage="dynamic_answer")
        config = write_config(tmp_path, lm)
        run_dir = tmp_path / "run"
        evaluate(config, questions, run_dir)
        lines = (run_dir / RESULTS).read_bytes()
        with RunStore(run_dir) as store:
            store.set_aside_degraded()
        (run_dir / RESULTS).write_bytes(lines)  # as if killed after the aside was written, before results.jsonl
        with RunStore(run_dir) as store:
            assert len(store.set_aside_degraded()) == 2
        assert len(read_set_aside_degraded(run_dir)) == 2  # not 4
        assert len((run_dir / DEGRADED).read_bytes().splitlines()) == 2


# --------------------------------------------------------------------------------------------- 6. bad characters


def test_a_benchmark_row_with_a_lone_surrogate_is_refused_naming_the_row(
    reliability, tmp_path: Path, lm: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    with reliability.case("bad input", "benchmark row with an escaped lone surrogate: one line naming it"):
        from clearmed.cli.main import main

        questions = mcq(3)
        lm.gold = gold_of(questions)
        config = write_config(tmp_path, lm)
        source = _medqa_file(tmp_path, questions)
        lines = source.read_text().splitlines()
        lines[1] = lines[1].replace("Addison", "Addison\\udcff")  # JSON's escape: json.loads makes half a character
        source.write_text("\n".join(lines) + "\n")
        argv = medqa_eval_args(config, source, tmp_path / "run")
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert f"{source.name}:2: " in err
        assert "lone surrogate" in err
        assert "Traceback" not in err
        assert main([*argv, "--skip-bad-rows"]) == 0  # the other rows run
        records = list(read_records(tmp_path / "run"))
        assert len(records) == 2
        assert all(r.score is not None and r.score.correct and not r.degraded for r in records)


def test_half_a_character_in_a_reply_is_mended_in_the_record_never_a_failed_question(
    reliability, tmp_path: Path, lm: FakeOpenAI
) -> None:
    with reliability.case(
        "bad input", "a reply with a lone surrogate: U+FFFD in the record, noted, still right"
    ) as case:
        questions = mcq(4)
        lm.gold = gold_of(questions)
        lm.inject("lone_surrogate", times=1, stage="parametric")
        config = write_config(tmp_path, lm, program='parallel_pathways = "off"')  # the first question meets it
        records = evaluate(config, questions, tmp_path / "run")
        assert [r.question_id for r in records] == ["q0", "q1", "q2", "q3"]
        first = records[0]
        assert first.decision.status != "failed"
        assert "\ufffd" in first.decision.bundle.candidate("parametric").rationale  # the half character, mended
        notes = [step.outcome for step in first.decision.steps if step.trigger == "record"]
        assert len(notes) == 1
        assert "U+FFFD" in notes[0]
        assert "half character" in notes[0]
        counts = outcome(records, questions)
        case.flipped = counts["flipped"]
        assert counts["correct"] == 4  # the answer the reply gave still counts
        assert evaluate(config, questions, tmp_path / "run") == records  # a resume keeps it and redoes nothing


def test_a_surrogate_pair_becomes_its_character_and_half_of_one_becomes_u_fffd(reliability) -> None:
    with reliability.case("bad input", "surrogates in a reply: a pair joined, each half replaced, counted"):
        from clearmed.core.sanitize import mend_surrogates, mend_surrogates_in

        assert mend_surrogates("ok \ud83d\ude00") == ("ok \U0001f600", 0)  # a whole emoji in two halves: joined
        assert mend_surrogates("cut \ud83d.") == ("cut \ufffd.", 1)  # the high half alone
        assert mend_surrogates("\ude00\ud83d") == ("\ufffd\ufffd", 2)  # low before high is no pair
        assert mend_surrogates_in({"a": ["x\udcff", 3, {"b": "\ud800"}]}) == ({"a": ["x\ufffd", 3, {"b": "\ufffd"}]}, 2)


def test_a_record_unwritable_for_another_reason_is_recorded_failed_and_the_run_goes_on(
    reliability, tmp_path: Path, lm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    with reliability.case("bad input", "a record that will not load back (not a surrogate): that question failed"):
        from clearmed.evaluation import runner
        from clearmed.evaluation.store import UnwritableRecordError

        questions = mcq(2)
        lm.gold = gold_of(questions)
        config = write_config(tmp_path, lm)
        real = runner.RunStore.append

        def refuse_q0(store: object, record: EvalRecord) -> None:
            if record.question_id == "q0" and record.decision.status != "failed":
                raise UnwritableRecordError("q0: its record would not load back (a NaN)")
            real(store, record)  # type: ignore[arg-type]

        monkeypatch.setattr(runner.RunStore, "append", refuse_q0)
        records = evaluate(config, questions, tmp_path / "run")
        assert records[0].decision.status == "failed"
        assert "a NaN" in (records[0].decision.error or "")
        assert outcome(records[1:], questions[1:])["correct"] == 1


def test_ask_with_bytes_that_are_not_utf8_is_one_line(reliability, tmp_path: Path, lm: FakeOpenAI) -> None:
    with reliability.case("bad input", "ask: a question with non-UTF-8 bytes gives one line"):
        import subprocess
        import sys

        config = write_config(tmp_path, lm)
        command = [
            sys.executable.encode(),
            b"-m",
            b"clearmed.cli.main",
            b"ask",
            b"Which hormone is low in Addison\xff?",
            b"-o",
            b"A: cortisol",
            b"-o",
            b"B: insulin",
            b"-c",
            str(config).encode(),
        ]
        child = subprocess.run(command, capture_output=True, timeout=120, check=False)
        err = child.stderr.decode("utf-8", "replace").strip()
        assert child.returncode == 2, err
        assert err.startswith("clearmed: error: the question holds bytes that are not UTF-8")
        assert len(err.splitlines()) == 1
        assert lm.chat_requests == 0


# --------------------------------------------------------------------------------------------- 7. secrets by value

PLAIN_KEY = "plainvalue-7f3a9c2e51"  # no known key shape, under a variable name that does not look like a key's
PASSWORD = "pw-s3cret-value"


def _leaks(folder: Path, *secrets: str) -> list[str]:
    """Files under `folder` holding any of `secrets`, with the secret found."""
    found = []
    for path in folder.rglob("*"):
        if path.is_file():
            text = path.read_bytes().decode("utf-8", "replace")
            found += [f"{path.name}: {secret}" for secret in secrets if secret in text]
    return found


@pytest.mark.parametrize("fault", ["echo_key_400", "echo_key_500"])
def test_a_key_of_no_known_shape_echoed_by_the_server_never_reaches_the_run_folder(
    reliability, tmp_path: Path, lm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    with reliability.case("secrets", f"api_key_env VLLM_KEY of no key shape, echoed in a {fault[-3:]}") as case:
        from clearmed.cli.main import main

        monkeypatch.setenv("VLLM_KEY", PLAIN_KEY)
        questions = mcq(2)
        lm.gold = gold_of(questions)
        lm.api_key = PLAIN_KEY
        lm.inject(fault, times=None, stage="dynamic_answer")
        config = write_config(tmp_path, lm, main={"api_key_env": '"VLLM_KEY"'})
        run_dir = tmp_path / "run"
        argv = ["eval", "--config", str(config), "--program", "clear-heuristic", "--benchmark", "medqa"]
        argv += ["--source", str(_medqa_file(tmp_path, questions)), "--run-dir", str(run_dir)]
        assert main(argv) == (4 if fault == "echo_key_500" else 0)  # a 500 degrades its questions: exit 4
        records = list(read_records(run_dir))
        assert all(r.degraded or r.score.correct for r in records if r.score)  # type: ignore[union-attr]
        assert any("***" in (c.error.message if c.error else "") for r in records for c in r.decision.bundle.candidates)
        leaks = _leaks(run_dir, PLAIN_KEY)
        case.leaked = len(leaks)
        assert leaks == []


def test_a_password_in_api_base_is_refused_at_config_load_without_showing_it(
    reliability, tmp_path: Path, lm: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    with reliability.case("secrets", "credentials inside api_base: refused in one line at load, never shown") as case:
        from clearmed.cli.main import main

        questions = mcq(1)
        lm.gold = gold_of(questions)
        config = write_config(tmp_path, lm)
        text = config.read_text().replace(lm.api_base, lm.api_base.replace("http://", f"http://alice:{PASSWORD}@"), 1)
        config.write_text(text)
        source = _medqa_file(tmp_path, questions)
        argv = ["eval", "--config", str(config), "--program", "clear-heuristic", "--benchmark", "medqa"]
        assert main([*argv, "--source", str(source), "--run-dir", str(tmp_path / "run")]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1
        assert "backbones.main.api_base: holds a user name or password" in err
        assert "api_key_env" in err  # what to do instead
        case.leaked = int(PASSWORD in err)
        assert PASSWORD not in err
        assert lm.served["ok"] == 0  # refused before any call, not a run of questions that can never connect
        assert not (tmp_path / "run").exists()


# --------------------------------------------------------------------------------------------- 9. config and caches


@pytest.mark.parametrize(
    ("table", "line", "field"),
    [
        ("run", 'num_threads = "2"', "run.num_threads"),
        ("program", 'local_k = "4"', "program.local_k"),
        ("search", 'max_query_chars = "300"', "search.max_query_chars"),
        ("thresholds", 'guard_min_high = "2"', "thresholds.guard_min_high"),
        ("program", 'enable_guard = "yes"', "program.enable_guard"),
    ],
)
def test_a_number_written_as_a_string_is_refused_with_one_line(
    reliability, tmp_path: Path, capsys: pytest.CaptureFixture[str], table: str, line: str, field: str
) -> None:
    with reliability.case("bad input", f"config: {line} in [{table}] refused, not coerced"):
        from clearmed.cli.main import main

        text = demo_config_toml(**{table: line}) if table != "search" else demo_config_toml()
        if table == "search":
            text = text.replace('backend = "offline"', f'backend = "offline"\n{line}', 1)
        path = tmp_path / "config.toml"
        path.write_text(text, encoding="utf-8")
        assert main(["config", "-c", str(path)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"clearmed: error: {path}: {field}:"), err
        assert len(err.splitlines()) == 1


def test_an_lm_cache_that_cannot_write_warns_once(reliability, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with reliability.case("failing dependencies", "LM cache on a full disk: one warning, not silence"):
        import errno

        import dspy
        from dspy.clients.cache import Cache

        from clearmed.evaluation.lm_cache import LMCacheWarning, watch_lm_cache

        cache = Cache(enable_disk_cache=True, enable_memory_cache=False, disk_cache_dir=str(tmp_path / "lm"))
        monkeypatch.setattr(dspy, "cache", cache)

        def full(*args: object, **kwargs: object) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(cache.disk_cache, "set", full)
        watch_lm_cache()
        with pytest.warns(LMCacheWarning, match="cannot write.*No space left") as caught:
            [cache.put({"model": "m", "messages": [n]}, {"reply": n}) for n in range(3)]
        assert len([w for w in caught if issubclass(w.category, LMCacheWarning)]) == 1


def test_a_folder_from_before_the_spend_log_counts_its_records(reliability, tmp_path: Path, lm: FakeOpenAI) -> None:
    with reliability.case("lost work", "a run folder without spend.jsonl: its records' dollars still count"):
        from clearmed.evaluation.runner import BudgetReached

        questions = mcq(4)
        lm.gold = gold_of(questions)
        config = write_config(tmp_path, lm, main={"price": PRICE})
        run_dir = tmp_path / "run"
        evaluate(config, questions, run_dir, stop_after=2)  # $1.20
        (run_dir / "spend.jsonl").unlink()  # as an older clearmed left it
        served = lm.served["ok"]
        with pytest.raises(BudgetReached, match=r"spent \$1\.20"):
            evaluate(config, questions, run_dir, max_cost=1.0)
        assert lm.served["ok"] == served  # nothing started past the budget
        assert logged_usd(run_dir) == pytest.approx(1.2)  # carried over once
