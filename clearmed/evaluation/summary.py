"""Run summaries: accuracy with intervals (over every question, degraded ones counted wrong, and over the clean ones
beside it), the paper's route and adjudication statistics, cost in calls, tokens, dollars and Tavily credits, retries,
scored against generated answers, plots."""

from __future__ import annotations

import json
import statistics
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict

from clearmed.evaluation.pathway_worth import PathwayWorth, pathway_worth
from clearmed.evaluation.spend import Prices, SpendSummary, record_usd, spend_summary
from clearmed.evaluation.store import (
    EvalRecord,
    RunManifest,
    RunStore,
    RunStoreError,
    read_records,
    read_set_aside_degraded,
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
    judge_table,
    mcnemar_exact_p,
)
from clearmed.signatures.records import Decision, VerifierOutput

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

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
    degraded: int = 0
    degraded_stages: dict[str, int] = {}
    clean_accuracy: AccuracySummary | None = None
    # Dollars, Tavily credits and retries, per stage and for the run (None in summaries written before they were).
    spend: SpendSummary | None = None
    # Per pathway: answers scored from log-probabilities against answers generated.
    answer_sources: dict[str, AnswerSources] = {}


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
        degraded=len(records) - len(clean),
        degraded_stages=dict(Counter(stage for record in records for stage in record.degraded_stages)),
        clean_accuracy=accuracy_summary(clean_scores, seed=seed) if clean_scores else None,
        spend=_spend(records, prices, set_aside, paid),
        answer_sources=_answer_sources(decisions),
    )


def write_run_summary(run_dir: Path, prices: Prices | None) -> RunSummary:
    """Summarize what a run folder holds into summary.json, summary.md, leakage.json and plots/, as `clearmed eval`
    does when a run ends (and `clearmed merge` for joined shards, the Python API for its runs). The HTML report is
    the caller's to write after this returns (clearmed.report sits above this layer; the lock is released by then).
    `prices` are the run's backbones' (`Prices.of(config)`, or `compare.snapshot_prices` of the folder)."""
    from clearmed.evaluation.spend_log import paid_calls  # it imports the programs' usage sink

    records = sorted(read_records(run_dir), key=lambda record: record.index)
    with RunStore(run_dir) as store:
        manifest = store.read_manifest()
        if manifest is None:
            raise RunStoreError(f"{run_dir}: no manifest.json (is it a run folder?)")
        audits = [audit_leakage(r.decision.bundle.question, r.decision) for r in records]
        summary = summarize(
            records,
            manifest,
            seed=manifest.seed,
            leaks=audits,
            prices=prices,
            set_aside=read_set_aside_degraded(run_dir),
            paid=paid_calls(run_dir),
        )
        store.write_json("summary.json", summary.model_dump_json(indent=2))
        store.write_json("summary.md", comparison_table([summary]) + details_markdown([summary]))
        store.write_json("leakage.json", json.dumps([a.model_dump() for a in audits if a.flagged], indent=2))
        write_plots([summary], run_dir / "plots")
    return summary


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def accuracy_cell(summary: RunSummary) -> str:
    acc = summary.accuracy
    rubric = summary.rubric
    if (acc is None or acc.accuracy is None) and rubric is not None and rubric.score is not None:
        return f"rubric {100 * rubric.score:.1f} ± {100 * (rubric.bootstrap_std or 0):.1f}"
    if acc is None or acc.accuracy is None or acc.wilson is None:
        return "-"
    return f"{_pct(acc.accuracy)} [{_pct(acc.wilson.low)}, {_pct(acc.wilson.high)}]"


def clean_cell(summary: RunSummary) -> str:
    """Accuracy over the clean questions alone, with their number; "-" when no question is degraded (it is then the
    headline itself)."""
    clean = summary.clean_accuracy
    if not summary.degraded or clean is None or clean.accuracy is None:
        return "-"
    return f"{_pct(clean.accuracy)} ({clean.n})"


def _calls_cell(cost: CostSummary) -> str:
    """Calls that reached a model, plus the cache hits: a run that reuses another run's calls looks cheaper than
    it would be cold, in calls and in seconds."""
    hits = cost.cache_hit_calls / cost.questions if cost.questions else 0.0
    return f"{cost.mean_lm_calls:.1f}" + (f" (+{hits:.1f} cached)" if hits >= 0.05 else "")


