"""Paired comparison of two runs on the questions both answered: who gained, who lost, exact McNemar p.

Two programs on the same questions are not independent samples: their Wilson intervals overlap long before the
paired test says anything. The discordant questions (one right, the other wrong) carry the whole signal.
"""

from __future__ import annotations

from collections.abc import Mapping
from math import comb

from pydantic import BaseModel, ConfigDict


class PairedComparison(BaseModel):
    """`other` against `baseline` on their `common` question ids (scored questions only)."""

    model_config = ConfigDict(extra="forbid")

    baseline: str
    other: str
    common: int
    both_right: int
    gained: int  # baseline wrong, other right
    lost: int  # baseline right, other wrong
    both_wrong: int
    mcnemar_p: float  # exact two-sided; 1.0 when no question is discordant


def mcnemar_exact_p(gained: int, lost: int) -> float:
    """Two-sided exact McNemar p: the binomial tail of the smaller discordant count under p = 1/2, doubled."""
    if gained < 0 or lost < 0:
        raise ValueError("discordant counts must be non-negative")
    discordant = gained + lost
    if discordant == 0:
        return 1.0
    tail = sum(comb(discordant, k) for k in range(min(gained, lost) + 1)) / 2**discordant
    return min(1.0, 2 * tail)


def paired_comparison(
    baseline: str, baseline_correct: Mapping[str, bool], other: str, other_correct: Mapping[str, bool]
) -> PairedComparison:
    """Compare two runs' per-question correctness (question id -> correct) on the ids both contain."""
    common = sorted(baseline_correct.keys() & other_correct.keys())
    pairs = [(baseline_correct[qid], other_correct[qid]) for qid in common]
    gained = sum(1 for base, new in pairs if new and not base)
    lost = sum(1 for base, new in pairs if base and not new)
    return PairedComparison(
        baseline=baseline,
        other=other,
        common=len(common),
        both_right=sum(1 for base, new in pairs if base and new),
        gained=gained,
        lost=lost,
        both_wrong=sum(1 for base, new in pairs if not base and not new),
        mcnemar_p=round(mcnemar_exact_p(gained, lost), 4),
    )
