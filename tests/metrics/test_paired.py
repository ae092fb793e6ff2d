"""Paired comparison: discordant counts, the exact McNemar p, Newcombe's interval on the difference, Holm's p."""

from __future__ import annotations

import pytest

from clearmed.metrics import holm_adjust, mcnemar_exact_p, paired_comparison, paired_difference_interval


@pytest.mark.parametrize(
    ("gained", "lost", "expected"),
    [
        (0, 0, 1.0),  # nothing discordant: no evidence either way
        (1, 1, 1.0),
        (10, 6, 0.4545),  # 2 * P(X <= 6 | n = 16, p = 1/2)
        (6, 10, 0.4545),  # symmetric
        (8, 0, 0.0078),  # 2 / 2**8
        (0, 1, 1.0),  # the doubled tail is capped at 1
    ],
)
def test_mcnemar_exact_p(gained: int, lost: int, expected: float) -> None:
    assert mcnemar_exact_p(gained, lost) == pytest.approx(expected, abs=1e-4)


def test_mcnemar_rejects_negative_counts() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        mcnemar_exact_p(-1, 2)


def test_paired_comparison_counts_only_shared_questions() -> None:
    base = {"q1": True, "q2": False, "q3": False, "q4": True, "only-base": True}
    other = {"q1": True, "q2": True, "q3": False, "q4": False, "only-other": False}
    pair = paired_comparison("direct", base, "clear", other)
    assert (pair.common, pair.both_right, pair.gained, pair.lost, pair.both_wrong) == (4, 1, 1, 1, 1)
    assert pair.mcnemar_p == 1.0
    assert (pair.baseline, pair.other) == ("direct", "clear")


# Newcombe (1998), Stat Med 17:2635, Table II, method 10 (the hybrid score interval), on his four worked examples:
# cells (a, b, c, d) = (both +, first only, second only, both -), the difference (b - c) / n. The literals are the
# paper's as reproduced by the R package propint's tests (tests/testthat, "results reported in Newcombe1998"); the
# two degenerate tables (no discordant pair; every pair discordant one way) are where a Wald interval collapses.
@pytest.mark.parametrize(
    ("cells", "low", "high"),
    [
        ((36, 12, 2, 0), 0.0569, 0.3404),
        ((18, 12, 2, 18), 0.0562, 0.3290),
        ((53, 0, 0, 1), -0.0729, 0.0729),
        ((0, 30, 0, 0), 0.8395, 1.0),
    ],
)
def test_paired_difference_interval_matches_newcombes_worked_examples(
    cells: tuple[int, int, int, int], low: float, high: float
) -> None:
    interval = paired_difference_interval(*cells)
    assert (round(interval.low, 4), round(interval.high, 4)) == (low, high)
    assert interval.method == "newcombe-paired"


def test_the_paired_interval_is_on_other_minus_baseline() -> None:
    # baseline right on q0-q3, the other on q0-q1 and q4-q9: gained 6, lost 2, +40 points over ten questions
    base = {f"q{i}": i < 4 for i in range(10)}
    other = {f"q{i}": i < 2 or i >= 4 for i in range(10)}
    pair = paired_comparison("base", base, "other", other)
    assert (pair.both_right, pair.gained, pair.lost, pair.both_wrong) == (2, 6, 2, 0)
    assert pair.difference == pytest.approx(0.4)
    assert pair.difference_ci == paired_difference_interval(2, 6, 2, 0)
    swapped = paired_comparison("other", other, "base", base)
    assert swapped.difference_ci is not None
    assert pair.difference_ci is not None
    assert (swapped.difference_ci.low, swapped.difference_ci.high) == pytest.approx(
        (-pair.difference_ci.high, -pair.difference_ci.low)
    )
    assert paired_comparison("a", {}, "b", {}).difference_ci is None  # nothing shared, nothing to estimate


def test_paired_difference_interval_refuses_impossible_tables() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        paired_difference_interval(1, -1, 0, 0)
    with pytest.raises(ValueError, match="no paired question"):
        paired_difference_interval(0, 0, 0, 0)


@pytest.mark.parametrize(
    ("p", "adjusted"),
    [
        # R's p.adjust(c(0.01, 0.04, 0.03, 0.005), "holm"): 0.03 0.06 0.06 0.02 (the step-down keeps it monotone)
        ([0.01, 0.04, 0.03, 0.005], [0.03, 0.06, 0.06, 0.02]),
        ([0.5, 0.6], [1.0, 1.0]),  # capped at 1
        ([0.2], [0.2]),  # one comparison is its own family
        ([], []),
    ],
)
def test_holm_adjust(p: list[float], adjusted: list[float]) -> None:
    assert holm_adjust(p) == pytest.approx(adjusted)
