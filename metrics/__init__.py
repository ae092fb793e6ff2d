"""Scoring: MCQ answers and decisions, accuracy with intervals, free-text judging, HealthBench rubrics.

    from clearmed.metrics import score_decision, accuracy_summary
    summary = accuracy_summary([score_decision(q, d) for q, d in pairs], seed=0)

Multi-answer questions are scored by exact set equality (`correct`); the CLEAR code's lenient "prediction in
the gold set" is kept alongside as `in_gold_set` and never reported as accuracy. Judges run with their own
LM, passed in: `FreeTextJudge(judge_lm)`, `RubricGrader(judge_lm)`.
"""

from clearmed.metrics._calibration import Calibration, ReliabilityBin, calibration, letter_prior
from clearmed.metrics._decision import QuestionScore, score_decision, score_rubric_decision
from clearmed.metrics._free_text import FreeTextJudge, FreeTextJudgement, JudgeTask, extract_final_answer
from clearmed.metrics._intervals import Interval, bootstrap_interval, wilson_interval
from clearmed.metrics._judge import PathwayJudgeStats, judge_stats, judge_table
from clearmed.metrics._leakage import LeakageReport, PassageLeak, audit_leakage, passage_leak
from clearmed.metrics._mcq import McqScore, score_mcq
from clearmed.metrics._paired import PairedComparison, mcnemar_exact_p, paired_comparison
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
