"""How every view words counts, money, cut texts, stop reasons and decisions: one place, so no
line reads "1 proposals", "(6 time(s))", "$4.7961", "v1 won: won: Δ" or "stopped (stopped by
SIGINT)", and a text cut to fit ends at a word with an ellipsis. Plain functions of their
arguments; nothing here decides anything."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Protocol

# Words whose plural is not the word and an s.
_PLURALS = {"was": "were", "has": "have", "is": "are", "analysis": "analyses"}


def plural(n: int, word: str, many: str | None = None) -> str:
    """'1 run', '2 runs', '0 runs': the count and its noun, agreed."""
    if n == 1:
        return f"{n} {word}"
    if many is None:
        many = _PLURALS.get(word) or (
            word + "es" if word.endswith(("s", "x", "ch", "sh")) else word + "s"
        )
    return f"{n} {many}"


def numbered(word: str, ids: Iterable[object]) -> str:
    """'eval 3', 'evals 3, 5': a noun and the ids it names, never a list's repr ('evals [3]')."""
    shown = [str(i) for i in ids]
    return f"{word if len(shown) == 1 else word + 's'} {', '.join(shown) or '—'}"


def dollars(x: float | None) -> str:
    """'$4.80', '$0.25', '$0.0042': cents, or two significant digits below a cent; '—' unknown."""
    if x is None:
        return "—"
    if x == 0:
        return "$0.00"  # and never "$-0.00"
    if abs(x) >= 0.01:
        return f"${x:.2f}"
    return f"${x:.2g}" if abs(x) >= 0.0001 else "under $0.0001"


def clip(text: str, limit: int) -> str:
    """At most `limit` characters: a longer text ends at its last whole word with an ellipsis,
    never inside a word and never after a dangling comma or colon."""
    text = text.strip()
    if len(text) <= limit:
        return text
    cut = text[: max(1, limit - 1)]
    if not text[len(cut)].isspace():  # the cut fell inside a word: drop that word's start
        cut = re.sub(r"\S+$", "", cut) or cut
    return cut.rstrip(" \n,;:—-.") + "…"


def phrases(parts: Iterable[str], sep: str = "; ") -> str:
    """Phrases joined into one line: a phrase's own full stop goes, so no 'heading.; End'."""
    return sep.join(p.strip().rstrip(".").rstrip() for p in parts if p.strip())


def decision(label: str, verdict: str, reason: str) -> str:
    """'v1 won: Δ = …': the verdict once, though the reason may start with it ('won: Δ = …')."""
    said = reason.strip()
    if said.lower().startswith(f"{verdict.lower()}:"):
        said = said[len(verdict) + 1 :].lstrip()
    return f"{label} {verdict}: {said}" if said else f"{label} {verdict}"


def ended(status: str | None, reason: str | None) -> str:
    """'stopped: no win in 3 iterations (plateau)', 'stopped by SIGINT', 'failed: …': how a run
    ended, with its reason said once and never in parentheses inside parentheses."""
    state = status or "ended"
    said = (reason or "").strip().rstrip(".")
    if not said:
        return state
    if said.lower().startswith(f"{state} "):  # 'stopped by SIGINT' already says it
        return said
    return f"{state}: {said}"


def not_worth_it(
    spent_usd: float,
    budget_usd: float,
    proposals: int,
    bought: float,
    seconds_left: float | None = None,
) -> str:
    """'stopped at $2.10 of $25.00 with 7h41m left: the last 8 proposals are worth +0.002
    expected; resume to go on': a search that stopped because going on was no longer worth its
    cost, what it had spent of its budget (the rest is kept), the time left before its deadline,
    and what its last proposals bought once noise is taken out (budget/worth.py)."""
    left = f" with {duration(seconds_left)} left" if seconds_left is not None else ""
    return (
        f"stopped at {dollars(spent_usd)} of {dollars(budget_usd)}{left}: the last "
        f"{plural(proposals, 'proposal')} {'is' if proposals == 1 else 'are'} worth "
        f"{bought:+.3f} expected; resume to go on"
    )


def duration(seconds: float) -> str:
    """'7h41m', '12m05s', '40s': a time left, to the minute once it is over an hour."""
    s = max(0, int(round(seconds)))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s" if m else f"{s}s"


