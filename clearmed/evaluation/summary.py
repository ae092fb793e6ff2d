"""Run summaries: accuracy with intervals (over every question, degraded ones counted wrong, and over the clean ones
beside it), the paper's route and adjudication statistics, cost in calls, tokens, dollars and Tavily credits, retries,
scored against generated answers. The numbers only: their tables and plots are clearmed.report's (`report.markdown`,
`report.plots`), and `report.run_folder.finish_run_folder` writes a finished run folder's summary files."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict

from clearmed.evaluation.degraded import degraded_endpoints as failed_at
from clearmed.evaluation.pathway_worth import PathwayWorth, pathway_worth
from clearmed.evaluation.spend import Prices, SpendSummary, record_usd, spend_summary
from clearmed.evaluation.store import (
    EvalRecord,
    RunManifest,
)
from clearmed.metrics import (
    AccuracySummary,
    LeakageReport,
    PathwayJudgeStats,
    RubricGrade,
    RubricSummary,
    accuracy_summary,
    audit_leakage,
    healthbench_summary,
    judge_stats,
)
from clearmed.signatures.records import EMPTY_SEARCH, Decision, VerifierOutput

if TYPE_CHECKING:
    from clearmed.evaluation.spend_log import SpendEntry


class CostSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    questions: int
    mean_seconds: float
    median_seconds: float
    mean_lm_calls: float
    mean_prompt_tokens: float
    mean_completion_tokens: float
    cache_hit_calls: int


class RouteCost(BaseModel):
    model_config = ConfigDict(extra="forbid")

    route: str
    questions: int
    accuracy: float | None
    mean_seconds: float
    mean_lm_calls: float


class AnswerSources(BaseModel):
    """How a pathway's answers were reached: scored from the options' log-probabilities, or generated (a backbone
    without log-probabilities, a failed scoring call, or `mcq_decoding = "generate"`)."""

    model_config = ConfigDict(extra="forbid")

    scored: int = 0
    generated: int = 0


class RunSummary(BaseModel):
    """What a run measured. `accuracy` is over every scored question and counts unparsed, failed and degraded answers
    as wrong (each reported separately too). A degraded question (a stage failed after its retries) is no answer of
    the program, and leaving it out would flatter a program with more stages to fail, on the longest questions:
    so it counts wrong in the headline (and meets no rubric item in `rubric`), `clean_accuracy` is the figure over
    the clean questions alone, and `degraded` counts them by failed stage. `pathways` is over the clean questions."""

    model_config = ConfigDict(extra="forbid")

    program: str
    benchmark: str
    config_source: str
    planned: int
    evaluated: int
    unscored: int
    accuracy: AccuracySummary | None
    status_counts: dict[str, int]
    route_counts: dict[str, int]
    rule_counts: dict[str, int]
    followup_searches: int
    questions_with_followup: int
    guard_invoked: int
    audit_invoked: int
    revisions_accepted: int
    cost: CostSummary
    cost_by_route: list[RouteCost]
    leakage_questions: int = 0
    leakage_passages: dict[str, int] = {}
    # Option-wise judge statistics per judged pathway, and QPIS stop reasons (empty when those were off).
    judge: list[PathwayJudgeStats] = []
    # CLEAR MCQ runs: each pathway's accuracy, the deterministic verifier's, and "some pathway was right".
    pathways: PathwayWorth | None = None
    # HealthBench-style rubric grading (its questions are not in `accuracy`).
    rubric: RubricSummary | None = None
    search_plan_stops: dict[str, int] = {}
    mean_search_rounds: float | None = None
    # verifier_mode = "calibrated": the questions it was asked to decide, and, by reason, those it left to the
    # deterministic verifier (`VerifierOutput.calibrated_fallback`; zero and empty in other modes).
    calibrated_questions: int = 0
    calibrated_fallbacks: dict[str, int] = {}
    # verifier_mode = "learned": likewise (`LearnedVerdict.fallback`).
    learned_questions: int = 0
    learned_fallbacks: dict[str, int] = {}
    # [program] evidence_binding: the disputed questions whose evidence pathways were scored with the question removed,
    # and, by reason, the answered evidence pathways of those questions that got no binding term
    # (`Candidate.binding_fallback`: no_logprobs, not_scored, scoring_failed, no_passages).
    binding_questions: int = 0
    binding_fallbacks: dict[str, int] = {}
    degraded: int = 0
    degraded_stages: dict[str, int] = {}
    # The endpoints (scheme://host:port) the degraded questions' failures name, with how many questions each.
    degraded_endpoints: dict[str, int] = {}
    clean_accuracy: AccuracySummary | None = None
    # Dollars, Tavily credits and retries, per stage and for the run (None in summaries written before they were).
    spend: SpendSummary | None = None
    # Per pathway: answers scored from log-probabilities against answers generated.
    answer_sources: dict[str, AnswerSources] = {}
    # Ctrl-C stopped the run (its questions in flight finished): the same command resumes it.
    interrupted: bool = False
    # Questions whose web search (the dynamic pathway's, or a follow-up's) came back with no page at all (a Tavily 200
    # with an empty `results` list): no failure, so not degraded, but an answer reached without that evidence.
    empty_searches: int = 0
    # Where the run reached each service, by role, every address it used (a resume on a moved server adds one).
    endpoints: dict[str, list[str]] = {}
    # Questions whose guard or audit assessment failed (the step records why: truncated, unparsable, ...), by
    # mechanism: the default answer stands unassessed. Apart from `degraded`: a resume would meet the same failure.
    gate_failures: dict[str, int] = {}


def _as_graded(record: EvalRecord) -> RubricGrade:
    """A rubric-graded question's grade; a degraded one's met nothing, as a degraded answer counts wrong."""
    assert record.score is not None
    grade = record.score.rubric_grade
    assert grade is not None
    if not record.degraded or grade.score is None:
        return grade
    return grade.model_copy(update={"score": 0.0, "tag_scores": dict.fromkeys(grade.tag_scores, 0.0)})


def _route(record: EvalRecord) -> str:
    return record.decision.route or ("single_pathway" if record.decision.deciding_rule == "single_pathway" else "none")


def _failed_gates(decision: Decision) -> list[str]:
    """The guard or audit of `decision` whose assessment failed (`*_assessment_failed`)."""
    failed = ("guard_assessment_failed", "audit_assessment_failed")
    return [step.mechanism for step in decision.steps if step.rule in failed]


def _binding_ran(decision: Decision) -> bool:
    """Whether evidence binding was asked for on this question (a disputed one): a pathway holds its passage-only
    scores or why it has none."""
    return any(c.passage_only_scores is not None or c.binding_fallback for c in decision.bundle.candidates)


def _mean(values: Sequence[float]) -> float:
    return round(statistics.fmean(values), 3) if values else 0.0


def _fallback_reason(output: VerifierOutput, mode: Literal["calibrated", "learned"]) -> str | None:
    """Why the verifier of ``mode`` left this output to the deterministic verifier (None: it did not)."""
    if mode == "calibrated":
        return output.calibrated_fallback
    return output.learned.fallback if output.learned is not None else None


def _fallback_counts(
    decisions: Sequence[Decision], mode: Literal["calibrated", "learned"]
) -> tuple[int, dict[str, int]]:
    """Questions the scored verifier of ``mode`` (calibrated or learned) was asked to decide, and those it left to the
    deterministic verifier, by the first reason recorded (a question counts once however many verifier rounds it
    had)."""
    asked = 0
    fallbacks: Counter[str] = Counter()
    for decision in decisions:
        outputs = decision.verifier_outputs
        reasons = [reason for o in outputs if (reason := _fallback_reason(o, mode)) is not None]
        if reasons or any(o.mode == mode for o in outputs):
            asked += 1
        if reasons:
            fallbacks[reasons[0]] += 1
    return asked, dict(fallbacks)


def _answer_sources(decisions: Sequence[Decision]) -> dict[str, AnswerSources]:
    """Per pathway, the candidates that answered: scored (option scores on the candidate) or generated."""
    counts: dict[str, AnswerSources] = {}
    for decision in decisions:
        for candidate in decision.bundle.candidates:
            if candidate.answer is None:
                continue
            tally = counts.setdefault(candidate.pathway, AnswerSources())
            if candidate.option_scores is not None:
                tally.scored += 1
            else:
                tally.generated += 1
    return counts


def _searched_nothing(decision: Decision) -> bool:
    """Whether a web search of the question returned no page: the dynamic pathway's (its recorded error says so) or a
    follow-up's (a round that searched and got no page, new or already held, and no failure)."""
    dynamic = next((c for c in decision.bundle.candidates if c.pathway == "dynamic"), None)
    if dynamic is not None and dynamic.error is not None and dynamic.error.message == EMPTY_SEARCH:
        return True
    return any(r.query and not r.passages and not r.excluded and r.error is None for r in decision.bundle.followups)


