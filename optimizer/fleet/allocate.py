"""Where a fleet night's next step goes (docs/design.md §18): a pure function of what each member's
ledger says, read in the members' name order, ties broken by name.

1. A member whose iteration a stop left open goes on with it (what the uninterrupted night did).
2. A member without a finished iteration gets its first look, in name order.
3. Each member its share of the budget (the fleet's budget over its members, its sealed test's
   reserve counted as spent), the least spent of its share first: no member's search is cut
   short for a sibling's lucky step, and a member whose stop rule fires before its share is
   spent gives the rest back. (Measured: choosing by the figure below from the first look on
   concentrated the money on a few members and bought less sealed gain than an equal split.)
4. Then, with every share spent, the member whose next iteration is expected to buy the most
   score a dollar:
   - what each measured proposal among its last `window` bought, with the noise taken out as the
     stop rule takes it out (budget/worth.py): a win counts its Δ shrunk toward the member's mean
     step (the fleet's steps where the member has fewer than OWN_PRIOR measured), a loss 0;
   - that mean shrunk in turn toward the fleet's (what a proposal bought across the fleet over the
     whole night), scaled by the member's headroom (1 − its best
     train score) over the fleet's mean headroom, by how little the member was seen: its share
     is spread / (spread + its mean's noise), the spread of the members' true gains measured
     across them (method of moments, as worth.prior). One lucky first step moves a member seen
     once by little; a member that keeps winning earns its own figure;
   - times the share of its proposals that reach a measurement (the rest are refused and buy
     nothing), drawn toward the fleet's share;
   - over the member's cost of a proposal (the fleet's mean where it has none).
A member whose own stop rule fired is not asked: it gave its share back."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from optimizer.budget import worth

WINDOW = 8  # proposals read per member: the stop rule's window (loop.stop_window's default)
# Measured proposals a member needs before its own steps set how its wins are shrunk; under it,
# the fleet's steps do (two draws say little about a member's spread).
OWN_PRIOR = 4
# Proposals of the fleet's measured share a member's own share is drawn toward (a Beta prior's
# weight): one, so a first look's refusal does not write a member off, and ten refusals in a row
# do.
PSEUDO_COUNT = 1


@dataclass(frozen=True)
class Seen:
    """One member as its ledger stands, for the choice."""

    name: str
    iterations_done: int
    open_iteration: int | None  # the number of an iteration a stop left open
    proposals: int  # made in finished iterations
    search_usd: float  # what those proposals and their children's evaluation cost
    judged: tuple[worth.Judged, ...]  # every proposal of finished iterations, in order
    headroom: float  # 1 − the best's train score
    spent_usd: float = 0.0  # everything the member's budget counts, its sealed test's reserve too
    share_usd: float | None = None  # the fleet's budget over its members; None: no budget


@dataclass(frozen=True)
class Choice:
    name: str
    why: str
    expected: dict[str, float | None]  # per member: expected gain a dollar (None: not estimated)


def choose(seen: Sequence[Seen], window: int = WINDOW) -> Choice | None:
    """The member the next step goes to; None when no member is left."""
    members = sorted(seen, key=lambda s: s.name)
    if not members:
        return None
    for s in members:
        if s.open_iteration is not None:
            return Choice(s.name, f"goes on with iteration {s.open_iteration}, left open", {})
    for s in members:
        if s.iterations_done == 0:
            return Choice(s.name, "its first look", {})
    within = [s for s in members if s.share_usd is not None and s.spent_usd < s.share_usd]
    if within:  # each member its share first, the least spent of it first
        least = min(within, key=lambda s: (s.spent_usd / (s.share_usd or 1.0), s.name))
        return Choice(least.name, f"within its share of the budget (${least.share_usd:.2f})", {})
    rates = per_dollar(members, window)
    best = max(members, key=lambda s: (rates[s.name], _reverse(s.name)))
    others = len(members) - 1
    said = f"expected {rates[best.name]:+.4f} score a dollar"
    if others:
        said += f", the most of {len(members)} skills still searching"
    return Choice(best.name, said, {k: round(v, 6) for k, v in rates.items()})


def _reverse(name: str) -> tuple[int, ...]:
    """A key under which max() picks the first name in alphabetical order among ties."""
    return tuple(-ord(c) for c in name)


def bought(s: Seen, fleet_prior: worth.Prior | None, window: int) -> list[float]:
    """What each measured proposal among the member's last `window` bought, the noise taken out
    (a refused or unmeasured proposal is counted by measured_share, not here)."""
    tail = [j for j in s.judged[-window:] if j.delta is not None]
    measured = sum(j.delta is not None for j in s.judged)
    p = (worth.prior(s.judged) if measured >= OWN_PRIOR else None) or fleet_prior
    if p is None:
        return [max(0.0, j.delta or 0.0) if j.won else 0.0 for j in tail]
    return [max(0.0, worth.shrunk(j, p)) if j.won else 0.0 for j in tail]


def measured_share(s: Seen, fleet_share: float, window: int) -> float:
    """The share of the member's proposals that reach a measurement (the rest are refused or
    duplicates, and buy nothing): its last window's, drawn toward the fleet's by PSEUDO_COUNT
    proposals. A member whose proposals keep being refused is cheap a proposal and buys nothing."""
    tail = s.judged[-window:]
    measured = sum(j.delta is not None for j in tail)
    return (measured + PSEUDO_COUNT * fleet_share) / (len(tail) + PSEUDO_COUNT)


def per_dollar(members: Sequence[Seen], window: int = WINDOW) -> dict[str, float]:
    """Each member's expected gain of one more proposal over its cost (the module's doc)."""
    fleet_prior = worth.prior([j for s in members for j in s.judged])
    xs = {s.name: bought(s, fleet_prior, window) for s in members}
    # The prior's level: what a measured proposal bought across the fleet over the whole night,
    # so that a member whose last window bought nothing still ranks by its headroom and cost.
    night = {s.name: bought(s, fleet_prior, len(s.judged) or 1) for s in members}
    every = [x for s in members for x in night[s.name]]
    pooled = math.fsum(sorted(every)) / len(every) if every else 0.0
    # The variance of one proposal's gain within a member, pooled over the members' whole nights
    # (a window alone may hold no win, and would call its mean exact).
    within = _pooled_variance([night[s.name] for s in members])
    mean_headroom = math.fsum(s.headroom for s in members) / len(members)
    prior_of = {
        s.name: pooled * (s.headroom / mean_headroom if mean_headroom > 0 else 1.0) for s in members
    }
    own = {s.name: math.fsum(sorted(xs[s.name])) / len(xs[s.name]) for s in members if xs[s.name]}
    noise = {name: within / len(xs[name]) for name in own}
    spread = _spread(own, prior_of, noise)
    tails = [j for s in members for j in s.judged[-window:]]
    fleet_share = sum(j.delta is not None for j in tails) / len(tails) if tails else 1.0
    costs = [s.search_usd / s.proposals for s in members if s.proposals and s.search_usd > 0]
    fleet_cost = math.fsum(sorted(costs)) / len(costs) if costs else 1.0
    rates: dict[str, float] = {}
    for s in members:
        gain = prior_of[s.name]
        if s.name in own:
            total = spread + noise[s.name]
            keep = spread / total if total > 0 else 0.0
            gain += keep * (own[s.name] - gain)
        gain *= measured_share(s, fleet_share, window)
        cost = s.search_usd / s.proposals if s.proposals and s.search_usd > 0 else fleet_cost
        rates[s.name] = gain / cost if cost > 0 else 0.0
    return rates


def _pooled_variance(groups: Sequence[Sequence[float]]) -> float:
    squares, df = 0.0, 0
    for g in groups:
        if len(g) < 2:
            continue
        mean = math.fsum(g) / len(g)
        squares += math.fsum(sorted((x - mean) ** 2 for x in g))
        df += len(g) - 1
    return squares / df if df else 0.0


def _spread(own: dict[str, float], prior_of: dict[str, float], noise: dict[str, float]) -> float:
    """The variance of the members' true gains around their priors: the variance of their
    means around them less the mean noise (method of moments), never below zero."""
    names = sorted(own)
    if len(names) < 2:
        return 0.0
    d = [own[n] - prior_of[n] for n in names]
    mean = math.fsum(d) / len(d)
    variance = math.fsum(sorted((x - mean) ** 2 for x in d)) / (len(d) - 1)
    return max(0.0, variance - math.fsum(sorted(noise[n] for n in names)) / len(names))
