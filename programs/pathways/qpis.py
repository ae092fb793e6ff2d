"""Query planning and iterative search (CLEAR's QPIS variant, section 2.7) for the dynamic pathway.

Plan: split the question into targeted sub-queries. Search them. Then, while the budget allows another round,
ask whether the evidence now suffices; if not, search the one query that would fill the gap. It stops when
the evidence suffices, the round budget is spent, a round finds nothing new, or a check fails (the evidence
gathered so far is kept: a failed check never throws away results).

The budget is counted in search rounds (`qpis_max_rounds`, the planned queries being round one), so the
worst case is known: one plan call, `max_rounds - 1` check calls, and `max_subqueries + max_rounds - 1`
searches. The kept pages (`qpis_max_passages`) are shared out over the rounds: round r may fill the budget up to
r/max_rounds of it. Otherwise the planned queries fill it in round one (3 sub-queries x 4 results > 8 pages), and
the sufficiency check, the iterative half of QPIS, never runs. Within a round the queries' results are taken
in turns (every query's first result, then every second result...), so the last sub-query is not crowded out by
the first.
"""

from __future__ import annotations

from collections.abc import Sequence

import dspy

from clearmed.programs.lm.context import current
from clearmed.programs.lm.parsing import format_options
from clearmed.programs.lm.prompting import format_passages
from clearmed.programs.lm.stage import run_stage
from clearmed.programs.pathways.evidence_search import reid, search_web
from clearmed.programs.pathways.web_query import WebQueryWriter, fit_query, without_option_letters
from clearmed.retrieval.base import WebSearch
from clearmed.signatures.qpis import CheckEvidence, PlanSubqueries
from clearmed.signatures.records import Passage, Question, SearchPlan, SearchRound
from clearmed.signatures.records.results import SearchResult, WebQueryResult


def _page_key(passage: Passage) -> str:
    return passage.provenance.url or passage.text[:200]


def round_quota(limit: int, round_number: int, max_rounds: int) -> int:
    """How many pages may be kept after round `round_number` (1-based): an even share of `limit` per round."""
    return limit if round_number >= max_rounds else max(1, -(-limit * round_number // max_rounds))


def in_turns(result_lists: list[list[Passage]]) -> list[Passage]:
    """Each list's first result, then each list's second, and so on."""
    depth = max((len(results) for results in result_lists), default=0)
    return [results[i] for i in range(depth) for results in result_lists if i < len(results)]


def clean_queries(raw: list[str] | None, limit: int, letters: Sequence[str] = ()) -> list[str]:
    """Non-empty, distinct (case-insensitive) queries without option letters, at most `limit`."""
    out: list[str] = []
    for query in raw or []:
        text = without_option_letters(str(query), letters)
        if text and text.casefold() not in {q.casefold() for q in out}:
            out.append(text)
    return out[:limit]


def fitted_round(queries: list[str], max_chars: int | None) -> SearchRound:
    """A round of these queries, each cut to the backend's limit at a word boundary (the cuts recorded)."""
    sent: list[str] = []
    cuts: dict[str, int] = {}
    for query in queries:
        fitted, cut = fit_query(query, max_chars)
        sent.append(fitted)
        if cut is not None:
            cuts[fitted] = cut
    return SearchRound(queries=sent, query_cut_chars=cuts)


class QueryPlannedSearch(dspy.Module):
    def __init__(self) -> None:
        super().__init__()
        self.plan = dspy.Predict(PlanSubqueries)
        self.check = dspy.Predict(CheckEvidence)

    def forward(self, question: Question, search: WebSearch, writer: WebQueryWriter) -> SearchResult:
        settings = current().settings
        limit = settings.qpis_max_passages or 2 * settings.dynamic_k
        options = format_options(question)
        letters = question.letters if question.options else []
        planned = run_stage(
            "qpis_plan",
            self.plan,
            question=question.text,
            options=options,
            max_queries=settings.qpis_max_subqueries,
        )
        subqueries = clean_queries(
            planned.prediction.subqueries if planned.prediction is not None else None,
            settings.qpis_max_subqueries,
            letters,
        )
        # Without a usable plan the pathway's own web query is searched: QPIS degrades to a single search.
        fallback: WebQueryResult | None = None
        if subqueries:
            queries = subqueries
        else:
            fallback = writer(question=question, limit=search.max_query_chars)
            queries = [fallback.query]
        plan = SearchPlan(subqueries=subqueries, plan_error=planned.error)
        passages: list[Passage] = []
        known: set[str] = set()  # pages already kept, by URL (or text when a page has none)

        while True:
            round_ = fitted_round(queries, search.max_query_chars)
            queries = round_.queries
            before = len(passages)
            failures = 0
            found_lists: list[list[Passage]] = []
            for query in queries:
                found, error = search_web(search, query, settings.dynamic_k, "dynamic_search", "W")
                if error is not None:
                    failures += 1
                    round_ = round_.model_copy(update={"error": error})
                    continue
                found_lists.append(found)
            quota = round_quota(limit, len(plan.rounds) + 1, settings.qpis_max_rounds)
            for page in in_turns(found_lists):
                if len(passages) < quota and _page_key(page) not in known:
                    known.add(_page_key(page))
                    passages.append(page)
            passages = reid(passages, "W")
            round_ = round_.model_copy(update={"new_passage_ids": [p.id for p in passages[before:]]})
            plan.rounds.append(round_)
            if failures == len(queries) and not passages:
                plan.stop_reason = "search_failed"
                break
            if len(passages) == before:
                plan.stop_reason = "no_new_results"
                break
            if len(plan.rounds) >= settings.qpis_max_rounds or len(passages) >= limit:
                plan.stop_reason = "budget"
                break
            checked = run_stage(
                "qpis_check",
                self.check,
                question=question.text,
                options=options,
                evidence=format_passages(passages, settings.quality_snippet_words or settings.passage_words),
            )
            if checked.prediction is None:
                plan.rounds[-1] = round_.model_copy(update={"error": checked.error})
                plan.stop_reason = "check_failed"
                break
            sufficient = bool(checked.prediction.sufficient)
            missing = str(checked.prediction.missing or "")
            plan.rounds[-1] = round_.model_copy(update={"sufficient": sufficient, "missing": missing})
            next_queries = clean_queries([checked.prediction.next_query or missing], 1, letters)
            if sufficient:
                plan.stop_reason = "sufficient"
                break
            if not next_queries:
                plan.stop_reason = "no_new_results"
                break
            queries = next_queries

        error = next((r.error for r in plan.rounds if r.error is not None), None)
        return SearchResult(passages=passages, plan=plan, error=error if not passages else None, fallback=fallback)
