"""The three source-specific pathways (CLEAR 2.2). Each returns a `Candidate`; none ever raises.

parametric: a = M(q). local: E, P = R(q, K_local); a = M(q, E). dynamic: E, P = Search(q); S = quality of E;
a = M(q, E). Passages get bundle-unique ids (L1.., W1..) that answers and verdicts cite; the corpus doc id
or URL stays in the provenance.

The local and dynamic answer step is either a direct evidence-conditioned answer or, per pathway by config,
the option-wise judge (MedJudgeRAG); the dynamic search is one query or query-planned iterative search.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import dspy

from clearmed.programs.assessors.source_quality import SourceQualityAssessor, label_passages
from clearmed.programs.judge.judge import OptionWiseJudge
from clearmed.programs.lm.context import current
from clearmed.programs.lm.parsing import answer_format, format_options
from clearmed.programs.lm.prompting import format_passages, render_question
from clearmed.programs.lm.stage import Shared, StageResult, lm_name, record_tool_call, run_stage
from clearmed.programs.pathways.evidence_search import evidence_failure, reid, search_web
from clearmed.programs.pathways.qpis import QueryPlannedSearch
from clearmed.programs.pathways.scored_answer import passage_only_scores, run_scored_stage
from clearmed.programs.pathways.task_adapters import FormatGate, resolve_answer
from clearmed.programs.pathways.web_query import WebQueryWriter, build_query
from clearmed.retrieval.base import Retriever, WebSearch
from clearmed.signatures.clear import AnswerFromEvidence, AnswerFromKnowledge
from clearmed.signatures.records import (
    EMPTY_SEARCH,
    Answer,
    BindingFallback,
    Candidate,
    OptionJudgment,
    OptionScores,
    Passage,
    PathwayName,
    Question,
    StepError,
    top_options,
)
from clearmed.signatures.records.results import JudgeResult, PathwayResult, QualityResult, SearchResult, WebQueryResult
from clearmed.signatures.records.settings import Stage


def _candidate_from(
    pathway: PathwayName,
    result: StageResult,
    question: Question,
    gate: FormatGate,
    stage: str,
    cited: Sequence[str] = (),
    **extra: object,
) -> Candidate:
    context_lm = current().lm_for(stage)[1]
    if result.prediction is None:
        return Candidate(pathway=pathway, error=result.error, model=lm_name(context_lm), **extra)  # type: ignore[arg-type]
    raw = result.prediction.answer
    answer, error = resolve_answer(gate, question, raw, stage)
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

    def forward(self, question: Question) -> PathwayResult:
        inputs = {
            "question": render_question(question),
            "options": format_options(question),
            "answer_format": answer_format(question),
        }
        scores = run_scored_stage("parametric", self.answer, question, **inputs)
        if scores is not None:
            return PathwayResult(candidate=_scored_candidate("parametric", scores, "parametric"))
        result = run_stage("parametric", self.answer, **inputs)
        return PathwayResult(candidate=_candidate_from("parametric", result, question, self.gate, "parametric"))


class EvidenceAnswerer(dspy.Module):
    """a = M(q, E): the evidence-conditioned answer shared by the local and dynamic pathways.

    With the judge switched on for the pathway (MCQ only: verdicts need options), the answer comes from the
    option-wise judgement instead; both predictors always exist so a saved program loads whatever the config.
    """

    def __init__(self) -> None:
        super().__init__()
        self.answer = dspy.Predict(AnswerFromEvidence)
        self.judge = OptionWiseJudge()

    def forward(
        self, question: Question, passages: list[Passage], pathway: PathwayName, gate: FormatGate, **extra: object
    ) -> Candidate:
        settings = current().settings
        answerer = settings.local_answerer if pathway == "local" else settings.dynamic_answerer
        if answerer == "judge" and question.is_mcq:
            judge_stage: Stage = "local_judge" if pathway == "local" else "dynamic_judge"
            judged: JudgeResult = self.judge(
                question=question, passages=passages, stage=judge_stage, mode=settings.judge_mode
            )
            return _judged_candidate(pathway, judged.judgment, judged.error, judge_stage, **extra)
        stage: Stage = "local_answer" if pathway == "local" else "dynamic_answer"
        inputs = _evidence_inputs(question, passages, settings.passage_words)
        scores = run_scored_stage(stage, self.answer, question, **inputs)
        if scores is not None:
            return _scored_candidate(pathway, scores, stage, **extra)
        result = run_stage(stage, self.answer, **inputs)
        cited = (result.prediction.cited_ids or []) if result.prediction is not None else []
        return _candidate_from(pathway, result, question, gate, stage, cited, **extra)

    def passage_only(
        self, question: Question, passages: list[Passage], candidate: Candidate
    ) -> OptionScores | BindingFallback:
        """Evidence binding: this pathway's answer prompt scored with the question removed, p(o | P)
        (`scored_answer.passage_only_scores`), or why not."""
        stage: Stage = "local_binding" if candidate.pathway == "local" else "dynamic_binding"
        # As the answer step read them: the bundle's web results carry the quality labels attached after it answered.
        read = [p.model_copy(update={"quality": None, "quality_reason": None}) for p in passages]
        inputs = _evidence_inputs(question, read, current().settings.passage_words)
        return passage_only_scores(stage, self.answer, question, candidate, read, **inputs)


def _evidence_inputs(question: Question, passages: list[Passage], passage_words: int | None) -> dict[str, str]:
    """The evidence-conditioned answer step's inputs (its scored and generated answers and its binding pass)."""
    return {
        "question": render_question(question),
        "options": format_options(question),
        "answer_format": answer_format(question),
        "evidence": format_passages(passages, passage_words),
    }


