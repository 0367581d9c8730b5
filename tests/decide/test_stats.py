import random

import pytest

from optimizer.decide.stats import mean, paired_bootstrap, percentile


def test_percentile_interpolates_between_ranks():
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.0) == 1.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 1.0) == 4.0
    assert percentile([5.0], 0.3) == 5.0


def test_constant_difference_gives_a_zero_width_interval():
    for value, n in ((0.1, 5), (0.3, 7), (-0.05, 10), (0.0, 3)):
        delta, low, high = paired_bootstrap(
            [value] * n, confidence=0.95, samples=500, rng=random.Random(1)
        )
        assert delta == low == high == pytest.approx(value, abs=1e-15)
        assert low == high


def test_seeded_bootstrap_gives_stable_numbers():
    ds = [0.1, -0.05, 0.2, 0.0, 0.15]
    first = paired_bootstrap(ds, confidence=0.95, samples=2000, rng=random.Random(7))
    again = paired_bootstrap(ds, confidence=0.95, samples=2000, rng=random.Random(7))
    assert first == again
    delta, low, high = first
    assert delta == pytest.approx(0.08)
    assert low == pytest.approx(0.0, abs=1e-12)
    assert high == pytest.approx(0.16)
    other = paired_bootstrap(ds, confidence=0.95, samples=2000, rng=random.Random(8))
    assert other[0] == delta  # Δ is the plain mean, whatever the draws


def test_interval_narrows_with_lower_confidence_and_contains_delta():
    ds = [0.12, -0.03, 0.08, 0.2, -0.1, 0.05, 0.02, 0.11]
    wide = paired_bootstrap(ds, confidence=0.99, samples=2000, rng=random.Random(3))
    narrow = paired_bootstrap(ds, confidence=0.8, samples=2000, rng=random.Random(3))
    assert wide[1] <= narrow[1] <= mean(ds) <= narrow[2] <= wide[2]


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError):
        paired_bootstrap([], confidence=0.95, samples=100, rng=random.Random(0))
    with pytest.raises(ValueError):
        paired_bootstrap([0.1], confidence=1.0, samples=100, rng=random.Random(0))
    with pytest.raises(ValueError):
        mean([])
