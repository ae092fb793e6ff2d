"""Evaluation runs: a program over a benchmark into a resumable run folder, and the numbers (their tables, plots
and reports are clearmed.report's; a run's one door is clearmed.api).

    from clearmed.evaluation import EvalSpec, run_evaluation, summarize

- the harness: `runner` (`EvalRun`, `run_evaluation`), `store` (the run folder), `scoring` (the run's grader),
  `progress`, `lm_cache`, `degraded` (questions a resume redoes), `recorded` (other systems' pathway answers);
- spread and joined: `shard` (`--shard K/N`), `merge` (shards joined into one run), `suite` (a matrix of runs);
- the numbers: `summary`, `spend` and `spend_log`, `estimate` (`--estimate`), `compare`, `pathway_worth`,
  `results_table` (run folders as data frames).

The run harness loads DSPy, so its names are imported on first use: replay and tuning read run folders (`store`)
and summaries without it (tests/test_layers.py).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from clearmed.evaluation.store import EvalRecord, RunManifest, RunStore, RunStoreError, read_records
from clearmed.evaluation.summary import RunSummary, summarize

if TYPE_CHECKING:
    from clearmed.evaluation.runner import (
        BudgetReached,
        EvalRun,
        EvalSpec,
        config_digest,
        default_scorer,
        run_evaluation,
    )

_RUNNER = frozenset({"BudgetReached", "EvalRun", "EvalSpec", "config_digest", "default_scorer", "run_evaluation"})

__all__ = [
    "BudgetReached",
    "EvalRecord",
    "EvalRun",
    "EvalSpec",
    "RunManifest",
    "RunStore",
    "RunStoreError",
    "RunSummary",
    "config_digest",
    "default_scorer",
    "read_records",
    "run_evaluation",
    "summarize",
]


def __getattr__(name: str) -> Any:
    if name not in _RUNNER:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module("clearmed.evaluation.runner"), name)
