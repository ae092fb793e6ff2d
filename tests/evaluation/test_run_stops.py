"""Whole runs against outside services: degraded questions reported apart and redone on resume, fatal errors and budgets
that stop a run cleanly and resumably, resume across operational settings, dollars, credits and retries counted."""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dspy
import pytest
from dspy import lm15

from clearmed.backbones.client import ClearmedLM
from clearmed.config import parse_config
from clearmed.core.errors import FatalServiceError
from clearmed.evaluation import EvalSpec, RunStore, RunStoreError, read_records, run_evaluation, summarize
from clearmed.evaluation.runner import BudgetReached
from clearmed.evaluation.spend import Prices
from clearmed.evaluation.store import DEGRADED, read_set_aside_degraded
from clearmed.programs.clear import CLEAR
from clearmed.report.markdown import comparison_table, details_markdown
from clearmed.retrieval.memory import InMemoryRetriever, InMemoryWebSearch
from clearmed.signatures.records import Question
from clearmed.signatures.records.settings import ProgramSettings
from clearmed.testing import (
    LOCAL,
    QUESTION,
    WEB,
    ScriptedEngine,
    _AsyncScriptedEngine,
    label_all,
    pathway_replies,
    verifier_reply,
)

MAIN: dict[str, Any] = {"kind": "openai_compatible", "model": "m", "api_base": "http://127.0.0.1:9/v1"}
# $1,000 per million prompt tokens, $2,000 per million output tokens: a scripted question costs about a dollar.
PRICED = {**MAIN, "price": {"input": 1000.0, "output": 2000.0}}
CONFIG = parse_config({"backbones": {"main": PRICED}}, source="test.toml")
HAPPY: dict[str, Any] = {
    **pathway_replies("A", "A", "A"),
    "source_quality": label_all("high"),
    "verifier": verifier_reply("consensus"),
}
RATE_LIMITED = lm15.RateLimitError("too many requests", retry_after=0.0, status=429)


def questions(n: int = 6) -> list[Question]:
    # Distinct texts, so that no question's prompts are another's cache hits.
    return [
        QUESTION.model_copy(
            update={"id": f"q{i}", "text": f"{QUESTION.text} (case {i})", "gold_letters": ["A" if i % 2 == 0 else "B"]}
        )
        for i in range(n)
    ]


def spec(run_dir: Path, n: int = 6) -> EvalSpec:
    return EvalSpec(program="clear", benchmark="toy", source="memory", questions=questions(n), run_dir=run_dir)


def failing(reply: object, error: BaseException, calls: set[int]):
    """`reply`, except on the listed calls of this stage (counted from 0), which raise `error`."""
    counter = itertools.count()
    lock = threading.Lock()

    def answer(call: object) -> object:
        with lock:
            number = next(counter)
        return error if number in calls else reply

    return answer


def in_order(replies: list[object], then: object):
    """These replies to this stage's calls in turn, then `then`."""
    queue = list(replies)
    lock = threading.Lock()

    def answer(call: object) -> object:
        with lock:
            return queue.pop(0) if queue else then

    return answer


def program(
    script: dict[str, Any],
    *,
    model: str = "local/scripted",
    cache: bool = False,
    parallel: str = "off",
    web: InMemoryWebSearch | None = None,
):
    """CLEAR on a scripted engine, through `ClearmedLM` as every configured backbone is (fatal errors raised as such)."""
    engine = ScriptedEngine(script=dict(script))
    lm = ClearmedLM(
        model,
        service="main backbone m",
        engine=engine,
        async_engine=_AsyncScriptedEngine(engine),
        cache=cache,
        num_retries=0,
    )
    built = CLEAR(
        InMemoryRetriever(LOCAL),
        web if web is not None else InMemoryWebSearch(WEB),
        settings=ProgramSettings(json_fallback=False, parallel_pathways=parallel),  # type: ignore[arg-type]
        role_lms={"main": lm},
    )
    return built, engine


@pytest.fixture
def memory_cache() -> Iterator[None]:
    """DSPy's in-memory LM cache, on for one test (the suite runs with caches off)."""
    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=True)
    yield
    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)


def summary_of(run_dir: Path, config=CONFIG):
    with RunStore(run_dir) as store:
        manifest = store.read_manifest()
    assert manifest is not None
    records = sorted(read_records(run_dir), key=lambda r: r.index)
    return summarize(records, manifest, prices=Prices(config.backbones), set_aside=read_set_aside_degraded(run_dir))


# --------------------------------------------------------------------------------------------- degraded


