"""The noise worlds of bench/selection.py's panel (numpy, vectorised per trial). Each draws, for one
trial, the true per-eval means of parent and child and up to CAP runs per eval per side, with the
blind comparator's swap-consistent verdict for every pair, so the rule can ask for more runs and
every claim sees the same draws (common random numbers).

Worlds (per-eval parent difficulty uniform in [0.15, 0.85] unless said):
- continuous   run quality = mean + N(0, 0.12), score = clip(quality + judge N(0, 0.09)); the child's
               per-eval advantage Δ + N(0, 0.05)
- expectations 5 binary expectations per run, each passed with its own probability, the judge
               flipping each with 5%; score = share passed
- pass/fail    one binary expectation per run (score 0 or 1)
- levels       continuous, rounded to 5 levels (0, .25, .5, .75, 1): a 1–5 rubric
- taste        continuous; the comparator prefers one side on each eval with 30% (the side drawn
               per eval, fair over evals), whatever it sees, in both orders
- hetero       continuous with the child's advantage spread N(0, 0.15) over evals
- bias         continuous with a comparator position bias of 0.6 (0.3 elsewhere)
- heavy        continuous with run noise from a Student t with 3 degrees of freedom (same sd):
               rare runs far from the rest
- crashes      continuous, but each run scores 0 with 10% (a run that fell over): two modes
- ceiling      pass/fail near the ceiling (the parent passes 75–97% of runs) with the child's
               advantage spread N(0, 0.10) over evals: skewed, discrete and heterogeneous
- steady       pass/fail where one eval in eight (the 1st, 9th, …) is noisy (the parent passes
               30–70%) and every other eval always passes on both sides: a few evals hold all
               the run noise; the child's advantage sits on the noisy evals (×E/noisy, clipped)

For the `tasks` claim the per-eval advantages are centred, so an "equal" child is equal on these
evals on average (its realized Δ is Δ up to clipping); for `general` they are a draw."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CAP = 12
RUN_SD, JUDGE_SD, HETERO_SD = 0.12, 0.09, 0.05
COMPARATOR_SD, COMPARATOR_TIE, POSITION_BIAS = 0.07, 0.02, 0.3
WORLDS = (
    "continuous",
    "expectations",
    "pass/fail",
    "levels",
    "taste",
    "hetero",
    "bias",
    "heavy",
    "crashes",
    "ceiling",
    "steady",
)
# The default panel. `steady` is asked for by name: under `general` its +0.10 child's d is 0 on
# seven evals in eight, so the oracle's normal reference is out of any valid test's reach there
# (docs/selection.md, "A few evals hold the noise").
PANEL = tuple(w for w in WORLDS if w != "steady")
CRASH = 0.10
EXPECTATIONS, FLIP = 5, 0.05


@dataclass
class Trial:
    child: np.ndarray  # (evals, CAP) observed scores
    parent: np.ndarray
    verdict: np.ndarray  # (evals, CAP): 1 child, −1 parent, 0 tie / inconsistent
    true_d: np.ndarray  # (evals,) true mean child − parent score
    var_sum: np.ndarray | None  # (evals,) true σ²_child + σ²_parent of one run (oracle only)


def _advantage(
    world: str, n: int, delta: float, centre: bool, rng: np.random.Generator
) -> np.ndarray:
    sd = {"hetero": 0.15, "ceiling": 0.10}.get(world, HETERO_SD)
    h = rng.normal(0, sd, n)
    if centre:
        h -= h.mean()
    return delta + h


def _draw(
    world: str,
    base: np.ndarray,
    shape: tuple[int, int],
    rng: np.random.Generator,
    probs: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(observed scores, latent quality the comparator sees) for runs around `base` (evals,)."""
    if world in ("pass/fail", "ceiling"):
        p = np.clip(base, 0, 1)[:, None]
        passed = (rng.random(shape) < p).astype(float)
        return passed, passed
    if world == "expectations":
        assert probs is not None
        passed = rng.random((*shape, EXPECTATIONS)) < probs[:, None, :]
        flipped = passed ^ (rng.random(passed.shape) < FLIP)
        return flipped.mean(axis=2), passed.mean(axis=2)
    if world == "heavy":  # t(3) has variance 3
        quality = base[:, None] + RUN_SD * rng.standard_t(3, shape) / np.sqrt(3)
    else:
        quality = base[:, None] + rng.normal(0, RUN_SD, shape)
    score = np.clip(quality + rng.normal(0, JUDGE_SD, shape), 0, 1)
    if world == "levels":
        score = np.round(score * 4) / 4
    if world == "crashes":
        crashed = rng.random(shape) < CRASH
        score, quality = np.where(crashed, 0.0, score), np.where(crashed, 0.0, quality)
    return score, quality