def comparison_table(summaries: Sequence[RunSummary], labels: Sequence[str] | None = None) -> str:
    """Markdown: one row per run (accuracy with a 95% Wilson interval, failures, cost, routes). `labels` name
    the runs in a first column when several runs share a program."""
    if labels is not None and len(labels) != len(summaries):
        raise ValueError("one label per summary")
    run_head, run_rule = ("| run ", "|---") if labels is not None else ("", "")
    header = (
        f"{run_head}| program | benchmark | n | accuracy % [95% CI] | clean % | unparsed | failed | degraded "
        f"| s/question | LM calls/q | $/question | follow-ups | revisions | leaked items | routes |\n{run_rule}"
        + "|---" * 15
        + "|"
    )
    rows = []
    for i, s in enumerate(summaries):
        acc = s.accuracy
        routes = ", ".join(f"{route} {count}" for route, count in sorted(s.route_counts.items()))
        run_cell = f"| {labels[i]} " if labels is not None else ""
        rows.append(
            f"{run_cell}| {s.program} | {s.benchmark} | {s.evaluated}/{s.planned} | {accuracy_cell(s)} "
            f"| {clean_cell(s)} | {acc.unparsed if acc else '-'} | {acc.failed if acc else '-'} | {s.degraded} "
            f"| {s.cost.mean_seconds:.1f} | {_calls_cell(s.cost)} | {_dollars_cell(s)} | {s.followup_searches} "
            f"| {s.revisions_accepted} | {s.leakage_questions} | {routes} |"
        )
    note = (
        "\nAccuracy is over every question, degraded ones (a stage failed after its retries) counted wrong; "
        "clean % is over the clean questions alone (n in brackets).\n"
        if any(s.degraded for s in summaries)
        else ""
    )
    return "\n".join([header, *rows]) + "\n" + note


def _dollars_cell(summary: RunSummary) -> str:
    spend = summary.spend
    if spend is None or spend.mean_usd is None:
        return "-"
    return f"{spend.mean_usd:.4f}" if spend.mean_usd < 0.01 else f"{spend.mean_usd:.3f}"


def details_markdown(summaries: Sequence[RunSummary], labels: Sequence[str] | None = None) -> str:
    """Report sections beyond the table: what the pathways were worth, the option-wise judge, QPIS. Sections are
    headed by `labels` when given (several runs of one program), else by program."""
    parts: list[str] = []
    for i, s in enumerate(summaries):
        name = labels[i] if labels is not None else s.program
        if s.degraded:
            stages = ", ".join(f"{stage} {count}" for stage, count in sorted(s.degraded_stages.items()))
            parts.append(
                f"\n### Degraded: {name} on {s.benchmark}\n\n{s.degraded} of {s.evaluated} questions had a stage fail "
                f"after its retries (by stage: {stages}); accuracy counts them wrong, and a resume redoes them "
                f"(`--keep-degraded` keeps them). Accuracy over the clean questions alone: "
                f"{_accuracy_text(s.clean_accuracy)}\n"
            )
        if s.spend is not None:
            parts.append(_spend_markdown(name, s))
        if s.answer_sources:
            each = "; ".join(
                f"{pathway} {sources.scored} scored, {sources.generated} generated"
                for pathway, sources in s.answer_sources.items()
            )
            parts.append(f"\n### Answers scored against generated: {name} on {s.benchmark}\n\n{each}\n")
        if s.pathways is not None:
            worth = s.pathways
            each = ", ".join(f"{p} {100 * a:.1f}%" for p, a in worth.pathway_accuracy.items())
            parts.append(
                f"\n### Pathways: {name} on {s.benchmark} ({worth.questions} questions)\n\n"
                f"each pathway alone: {each}; deterministic verifier over the same candidates: "
                f"{100 * worth.deterministic_verifier_accuracy:.1f}%; some pathway right: "
                f"{100 * worth.any_pathway_correct:.1f}% (by chance alone at these accuracies: "
                f"{100 * worth.chance_oracle:.1f}%)\n"
            )
            if worth.by_route:
                parts.append(_routes_markdown(worth))
            if worth.calibration:
                parts.append(_calibration_markdown(worth))
        if s.judge:
            parts.append(f"\n### Option-wise judge: {name} on {s.benchmark}\n\n{judge_table(s.judge)}\n")
        if s.calibrated_questions:
            parts.append(f"\n### Calibrated verifier: {name} on {s.benchmark}\n\n{calibrated_fallback_line(s)}\n")
        if s.learned_questions:
            parts.append(f"\n### Learned verifier: {name} on {s.benchmark}\n\n{learned_fallback_line(s)}\n")
        if s.search_plan_stops:
            stops = ", ".join(f"{reason} {count}" for reason, count in sorted(s.search_plan_stops.items()))
            parts.append(
                f"\n### QPIS: {name} on {s.benchmark}\n\nmean search rounds {s.mean_search_rounds}; "
                f"stopped by {stops}\n"
            )
    return "".join(parts)


