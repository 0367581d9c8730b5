"""The cheap screen before a child's full runs (docs/design.md §3): which few evals it runs on
(stratified towards the parent's failures) and whether its scores there let it go on. Pure
functions of their inputs and a seeded random.Random."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from optimizer.decide.comparison import E
from optimizer.decide.stats import mean

_EPS = 1e-12


def _eval_means(scores: Mapping[E, float | list[float]]) -> dict[E, float]:
    out: dict[E, float] = {}
    for e, value in scores.items():
        if isinstance(value, list | tuple):
            if value:
                out[e] = mean(value)
        elif value is not None:
            out[e] = float(value)
    return out


def screen(
    child_minibatch_scores: Mapping[E, float | list[float]],
    parent_scores_same_evals: Mapping[E, float | list[float]],
    *,
    margin: float,
) -> tuple[bool, str]:
    """A cheap paired check on a few evals: a candidate whose mean d is below −margin stops here;
    anything above goes on to the full benchmark, where the real rule decides. A positive margin
    stops only the clearly worse; a negative one asks for an improvement on the minibatch."""
    child = _eval_means(child_minibatch_scores)
    parent = _eval_means(parent_scores_same_evals)
    shared = [e for e in child if e in parent]
    if not shared:
        return True, "passed: no eval has scores for both, so the screen cannot judge."
    d = mean([child[e] - parent[e] for e in shared])
    if d < -margin - _EPS:
        why = "clearly worse than the parent" if margin >= 0 else "not better than the parent"
        return False, (
            f"stopped at screening: mean difference {d:+.3f} over {len(shared)} evals is below "
            f"{-margin:+g} ({why})."
        )
    return (
        True,
        f"passed screening: mean difference {d:+.3f} over {len(shared)} evals ≥ {-margin:+g}.",
    )


def choose_minibatch(
    train_ids: Sequence[E], parent_per_eval_scores: Mapping[E, float], k: int, rng: random.Random
) -> list[E]:
    """k evals for the screen, stratified: most are the parent's weakest (lowest score first,
    ties broken by rng), where a proposal aimed at failures shows; one in three at most is drawn
    at random from the rest, because a screen made only of evals the parent scores 0 on could
    never see a candidate that breaks what already works. An eval without a parent score counts
    as a failure."""
    if k <= 0 or not train_ids:
        return []
    if k >= len(train_ids):
        return list(train_ids)
    keyed = sorted(train_ids, key=lambda e: (parent_per_eval_scores.get(e, 0.0), rng.random()))
    n_rest = max(1, k // 3) if k >= 2 else 0
    chosen = keyed[: k - n_rest]
    rest = keyed[k - n_rest :]
    chosen += rng.sample(rest, n_rest)
    return chosen