def _verdicts(world: str, qc: np.ndarray, qp: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Each pair judged in both orders; 1 / −1 when both orders agree on the child / the parent."""
    bias = 0.6 if world == "bias" else POSITION_BIAS
    n = qc.shape[0]
    taste = (rng.choice([-1.0, 1.0], n)[:, None] * np.ones_like(qc)) if world == "taste" else None

    def one(first_child: bool) -> np.ndarray:
        a, b = (qc, qp) if first_child else (qp, qc)
        pa = a + rng.normal(0, COMPARATOR_SD, a.shape)
        pb = b + rng.normal(0, COMPARATOR_SD, b.shape)
        says_a = np.where(np.abs(pa - pb) < COMPARATOR_TIE, 0.0, np.where(pa > pb, 1.0, -1.0))
        says_a = np.where(rng.random(a.shape) < bias, 1.0, says_a)
        child = says_a if first_child else -says_a
        if taste is not None:
            child = np.where(rng.random(a.shape) < 0.3, taste, child)
        return child

    first, second = one(True), one(False)
    return np.where(first == second, first, 0.0)


def trial(
    world: str,
    n_evals: int,
    delta: float,
    centre: bool,
    seed: tuple[int, ...],
    oracle: bool = False,
) -> Trial:
    rng = np.random.default_rng(list(seed))
    shape = (n_evals, CAP)
    if world == "steady":
        noisy = np.arange(n_evals) % 8 == 0
        pb = np.where(noisy, rng.uniform(0.3, 0.7, n_evals), 1.0)
        h = rng.normal(0, HETERO_SD, n_evals) * noisy
        if centre:
            h[noisy] -= h[noisy].mean()
        pc = np.clip(pb + noisy * (delta * n_evals / noisy.sum() + h), 0, 1)
        child, qc = _draw("pass/fail", pc, shape, rng)
        parent, qp = _draw("pass/fail", pb, shape, rng)
        var = pc * (1 - pc) + pb * (1 - pb)
        return Trial(child, parent, _verdicts(world, qc, qp, rng), pc - pb, var if oracle else None)
    if world in ("pass/fail", "expectations", "ceiling"):
        pb = rng.uniform(*((0.75, 0.97) if world == "ceiling" else (0.15, 0.85)), n_evals)
        adv = _advantage(world, n_evals, delta, centre, rng)
        if world == "expectations":
            spread = rng.uniform(-0.3, 0.3, (n_evals, EXPECTATIONS))
            pp = np.clip(pb[:, None] + spread, 0.02, 0.98)
            pc = np.clip(pp + adv[:, None], 0.0, 1.0)
            flip = lambda p: p * (1 - FLIP) + (1 - p) * FLIP  # noqa: E731
            mc, mp = flip(pc).mean(1), flip(pp).mean(1)
            vc = (flip(pc) * (1 - flip(pc))).sum(1) / EXPECTATIONS**2
            vp = (flip(pp) * (1 - flip(pp))).sum(1) / EXPECTATIONS**2
            child, qc = _draw(world, pb, shape, rng, pc)
            parent, qp = _draw(world, pb, shape, rng, pp)
        else:
            pc = np.clip(pb + adv, 0, 1)
            mc, mp, vc, vp = pc, pb, pc * (1 - pc), pb * (1 - pb)
            child, qc = _draw(world, pc, shape, rng)
            parent, qp = _draw(world, pb, shape, rng)
        return Trial(
            child, parent, _verdicts(world, qc, qp, rng), mc - mp, vc + vp if oracle else None
        )
    mb = rng.uniform(0.15, 0.85, n_evals)
    mc_latent = mb + _advantage(world, n_evals, delta, centre, rng)
    child, qc = _draw(world, mc_latent, shape, rng)
    parent, qp = _draw(world, mb, shape, rng)
    verdict = _verdicts(world, qc, qp, rng)
    if not oracle:
        return Trial(child, parent, verdict, mc_latent - mb, None)
    # True means and variances of clipped (and rounded) scores, by a large draw of the same world.
    big = np.random.default_rng([*seed, 1])
    sc, _ = _draw(world, mc_latent, (n_evals, 2000), big)
    sp, _ = _draw(world, mb, (n_evals, 2000), big)
    return Trial(child, parent, verdict, sc.mean(1) - sp.mean(1), sc.var(1) + sp.var(1))
