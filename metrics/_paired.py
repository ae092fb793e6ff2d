"""Paired comparison of two runs on the questions both answered: who gained, who lost, exact McNemar p, a 95%
interval on the accuracy difference, and Holm's adjustment when one table holds several comparisons.

Two programs on the same questions are not independent samples: their Wilson intervals overlap long before the
paired test says anything. The discordant questions (one right, the other wrong) carry the whole signal.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from math import comb

from pydantic import BaseModel, ConfigDict

from clearmed.metrics._intervals import Interval, wilson_interval


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
    mcnemar_p: float  # exact two-sided, unrounded (a rounded 3.1e-31 reads as 0); 1.0 when no question is discordant
    difference: float | None = None  # other's accuracy minus baseline's on the common ids; None when none is common
    difference_ci: Interval | None = None  # Newcombe's paired interval on `difference` (`paired_difference_interval`)
    holm_p: float | None = None  # McNemar p adjusted over every comparison of its table (`holm_adjust`), when several


def mcnemar_exact_p(gained: int, lost: int) -> float:
    """Two-sided exact McNemar p: the binomial tail of the smaller discordant count under p = 1/2, doubled."""
    if gained < 0 or lost < 0:
        raise ValueError("discordant counts must be non-negative")
    discordant = gained + lost
    if discordant == 0:
        return 1.0
    # Integer arithmetic to the last division: Python rounds int / int correctly, so 3.1e-31 stays 3.1e-31.
    tail = sum(comb(discordant, k) for k in range(min(gained, lost) + 1)) / 2**discordant
    return min(1.0, 2 * tail)


def paired_difference_interval(
    both_right: int, gained: int, lost: int, both_wrong: int, *, confidence: float = 0.95
) -> Interval:
    """Newcombe's hybrid score interval for a difference of paired proportions (method 10 of R. G. Newcombe,
    "Improved confidence intervals for the difference between binomial proportions based on paired data",
    Stat Med 1998;17:2635-2650), on (gained - lost) / n: the other run's accuracy minus the baseline's.

    Each accuracy gets its Wilson interval (l1, u1 for the other run's, l2, u2 for the baseline's), and the two
    are joined as the paper's square-and-add with the correlation phi of the 2x2 table, whose numerator ad - bc is
    shrunk by n/2 towards 0 when positive (and phi is 0 when a margin is empty):
    low = D - sqrt((p1 - l1)^2 - 2 phi (p1 - l1)(u2 - p2) + (u2 - p2)^2), high likewise with the other ends.
    Unlike the Wald interval it stays inside [-1, 1] and does not collapse to a point with no discordant pair."""
    counts = (both_right, gained, lost, both_wrong)
    if min(counts) < 0:
        raise ValueError(f"paired counts must be non-negative, got {counts}")
    n = sum(counts)
    if n == 0:
        raise ValueError("no paired question to compare")
    a, b, c, d = counts  # Newcombe's cells, the other run first: a both right, b only it right, c only baseline
    p1, p2 = (a + b) / n, (a + c) / n
    first, second = wilson_interval(a + b, n, confidence=confidence), wilson_interval(a + c, n, confidence=confidence)
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    shrunk = max(a * d - b * c - n / 2, 0.0) if a * d > b * c else float(a * d - b * c)
    phi = shrunk / math.sqrt(margins) if margins else 0.0

    def spread(x: float, y: float) -> float:
        return math.sqrt(max(0.0, x * x - 2 * phi * x * y + y * y))

    difference = p1 - p2
    low = difference - spread(p1 - first.low, second.high - p2)
    high = difference + spread(first.high - p1, p2 - second.low)
    return Interval(low=max(-1.0, low), high=min(1.0, high), confidence=confidence, method="newcombe-paired")


def holm_adjust(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment (S. Holm, Scand J Statist 1979;6:65-70), in the input's order: the i-th smallest
    of m p-values is multiplied by m - i + 1, made non-decreasing in that order and capped at 1. A comparison whose
    adjusted p is below alpha is significant with the family-wise error of all m kept at alpha."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [0.0] * len(p_values)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def paired_comparison(
    baseline: str, baseline_correct: Mapping[str, bool], other: str, other_correct: Mapping[str, bool]
) -> PairedComparison:
    """Compare two runs' per-question correctness (question id -> correct) on the ids both contain."""
    common = sorted(baseline_correct.keys() & other_correct.keys())
    pairs = [(baseline_correct[qid], other_correct[qid]) for qid in common]
    both_right = sum(1 for base, new in pairs if base and new)
    gained = sum(1 for base, new in pairs if new and not base)
    lost = sum(1 for base, new in pairs if base and not new)
    both_wrong = len(pairs) - both_right - gained - lost
    return PairedComparison(
        baseline=baseline,
        other=other,
        common=len(common),
        both_right=both_right,
        gained=gained,
        lost=lost,
        both_wrong=both_wrong,
        mcnemar_p=mcnemar_exact_p(gained, lost),
        difference=(gained - lost) / len(common) if common else None,
        difference_ci=paired_difference_interval(both_right, gained, lost, both_wrong) if common else None,
    )
