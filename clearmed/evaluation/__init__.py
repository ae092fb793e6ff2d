"""The run harness: a program over a benchmark into a resumable run folder (a run's one door is clearmed.api; the
numbers of finished runs are clearmed.numbers', other systems' recorded answers clearmed.recorded's, and every view
clearmed.report's).

    from clearmed.evaluation import EvalSpec, run_evaluation, summarize

- the loop: `runner` (`EvalRun`, `run_evaluation`), `progress` (the bar, or lines in a batch log), `lm_cache`,
  `degraded` (questions a resume redoes);
- the folder: `folder` (a run folder's identity: the spec, its config snapshot and digest, opening and growing it,
  finished or not), `store` (the folder's files);
- spread and joined: `shard` (`--shard K/N`), `merge` (shards joined into one run);
- what a run spent and made: `spend` and `spend_log` (prices, and every paid call as it completed), `summary` (a
  run's summary record, `RunSummary`) and `pathway_worth` (what each pathway added to it).

The run harness loads DSPy, so its names are imported on first use: replay and tuning read run folders (`store`)
and summaries without it (tests/test_layers.py).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from clearmed.evaluation.store import EvalRecord, RunManifest, RunStore, RunStoreError, read_records
from clearmed.evaluation.summary import RunSummary, summarize

if TYPE_CHECKING:
    from clearmed.evaluation.folder import EvalSpec, config_digest
    from clearmed.evaluation.runner import BudgetReached, EvalRun, default_scorer, run_evaluation

# Imported on first use: the run loop loads DSPy (and the folder's names come on first use too, as they always did).
_LAZY = {
    **dict.fromkeys(("BudgetReached", "EvalRun", "default_scorer", "run_evaluation"), "clearmed.evaluation.runner"),
    **dict.fromkeys(("EvalSpec", "config_digest"), "clearmed.evaluation.folder"),
}

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
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_LAZY[name]), name)
