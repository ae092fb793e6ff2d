"""Evaluation runs: a program over a benchmark into a resumable run folder, summaries and comparisons.

from clearmed.evaluation import EvalSpec, run_evaluation, summarize
"""

from clearmed.evaluation.report import RunSummary, comparison_table, summarize, write_plots
from clearmed.evaluation.runner import BudgetReached, EvalSpec, config_digest, default_scorer, run_evaluation
from clearmed.evaluation.store import EvalRecord, RunManifest, RunStore, RunStoreError, read_records

__all__ = [
    "BudgetReached",
    "EvalRecord",
    "EvalSpec",
    "RunManifest",
    "RunStore",
    "RunStoreError",
    "RunSummary",
    "comparison_table",
    "config_digest",
    "default_scorer",
    "read_records",
    "run_evaluation",
    "summarize",
    "write_plots",
]