def _accuracy_text(accuracy: AccuracySummary | None) -> str:
    if accuracy is None or accuracy.accuracy is None:
        return "-"
    return f"{_pct(accuracy.accuracy)}% ({accuracy.correct}/{accuracy.n})"


def _spend_markdown(name: str, summary: RunSummary) -> str:
    """Dollars, tokens, Tavily credits and retries per stage, and the run's totals."""
    spend = summary.spend
    assert spend is not None

    def usd(value: float | None) -> str:
        return "unknown price" if value is None else f"${value:.4f}"

    rows = [
        "| stage | calls | cached | failed | prompt tokens | completion tokens | $ | Tavily credits | retries |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for stage in spend.by_stage:
        rows.append(
            f"| {stage.stage} | {stage.calls} | {stage.cached} | {stage.failed} | {stage.prompt_tokens} "
            f"| {stage.completion_tokens} | {'-' if stage.usd is None else f'{stage.usd:.4f}'} "
            f"| {stage.credits:g} | {stage.retries} |"
        )
    redone = (
        f"; the {spend.set_aside_questions} degraded attempts redone had spent {usd(spend.set_aside_usd)} more"
        if spend.set_aside_questions
        else ""
    )
    return (
        f"\n### Spend: {name} on {summary.benchmark}\n\nLM {usd(spend.usd)} ({usd(spend.mean_usd)} per question), "
        f"{spend.search_credits:g} Tavily credits, {spend.retries} retries{redone}\n\n" + "\n".join(rows) + "\n"
    )


def calibrated_fallback_line(summary: RunSummary) -> str:
    """How often calibrated mode was the deterministic verifier in disguise, and why."""
    return _fallback_line("calibrated", summary.calibrated_questions, summary.calibrated_fallbacks)


def learned_fallback_line(summary: RunSummary) -> str:
    """How often learned mode left the question to the deterministic verifier, and why (out_of_domain: the fit
    does not apply to this benchmark, format or backbone)."""
    return _fallback_line("learned", summary.learned_questions, summary.learned_fallbacks)


def _fallback_line(mode: str, asked: int, fallbacks: dict[str, int]) -> str:
    reasons = ", ".join(f"{reason} {count}" for reason, count in sorted(fallbacks.items()))
    return (
        f"{mode} verifier fell back to the deterministic (heuristic) verifier: {sum(fallbacks.values())} of "
        f"{asked} questions" + (f" ({reasons})" if reasons else "")
    )


def _routes_markdown(worth: PathwayWorth) -> str:
    """Per route: the program's and each pathway's correct answers, and the route's net against Direct's answer."""
    names = list(worth.pathway_accuracy)
    rows = [
        "\n| route | questions | program correct | " + " | ".join(f"{p} correct" for p in names)
        + " | vs parametric: gained / lost |",
        "|---|---|---|" + "---|" * len(names) + "---|",
    ]  # fmt: skip
    for r in worth.by_route:
        each = " | ".join(str(r.pathway_correct.get(p, 0)) for p in names)
        rows.append(
            f"| {r.route} | {r.questions} | {r.program_correct} | {each} | "
            f"{r.gained_vs_parametric} / {r.lost_vs_parametric} |"
        )
    gained = sum(r.gained_vs_parametric for r in worth.by_route)
    lost = sum(r.lost_vs_parametric for r in worth.by_route)
    rows.append(
        f"\nAgainst its parametric pathway (Direct's answer): {gained} gained, {lost} lost, "
        f"exact McNemar p = {mcnemar_exact_p(gained, lost):.3f}"
    )
    return "\n".join(rows) + "\n"


def _calibration_markdown(worth: PathwayWorth) -> str:
    rows = [
        "\n| pathway | scored | accuracy % | mean confidence % | ECE | letter prior: mean P (top choice %) |",
        "|---|---|---|---|---|---|",
    ]
    for pathway, cal in worth.calibration.items():
        prior = ", ".join(
            f"{letter} {v['mean_probability']:.2f} ({100 * v['top_share']:.0f})"
            for letter, v in worth.letter_prior.get(pathway, {}).items()
        )
        rows.append(
            f"| {pathway} | {cal.questions} | {100 * cal.accuracy:.1f} | {100 * cal.mean_confidence:.1f} "
            f"| {cal.ece:.3f} | {prior} |"
        )
    return "\n".join(rows) + "\n"


def write_plots(summaries: Sequence[RunSummary], folder: Path, stem: str = "") -> list[Path]:
    """PNG plots: accuracy with intervals by program; route mix; cost per question by route."""
    import matplotlib

    matplotlib.use("Agg")
    folder.mkdir(parents=True, exist_ok=True)
    labels = [f"{s.program}\n{s.benchmark}" for s in summaries]
    routes = sorted({route for s in summaries for route in s.route_counts})
    written = [
        _save(_accuracy_plot(summaries, labels), folder / f"{stem}accuracy.png"),
        _save(_route_mix_plot(summaries, labels, routes), folder / f"{stem}routes.png"),
        _save(_route_cost_plot(summaries, labels, routes), folder / f"{stem}cost_by_route.png"),
    ]
    calibrated = [s for s in summaries if s.pathways is not None and s.pathways.calibration]
    if calibrated:
        written.append(_save(_reliability_plot(calibrated), folder / f"{stem}calibration.png"))
    return written


def _axes(figsize: tuple[float, float]) -> tuple[Figure, Axes]:
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=figsize)


