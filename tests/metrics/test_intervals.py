from __future__ import annotations

import numpy as np
import pytest

from clearmed.metrics import bootstrap_interval, mean_sd, wilson_interval


@pytest.mark.parametrize(
    ("successes", "n", "low", "high"),
    [
        # Newcombe (1998), Stat Med 17:857, Table I, method 3 (score interval without correction), 4 d.p.
        (81, 263, 0.2553, 0.3662),
        (15, 148, 0.0624, 0.1605),
        (0, 20, 0.0, 0.1611),
        (1, 29, 0.0061, 0.1718),
        # Closed-form checks: p = 0.5 is symmetric; 8/10 and 0/10 as tabulated by statsmodels.
        (50, 100, 0.4038, 0.5962),
        (8, 10, 0.4902, 0.9433),
        (0, 10, 0.0, 0.2775),
    ],
)
def test_wilson_known_values(successes: int, n: int, low: float, high: float) -> None:
    interval = wilson_interval(successes, n)
    assert interval.low == pytest.approx(low, abs=5e-5)
    assert interval.high == pytest.approx(high, abs=5e-5)
    assert interval.method == "wilson"
    assert interval.confidence == 0.95


def test_wilson_ends_are_exact() -> None:
    assert wilson_interval(0, 10).low == 0.0
    assert wilson_interval(10, 10).high == 1.0


def test_wilson_wider_at_higher_confidence_and_bad_input() -> None:
    assert wilson_interval(8, 10, confidence=0.99).low < wilson_interval(8, 10).low
    with pytest.raises(ValueError, match="n must be positive"):
        wilson_interval(0, 0)
    with pytest.raises(ValueError, match="successes"):
        wilson_interval(11, 10)
    with pytest.raises(ValueError, match="confidence"):
        wilson_interval(1, 10, confidence=1.5)


def test_bootstrap_two_point_sample_spans_the_range() -> None:
    # Resampled means of [0, 1] are 0, 0.5, 1 with probabilities 1/4, 1/2, 1/4: the 2.5% and 97.5%
    # quantiles are exactly 0 and 1.
    interval = bootstrap_interval([0.0, 1.0], n_resamples=4000, seed=1)
    assert (interval.low, interval.high) == (0.0, 1.0)


def test_bootstrap_constant_sample_is_degenerate() -> None:
    interval = bootstrap_interval([1.0] * 30, seed=3)
    assert (interval.low, interval.high) == (1.0, 1.0)


def test_bootstrap_matches_a_direct_numpy_computation() -> None:
    values = [1.0] * 60 + [0.0] * 40
    interval = bootstrap_interval(values, n_resamples=500, seed=42)
    rng = np.random.default_rng(42)
    data = np.asarray(values)
    means = data[rng.integers(0, 100, size=(500, 100))].mean(axis=1)
    assert interval.low == pytest.approx(float(np.quantile(means, 0.025)))
    assert interval.high == pytest.approx(float(np.quantile(means, 0.975)))


def test_bootstrap_is_reproducible_and_close_to_wilson_for_large_n() -> None:
    values = [1.0] * 200 + [0.0] * 200
    first = bootstrap_interval(values, seed=0)
    assert first == bootstrap_interval(values, seed=0)
    assert first != bootstrap_interval(values, seed=1)
    wilson = wilson_interval(200, 400)
    assert first.low == pytest.approx(wilson.low, abs=0.01)
    assert first.high == pytest.approx(wilson.high, abs=0.01)


def test_bootstrap_bad_input() -> None:
    with pytest.raises(ValueError, match="empty"):
        bootstrap_interval([])
    with pytest.raises(ValueError, match="n_resamples"):
        bootstrap_interval([1.0], n_resamples=0)


def test_mean_sd_is_the_mean_and_the_sample_standard_deviation() -> None:
    # The sample SD (n - 1), as numpy's ddof=1 gives it; a population SD (n) would be 1.118 here.
    mean, sd = mean_sd([1.0, 2.0, 3.0, 4.0])
    assert mean == pytest.approx(2.5)
    assert sd == pytest.approx(np.std([1.0, 2.0, 3.0, 4.0], ddof=1)) == pytest.approx(1.2909944)
    assert mean_sd([0.7]) == (0.7, 0.0)
