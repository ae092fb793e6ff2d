"""clearmed.programs: the DSPy programs and the adjudication procedure, one folder per part.

- `adjudication/`: the kernel, CLEAR's procedure over typed records with no LM in reach (importing it loads no
  DSPy): `adjudicate`, the actions interface, the rules, the guard and audit contest, the calibrated verifier;
- `pathways/`: the parametric, local and dynamic pathways, their evidence search, option scoring, web query and
  QPIS;
- `assessors/`: the LM judgements adjudication consumes: verifier, follow-up search, guard and audit, source
  quality, free-text agreement;
- `judge/`: the option-wise judge (MedJudgeRAG) and its verdict rules;
- `lm/`: the DSPy plumbing every LM step shares (one stage, the run context, parsing, formatting for prompts);
- `clear.py` (`CLEAR`, `LiveActions`), `baselines.py`, `settings.py`, `task_adapters.py` (format gate, response),
  `input_budget.py`.

Names are resolved on first use, so importing this package (or the kernel) loads neither DSPy nor a backend.
"""

from __future__ import annotations

import importlib
from typing import Any

# Public name -> the module that defines it.
_PUBLIC = {
    "CLEAR": "clear",
    "LiveActions": "clear",
    "SinglePathway": "baselines",
    "ProgramSettings": "settings",
    "adjudicate": "adjudication",
    "Adjudicated": "adjudication",
    "AdjudicationActions": "adjudication",
    "Mechanisms": "adjudication",
    "ALL_MECHANISMS": "adjudication",
    "over_budget": "input_budget",
    "answer_format": "lm.answers",
    "format_options": "lm.answers",
    "parse_letters": "lm.answers",
    "format_passages": "lm.formatting",
    "render_question": "lm.formatting",
    "Ledger": "lm.run_context",
    "RunContext": "lm.run_context",
    "activate": "lm.run_context",
    "normalise_decision": "judge.rules",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'clearmed.programs' has no attribute {name!r}")
    return getattr(importlib.import_module(f"clearmed.programs.{module}"), name)
