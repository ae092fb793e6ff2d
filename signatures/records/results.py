"""What the program's steps hand each other: typed results, never a `dspy.Prediction` with ad-hoc keys.

Each holds a step's output and the `StepError` that replaced or accompanied it (`programs.lm.stage.run_stage` records
the failure; the step's module builds the result). Only the entry programs (`CLEAR`, `SinglePathway`) return a
`dspy.Prediction`, because DSPy's optimizers and evaluators expect one.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from clearmed.signatures.records.adjudication import AdjudicationStep
from clearmed.signatures.records.base import Record
from clearmed.signatures.records.candidates import Agreement, Candidate, VerifierOutput
from clearmed.signatures.records.evidence import Passage, SourceQuality
from clearmed.signatures.records.judgment import OptionJudgment
from clearmed.signatures.records.question import Answer
from clearmed.signatures.records.routes import RuleId
from clearmed.signatures.records.search_plan import SearchPlan
from clearmed.signatures.records.usage import StepError


class PathwayResult(Record):
    """A pathway's candidate, the evidence it read, and (dynamic) that evidence's quality labels."""

    candidate: Candidate
    passages: list[Passage] = Field(default_factory=list)
    quality: SourceQuality = Field(default_factory=SourceQuality)
    quality_error: StepError | None = None  # the quality assessment failed; labels came from priors or none
    query_error: StepError | None = None  # the web-query LM step failed; the key-term query was searched

    def query_writer_step(self) -> AdjudicationStep | None:
        """The trail's record of a failed web-query writer (CLEAR's and the single-pathway programs' alike)."""
        if self.query_error is None:
            return None
        return AdjudicationStep(
            mechanism="pathways",
            trigger="web query",
            outcome=f"the query writer failed; key terms searched: {self.candidate.query or ''!r}",
            error=self.query_error,
        )


class QualityResult(Record):
    quality: SourceQuality
    error: StepError | None = None


class WebQueryResult(Record):
    """The query a web search is sent: who made it, what it replaced or cut, and the LM step's error if it failed
    (the key-term query then stood in)."""

    query: str
    source: Literal["question", "lm", "salient"]
    replaced_chars: int | None = None  # the question's length, when the query is not the question itself
    cut_chars: int | None = None  # a written query's length before it was cut to the backend's limit
    error: StepError | None = None

    def candidate_fields(self) -> dict[str, object]:
        """The candidate's record of the query (its error goes to the trail, not the candidate)."""
        return {
            "query": self.query,
            "query_source": self.source,
            "query_replaced_chars": self.replaced_chars,
            "query_cut_chars": self.cut_chars,
        }


class SearchResult(Record):
    """Query-planned search: the pages kept, the plan, and an error when nothing was found."""

    passages: list[Passage]
    plan: SearchPlan
    error: StepError | None = None
    fallback: WebQueryResult | None = None  # the plan gave no sub-queries: this query was searched instead


class JudgeResult(Record):
    """The option-wise judgement (None when nothing usable came back) and the stage's error if any."""

    judgment: OptionJudgment | None
    error: StepError | None = None


class AgreementResult(Record):
    agreement: Agreement
    error: StepError | None = None  # the LM judgement failed; the normaliser's agreement stands


class VerifierResult(Record):
    output: VerifierOutput
    rule: RuleId


class GateResult(Record):
    """The format gate: an answer parsed in Python or mapped onto the options by the LM, or None."""

    answer: Answer | None
    error: StepError | None = None


class ResponseResult(Record):
    response: str | None
    error: StepError | None = None
