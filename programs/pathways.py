"""The three source-specific pathways (CLEAR 2.2). Each returns a `Candidate`; none ever raises.

parametric: a = M(q). local: E, P = R(q, K_local); a = M(q, E). dynamic: E, P = Search(q); S = quality of E;
a = M(q, E). Passages get bundle-unique ids (L1.., W1..) that answers and verdicts cite; the corpus doc id
or URL stays in the provenance.
"""

from __future__ import annotations

import time

import dspy

from clearmed.programs.answers import answer_format, format_options
from clearmed.programs.formatting import format_passages, render_question
from clearmed.programs.quality import SourceQualityAssessor, label_passages
from clearmed.programs.run_context import current
from clearmed.programs.shared import Shared
from clearmed.programs.stage import StageResult, lm_name, record_tool_call, run_stage
from clearmed.programs.task_adapters import FormatGate, resolve_answer
from clearmed.retrieval.base import EvidenceError, Retriever, WebSearch
from clearmed.signatures.clear import AnswerFromEvidence, AnswerFromKnowledge
from clearmed.signatures.records import (
    Candidate,
    Passage,
    PathwayName,
    Question,
    SourceQuality,
    StepError,
)


def build_query(question: Question, include_options: bool) -> str:
    """Question-only retrieval query by default (the CLEAR and MIRAGE convention); options optional."""
    if include_options and question.options:
        return f"{question.text} {' '.join(question.options.values())}"
    return question.text


def reid(passages: list[Passage], prefix: str) -> list[Passage]:
    """Give passages short bundle-unique ids; keep the source id as the provenance doc id."""
    out = []
    for index, passage in enumerate(passages, start=1):
        provenance = passage.provenance
        if provenance.doc_id is None and provenance.kind == "corpus":
            provenance = provenance.model_copy(update={"doc_id": passage.id})
        if provenance.rank is None:
            provenance = provenance.model_copy(update={"rank": index})
        out.append(passage.model_copy(update={"id": f"{prefix}{index}", "provenance": provenance}))
    return out


def _candidate_from(
    pathway: PathwayName,
    result: StageResult,
    question: Question,
    gate: FormatGate,
    stage: str,
    **extra: object,
) -> Candidate:
    context_lm = current().lm_for(stage)[1]
    if result.prediction is None:
        return Candidate(pathway=pathway, error=result.error, model=lm_name(context_lm), **extra)  # type: ignore[arg-type]
    raw = result.prediction.answer
    answer, error = resolve_answer(gate, question, raw, stage)
    cited = list(getattr(result.prediction, "cited_ids", []) or [])
    return Candidate(
        pathway=pathway,
        answer=answer,
        rationale=str(result.prediction.rationale or ""),
        raw_answer=raw,
        cited_passage_ids=[str(c) for c in cited],
        model=lm_name(context_lm),
        error=error,
        **extra,  # type: ignore[arg-type]
    )


class ParametricPathway(dspy.Module):
    """The model alone: a retrieval-free reference that keeps the model's medical priors."""

    def __init__(self, gate: FormatGate | None = None) -> None:
        super().__init__()
        self.answer = dspy.Predict(AnswerFromKnowledge)
        self.gate = gate or FormatGate()

    def forward(self, question: Question) -> dspy.Prediction:
        result = run_stage(
            "parametric",
            self.answer,
            question=render_question(question),
            options=format_options(question),
            answer_format=answer_format(question),
        )
        return dspy.Prediction(candidate=_candidate_from("parametric", result, question, self.gate, "parametric"))


class EvidenceAnswerer(dspy.Module):
    """a = M(q, E): the evidence-conditioned answer shared by the local and dynamic pathways."""

    def __init__(self) -> None:
        super().__init__()
        self.answer = dspy.Predict(AnswerFromEvidence)

    def forward(self, question: Question, passages: list[Passage], stage: str) -> StageResult:
        return run_stage(
            stage,  # type: ignore[arg-type]
            self.answer,
            question=render_question(question),
            options=format_options(question),
            answer_format=answer_format(question),
            evidence=format_passages(passages, current().settings.passage_words),
        )


def _evidence_failure(pathway: PathwayName, stage: str, exc: Exception) -> StepError:
    kind = "retrieval_error" if pathway == "local" else "search_error"
    if isinstance(exc, EvidenceError):
        return StepError(stage=stage, kind=kind, message=f"{exc.kind}: {exc}")
    return StepError(stage=stage, kind=kind, message=f"{type(exc).__name__}: {exc}")