def _cost(records: Sequence[EvalRecord]) -> CostSummary:
    """Seconds, calls and tokens per question (tool calls are not LM calls)."""
    lm_rows = [[row for row in r.decision.usage if row.role != "tool"] for r in records]
    return CostSummary(
        questions=len(records),
        mean_seconds=_mean([r.seconds for r in records]),
        median_seconds=round(statistics.median([r.seconds for r in records]), 3) if records else 0.0,
        mean_lm_calls=_mean([r.decision.lm_calls() for r in records]),
        mean_prompt_tokens=_mean([sum(row.prompt_tokens for row in rows) for rows in lm_rows]),
        mean_completion_tokens=_mean([sum(row.completion_tokens for row in rows) for rows in lm_rows]),
        cache_hit_calls=sum(1 for rows in lm_rows for row in rows if row.cached),
    )


def _cost_by_route(records: Sequence[EvalRecord]) -> list[RouteCost]:
    """Per route, in name order: questions, accuracy (a degraded answer counts wrong), seconds and calls."""
    by_route: dict[str, list[EvalRecord]] = {}
    for record in records:
        by_route.setdefault(_route(record), []).append(record)
    costs = []
    for route, group in sorted(by_route.items()):
        right = [r.score.correct and not r.degraded for r in group if r.score is not None]  # degraded: wrong
        costs.append(
            RouteCost(
                route=route,
                questions=len(group),
                accuracy=round(sum(right) / len(right), 4) if right else None,
                mean_seconds=_mean([r.seconds for r in group]),
                mean_lm_calls=_mean([r.decision.lm_calls() for r in group]),
            )
        )
    return costs