def _scored_candidate(pathway: PathwayName, scores: OptionScores, stage: Stage, **extra: object) -> Candidate:
    """A candidate whose answer was read from the option probabilities: no rationale or citations were written."""
    return Candidate(
        pathway=pathway,
        answer=Answer(letters=scores.letters),
        rationale=f"scored: {top_options(scores.probs)}",
        raw_answer=",".join(scores.letters),
        model=lm_name(current().lm_for(stage)[1]),
        option_scores=scores,
        **extra,  # type: ignore[arg-type]
    )


def _judged_candidate(
    pathway: PathwayName, judgment: OptionJudgment | None, error: StepError | None, stage: str, **extra: object
) -> Candidate:
    model = lm_name(current().lm_for(stage)[1])
    if judgment is None:
        return Candidate(pathway=pathway, model=model, error=error, **extra)  # type: ignore[arg-type]
    if judgment.answer is None:
        error = StepError(
            stage=stage, kind="invalid_answer", message=judgment.answer_rule, raw_output=judgment.model_answer
        )
    cited = [
        i for v in judgment.verdicts if judgment.answer and v.letter in judgment.answer.letters for i in v.cited_ids
    ]
    summary = "; ".join(
        f"{v.letter} {v.verdict}" + (f" ({', '.join(v.cited_ids)})" if v.cited_ids else "") for v in judgment.verdicts
    )
    return Candidate(
        pathway=pathway,
        answer=judgment.answer,
        rationale=f"{judgment.decision}: {summary}",
        raw_answer=judgment.model_answer,
        cited_passage_ids=list(dict.fromkeys(cited)),
        model=model,
        error=error,
        judgment=judgment,
        **extra,  # type: ignore[arg-type]
    )


