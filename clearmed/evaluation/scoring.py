"""Which scorer a run uses: MCQ by exact set; free text by the configured judge backbone when there is one."""

from __future__ import annotations

from clearmed.config import ClearmedConfig
from clearmed.evaluation.runner import Scorer, default_scorer
from clearmed.metrics import FreeTextJudge, QuestionScore
from clearmed.signatures.records import Decision, Question


def scorer_for(config: ClearmedConfig) -> Scorer:
    """MCQ questions: exact-set accuracy. Free text: the `[backbones.judge]` model, else left unscored."""
    judge_cfg = config.backbones.get("judge")
    if judge_cfg is None:
        return default_scorer
    from clearmed.backbones.factory import build_lm

    judge = FreeTextJudge(build_lm(judge_cfg, role="judge", source=config.source))

    def score(question: Question, decision: Decision) -> QuestionScore | None:
        if question.is_mcq:
            return default_scorer(question, decision)
        if question.rubric:
            return None  # HealthBench rubrics are graded by `RubricGrader`, reported separately
        return judge.score_decision(question, decision)

    return score