def test_a_stage_failing_after_its_retries_is_a_degraded_question_reported_apart(tmp_path: Path) -> None:
    script = {
        **HAPPY,
        # q1's dynamic answer is still rate limited after its retries: degraded
        "dynamic_answer": failing(HAPPY["dynamic_answer"], RATE_LIMITED, {1}),
        # q2's verifier writes prose: unparsed, recorded as today, not degraded (a retry would meet it again)
        "verifier": in_order([HAPPY["verifier"], HAPPY["verifier"], "I'd rather not say."], HAPPY["verifier"]),
    }
    built, _ = program(script)
    records = run_evaluation(spec(tmp_path / "run", n=4), CONFIG, built, show_progress=False)
    assert [r.degraded_stages for r in records] == [[], ["dynamic_answer"], [], []]
    assert records[2].decision.deciding_rule.startswith("heuristic_")  # the unparsed verifier fell back, clean
    summary = summary_of(tmp_path / "run")
    assert (summary.degraded, summary.degraded_stages) == (1, {"dynamic_answer": 1})
    assert summary.accuracy is not None
    assert summary.clean_accuracy is not None
    # the headline is over all four, q1 (degraded) counted wrong; the clean figure (q0, q2, q3) beside it
    assert (summary.accuracy.n, summary.accuracy.correct, summary.accuracy.counted_wrong) == (4, 2, 1)
    assert (summary.clean_accuracy.n, summary.clean_accuracy.correct) == (3, 2)
    table = comparison_table([summary])
    assert "| degraded |" in table.splitlines()[0]
    assert "| 4/4 | 50.0 [" in table
    assert "| 66.7 (3) |" in table
    assert "degraded ones (a stage failed after its retries) counted wrong" in table
    assert "1 of 4 questions had a stage fail after its retries (by stage: dynamic_answer 1)" in details_markdown(
        [summary]
    )
    json.loads(summary.model_dump_json())


def test_a_resume_redoes_degraded_questions_paying_only_for_what_failed(tmp_path: Path, memory_cache) -> None:
    run_dir = tmp_path / "run"
    model = f"local/scripted-{tmp_path.name}"  # its own cache entries
    script = {**HAPPY, "dynamic_answer": failing(HAPPY["dynamic_answer"], RATE_LIMITED, {1})}  # fails once
    built, engine = program(script, model=model, cache=True)
    first = run_evaluation(spec(run_dir, n=4), CONFIG, built, show_progress=False)
    assert [r.question_id for r in first if r.degraded] == ["q1"]
    paid = first[1].cost_usd
    assert paid is not None
    assert paid > 0

    # --keep-degraded: nothing is redone
    engine.calls.clear()
    kept = run_evaluation(spec(run_dir, n=4), CONFIG, built, show_progress=False, keep_degraded=True)
    assert engine.calls == []
    assert [r.question_id for r in kept if r.degraded] == ["q1"]

    # the default: the degraded question is set aside and redone; its good calls come from the cache
    engine.calls.clear()
    redone = run_evaluation(spec(run_dir, n=4), CONFIG, built, show_progress=False)
    assert engine.stages() == ["dynamic_answer", "verifier"]  # what failed, and the verifier that reads it
    assert [r.question_id for r in redone] == ["q0", "q1", "q2", "q3"]
    assert not any(r.degraded for r in redone)
    cached = {row.stage for row in redone[1].decision.usage if row.cached}
    assert {"parametric", "local_answer", "source_quality"} <= cached
    assert len((run_dir / "results.jsonl").read_text().splitlines()) == 4  # one line per question
    set_aside = read_set_aside_degraded(run_dir)
    assert [(r.question_id, r.degraded_stages) for r in set_aside] == [("q1", ["dynamic_answer"])]
    summary = summary_of(run_dir)
    assert summary.degraded == 0
    assert summary.spend is not None
    assert (summary.spend.set_aside_questions, summary.spend.set_aside_usd) == (1, paid)
    # the redo cost a fraction of the first attempt: only the two calls that reached the model
    assert redone[1].cost_usd is not None
    assert 0 < redone[1].cost_usd < paid
    assert (run_dir / DEGRADED).is_file()


# --------------------------------------------------------------------------------------------- fatal errors

BAD_KEY = lm15.AuthError("Incorrect API key provided: sk-live-0123456789abcdefghij", status=401)


