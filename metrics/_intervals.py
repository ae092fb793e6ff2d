"""Confidence intervals for a proportion: Wilson score (closed form) and percentile bootstrap (resampling); and a
figure's spread over repeated random splits, as mean ± SD (`mean_sd`)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from statistics import NormalDist

import numpy as np
from pydantic import BaseModel, ConfigDict


class Interval(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    low: float
    high: float
    confidence: float = 0.95
    method: str

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")


def wilson_interval(successes: int, n: int, *, confidence: float = 0.95) -> Interval:
    """Wilson score interval: well behaved near 0 and 1 and for small n, unlike the normal approximation."""
    _check_confidence(confidence)
    if n <= 0:
        raise ValueError(f"n must be positive, got {n}")
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be in [0, n], got {successes} of {n}")
    z = NormalDist().inv_cdf(1.0 - (1.0 - confidence) / 2.0)
    p = successes / n
    denominator = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    # The ends are exact in theory (0/n has low 0, n/n has high 1); set them so rounding dust never shows.
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return Interval(low=low, high=high, confidence=confidence, method="wilson")


def bootstrap_interval(
    values: Sequence[float], *, confidence: float = 0.95, n_resamples: int = 1000, seed: int = 0
) -> Interval:
    """Percentile bootstrap interval of the mean of `values` (e.g. 0/1 correctness), reproducible by `seed`."""
    _check_confidence(confidence)
    if not values:
        raise ValueError("cannot bootstrap an empty sample")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be positive, got {n_resamples}")
    data = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, len(data), size=(n_resamples, len(data)))].mean(axis=1)
    alpha = 1.0 - confidence
    low, high = np.quantile(means, [alpha / 2.0, 1.0 - alpha / 2.0])
    return Interval(low=float(low), high=float(high), confidence=confidence, method=f"bootstrap({n_resamples})")


def mean_sd(values: Sequence[float]) -> tuple[float, float]:
    """A figure over repeated random splits as its mean and sample standard deviation (0 for a single value): a
    figure from a random split is a distribution, reported as mean ± SD, never its best draw."""
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0
