"""OptionWiseJudge: MedJudgeRAG's option-wise evidence judgement as the answer step of an evidence pathway.

One LM call per pathway: in `implicit` mode verdicts, decision and answer; in `explicit` mode a small
question-specific knowledge graph first. The verdicts are checked and the decision and answer derived in
Python (`verdicts.py`, `graph.py`). A completion the typed parser rejects is salvaged line by line when it can
be; otherwise the pathway gets no answer and the error is recorded.
"""

from __future__ import annotations

import dspy

from clearmed.programs.judge.graph import clean_graph
from clearmed.programs.judge.salvage import salvage
from clearmed.programs.judge.verdicts import judge
from clearmed.programs.lm.context import current
from clearmed.programs.lm.parsing import answer_format, format_options
from clearmed.programs.lm.prompting import format_passages, render_question
from clearmed.programs.lm.stage import run_stage
from clearmed.signatures.option_judge import JudgeOptions, JudgeOptionsWithGraph
from clearmed.signatures.records import JudgeMode, Passage, Question
from clearmed.signatures.records.results import JudgeResult
from clearmed.signatures.records.settings import Stage


class OptionWiseJudge(dspy.Module):
    def __init__(self) -> None:
        super().__init__()
        # Both predictors exist so optimizers see both; the run's settings pick one per call.
        self.implicit = dspy.Predict(JudgeOptions)
        self.explicit = dspy.Predict(JudgeOptionsWithGraph)

    def forward(self, question: Question, passages: list[Passage], stage: Stage, mode: JudgeMode) -> JudgeResult:
        if not question.is_mcq:
            raise ValueError("the option-wise judge needs a multiple-choice question")
        predictor = self.explicit if mode == "explicit" else self.implicit
        result = run_stage(
            stage,
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
            return JudgeResult(judgment=judgment)
        return JudgeResult(judgment=salvage(question, result.error, evidence_ids, mode), error=result.error)
