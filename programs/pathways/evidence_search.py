"""Gathering evidence: bundle-unique passage ids, search calls that never raise, and the targeted follow-up search.

Targeted follow-up search (CLEAR 2.3.2): q~ = Q_follow(q, B, o0), one bounded search round over the web
backend, its new pages labelled for quality. The guard and the audit search through it; its query names the
conflict and the competing options.
"""

from __future__ import annotations

import errno
import time

import dspy

from clearmed.core.errors import FatalServiceError
from clearmed.core.retries import count_retries
from clearmed.programs.adjudication.rules import competing_answers
from clearmed.programs.assessors.source_quality import SourceQualityAssessor, label_passages
from clearmed.programs.lm.context import current
from clearmed.programs.lm.prompting import describe_answer, render_question
from clearmed.programs.lm.stage import Shared, record_tool_call, run_stage
from clearmed.programs.pathways.web_query import WebQueryWriter, clean_written_query, fit_query
from clearmed.retrieval.base import FATAL_FAILURES, TRANSIENT_FAILURES, EvidenceError, WebSearch
from clearmed.retrieval.screening import label_quarantined
from clearmed.signatures.clear import GenerateFollowUpQuery
from clearmed.signatures.records import (
    ErrorKind,
    EvidenceBundle,
    FollowUpRound,
    Passage,
    PathwayName,
    StepError,
    page_key,
)
from clearmed.signatures.records.results import QualityResult, WebQueryResult
from clearmed.signatures.records.settings import Stage


def reid(passages: list[Passage], prefix: str) -> list[Passage]:
    """Give passages short bundle-unique ids; keep the source id as the provenance doc id. Every retrieved passage
    enters the bundle here, so a corpus passage the evidence screen quarantines is also labelled so here, as a web
    page is by its source-quality cap (`label_quarantined`)."""
    out = []
    for index, passage in enumerate(map(label_quarantined, passages), start=1):
        provenance = passage.provenance
        if provenance.doc_id is None and provenance.kind == "corpus":
            provenance = provenance.model_copy(update={"doc_id": passage.id})
        if provenance.rank is None:
            provenance = provenance.model_copy(update={"rank": index})
        out.append(passage.model_copy(update={"id": f"{prefix}{index}", "provenance": provenance}))
    return out


def evidence_failure(pathway: PathwayName, stage: str, exc: Exception) -> StepError:
    """The recorded failure of a search or retrieval: transient (the question is degraded, and redone on resume) or
    deterministic. A failure every later search would meet too (a corrupt or unwritable cache or index) is raised as
    `FatalServiceError` instead: the run stops with one line rather than answer the rest with an empty search."""
    kind: ErrorKind = "retrieval_error" if pathway == "local" else "search_error"
    if isinstance(exc, EvidenceError):
        if exc.kind in FATAL_FAILURES:
            what = "local index" if pathway == "local" else f"{exc.backend or 'web'} search"
            raise FatalServiceError(what, "local_data", str(exc)) from exc
        transient = exc.kind in TRANSIENT_FAILURES
        return StepError(stage=stage, kind=kind, message=f"{exc.kind}: {exc}", transient=transient)
    if isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE):  # no descriptor left: may pass
        return StepError(stage=stage, kind=kind, message=f"{type(exc).__name__}: {exc}", transient=True)
    return StepError(stage=stage, kind=kind, message=f"{type(exc).__name__}: {exc}")


def search_web(
    search: WebSearch, query: str, max_results: int, stage: Stage, prefix: str
) -> tuple[list[Passage], StepError | None]:
    """One search with its ledger row (retries and billed credits included); failures become a recorded error and
    no passages, except a `FatalServiceError` (a revoked key, an exhausted plan), which stops the run."""
    started = time.perf_counter()
    with count_retries() as tally:
        try:
            found = search.search(query, max_results)
        except FatalServiceError:
            raise
        except Exception as exc:  # recorded, never raised: the pathway still yields a candidate
            seconds = time.perf_counter() - started
            record_tool_call(stage, seconds, backend=search.name, failed=True, retries=tally.total)
            return [], evidence_failure("dynamic", stage, exc)
    seconds = time.perf_counter() - started
    record_tool_call(stage, seconds, backend=search.name, failed=False, retries=tally.total, credits=tally.credits)
    return reid(list(found)[:max_results], prefix), None


