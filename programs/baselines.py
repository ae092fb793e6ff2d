"""Baselines on the same backbone and the same questions (CLEAR 2.7): one pathway, no adjudication.

Direct = the parametric pathway alone; MedRAG (BM25) = the local pathway alone, and MedRAG (MedCPT) the same
with MedCPT dense retrieval (the retriever is chosen where the program is assembled); online-only = the dynamic
pathway alone. They return the same `Decision` record as CLEAR (route None, rule `single_pathway`), so
evaluation, reports and comparisons treat every program alike.
"""

from __future__ import annotations

from typing import Literal

import dspy

from clearmed.programs.adjudication.rules import gate_accepts
from clearmed.programs.assessors.source_quality import SourceQualityAssessor
from clearmed.programs.lm.context import Ledger, RunContext, activate
from clearmed.programs.lm.prompting import over_budget, refused_decision
from clearmed.programs.pathways.pathways import DynamicPathway, LocalPathway, ParametricPathway
from clearmed.programs.pathways.task_adapters import FormatGate, ResponseGenerator
from clearmed.retrieval.base import Retriever, WebSearch
from clearmed.retrieval.priors import QualityPriors
from clearmed.signatures.records import (
    AdjudicationStep,
    Decision,
    DecisionStatus,
    EvidenceBundle,
    PathwayName,
    Question,
)
from clearmed.signatures.records.question import OptionTexts, as_question
from clearmed.signatures.records.results import PathwayResult, ResponseResult
from clearmed.signatures.records.settings import ProgramSettings

SinglePathwayName = Literal["direct", "medrag", "medrag-medcpt", "online"]
PATHWAY_OF: dict[SinglePathwayName, PathwayName] = {
    "direct": "parametric",
    "medrag": "local",
    "medrag-medcpt": "local",
    "online": "dynamic",
}


class SinglePathway(dspy.Module):
    """One CLEAR pathway used as the whole program, with the same task adapters."""

    def __init__(
        self,
        name: SinglePathwayName,
        retriever: Retriever | None = None,
        web_search: WebSearch | None = None,
        *,
        settings: ProgramSettings | None = None,
        quality_priors: QualityPriors | None = None,
        role_lms: dict[str, dspy.BaseLM] | None = None,
    ) -> None:
        super().__init__()
        self.gate = FormatGate()
        pathway = PATHWAY_OF[name]
        if pathway == "parametric":
            self.pathway: dspy.Module = ParametricPathway(self.gate)
        elif pathway == "local":
            self.pathway = LocalPathway(retriever, self.gate)
        else:
            self.pathway = DynamicPathway(web_search, SourceQualityAssessor(quality_priors), self.gate)
        self.responder = ResponseGenerator()
        self.settings = settings or ProgramSettings()
        self.role_lms = dict(role_lms or {})
        self.program_name = name

    def forward(self, question: Question | str, options: OptionTexts | None = None) -> dspy.Prediction:
        """Answer one question: a `Question`, or its text with its options (a list, lettered A, B, ...)."""
        question = as_question(question, options)
        refusal = over_budget(question, self.settings)
        if refusal is not None:
            decision = refused_decision(question, refusal, self.program_name)
            return dspy.Prediction(decision=decision, answer=None, route=None)
        context = RunContext(settings=self.settings, role_lms=self.role_lms, ledger=Ledger())
        with activate(context):
            result: PathwayResult = self.pathway(question=question)
            candidate, passages = result.candidate, result.passages
            bundle = EvidenceBundle(
                question=question,
                candidates=[candidate],
                local_passages=passages if candidate.pathway == "local" else [],
                dynamic_passages=passages if candidate.pathway == "dynamic" else [],
                source_quality=result.quality,
            )
            steps = [
                AdjudicationStep(
                    mechanism="pathways",
                    trigger=candidate.pathway,
                    rule="single_pathway",
                    outcome=f"{candidate.pathway}: {candidate.answer.display() if candidate.answer else 'no answer'}",
                    answer=candidate.answer,
                    error=candidate.error,
                )
            ]
            if (query_step := result.query_writer_step()) is not None:
                steps.append(query_step)
            response = None
            if candidate.answer is not None and not question.is_mcq:
                generated: ResponseResult = self.responder(
                    bundle=bundle, conclusion=candidate.answer, rationale=candidate.rationale
                )
                response = generated.response or candidate.answer.display()
            valid = gate_accepts(candidate.answer, question)
            status: DecisionStatus = (
                "answered" if valid else ("failed" if candidate.error and candidate.raw_answer is None else "unparsed")
            )
            decision = Decision(
                question_id=question.id,
                status=status,
                answer=candidate.answer if valid else None,
                route=None,
                rationale=candidate.rationale,
                confidence="low",
                deciding_rule="single_pathway",
                response=response,
                bundle=bundle,
                steps=steps,
                usage=context.ledger.rows,
                error=candidate.error.message if status == "failed" and candidate.error else None,
                program=self.program_name,
            )
        return dspy.Prediction(decision=decision, answer=decision.answer, route=decision.route)
