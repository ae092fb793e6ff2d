"""OptionWiseJudge: MedJudgeRAG's option-wise evidence judgement as the answer step of an evidence pathway.

One LM call per pathway: in `implicit` mode verdicts, decision and answer; in `explicit` mode a small
question-specific knowledge graph first. The verdicts are checked and the decision and answer derived in
Python (`programs.judge_rules`). A completion the typed parser rejects is salvaged line by line when it can
be; otherwise the pathway gets no answer and the error is recorded.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TypeVar

import dspy

from clearmed.programs.answers import answer_format, format_options
from clearmed.programs.formatting import format_passages, render_question
from clearmed.programs.judge_rules import clean_graph, judge, parse_verdict_lines, raw_sections
from clearmed.programs.run_context import current
from clearmed.programs.stage import StageResult, run_stage
from clearmed.signatures.option_judge import (
    EntityDraft,
    JudgeOptions,
    JudgeOptionsWithGraph,
    RelationDraft,
    VerdictDraft,
)
from clearmed.signatures.records import JudgeMode, OptionJudgment, Passage, Question, StepError

_Draft = TypeVar("_Draft", EntityDraft, RelationDraft)


@dataclass(frozen=True)
class JudgeResult:
    """The judgement (None when nothing usable came back), the stage's error if any, and the raw stage result."""

    judgment: OptionJudgment | None
    error: StepError | None
    stage: StageResult


class OptionWiseJudge(dspy.Module):
    def __init__(self) -> None:
        super().__init__()
        # Both predictors exist so optimizers see both; the run's settings pick one per call.
        self.implicit = dspy.Predict(JudgeOptions)
        self.explicit = dspy.Predict(JudgeOptionsWithGraph)

    def forward(self, question: Question, passages: list[Passage], stage: str, mode: JudgeMode) -> JudgeResult:
        if not question.is_mcq:
            raise ValueError("the option-wise judge needs a multiple-choice question")
        predictor = self.explicit if mode == "explicit" else self.implicit
        result = run_stage(
            stage,  # type: ignore[arg-type]
            predictor,
            question=render_question(question),
            options=format_options(question),
            answer_format=answer_format(question),
            evidence=format_passages(passages, current().settings.passage_words),
        )
        evidence_ids = {p.id for p in passages}
        if result.prediction is not None:
            pred = result.prediction
            graph = None
            if mode == "explicit":
                graph = clean_graph(list(pred.entities or []), list(pred.relations or []), evidence_ids)
            judgment = judge(
                question,
                list(pred.verdicts or []),
                evidence_ids,
                stated_decision=str(pred.decision or ""),
                model_answer=str(pred.answer or ""),
                graph=graph,
            )
            return JudgeResult(judgment, None, result)
        return JudgeResult(_salvage(question, result.error, evidence_ids, mode), result.error, result)


def _salvage(
    question: Question, error: StepError | None, evidence_ids: set[str], mode: JudgeMode
) -> OptionJudgment | None:
    """Recover verdicts and answer from the raw completion of a failed parse; None if there is nothing to use."""
    if error is None or error.kind != "parse_error" or not error.raw_output:
        return None
    sections = raw_sections(error.raw_output)
    drafts: list[VerdictDraft] = parse_verdict_lines(sections.get("verdicts", ""))
    answer = sections.get("answer")
    if not drafts and not answer:
        return None
    graph = None
    if mode == "explicit":
        # The graph is an intermediate: when its JSON is broken, judge without it (an empty graph is allowed).
        graph = clean_graph(
            _drafts(sections.get("entities"), EntityDraft),
            _drafts(sections.get("relations"), RelationDraft),
            evidence_ids,
        )
    judgment = judge(
        question, drafts, evidence_ids, stated_decision=sections.get("decision"), model_answer=answer, graph=graph
    )
    return judgment.model_copy(update={"salvaged": True})


def _drafts(text: str | None, model: type[_Draft]) -> list[_Draft]:
    if not text:
        return []
    try:
        items = json.loads(text)
    except json.JSONDecodeError:
        return []
    out: list[_Draft] = []
    for item in items if isinstance(items, list) else []:
        try:
            out.append(model.model_validate(item))
        except ValueError:
            continue
    return out