class LocalPathway(dspy.Module):
    """BM25 (or any Retriever) over a curated corpus, then an evidence-conditioned answer."""

    def __init__(self, retriever: Retriever | None, gate: FormatGate | None = None) -> None:
        super().__init__()
        self.retriever = Shared(retriever)
        self.reader = EvidenceAnswerer()
        self.gate = gate or FormatGate()

    def forward(self, question: Question) -> dspy.Prediction:
        retriever: Retriever | None = self.retriever.value
        settings = current().settings
        if retriever is None:
            error = StepError(stage="local_retrieval", kind="retrieval_error", message="no local corpus configured")
            return dspy.Prediction(candidate=Candidate(pathway="local", error=error), passages=[])
        query = build_query(question, settings.query_includes_options)
        started = time.perf_counter()
        try:
            passages = reid(retriever.retrieve(query, settings.local_k), "L")
        except Exception as exc:  # a broken index must not take the question down
            record_tool_call("local_retrieval", time.perf_counter() - started, backend=retriever.name, failed=True)
            error = _evidence_failure("local", "local_retrieval", exc)
            return dspy.Prediction(
                candidate=Candidate(pathway="local", retriever=retriever.name, query=query, error=error),
                passages=[],
            )
        record_tool_call("local_retrieval", time.perf_counter() - started, backend=retriever.name, failed=False)
        extra = {"retriever": retriever.name, "query": query, "passage_ids": [p.id for p in passages]}
        if not passages:
            error = StepError(stage="local_retrieval", kind="retrieval_error", message="no passage matched the query")
            return dspy.Prediction(candidate=Candidate(pathway="local", error=error, **extra), passages=[])  # type: ignore[arg-type]
        result = self.reader(question=question, passages=passages, stage="local_answer")
        candidate = _candidate_from("local", result, question, self.gate, "local_answer", **extra)
        return dspy.Prediction(candidate=candidate, passages=passages)


def search_web(
    search: WebSearch, query: str, max_results: int, stage: str, prefix: str
) -> tuple[list[Passage], StepError | None]:
    """One search with its ledger row; failures become a recorded error and no passages."""
    started = time.perf_counter()
    try:
        found = search.search(query, max_results)
    except Exception as exc:  # recorded, never raised: the pathway still yields a candidate
        record_tool_call(stage, time.perf_counter() - started, backend=search.name, failed=True)  # type: ignore[arg-type]
        return [], _evidence_failure("dynamic", stage, exc)
    record_tool_call(stage, time.perf_counter() - started, backend=search.name, failed=False)  # type: ignore[arg-type]
    return reid(list(found)[:max_results], prefix), None


class DynamicPathway(dspy.Module):
    """Web search, an evidence-conditioned answer, and one source-quality call over all results."""

    def __init__(
        self, search: WebSearch | None, assessor: SourceQualityAssessor, gate: FormatGate | None = None
    ) -> None:
        super().__init__()
        self.search = Shared(search)
        self.assessor = assessor
        self.reader = EvidenceAnswerer()
        self.gate = gate or FormatGate()

    def forward(self, question: Question) -> dspy.Prediction:
        search: WebSearch | None = self.search.value
        settings = current().settings
        empty = SourceQuality()
        if search is None:
            error = StepError(stage="dynamic_search", kind="search_error", message="no web search configured")
            return dspy.Prediction(candidate=Candidate(pathway="dynamic", error=error), passages=[], quality=empty)
        query = build_query(question, settings.query_includes_options)
        passages, error = search_web(search, query, settings.dynamic_k, "dynamic_search", "W")
        extra = {"search_backend": search.name, "query": query, "passage_ids": [p.id for p in passages]}
        if error is not None or not passages:
            error = error or StepError(stage="dynamic_search", kind="search_error", message="the search found nothing")
            candidate = Candidate(pathway="dynamic", error=error, **extra)  # type: ignore[arg-type]
            return dspy.Prediction(candidate=candidate, passages=passages, quality=empty, quality_error=None)
        # a_dynamic = M(q, E) and S = AssessQuality(q, E) are independent (eq. 4). Answering first puts the two
        # evidence-answer calls back to back, so an in-process model reuses their shared prompt prefix.
        result = self.reader(question=question, passages=passages, stage="dynamic_answer")
        candidate = _candidate_from("dynamic", result, question, self.gate, "dynamic_answer", **extra)
        assessed = self.assessor(question_text=question.text, passages=passages)
        passages = label_passages(passages, assessed.quality)
        return dspy.Prediction(
            candidate=candidate, passages=passages, quality=assessed.quality, quality_error=assessed.error
        )
