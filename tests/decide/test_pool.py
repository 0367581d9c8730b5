"""The pool (decide/pool.py): v0 and the children that won their step, each worth its parent's
estimate plus its step's Δ shrunk by the run's noise. Hand-built runs; no world behind them."""

from __future__ import annotations

import random

import pytest

from optimizer.decide import pool

EVALS = (1, 2, 3, 4)


def runs(*per_eval: list[float]) -> dict[int, list[float]]:
    return dict(zip(EVALS, per_eval, strict=True))


def flat(level: float, n: int, jitter: float = 0.1) -> dict[int, list[float]]:
    """n runs on each eval at `level`, alternating ± jitter (their mean is `level` for even n)."""
    return {e: [level + jitter * (-1) ** k for k in range(n)] for e in EVALS}


def noisy_steps(count: int, seed: int, sd: float = 0.1) -> list[pool.Version]:
    """Children of v0 that lost or tied on one run an eval, each eval's run drawn around v0's."""
    rng = random.Random(seed)
    return [
        pool.Version(
            f"v{k + 1}",
            "v0",
            {e: [min(1.0, max(0.0, 0.5 + rng.gauss(0, sd)))] for e in EVALS},
            measured=True,
        )
        for k in range(count)
    ]


def test_noise_pools_the_spread_of_runs_within_one_eval():
    v = pool.Version("v0", None, {1: [0.0, 1.0], 2: [0.5, 0.5], 3: [0.2]})
    # (0 − .5)² + (1 − .5)² + 0 + 0 over 1 + 1 degrees of freedom; one run says nothing
    assert pool.noise([v]) == pytest.approx(0.25)
    assert pool.noise([pool.Version("v1", None, {1: [0.3]})]) is None


def test_a_step_is_read_over_the_evals_both_have_with_each_sides_runs():
    child = pool.Version("v1", "v0", {1: [0.8], 2: [0.6], 3: [0.4]})
    parent = pool.Version("v0", None, {1: [0.5, 0.7], 2: [0.6, 0.6]})
    s = pool.step(child, parent, run_noise=0.02)
    assert s is not None
    assert s.delta == pytest.approx(((0.8 - 0.6) + (0.6 - 0.6)) / 2)
    assert s.noise == pytest.approx(0.02 * 2 * (1 + 1 / 2) / 4)


def test_one_lucky_run_keeps_only_a_share_of_its_step_where_steps_are_noise():
    v0 = pool.Version("v0", None, flat(0.5, 3), won=True)
    lucky = pool.Version("v12", "v0", flat(0.7, 1, 0.0), won=True, measured=True)
    known = pool.estimates([v0, *noisy_steps(10, seed=1), lucky])
    assert set(known) == {"v0", "v12"}  # the losers serve the prior, never the pool
    assert known["v12"].mean < 0.1  # its Δ is +0.2 on one run an eval
    assert known["v12"].variance > 0


def test_a_step_measured_without_noise_keeps_its_size():
    v0 = pool.Version("v0", None, flat(0.5, 2, 0.001), won=True)
    steps = [
        pool.Version(f"v{k}", "v0", flat(0.5 + d, 2, 0.001), measured=True)
        for k, d in enumerate((-0.2, -0.1, 0.0, 0.1), start=1)
    ]
    good = pool.Version("v5", "v0", flat(0.8, 2, 0.001), won=True, measured=True)
    known = pool.estimates([v0, *steps, good])
    assert known["v5"].mean == pytest.approx(0.3, abs=0.02)
    assert pool.best(known) == "v5"


def test_a_winner_measured_again_below_its_parent_gives_the_best_back():
    v0 = pool.Version("v0", None, flat(0.5, 3), won=True)
    # won on its first runs (0.8), then measured again as a parent: 0.8, 0.3, 0.3
    fallen = pool.Version("v11", "v0", {e: [0.8, 0.3, 0.3] for e in EVALS}, won=True, measured=True)
    known = pool.estimates([v0, *noisy_steps(10, seed=2), fallen])
    assert known["v11"].mean < 0
    assert pool.best(known) == "v0"
    # the same winner measured again at its first level stays ahead
    held = pool.Version("v11", "v0", {e: [0.8, 0.75, 0.85] for e in EVALS}, won=True, measured=True)
    assert pool.best(pool.estimates([v0, *noisy_steps(10, seed=2), held])) == "v11"


def test_a_child_stands_on_its_parents_estimate():
    v0 = pool.Version("v0", None, flat(0.4, 2, 0.001), won=True)
    child = pool.Version("v1", "v0", flat(0.6, 2, 0.001), won=True, measured=True)
    grandchild = pool.Version("v2", "v1", flat(0.8, 2, 0.001), won=True, measured=True)
    known = pool.estimates([v0, child, grandchild])
    assert known["v2"].mean == pytest.approx(known["v1"].mean + 0.2, abs=0.02)
    assert pool.best(known) == "v2"


def test_without_two_measured_steps_a_step_is_its_measured_delta():
    v0 = pool.Version("v0", None, flat(0.5, 1, 0.0), won=True)
    first = pool.Version("v1", "v0", flat(0.6, 1, 0.0), won=True, measured=True)
    assert pool.estimates([v0, first])["v1"] == pool.Estimate(pytest.approx(0.1), 0.0)


def test_a_tie_goes_to_the_earlier_member():
    known = {"v0": pool.Estimate(0.0, 0.0), "v3": pool.Estimate(0.0, 0.0)}
    assert pool.best(known) == "v0"
    assert pool.draw(known, random.Random(1)) == "v0"


def test_the_parent_drawn_is_a_function_of_the_seed_and_of_the_estimates():
    known = {
        "v0": pool.Estimate(0.0, 0.0),
        "v4": pool.Estimate(-0.01, 0.01),  # a winner still uncertain: its draws beat v0 often
        "v7": pool.Estimate(-0.5, 0.0001),  # far below: never drawn
    }
    draws = [pool.draw(known, random.Random(seed)) for seed in range(200)]
    assert draws == [pool.draw(known, random.Random(seed)) for seed in range(200)]
    assert 40 < draws.count("v4") < 160
    assert "v7" not in draws
