"""Which scorer a run uses: MCQ by exact set; free text (MedRBench judge, HealthBench rubric) by the configured
judge backbone when there is one."""

from __future__ import annotations

from clearmed.config import ClearmedConfig
from clearmed.evaluation.runner import Scorer, default_scorer
from clearmed.metrics import FreeTextJudge, QuestionScore, RubricGrader, score_rubric_decision
from clearmed.signatures.records import Decision, Question


def scorer_for(config: ClearmedConfig) -> Scorer:
    """MCQ questions: exact-set accuracy. Free text and rubrics: the `[backbones.judge]` model, else unscored."""
    judge_cfg = config.backbones.get("judge")
    if judge_cfg is None:
        return default_scorer
    from clearmed.backbones.factory import build_lm

    judge_lm = build_lm(judge_cfg, role="judge", source=config.source)
    judge = FreeTextJudge(judge_lm)
    grader = RubricGrader(judge_lm)

    def score(question: Question, decision: Decision) -> QuestionScore | None:
        if question.is_mcq:
            return default_scorer(question, decision)
        if question.rubric:
            return score_rubric_decision(grader, question, decision)
        return judge.score_decision(question, decision)

    return score