class LocalPathway(dspy.Module):
    """BM25 (or any Retriever) over a curated corpus, then an evidence-conditioned answer."""

    def __init__(self, retriever: Retriever | None, gate: FormatGate | None = None) -> None:
        super().__init__()
        self.retriever = Shared(retriever, "local corpus")
        self.reader = EvidenceAnswerer()
        self.gate = gate or FormatGate()

    def forward(self, question: Question) -> PathwayResult:
        retriever: Retriever | None = self.retriever.value
        settings = current().settings
        if retriever is None:
            error = StepError(stage="local_retrieval", kind="retrieval_error", message="no local corpus configured")
            return PathwayResult(candidate=Candidate(pathway="local", error=error))
        query = build_query(question)
        started = time.perf_counter()
        try:
            passages = reid(retriever.retrieve(query, settings.local_k), "L")
        except Exception as exc:  # a broken index must not take the question down
            record_tool_call("local_retrieval", time.perf_counter() - started, backend=retriever.name, failed=True)
            error = evidence_failure("local", "local_retrieval", exc)
            return PathwayResult(
                candidate=Candidate(pathway="local", retriever=retriever.name, query=query, error=error)
            )
        record_tool_call("local_retrieval", time.perf_counter() - started, backend=retriever.name, failed=False)
        extra = {"retriever": retriever.name, "query": query, "passage_ids": [p.id for p in passages]}
        if not passages:
            error = StepError(stage="local_retrieval", kind="retrieval_error", message="no passage matched the query")
            return PathwayResult(candidate=Candidate(pathway="local", error=error, **extra))  # type: ignore[arg-type]
        candidate = self.reader(question=question, passages=passages, pathway="local", gate=self.gate, **extra)
        return PathwayResult(candidate=candidate, passages=passages)


class DynamicPathway(dspy.Module):
    """Web search (one query, or query-planned iterative search), an evidence-conditioned answer, and one
    source-quality call over all results."""

    def __init__(
        self,
        search: WebSearch | None,
        assessor: SourceQualityAssessor,
        gate: FormatGate | None = None,
        writer: WebQueryWriter | None = None,
    ) -> None:
        super().__init__()
        self.search = Shared(search, "web search")
        self.assessor = assessor
        self.reader = EvidenceAnswerer()
        self.writer = writer or WebQueryWriter()
        self.planner = QueryPlannedSearch()
        self.gate = gate or FormatGate()

    def forward(self, question: Question) -> PathwayResult:
        search: WebSearch | None = self.search.value
        settings = current().settings
        if search is None:
            absent = StepError(stage="dynamic_search", kind="search_error", message="no web search configured")
            return PathwayResult(candidate=Candidate(pathway="dynamic", error=absent))
        plan = None
        written: WebQueryResult | None = None
        if settings.dynamic_search_mode == "qpis":
            planned: SearchResult = self.planner(question=question, search=search, writer=self.writer)
            passages, error, plan, written = planned.passages, planned.error, planned.plan, planned.fallback
            # The planner wrote the sub-queries (their cuts are on the rounds); the question was not searched.
            query_fields: dict[str, object] = {
                "query": " | ".join(q for r in plan.rounds for q in r.queries),
                "query_source": "lm",
                "query_replaced_chars": len(build_query(question)),
            }
            if written is not None:  # the plan failed and the pathway's own query was searched
                query_fields = written.candidate_fields()
        else:
            written = self.writer(question=question, limit=search.max_query_chars)
            passages, error = search_web(search, written.query, settings.dynamic_k, "dynamic_search", "W")
            query_fields = written.candidate_fields()
        query_error = written.error if written is not None else None
        extra = {
            "search_backend": search.name,
            **query_fields,
            "passage_ids": [p.id for p in passages],
            "search_plan": plan,
        }
        if error is not None or not passages:
            failure = error or StepError(stage="dynamic_search", kind="search_error", message=EMPTY_SEARCH)
            candidate = Candidate(pathway="dynamic", error=failure, **extra)  # type: ignore[arg-type]
            return PathwayResult(candidate=candidate, passages=passages, query_error=query_error)
        # a_dynamic = M(q, E) and S = AssessQuality(q, E) are independent (eq. 4). Answering first puts the two
        # evidence-answer calls back to back, so an in-process model reuses their shared prompt prefix.
        candidate = self.reader(question=question, passages=passages, pathway="dynamic", gate=self.gate, **extra)
        assessed: QualityResult = self.assessor(question_text=question.text, passages=passages)
        passages = label_passages(passages, assessed.quality)
        return PathwayResult(
            candidate=candidate,
            passages=passages,
            quality=assessed.quality,
            quality_error=assessed.error,
            query_error=query_error,
        )