def conflict_description(bundle: EvidenceBundle) -> tuple[str, str]:
    """(conflict, competing options) for the follow-up query: who said what, and the options in play."""
    question = bundle.question
    lines = [
        f"{c.pathway}: {describe_answer(c.answer, question) if c.answer else '(no answer)'}" for c in bundle.candidates
    ]
    competing = competing_answers(bundle)
    options = ""
    if question.options:
        letters = sorted({letter for _, answer in competing for letter in answer.letters})
        options = "\n".join(f"{letter}. {question.options[letter]}" for letter in letters)
    return "\n".join(lines), options


def competing_texts(bundle: EvidenceBundle) -> str:
    """The competing options' texts, without their letters: what a follow-up search must separate."""
    _, options = conflict_description(bundle)
    return " vs ".join(line.split(". ", 1)[-1] for line in options.splitlines())


def fallback_query(stem: str, texts: str) -> str:
    """When the query LM fails: the question's web query plus the competing options' texts (still targeted)."""
    return f"{stem} {texts}".strip()


def stem_budget(limit: int | None, texts: str) -> int | None:
    """Characters left for the question's part of a fallback query once the options' texts are in (at least
    half the limit: a long option list is cut instead)."""
    return None if limit is None else max(limit - len(texts) - 1, limit // 2)


class FollowUpSearch(dspy.Module):
    """q~ = Q_follow(q, B, o0); E, P = Search(q~); S = AssessQuality(...): one bounded follow-up round.

    The query is cleaned of option letters and cut to the backend's limit (the cut recorded on the round); when
    the query LM fails, the web-query step (`settings.web_query`) writes the stem of a fallback query.
    """

    def __init__(
        self, search: WebSearch | None, assessor: SourceQualityAssessor, writer: WebQueryWriter | None = None
    ) -> None:
        super().__init__()
        self.query = dspy.Predict(GenerateFollowUpQuery)
        self.search = Shared(search, "web search")
        self.assessor = assessor
        self.writer = writer or WebQueryWriter()

    def forward(self, bundle: EvidenceBundle, trigger: str) -> FollowUpRound:
        search: WebSearch | None = self.search.value
        round_number = len(bundle.followups) + 1
        if search is None:
            absent = StepError(stage="followup_search", kind="search_error", message="no web search configured")
            return FollowUpRound(trigger=trigger, error=absent)  # type: ignore[arg-type]
        conflict, options = conflict_description(bundle)
        result = run_stage(
            "followup_query",
            self.query,
            question=render_question(bundle.question),
            conflict=conflict,
            competing_options=options,
        )
        written = clean_written_query(result.prediction.query, bundle.question) if result.prediction is not None else ""
        limit = search.max_query_chars
        if not written:
            texts = competing_texts(bundle)
            stem: WebQueryResult = self.writer(
                question=bundle.question, limit=stem_budget(limit, texts), stage="followup_query"
            )
            written = fallback_query(stem.query, texts)
        query, cut = fit_query(written, limit)
        found, error = search_web(search, query, current().settings.dynamic_k, "followup_search", f"F{round_number}.")
        # A page already in the bundle is not new evidence: counting it twice would inflate quality counts. What is
        # left out is recorded, so replay serves this round only beside rounds that would leave out the same.
        seen = {page_key(p) for p in bundle.all_dynamic_passages()}
        passages = [p for p in found if page_key(p) not in seen]
        excluded = list(dict.fromkeys(page_key(p) for p in found if page_key(p) in seen))
        failure = error or result.error
        if not passages:
            return FollowUpRound(
                trigger=trigger,  # type: ignore[arg-type]
                query=query,
                query_cut_chars=cut,
                error=failure,
                excluded=excluded,
            )
        assessed: QualityResult = self.assessor(
            question_text=bundle.question.text, passages=passages, stage="followup_quality"
        )
        round_ = FollowUpRound(
            trigger=trigger,  # type: ignore[arg-type]
            query=query,
            query_cut_chars=cut,
            passages=label_passages(passages, assessed.quality),
            source_quality=assessed.quality,
            error=failure or assessed.error,
            excluded=excluded,
        )
        return round_
