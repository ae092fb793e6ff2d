"""The query a web search is sent, always within the backend's `max_query_chars` (Tavily: 400).

`[program] web_query` chooses who makes it:
- "question": the question itself (CLEAR's convention), unless it is longer than the backend accepts; then its
  key terms (`retrieval.query.salient_query`), recorded as replaced.
- "salient": the key terms always (no LM call).
- "lm": the `WriteWebQuery` step writes it; a failed step or an empty query falls back to the key terms, and a
  query longer than the limit is cut at a word boundary. Both are recorded on the result.

Whatever made it, a query never carries option letters and is never sent over the limit: a backend would only
refuse it (Tavily: HTTP 400), and the pathway would lose its evidence.
"""

from __future__ import annotations

import re
from typing import Final

import dspy

from clearmed.programs.lm.formatting import render_question
from clearmed.programs.lm.results import WebQueryResult
from clearmed.programs.lm.run_context import current
from clearmed.programs.lm.stage import run_stage
from clearmed.programs.settings import Stage
from clearmed.retrieval.query import build_query, cut_at_word, salient_query, without_option_letters
from clearmed.signatures.records import Question, StepError
from clearmed.signatures.web_query import WriteWebQuery

# A written query is short whatever the backend: without a backend limit, the strictest one known (Tavily's).
DEFAULT_QUERY_CHARS: Final = 400
_LABEL: Final = re.compile(r"^(?:search\s+)?query\s*:\s*", re.IGNORECASE)


def fit_query(query: str, limit: int | None) -> tuple[str, int | None]:
    """(the query to send, its length before a cut or None): cut at a word boundary when over ``limit``."""
    query = " ".join(query.split())
    if limit is None or len(query) <= limit:
        return query, None
    return cut_at_word(query, limit), len(query)


def clean_written_query(raw: object, question: Question) -> str:
    """A model-written query as one line, without a "Query:" label, quotes or option letters."""
    lines = [line.strip() for line in str(raw or "").splitlines() if line.strip()]
    text = _LABEL.sub("", lines[0] if lines else "").strip().strip("\"'`").strip()
    return without_option_letters(text, question.letters if question.options else ())


def key_terms(question: Question, limit: int | None) -> str:
    """The deterministic query: key terms of the question, or its words cut at the limit when it has none."""
    budget = limit or DEFAULT_QUERY_CHARS
    return salient_query(question.text, budget) or cut_at_word(question.text, budget)


class WebQueryWriter(dspy.Module):
    """Makes the web query per `settings.web_query`; one predictor, shared by the dynamic pathway, the follow-up
    search and QPIS, so an optimizer tunes one query-writing prompt."""

    def __init__(self) -> None:
        super().__init__()
        self.write = dspy.Predict(WriteWebQuery)

    def forward(self, question: Question, limit: int | None, stage: Stage = "web_query") -> WebQueryResult:
        """`stage` names the LM call in the ledger: the follow-up passes its own, so tuning counts the call as the
        follow-up's cost."""
        settings = current().settings
        asked = build_query(question)
        mode = settings.web_query
        if mode == "question" and (limit is None or len(asked) <= limit):
            return WebQueryResult(query=asked, source="question")
        error: StepError | None = None
        if mode == "lm":
            written = run_stage(
                stage,
                self.write,
                question=render_question(question),
                max_characters=limit or DEFAULT_QUERY_CHARS,
            )
            error = written.error
            text = clean_written_query(written.prediction.query, question) if written.prediction is not None else ""
            if text:
                query, cut = fit_query(text, limit)
                return WebQueryResult(query=query, source="lm", replaced_chars=len(asked), cut_chars=cut)
            if error is None:
                error = StepError(stage=stage, kind="invalid_answer", message="the query writer wrote no query")
        return WebQueryResult(
            query=key_terms(question, limit), source="salient", replaced_chars=len(asked), error=error
        )
