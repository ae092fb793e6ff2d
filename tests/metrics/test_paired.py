"""Paired comparison: discordant counts and the exact McNemar p."""

from __future__ import annotations

import pytest

from clearmed.metrics import mcnemar_exact_p, paired_comparison


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
