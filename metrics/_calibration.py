"""How far a pathway's option probabilities can be trusted: expected calibration error, reliability bins, and
the backbone's letter prior.

A calibrated verifier is only as good as the confidences it pools. A pathway whose 0.9 is right nine times
in ten can be trusted when it disagrees with the others; one that is equally sure of everything cannot. The
letter prior (the mean probability a backbone gives each option position, and how often each position is its
choice) shows a positional bias such as the small model's preference for "B".
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

__all__ = ["Calibration", "ReliabilityBin", "calibration", "letter_prior"]


class ReliabilityBin(BaseModel):
    model_config = ConfigDict(extra="forbid")

    low: float
    high: float
    count: int
    mean_confidence: float
    accuracy: float


class Calibration(BaseModel):
    """Calibration of one pathway's top-option probability over the questions it scored."""

    model_config = ConfigDict(extra="forbid")

    questions: int
    accuracy: float
    mean_confidence: float
    ece: float  # expected calibration error: bin-size-weighted |accuracy - confidence|
    bins: list[ReliabilityBin]


def calibration(confidences: Sequence[float], correct: Sequence[bool], n_bins: int = 10) -> Calibration | None:
    """ECE and reliability bins (equal width over [0, 1]) for top-option confidences; None without data."""
    if len(confidences) != len(correct):
        raise ValueError("one correctness flag per confidence")
    if not confidences:
        return None
    bins: list[ReliabilityBin] = []
    ece = 0.0
    n = len(confidences)
    for index in range(n_bins):
        low, high = index / n_bins, (index + 1) / n_bins
        members = [i for i, c in enumerate(confidences) if low <= c < high or (index == n_bins - 1 and c == 1.0)]
        if not members:
            continue
        mean_conf = sum(confidences[i] for i in members) / len(members)
        acc = sum(correct[i] for i in members) / len(members)
        ece += len(members) / n * abs(acc - mean_conf)
        bins.append(
            ReliabilityBin(
                low=low, high=high, count=len(members), mean_confidence=round(mean_conf, 4), accuracy=round(acc, 4)
            )
        )
    return Calibration(
        questions=n,
        accuracy=round(sum(correct) / n, 4),
        mean_confidence=round(sum(confidences) / n, 4),
        ece=round(ece, 4),
        bins=bins,
    )


def letter_prior(distributions: Sequence[dict[str, float]]) -> dict[str, dict[str, float]]:
    """Per option letter: its mean probability, and the share of questions where it was the top choice."""
    if not distributions:
        return {}
    letters = sorted({letter for dist in distributions for letter in dist})
    n = len(distributions)
    tops = [max(dist, key=dist.__getitem__) for dist in distributions if dist]
    return {
        letter: {
            "mean_probability": round(sum(dist.get(letter, 0.0) for dist in distributions) / n, 4),
            "top_share": round(tops.count(letter) / n, 4),
        }
        for letter in letters
    }
