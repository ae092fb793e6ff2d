"""A run's numbers as markdown: the comparison table (one row per run) and the sections beside it (degraded
questions, spend, answer sources, what the pathways were worth, the option-wise judge, the scored verifiers' fallbacks,
QPIS), and the paired table of `clearmed compare` (`comparison_markdown`). summary.md, `clearmed eval`'s terminal
summary and comparison.md are these; the HTML report reuses the table's cells."""

from __future__ import annotations

from collections.abc import Sequence

from clearmed.evaluation.pathway_worth import PathwayWorth
from clearmed.evaluation.summary import CostSummary, RunSummary
from clearmed.metrics import AccuracySummary, PairedComparison, judge_table, mcnemar_exact_p
from clearmed.numbers.compare import Comparison


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
            at = ", ".join(f"{where} {count}" for where, count in sorted(s.degraded_endpoints.items()))
            parts.append(
                f"\n### Degraded: {name} on {s.benchmark}\n\n{s.degraded} of {s.evaluated} questions had a stage fail "
                f"after its retries (by stage: {stages}{f'; by endpoint: {at}' if at else ''}); accuracy counts them "
                "wrong, and a resume redoes them "
                f"(`--keep-degraded` keeps them). Accuracy over the clean questions alone: "
                f"{_accuracy_text(s.clean_accuracy)}\n"
            )
        if s.gate_failures:
            each = ", ".join(f"{mechanism} {count}" for mechanism, count in sorted(s.gate_failures.items()))
            parts.append(
                f"\n### Failed gates: {name} on {s.benchmark}\n\n{sum(s.gate_failures.values())} of {s.evaluated} "
                f"questions had their guard or audit assessment fail ({each}): the default answer stands unassessed. "
                "Each step's error says why (truncated at its token budget, unparsable, ...).\n"
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
        if s.binding_questions:
            parts.append(f"\n### Evidence binding: {name} on {s.benchmark}\n\n{binding_line(s)}\n")
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


def binding_line(summary: RunSummary) -> str:
    """On how many disputed questions evidence binding ran, and why evidence pathways got no binding term."""
    reasons = ", ".join(f"{reason} {count}" for reason, count in sorted(summary.binding_fallbacks.items()))
    return (
        f"evidence binding (question-removed scoring) ran on {summary.binding_questions} disputed questions; "
        f"evidence pathways with no binding term: {sum(summary.binding_fallbacks.values())}"
        + (f" ({reasons})" if reasons else "")
    )


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
        f"exact McNemar p = {p_text(mcnemar_exact_p(gained, lost))}"
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


def p_text(p: float) -> str:
    """A p-value as a paper prints it: two decimals from 0.01 up (1.00, 0.45), three below (0.008), and under 0.001
    two significant digits in scientific notation (3.1e-31, 7.8e-4), so a tiny p never reads as 0; a p that
    underflowed a double is "<1e-300"."""
    if p >= 0.01:
        return f"{p:.2f}"
    if p >= 0.001:
        return f"{p:.3f}"
    if p <= 0.0:
        return "<1e-300"
    mantissa, exponent = f"{p:.1e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def difference_text(pair: PairedComparison) -> str:
    """The paired accuracy difference in percentage points with its 95% interval, e.g. "+18.1 [+14.3, +21.8]"."""
    if pair.difference is None or pair.difference_ci is None:
        return "-"
    ci = pair.difference_ci
    return f"{100 * pair.difference:+.1f} [{100 * ci.low:+.1f}, {100 * ci.high:+.1f}]"


def pairing_text(comparison: Comparison) -> str:
    """Which pairs were made, and how many (the multiplicity a reader must know to weigh each p)."""
    against = {
        "first": "Paired against the first run of each benchmark",
        "baseline": f"Paired against {comparison.baseline}",
        "all": "Every pair of runs of a benchmark paired (the earlier run as baseline)",
    }[comparison.pairing]
    m = comparison.multiplicity
    holm = (
        f"; the last column is Holm's adjustment of p over these {m} (it keeps the family-wise error at the level read)"
        if m > 1
        else ""
    )
    return f"{against}, on the questions both scored: {m} comparison{'s' if m != 1 else ''}{holm}."


def paired_markdown(pairs: Sequence[PairedComparison], note: str = "") -> str:
    """Markdown: gained and lost questions against the baseline, the run's accuracy minus the baseline's in
    percentage points with Newcombe's paired 95% interval, the exact McNemar p, and the Holm-adjusted p when the
    pairs carry one. `note` (`pairing_text`) goes above the table."""
    if not pairs:
        return ""
    holm = any(p.holm_p is not None for p in pairs)
    rows = [
        f"| {p.other} | {p.baseline} | {p.common} | {p.both_right} | {p.gained} | {p.lost} | {p.both_wrong} "
        f"| {difference_text(p)} | {p_text(p.mcnemar_p)} |"
        + (f" {'-' if p.holm_p is None else p_text(p.holm_p)} |" if holm else "")
        for p in pairs
    ]
    return (
        "\n### Paired comparisons (shared questions)\n\n"
        + (f"{note}\n\n" if note else "")
        + "| run | baseline | shared | both right | gained | lost | both wrong | run − baseline pp [95% CI] "
        "| exact McNemar p |" + (" Holm p |" if holm else "") + "\n"
        "|---|---|---|---|---|---|---|---|---|" + ("---|" if holm else "") + "\n" + "\n".join(rows) + "\n"
    )


def comparison_markdown(comparison: Comparison) -> str:
    """comparison.md, as `clearmed compare` prints it: the runs' table, the paired table under a line that says
    which pairs and how many, and each run's details."""
    summaries = [run.summary for run in comparison.runs]
    labels = [run.label for run in comparison.runs]
    scope = ""
    if comparison.common:
        sizes = {s.benchmark: s.evaluated for s in summaries}
        scope = "\nOn the questions clean in every run: " + ", ".join(f"{b} {n}" for b, n in sizes.items()) + ".\n\n"
    return (
        scope
        + comparison_table(summaries, labels=labels)
        + paired_markdown(comparison.pairs, pairing_text(comparison))
        + details_markdown(summaries, labels=labels)
    )
