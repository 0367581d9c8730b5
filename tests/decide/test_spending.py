import math
import random
from statistics import NormalDist

import pytest

from optimizer.decide import spending


def test_the_shares_sum_to_alpha_over_the_looks():
    assert spending.schedule(3, 12) == (3, 4, 6, 9, 12)
    spent = [spending.look_alpha(0.05, r, 12, 3) for r in range(3, 13)]
    assert math.fsum(spent) == pytest.approx(0.05)
    looks = [a for a in spent if a > 0]
    assert len(looks) == 5 and looks[0] == pytest.approx(0.05 * 0.25**1.5)
    assert spending.look_alpha(0.05, 5, 12, 3) == 0  # not a look: spends nothing
    assert spending.look_alpha(0.05, 20, 12, 3) == spent[-1]  # past the cap: the last look


def test_tasks_tests_each_look_at_its_share_general_at_no_less():
    shares = [spending.look_alpha(0.05, r, 12, 3) for r in (3, 4, 6, 9, 12)]
    tasks = [spending.look_level(0.05, r, 12, 3, "tasks") for r in (3, 4, 6, 9, 12)]
    general = [spending.look_level(0.05, r, 12, 3, "general") for r in (3, 4, 6, 9, 12)]
    assert tasks == shares
    assert general[0] == pytest.approx(shares[0])  # nothing came before the first look
    assert all(g > s for g, s in zip(general[1:], shares[1:], strict=True))
    assert general[-1] < 0.05  # the last look still cannot test at the whole α
    assert spending.look_level(0.05, 5, 12, 3, "general") == 0  # not a look
    assert spending.look_level(0.0, 12, 12, 3, "general") == 0


def _first_crossings(levels, fractions, paths, seed):
    """Monte Carlo of the Brownian motion at `fractions`: the share of paths whose first z above
    its look's critical value is at each look."""
    rng = random.Random(seed)
    z = [NormalDist().inv_cdf(1 - a) if a > 0 else math.inf for a in levels]
    steps = [math.sqrt(b - a) for a, b in zip((0.0, *fractions), fractions, strict=False)]
    first = [0] * len(levels)
    for _ in range(paths):
        w = 0.0
        for k, (step, t) in enumerate(zip(steps, fractions, strict=True)):
            w += rng.gauss(0.0, step)
            if w / math.sqrt(t) > z[k]:
                first[k] += 1
                break
    return [f / paths for f in first]


@pytest.mark.parametrize("looks", [(3, 4, 6, 9, 12), (1, 2, 3, 4, 6, 9, 12), (2, 3, 4, 6, 9, 13)])
def test_the_levels_make_each_look_spend_exactly_its_share(looks):
    top = looks[-1]
    fractions = tuple(r / top for r in looks)
    shares = tuple(
        0.05 * ((r / top) ** 1.5 - (p / top) ** 1.5)
        for p, r in zip((0, *looks), looks, strict=False)
    )
    levels = spending.nominal_levels(shares, fractions)
    got = _first_crossings(levels, fractions, 60_000, seed=len(looks))
    # The standard error of a 5% rate over 60,000 paths is 0.09 points.
    assert math.fsum(got) == pytest.approx(0.05, abs=0.003)
    for g, s in zip(got, shares, strict=True):
        assert g == pytest.approx(s, abs=0.0025)
    # Tested at their shares, the same looks spend far less than α: what the levels win back.
    assert math.fsum(_first_crossings(shares, fractions, 60_000, seed=1)) < 0.042


def test_a_look_without_a_share_never_crosses():
    levels = spending.nominal_levels((0.01, 0.0, 0.04), (0.25, 0.5, 1.0))
    assert levels[1] == 0 and levels[0] == pytest.approx(0.01) and 0.04 < levels[2] < 0.05
    assert spending.nominal_levels((0.05,), (1.0,)) == pytest.approx((0.05,))


def test_a_budget_too_small_for_the_grid_is_spent_by_the_union_bound():
    for alpha in (1e-9, 1e-12):
        for r in (3, 4, 6, 9, 12):
            level = spending.look_level(alpha, r, 12, 3, "general")
            assert level == pytest.approx(spending.look_alpha(alpha, r, 12, 3), rel=1e-12)
    # At 1e-5 the exact levels still apply, and each is above its share.
    assert spending.look_level(1e-5, 12, 12, 3, "general") > spending.look_alpha(1e-5, 12, 12, 3)