@pytest.mark.parametrize("threads", [1, 3])
def test_a_fatal_error_stops_the_run_writes_nothing_for_it_and_the_run_resumes(tmp_path: Path, threads: int) -> None:
    run_dir = tmp_path / "run"
    # the key is revoked from the third question on (its parametric call, counted from 0, is the third)
    script = {**HAPPY, "parametric": failing(HAPPY["parametric"], BAD_KEY, set(range(2, 100)))}
    built, engine = program(script, parallel="on")
    with pytest.raises(FatalServiceError) as raised:
        run_evaluation(spec(run_dir, n=8), CONFIG, built, show_progress=False, num_threads=threads)
    assert str(raised.value).startswith("main backbone m: authentication failed (HTTP 401)")
    assert "sk-live" not in str(raised.value)
    records = list(read_records(run_dir))
    assert len(records) == 2  # q0 and q1 finished; nothing for the question that met the error, nor after it
    assert all(not r.degraded and r.decision.status == "answered" for r in records)
    started = engine.stages().count("parametric")
    assert started <= 2 + threads  # no question started once the error was seen, beyond those in flight
    healthy, _ = program(HAPPY)
    resumed = run_evaluation(spec(run_dir, n=8), CONFIG, healthy, show_progress=False, num_threads=threads)
    assert [r.question_id for r in resumed] == [f"q{i}" for i in range(8)]
    assert len((run_dir / "results.jsonl").read_text().splitlines()) == 8


def test_a_fatal_error_from_the_judge_backbone_stops_the_run_too(tmp_path: Path) -> None:
    built, _ = program(HAPPY)
    calls = itertools.count()

    def scorer(question, decision):
        if next(calls) == 1:
            raise FatalServiceError("judge backbone j", "billing", "You exceeded your current quota", status=429)
        return None

    with pytest.raises(FatalServiceError, match="judge backbone j: billing or quota exhausted"):
        run_evaluation(spec(tmp_path / "run", n=4), CONFIG, built, show_progress=False, scorer=scorer)
    assert [r.question_id for r in read_records(tmp_path / "run")] == ["q0"]


# --------------------------------------------------------------------------------------------- budget