def after_stopped(reason: str) -> str:
    """The reason as it reads after the word 'stopped' (a status row): 'by SIGINT', 'reached 3
    iterations'."""
    return ended("stopped", reason).removeprefix("stopped").lstrip(": ")


def percent(level: float) -> str:
    """A confidence level with the decimals that keep it below 100%: 97.6%, 99.9980%."""
    if level >= 1 or level < 0.999:
        return f"{level:.1%}" if round(level * 100, 1) != round(level * 100) else f"{level:.0%}"
    return f"{level:.{max(1, math.ceil(-math.log10(1 - level)) - 1)}%}"


def ci(level: float) -> str:
    """'95% CI', '20.0% CI' -> '20% CI', '99.94% CI': an interval's level, named as one, so a bare
    '20.0%' beside an interval is never read as a score or a share."""
    return f"{percent(level)} CI"


def step_scope(scope: str | None, units: str = "evals") -> str:
    """'a step on these tasks', 'a step over evals like these': what a promotion's decision was
    read on, the same words in the decision's reason, the lineage, the report and the summary
    (`units`: "queries" for a description probe)."""
    if scope in ("tasks", "these_tasks"):
        return f"a step on these {'queries' if units == 'queries' else 'tasks'}"
    return f"a step over {units} like these"


# The step rule words its reason for evals and their runs; the description target's rule
# (decide/keep.queries) reads trigger queries and their probes: each (said, for queries, times; 0
# all) in order. "Δ =" first, once: the accuracy difference is the reason's first figure.
QUERY_WORDING: tuple[tuple[str, str, int], ...] = (
    (" evals ×", " validation queries ×", 0),
    ("Δ =", "validation accuracy Δ =", 1),
    (" evals", " queries", 0),
    (" per eval", " per query", 0),
    ("these tasks", "these queries", 0),
)


def reworded(text: str, wording: tuple[tuple[str, str, int], ...]) -> str:
    """`text` with each phrase of `wording` replaced in order (its count; 0: every one)."""
    for said, instead, times in wording:
        text = text.replace(said, instead, times or -1)
    return text


def not_a_run(folder: object, lacks: str = "state.db", fix: str = "") -> str:
    """'runs/x: not a run folder (no state.db); start one with …': the one sentence for a folder a
    command was given as a run folder and is not, naming what it lacks and, where there is one,
    the fix."""
    return f"{folder}: not a run folder (no {lacks})" + (f"; {fix}" if fix else ".")


class Undecided(Protocol):
    """What would decide a claim that was not certified (decide/adopt.NextStep has these)."""

    @property
    def below(self) -> bool: ...
    @property
    def runs(self) -> int: ...
    @property
    def next_look(self) -> int | None: ...
    @property
    def more_usd(self) -> float | None: ...
    @property
    def evals(self) -> int: ...
    @property
    def scope(self) -> str: ...
    @property
    def found(self) -> float: ...
    @property
    def effect(self) -> float: ...


def what_would_decide(step: Undecided | None, again: str = "optimizer adopt") -> str:
    """One sentence for a version that was not certified (None: it was, nothing to say): what
    would decide the claim. Never a route that resets its α: asking again (`again`) goes on from
    the claim's next look, and once its looks are spent only a later version can be certified."""
    if step is None:
        return ""
    if step.below:
        return (
            "Its fresh runs score below the version you have: more runs would not certify it; "
            "go on searching (`optimizer resume`) and adopt a later version."
        )
    claim = "these tasks" if step.scope == "tasks" else "evals like these"
    more_evals = (
        f"more evals for the next claim (with {step.evals}, a +{step.effect:.2f} gain is certified "
        f"on {claim} {step.found:.0%} of the time; `optimizer evals suggest` or `mine` grow them)"
    )
    if step.next_look is not None:
        cost = (
            f", about ${step.more_usd:.2f} more if every look is needed"
            if step.more_usd is not None
            else ""
        )
        return (
            f"Not decided at {step.runs} fresh runs an eval. Asking again (`{again}`) goes on with "
            f"this claim from its next look ({step.next_look} runs an eval{cost}) and the α it "
            f"has left; or {more_evals}."
        )
    return (
        f"Not decided at {step.runs} fresh runs an eval, the claim's last look: its α is spent, "
        "so asking again cannot certify it. Go on searching (`optimizer resume`) and adopt a "
        f"later version; {more_evals}."
    )
