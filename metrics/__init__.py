"""Scoring: MCQ answers and decisions, accuracy with intervals, free-text grading, HealthBench rubrics.

    from clearmed.metrics import score_decision, accuracy_summary
    summary = accuracy_summary([score_decision(q, d) for q, d in pairs], seed=0)

Multi-answer questions are scored by exact set equality (`correct`); the CLEAR code's lenient "prediction in
the gold set" is kept alongside as `in_gold_set` and never reported as accuracy. Graders run with their own
LM, passed in: `FreeTextGrader(grader_lm)`, `RubricGrader(grader_lm)`.
"""

from clearmed.metrics._calibration import Calibration, ReliabilityBin, calibration, letter_prior
from clearmed.metrics._decision import QuestionScore, score_decision, score_rubric_decision
from clearmed.metrics._free_text import FreeTextGrade, FreeTextGrader, GradingTask, extract_final_answer
from clearmed.metrics._intervals import Interval, bootstrap_interval, mean_sd, wilson_interval
from clearmed.metrics._judge import PathwayJudgeStats, judge_stats, judge_table
from clearmed.metrics._leakage import LeakageReport, PassageLeak, audit_leakage, passage_leak
from clearmed.metrics._mcq import McqScore, score_mcq
from clearmed.metrics._paired import (
    PairedComparison,
    holm_adjust,
    mcnemar_exact_p,
    paired_comparison,
    paired_difference_interval,
)
from clearmed.metrics._rubric import (
    RubricGrade,
    RubricGrader,
    RubricItemGrade,
    RubricSummary,
    healthbench_summary,
    render_conversation,
    render_rubric_item,
    rubric_score,
)
from clearmed.metrics._summary import AccuracySummary, accuracy_summary

__all__ = [
    "AccuracySummary",
    "Calibration",
    "FreeTextGrade",
    "FreeTextGrader",
    "GradingTask",
    "Interval",
    "LeakageReport",
    "McqScore",
    "PairedComparison",
    "PassageLeak",
    "PathwayJudgeStats",
    "QuestionScore",
    "ReliabilityBin",
    "RubricGrade",
    "RubricGrader",
    "RubricItemGrade",
    "RubricSummary",
    "accuracy_summary",
    "audit_leakage",
    "bootstrap_interval",
    "calibration",
    "extract_final_answer",
    "healthbench_summary",
    "holm_adjust",
    "judge_stats",
    "judge_table",
    "letter_prior",
    "mcnemar_exact_p",
    "mean_sd",
    "paired_comparison",
    "paired_difference_interval",
    "passage_leak",
    "render_conversation",
    "render_rubric_item",
    "rubric_score",
    "score_decision",
    "score_mcq",
    "score_rubric_decision",
    "wilson_interval",
]
