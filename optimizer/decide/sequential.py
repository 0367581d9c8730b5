"""The sequential promotion rule's statistics (docs/design.md §8 and §16, docs/selection.md): looks at a
few run counts (3, 4, 6, 9, 12 runs per eval by default), each allowed a fixed share of the
false-promotion budget, one test per look (the scores; the blind comparator only breaks a near-tie
the scores already won), a futility stop and a claim (`scope`) that says what the evidence is
about. Pure: no rng, no files, no clock.

Why this shape: re-testing a fixed 95% interval after every added run inflates the error rate
with each look. Spending α across the looks bounds the chance of ever promoting an equal child by
α, provided each look's own test holds its level (bench/selection.py and bench/looks.py measure
that on a panel of noise worlds rather than trusting it). `tasks` tests each look at its share (a
union bound, whatever the looks' correlation); `general` at the level that spends exactly its
share given the least correlation looks at nested runs of the same evals can have, exact for
normal statistics and measured for the t's (decide/spending.py).

Two claims:
- `tasks`: better on these evals. The evals are fixed and the runs are the units: Δ's standard
  error comes from the run-to-run variance within each eval (pooled over evals and sides), with
  Σ(runs − 1) degrees of freedom, fewer when a few evals hold the noise. Valid and powerful at 3
  to 8 evals.
- `general`: better on evals like these. The evals are the units: Student-t over the per-eval
  differences with evals − 1 degrees of freedom, never narrower than half the `tasks` error's
  variance.
Neither can collapse: a pseudo-observation of the largest variance a [0, 1] score can have is
pooled into every variance, so identical runs never give a zero-width interval."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from statistics import NormalDist

from optimizer import words
from optimizer.config import Selection
from optimizer.decide import verdict
from optimizer.decide.comparison import (
    MIN_CONSISTENT_VERDICTS,
    Asked,
    ComparatorTest,
    EvalId,
    Said,
    comparator_test,
)
from optimizer.decide.spending import Scope, look_alpha, look_level, next_look, schedule
from optimizer.decide.stats import mean
from optimizer.decide.stats import t_quantile as _t_quantile

# Every variance pools in PRIOR_N pseudo-observations of PRIOR_VAR, the largest variance of a score
# in [0, 1]: identical runs never make an interval collapse, and the pooled figure can only err wide.
# A quarter of one: a whole one nearly doubled 3 evals × 3 runs' variance (1–3 points of power).
PRIOR_VAR, PRIOR_N = 0.25, 0.25
# `general`: Δ's variance is never below GENERAL_FLOOR × the `tasks` one (run noise alone), so a
# chance small spread between evals cannot narrow the interval; a floor only widens the plain t.
# At 1 it cost 4–7 points of one-look power at 10 evals (docs/selection.md).
GENERAL_FLOOR = 0.5
_NORMAL = NormalDist()
_EPS = 1e-12  # below this a sum of squares or a difference of levels is zero


@lru_cache(maxsize=4096)
def t_quantile(p: float, df: int) -> float:
    return _t_quantile(p, df)


@dataclass(frozen=True)
class ScoreTest:
    delta: float
    low: float  # one-sided bounds at the test's α, inside [−1, 1] (the reported interval)
    high: float
    t: float  # the Student-t quantile behind them
    se: float
    df: int
    scope: Scope
    varied: bool  # some eval's runs differed on some side (or none was repeated)
    spread: bool = True  # `general` with repeated runs: the d's differed between evals


def _within(
    child: Sequence[Sequence[float]], parent: Sequence[Sequence[float]]
) -> tuple[float, int, int, bool]:
    """(pooled run variance with the pseudo-observation, its degrees of freedom, the degrees of
    freedom its t may claim, any run varied). The pooled variance is an unbiased average of the
    evals' run variances, but when a few evals hold all the noise it is as uncertain as those
    few: the t takes Welch's degrees of freedom of the pooled sum over evals,
    (c + Σ SS_e)² / Σ SS_e²/(df_e + 2) − 2 (c the pseudo-observation, which adds no noise), never
    more than the runs'. One noisy eval among eight (bench/_worlds.py's `steady` world) claimed 32
    degrees of freedom for the 4 it had: 3.9% of equal children were promoted."""
    ss, df, ss_sq = 0.0, 0, 0.0
    for c, p in zip(child, parent, strict=True):
        ss_e, df_e = 0.0, 0
        for runs in (c, p):
            if len(runs) >= 2:
                m = mean(runs)
                ss_e += math.fsum((x - m) ** 2 for x in runs)
                df_e += len(runs) - 1
        ss, df = ss + ss_e, df + df_e
        ss_sq += ss_e**2 / (df_e + 2)
    prior = PRIOR_N * PRIOR_VAR
    t_df = df
    if ss_sq > 0:
        t_df = min(df, max(1, math.floor((ss + prior) ** 2 / ss_sq - 2)))
    # With one run a side there was nothing to repeat: "no run varied" says nothing then.
    return (ss + prior) / (df + PRIOR_N), df, t_df, ss > _EPS or df == 0


def score_test(
    child: Sequence[Sequence[float]], parent: Sequence[Sequence[float]], alpha: float, scope: Scope
) -> ScoreTest:
    """One-sided Student-t bounds at α on Δ = mean over evals of d = mean child − mean parent.
    `tasks`: se² = Σ s²(1/n_child + 1/n_parent)/E², s² the pooled run variance, at most Σ(n − 1)
    df (_within).
    `general`: se² = the larger of s²_d/E (s²_d over evals) and GENERAL_FLOOR × the `tasks` se²,
    E − 1 df; with one run a side s²_d pools a pseudo-observation instead. Without runs to pool
    (one run each) `tasks` falls back to `general`."""
    ds = [mean(c) - mean(p) for c, p in zip(child, parent, strict=True)]
    n, delta = len(ds), mean(ds)
    pooled, df_w, t_df, varied = _within(child, parent)
    within = (
        math.fsum(pooled * (1 / len(c) + 1 / len(p)) for c, p in zip(child, parent, strict=True))
        / n**2
    )
    spread = True
    if scope == "tasks" and df_w > 0:
        df = t_df
        se = math.sqrt(within)
    else:
        scope = "general"
        if n < 2:
            return ScoreTest(delta, -1.0, 1.0, math.inf, math.inf, 0, scope, varied)
        ss_d = math.fsum((d - delta) ** 2 for d in ds)
        spread = not df_w or ss_d > _EPS
        if df_w:  # the run-to-run variance sets the floor: d cannot vary less than its runs do
            se = math.sqrt(max(ss_d / (n - 1) / n, within * GENERAL_FLOOR))
        else:  # one run a side (the description's queries): a pseudo-observation is the floor
            se = math.sqrt((ss_d + PRIOR_N * 2 * PRIOR_VAR) / (n - 1 + PRIOR_N) / n)
        df = n - 1
    t = t_quantile(1 - alpha, df) if alpha > 0 else math.inf
    # The true Δ of scores in [0, 1] lies in [−1, 1]: cutting there never uncovers it.
    low = max(-1.0, min(1.0, delta - t * se))
    high = min(1.0, max(-1.0, delta + t * se))
    return ScoreTest(delta, low, high, t, se, df, scope, varied, spread)


def conditional_power(z_now: float, fraction: float, z_final: float) -> float:
    """P(the final look's statistic clears z_final) if the trend seen so far continues (the
    B-value formula: Φ((z/√t − c)/√(1 − t)), t the information fraction)."""
    if fraction >= 1:
        return 1.0 if z_now >= z_final else 0.0
    if math.isinf(z_now):
        return 1.0 if z_now > 0 else 0.0
    return _NORMAL.cdf((z_now / math.sqrt(fraction) - z_final) / math.sqrt(1 - fraction))


def promotion_power(
    scores: ScoreTest, *, runs: int, max_runs: int, first_runs: int, alpha: float
) -> float:
    """The score test's conditional power to promote at the last look, with runs per eval as the
    information fraction. The comparator's is left out: counting the better of two noisy guesses
    kept equal children running (4.2–4.4 runs per eval in bench/selection.py) for 1–9% of the
    wins. Approximate for `general` (more runs do not shrink the between-eval spread), but
    futility only ever stops runs: a wrong guess costs power, never a false promotion."""
    if not scores.df:
        return 0.0
    fraction = min(1.0, runs / max_runs)
    last = look_level(alpha, max_runs, max_runs, first_runs, scores.scope)
    final_df = scores.df if scores.scope == "general" else round(scores.df * max_runs / runs)
    score_final = t_quantile(1 - last, max(1, final_df))
    # Against zero, not min_effect: a bound above zero wins too when the comparator agrees.
    z_score = scores.delta / scores.se if scores.se > 0 else math.copysign(math.inf, scores.delta)
    return conditional_power(z_score, fraction, score_final)


CLAIM = {"tasks": "better on these tasks", "general": "better in general"}
# A step is a move, not a claim (docs/design.md §16): its reason names what it was read on.
STEP = {s: words.step_scope(s) for s in ("tasks", "general")}


def _small(alpha: float) -> str:
    """An α for a reason: four decimals, or two significant digits below 0.0001, where four
    decimals read 0.0000 (the night's control can pass a decision 0.0001 or less)."""
    return f"{alpha:.4f}" if alpha >= 1e-4 or alpha == 0 else f"{alpha:.2g}"


@dataclass(frozen=True)
class Seen:
    """What a look sees: each eval's runs a side, in a stated order of the evals, and the blind
    comparator's decisive swap-consistent verdicts over them (all of them and per eval)."""

    child: Sequence[Sequence[float]]
    parent: Sequence[Sequence[float]]
    wins: int = 0
    losses: int = 0
    per_eval: Mapping[EvalId, Mapping[str, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class _Read:
    """One look's tests and the words every outcome's reason shares."""

    s: ScoreTest
    c: ComparatorTest
    level: float  # of the reported two-sided interval: 1 − 2·(the look's score α)
    spent: float  # the share of α this look spends
    where: str  # "Δ = …, 99% CI […] (Student-t) over … evals × … runs (…)"
    votes: str  # the comparator's verdicts, in words
    upcoming: int | None  # the runs per eval of the next look; None at the cap
    alpha: float  # the decision's whole false-promotion budget

    def said(
        self,
        outcome: verdict.Verdict,
        reason: str,
        more: bool = False,
        futile: bool = False,
        power: float | None = None,
    ) -> Said:
        """The look's outcome: its verdict and reason, with the look's figures."""
        s = self.s
        return Said(  # the interval's confidence is the look's, at the α it spent
            outcome,
            reason,
            s.delta,
            None if math.isinf(s.se) else s.low,
            None if math.isinf(s.se) else s.high,
            self.level,
            needs_more_runs=more,
            futile=futile,
            look_alpha=self.spent,
            comparator_p=self.c.p_child,
            promotion_power=power,
            scope=s.scope,
            next_runs=self.upcoming if more else None,
            alpha=self.alpha,
        )


def look(selection: Selection, asked: Asked, seen: Seen) -> Said:
    """won / lost / tie at the look of `asked.look` runs per eval, for the claim `asked.scope`.
    won: the score bound clears zero and Δ reaches selection.min_effect, or the bound clears zero
    with more comparator wins than losses. lost: the plain interval at selection.confidence is
    below zero. Otherwise more runs, unless runs are at selection.max_runs_per_eval or the
    conditional power to promote is below the claim's futility (selection.futility, or
    selection.futility_tasks for `tasks`). `asked.alpha` (default 1 − confidence) is this
    decision's whole budget: the night's false-discovery control (decide/fdr.py) passes a smaller
    one. `asked.certifies`: an adoption's claim, worded as one; otherwise the reason speaks of a
    step."""
    read = _read(selection, asked, seen)
    s, runs, max_runs = read.s, asked.look or asked.first_runs, selection.max_runs_per_eval

    if read.spent <= 0 and read.upcoming is not None:
        return read.said(
            "tie",
            f"tie: {runs} runs per eval is not a look of this rule (looks at "
            f"{', '.join(map(str, schedule(asked.first_runs, max_runs)))}); more runs are "
            f"needed, up to {read.upcoming} per eval.",
            more=True,
        )
    decided = _decided(selection, asked, seen, read)
    if decided is not None:
        return read.said(*decided)
    tail = _undecided_tail(seen, read, runs <= asked.first_runs)
    if read.upcoming is None:
        return read.said(
            "tie",
            f"tie: {read.where} is inconclusive, and {tail}; runs are at the cap of "
            f"{max_runs} per eval.",
        )
    power = promotion_power(
        s, runs=runs, max_runs=max_runs, first_runs=asked.first_runs, alpha=read.alpha
    )
    # One run a side shows no run noise (the `tasks` test fell back to the evals' spread): its
    # chance at the cap says nothing of the runs to come, so futility waits for repeated runs.
    unseen = asked.scope == "tasks" and s.scope != asked.scope
    futility_name = "futility_tasks" if asked.scope == "tasks" else "futility"
    futility: float = getattr(selection, futility_name)
    if power < futility and not unseen:
        return read.said(
            "tie",
            f"tie: {read.where} is inconclusive, and {tail}; no more runs are added: if "
            f"the trend holds, the chance of promotion at {max_runs} runs is "
            f"{power:.1%}, below selection.{futility_name} = {futility:.0%}.",
            futile=True,
            power=power,
        )
    return read.said(
        "tie",
        f"tie: {read.where} is inconclusive, and {tail}; more runs are needed (next look "
        f"at {read.upcoming} of at most {max_runs} per eval; chance of promotion if the "
        f"trend holds {power:.1%}).",
        more=True,
        power=power,
    )


def _read(selection: Selection, asked: Asked, seen: Seen) -> _Read:
    """The look's score and comparator tests at the α it spends, and the words of its reason."""
    alpha = 1 - selection.confidence if asked.alpha is None else asked.alpha
    runs, max_runs, first = (
        asked.look or asked.first_runs,
        selection.max_runs_per_eval,
        asked.first_runs,
    )
    scope: Scope = "tasks" if asked.scope == "tasks" else "general"
    # One run a side: score_test falls back to `general`, so α is spent as `general` spends it.
    pooled = any(len(x) >= 2 for x in (*seen.child, *seen.parent))
    spent = look_alpha(alpha, runs, max_runs, first)
    # All of it to the scores: the comparator's own test over the evals (10% of α under `general`
    # until the comparator judged one pair per eval) promoted 0–0.8% of +0.10 children at 10 evals
    # (docs/selection.md).
    a_score = look_level(alpha, runs, max_runs, first, scope if pooled else "general")
    s = score_test(seen.child, seen.parent, a_score, scope)
    c = comparator_test(seen.wins, seen.losses, seen.per_eval, MIN_CONSISTENT_VERDICTS)
    level = 1 - 2 * a_score
    tested = f", tested at {_small(a_score)}" if abs(a_score - spent) > _EPS else ""
    # The share of α a look spends, said only when it is a share: a single look spends it all.
    share = (
        f"; this look spends α = {_small(spent)} of {alpha:.3g}{tested}"
        if abs(spent - alpha) > _EPS or tested
        else ""
    )
    read = f"the claim: {CLAIM[s.scope]}" if asked.certifies else f"{STEP[s.scope]}, not a claim"
    n = len(seen.child)
    where = (
        f"Δ = {s.delta:+.3f}, {words.ci(level)} [{s.low:+.3f}, {s.high:+.3f}] (Student-t) "
        f"over {words.plural(n, 'eval')} × {words.plural(runs, 'run')} ({read}{share})"
    )
    if math.isinf(s.se):
        where = f"Δ = {s.delta:+.3f} over 1 eval × {words.plural(runs, 'run')} (no interval from one eval)"
    votes = (
        f"the comparator favoured the child in {seen.wins} and the parent in {seen.losses} "
        f"decisive swap-consistent verdicts"
    )
    return _Read(s, c, level, spent, where, votes, next_look(runs, first, max_runs), alpha)


def _decided(
    selection: Selection, asked: Asked, seen: Seen, read: _Read
) -> tuple[verdict.Verdict, str] | None:
    """won or lost at this look, with the reason; None while the look cannot tell."""
    s, min_effect = read.s, selection.min_effect
    # With no run-to-run variation (or, under `general`, no spread between the evals' d) the data
    # cannot show their own noise: the first look never promotes on the scores alone then (the
    # floor keeps later looks honest). Pass/fail runs give equal d's on every eval by chance.
    blind = not (s.varied and s.spread) and (asked.look or asked.first_runs) <= asked.first_runs
    if s.low > 0 and s.delta >= min_effect and not blind:
        return "won", (
            f"won: {read.where} lies above zero, and Δ is at or above the minimum effect "
            f"{min_effect}."
        )
    if s.low > 0 and seen.wins > seen.losses and not blind:
        # No extra α: this is a subset of "the bound is above zero", whose chance for an equal
        # child is this look's α already spent; the comparator only has to agree.
        return "won", (
            f"won: {read.where} lies above zero though Δ is below the minimum effect "
            f"{min_effect}, and {read.votes}."
        )
    # Losing is not promoting: the parent stays either way, so `lost` needs no share of the
    # spent α, only the plain two-sided interval at the configured confidence below zero.
    confidence = selection.confidence
    scope: Scope = "tasks" if asked.scope == "tasks" else "general"
    worse = score_test(seen.child, seen.parent, (1 - confidence) / 2, scope)
    if worse.high < 0:
        return "lost", (
            f"lost: {read.where}; its {confidence:.0%} upper bound {worse.high:+.3f} lies below "
            "zero."
        )
    # The interval the reason shows wholly below zero is a loss at its level, whatever that level
    # is: "tie" beside [-0.066, -0.029] would contradict the number it stands by.
    if not math.isinf(s.se) and verdict.side(s.low, s.high) == "below":
        return "lost", f"lost: {read.where} lies below zero."
    return None


def _undecided_tail(seen: Seen, read: _Read, first: bool) -> str:
    """The words after "is inconclusive, and" of an undecided look."""
    s = read.s
    tail = read.votes if seen.wins + seen.losses else "there are no decisive comparator verdicts"
    if not (s.varied and s.spread) and first and s.low > 0:
        same = (
            "every run of each eval scored the same" if not s.varied else "every eval's d is equal"
        )
        tail += f"; {same}, so the scores alone cannot promote{' yet' if read.upcoming else ''}"
    return tail