def _accuracy_plot(summaries: Sequence[RunSummary], labels: list[str]) -> Figure:
    fig, ax = _axes((max(4, 1.6 * len(summaries)), 3.6))
    values, lows, highs = [], [], []
    for s in summaries:
        acc = s.accuracy
        value = acc.accuracy if acc and acc.accuracy is not None else 0.0
        low = acc.wilson.low if acc and acc.wilson else value
        high = acc.wilson.high if acc and acc.wilson else value
        values.append(100 * value)
        lows.append(100 * (value - low))
        highs.append(100 * (high - value))
    ax.bar(labels, values, yerr=[lows, highs], capsize=4, color="#4c72b0")
    ax.set_ylabel("accuracy % (95% Wilson)")
    ax.set_ylim(0, 100)
    ax.set_title("Accuracy by program")
    fig.tight_layout()
    return fig


def _route_mix_plot(summaries: Sequence[RunSummary], labels: list[str], routes: list[str]) -> Figure:
    fig, ax = _axes((max(4, 1.6 * len(summaries)), 3.6))
    bottom = [0.0] * len(summaries)
    for route in routes:
        shares = [s.route_counts.get(route, 0) / max(1, s.evaluated) * 100 for s in summaries]
        ax.bar(labels, shares, bottom=bottom, label=route)
        bottom = [b + v for b, v in zip(bottom, shares, strict=True)]
    ax.set_ylabel("% of questions")
    ax.set_title("Route mix")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1, 1))
    fig.tight_layout()
    return fig


def _route_cost_plot(summaries: Sequence[RunSummary], labels: list[str], routes: list[str]) -> Figure:
    fig, ax = _axes((max(4, 1.6 * len(summaries)), 3.6))
    width = 0.8 / max(1, len(routes))
    for offset, route in enumerate(routes):
        seconds = [next((c.mean_seconds for c in s.cost_by_route if c.route == route), 0.0) for s in summaries]
        positions = [i + offset * width for i in range(len(summaries))]
        ax.bar(positions, seconds, width=width, label=route)
    ax.set_xticks([i + width * (len(routes) - 1) / 2 for i in range(len(summaries))], labels)
    ax.set_ylabel("mean seconds per question")
    ax.set_title("Cost per question by route")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1, 1))
    fig.tight_layout()
    return fig


def _reliability_plot(calibrated: Sequence[RunSummary]) -> Figure:
    """A reliability diagram: one line per pathway (and run), the diagonal is perfect calibration."""
    fig, ax = _axes((4.6, 4.2))
    ax.plot([0, 1], [0, 1], color="#999999", linestyle="--", linewidth=1)
    for s in calibrated:
        assert s.pathways is not None
        for pathway, cal in s.pathways.calibration.items():
            name = pathway if len(calibrated) == 1 else f"{s.program} {pathway}"
            xs = [b.mean_confidence for b in cal.bins]
            ys = [b.accuracy for b in cal.bins]
            ax.plot(xs, ys, marker="o", label=f"{name} (ECE {cal.ece:.3f})")
    ax.set_xlabel("confidence (top option probability)")
    ax.set_ylabel("accuracy")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_title("Reliability of pathway confidences")
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return fig


def _save(fig: Figure, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
