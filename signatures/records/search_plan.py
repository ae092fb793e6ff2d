"""Query-planned iterative search (CLEAR QPIS): the plan, its rounds, and why it stopped."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from clearmed.signatures.records.base import Record
from clearmed.signatures.records.usage import StepError


class SearchRound(Record):
    """One round of query-planned iterative search: the queries issued and what the check concluded."""

    queries: list[str] = Field(default_factory=list)
    # Queries cut at a word boundary to the backend's max_query_chars: the query sent -> its length before the cut.
    query_cut_chars: dict[str, int] = Field(default_factory=dict)
    new_passage_ids: list[str] = Field(default_factory=list)
    sufficient: bool | None = None
    missing: str = ""
    error: StepError | None = None


class SearchPlan(Record):
    """CLEAR (QPIS): sub-queries, the rounds run within the budget, and why the search stopped."""

    subqueries: list[str] = Field(default_factory=list)
    plan_error: StepError | None = None
    rounds: list[SearchRound] = Field(default_factory=list)
    stop_reason: Literal["sufficient", "budget", "no_new_results", "search_failed", "check_failed"] = "budget"