def _spend(
    records: Sequence[EvalRecord],
    prices: Prices | None,
    set_aside: Sequence[EvalRecord],
    paid: Sequence[SpendEntry] | None,
) -> SpendSummary:
    return spend_summary(
        [record.decision for record in records],
        [record_usd(record, prices) for record in records],
        prices=prices,
        set_aside_usd=[record_usd(record, prices) for record in set_aside],
        paid=None if paid is None else [(entry.usd, entry.row) for entry in paid],
    )


def summarize(
    records: Sequence[EvalRecord],
    manifest: RunManifest,
    *,
    seed: int = 0,
    leaks: Sequence[LeakageReport] | None = None,
    prices: Prices | None = None,
    set_aside: Sequence[EvalRecord] = (),
    paid: Sequence[SpendEntry] | None = None,
    interrupted: bool = False,
) -> RunSummary:
    """The run's statistics. `leaks` are the records' leakage audits when the caller already ran them (one per
    record, in order); otherwise they are audited here. `paid` is the run's spend log, the one source of its dollars,
    credits and retries (without it they come from the records, and `prices` give dollars per stage); `set_aside` are
    the degraded records a resume redid (their spend is reported)."""
    clean = [record for record in records if not record.degraded]
    degraded_ids = {record.question_id for record in records if record.degraded}
    graded = [record.score for record in records if record.score is not None]
    scores = [score for score in graded if score.rubric_grade is None]
    clean_scores = [score for score in scores if score.question_id not in degraded_ids]
    grades = [_as_graded(r) for r in records if r.score is not None and r.score.rubric_grade is not None]
    decisions = [record.decision for record in records]
    mechanisms = [[step.mechanism for step in d.steps] for d in decisions]
    if leaks is None:
        leaks = [audit_leakage(d.bundle.question, d) for d in decisions]
    plans = [p for d in decisions if (p := d.bundle.candidate("dynamic").search_plan) is not None]
    calibrated_questions, calibrated_fallbacks = _fallback_counts(decisions, "calibrated")
    learned_questions, learned_fallbacks = _fallback_counts(decisions, "learned")
    leak_kinds = Counter("local" if leak.passage_id.startswith("L") else "web" for r in leaks for leak in r.leaks)
    return RunSummary(
        program=manifest.program,
        benchmark=manifest.benchmark,
        config_source=manifest.config_source,
        planned=len(manifest.question_ids),
        evaluated=len(records),
        unscored=len(records) - len(graded),
        accuracy=accuracy_summary(scores, counted_wrong=degraded_ids, seed=seed) if scores else None,
        status_counts=dict(Counter(d.status for d in decisions)),
        route_counts=dict(Counter(_route(r) for r in records)),
        rule_counts=dict(Counter(d.deciding_rule or "-" for d in decisions)),
        followup_searches=sum(len(d.bundle.followups) for d in decisions),
        questions_with_followup=sum(1 for d in decisions if d.bundle.followups),
        guard_invoked=sum(1 for m in mechanisms if "guard" in m),
        audit_invoked=sum(1 for m in mechanisms if "audit" in m),
        revisions_accepted=sum(1 for d in decisions if d.deciding_rule in ("guard_granted", "audit_accepted")),
        cost=_cost(records),
        cost_by_route=_cost_by_route(records),
        leakage_questions=sum(1 for report in leaks if report.flagged),
        leakage_passages=dict(leak_kinds),
        judge=judge_stats(decisions),
        pathways=pathway_worth([record.decision for record in clean]),
        rubric=healthbench_summary(grades, seed=seed) if grades else None,
        search_plan_stops=dict(Counter(plan.stop_reason for plan in plans)),
        mean_search_rounds=_mean([len(plan.rounds) for plan in plans]) if plans else None,
        calibrated_questions=calibrated_questions,
        calibrated_fallbacks=calibrated_fallbacks,
        learned_questions=learned_questions,
        learned_fallbacks=learned_fallbacks,
        binding_questions=sum(1 for d in decisions if _binding_ran(d)),
        binding_fallbacks=dict(
            Counter(c.binding_fallback for d in decisions for c in d.bundle.candidates if c.binding_fallback)
        ),
        degraded=len(records) - len(clean),
        degraded_stages=dict(Counter(stage for record in records for stage in record.degraded_stages)),
        degraded_endpoints=dict(
            Counter(where for record in records if record.degraded_stages for where in failed_at(record.decision))
        ),
        clean_accuracy=accuracy_summary(clean_scores, seed=seed) if clean_scores else None,
        spend=_spend(records, prices, set_aside, paid),
        answer_sources=_answer_sources(decisions),
        interrupted=interrupted,
        empty_searches=sum(1 for d in decisions if _searched_nothing(d)),
        endpoints=manifest.endpoints,
        gate_failures=dict(Counter(m for d in decisions for m in sorted(set(_failed_gates(d))))),
    )