def test_max_cost_starts_no_question_past_the_budget_and_the_run_resumes_with_a_higher_one(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    built, engine = program(HAPPY)
    probe = run_evaluation(spec(tmp_path / "probe", n=1), CONFIG, built, show_progress=False)
    one = probe[0].cost_usd
    assert one is not None
    assert one > 0.1  # priced: about a dollar a question at the test price
    budget = 1.5 * one  # q0 leaves the run under it, q1 takes it past: q2 must not start
    with pytest.raises(BudgetReached) as raised:
        run_evaluation(spec(run_dir), CONFIG, built, show_progress=False, max_cost=budget)
    assert raised.value.not_started == 4
    assert raised.value.spent == pytest.approx(2 * one)
    assert "budget reached: spent $" in str(raised.value)
    assert [r.question_id for r in read_records(run_dir)] == ["q0", "q1"]
    # the same budget again: nothing starts, nothing is spent
    engine.calls.clear()
    with pytest.raises(BudgetReached):
        run_evaluation(spec(run_dir), CONFIG, built, show_progress=False, max_cost=budget)
    assert engine.calls == []
    # a higher budget resumes the run where it stopped
    done = run_evaluation(spec(run_dir), CONFIG, built, show_progress=False, max_cost=100 * one)
    assert [r.question_id for r in done] == [f"q{i}" for i in range(6)]


def test_with_threads_the_budget_is_overshot_by_at_most_the_questions_in_flight(tmp_path: Path) -> None:
    built, _ = program(HAPPY)
    one = run_evaluation(spec(tmp_path / "probe", n=1), CONFIG, built, show_progress=False)[0].cost_usd
    assert one is not None
    with pytest.raises(BudgetReached) as raised:
        run_evaluation(spec(tmp_path / "run", n=12), CONFIG, built, show_progress=False, num_threads=3, max_cost=one)
    finished = len(list(read_records(tmp_path / "run")))
    assert 1 <= finished <= 3  # the first wave was in flight when the budget was reached
    assert raised.value.not_started == 12 - finished


def test_a_budget_needs_every_backbone_priced(tmp_path: Path) -> None:
    from clearmed.core.errors import UsageError

    hosted = parse_config(
        {"backbones": {"main": {"kind": "hosted", "model": "openai/no-such-model", "api_key_env": "OPENAI_API_KEY"}}},
        source="t",
    )
    built, _ = program(HAPPY)
    with pytest.raises(UsageError, match=r"main \(openai/no-such-model\) has none"):
        run_evaluation(spec(tmp_path / "run"), hosted, built, show_progress=False, max_cost=5.0)


# --------------------------------------------------------------------------------------------- resume


def test_a_run_resumes_after_its_timeout_retries_threads_cache_and_price_changed(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    before = parse_config(
        {
            "backbones": {"main": {**PRICED, "timeout": 10.0}},
            "search": {"timeout": 20.0, "cache_mode": "record"},
            "run": {"num_threads": 1},
        },
        source="before.toml",
    )
    built, _ = program(HAPPY)
    run_evaluation(spec(run_dir), before, built, show_progress=False, stop_after=2)
    main = {**MAIN, "timeout": 120.0, "num_retries": 8, "cache": False, "price": {"input": 1.0, "output": 2.0}}
    after = parse_config(
        {
            "backbones": {"main": main},
            "search": {"timeout": 60.0, "cache_mode": "off"},
            "run": {"num_threads": 4, "max_cost": 50.0},
        },
        source="after.toml",
    )
    records = run_evaluation(spec(run_dir), after, built, show_progress=False, num_threads=4)
    assert len(records) == 6
    # what changes answers is still a different run
    hotter = parse_config({"backbones": {"main": {**main, "temperature": 0.7}}}, source="hot.toml")
    with pytest.raises(RunStoreError, match="different run"):
        run_evaluation(spec(run_dir), hotter, built, show_progress=False)


def test_a_run_from_before_the_operational_digest_resumes_after_a_changed_timeout(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    built, _ = program(HAPPY)
    config = parse_config({"backbones": {"main": {**MAIN, "timeout": 10.0}}}, source="t.toml")
    run_evaluation(spec(run_dir), config, built, show_progress=False, stop_after=2)
    # what the earlier clearmed wrote: a digest over every setting but [run] (timeout included)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["config_digest"] = "0123456789abcdef"
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    raised = parse_config({"backbones": {"main": {**MAIN, "timeout": 300.0}}}, source="t.toml")
    assert len(run_evaluation(spec(run_dir), raised, built, show_progress=False)) == 6


# --------------------------------------------------------------------------------------------- spend


def test_the_summary_counts_dollars_credits_and_retries_per_stage(tmp_path: Path) -> None:
    from clearmed.core.retries import note_credits, note_retry

    class MeteredSearch(InMemoryWebSearch):
        """An in-memory search that retries once and bills 2 credits, as an advanced Tavily search does."""

        def search(self, query: str, max_results: int):
            note_retry("tavily", 0.0)
            note_credits("tavily", 2)
            return super().search(query, max_results)

    built, _ = program(HAPPY, web=MeteredSearch(WEB))
    records = run_evaluation(spec(tmp_path / "run", n=3), CONFIG, built, show_progress=False)
    summary = summary_of(tmp_path / "run")
    spend = summary.spend
    assert spend is not None
    assert spend.usd == pytest.approx(sum(r.cost_usd or 0 for r in records))
    assert spend.mean_usd == pytest.approx(spend.usd / 3)
    stages = {stage.stage: stage for stage in spend.by_stage}
    assert stages["dynamic_search"].credits == 6
    assert stages["dynamic_search"].retries == 3
    assert (spend.search_credits, spend.retries) == (6, 3)
    assert stages["parametric"].usd is not None
    assert stages["parametric"].usd > 0
    assert stages["dynamic_search"].usd == 0
    text = details_markdown([summary])
    assert "### Spend: clear on toy" in text
    assert "6 Tavily credits, 3 retries" in text
    assert "| $/question |" in comparison_table([summary])


def test_the_summary_counts_scored_and_generated_answers_per_pathway(tmp_path: Path) -> None:
    from clearmed.testing import SCORED_CALIBRATED, build_toy_program

    # the parametric and local pathways are scored; the dynamic one has no distribution, so it generates
    scores = {stage: {"A": 0.7, "B": 0.1, "C": 0.1, "D": 0.1} for stage in ("parametric", "local_answer")}
    built, _, _ = build_toy_program({**HAPPY}, settings=SCORED_CALIBRATED, scores=scores)
    run_evaluation(spec(tmp_path / "run", n=2), CONFIG, built, show_progress=False)
    sources = summary_of(tmp_path / "run").answer_sources
    assert {p: (s.scored, s.generated) for p, s in sources.items()} == {
        "parametric": (2, 0),
        "local": (2, 0),
        "dynamic": (0, 2),
    }
    assert "dynamic 0 scored, 2 generated" in details_markdown([summary_of(tmp_path / "run")])
