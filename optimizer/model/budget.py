"""The run's one budget (docs/design.md §9): its ceiling, the reserves the search leaves for what
follows it, and the spend counted against it. The client holds one and admits every paid call
through it; the stop rule, the Ray backend and the adoption read and change it here and nowhere
else.

What a budget counts: everything a run spends except the adoptions made apart. An adoption is paid
on its own limit (`optimizer adopt` shows its estimate first; an adoption at a night's end gets
what the search left), so the ledger's spend under the scopes "adoption N" is never counted against
budget.usd; every view reads the same split from the ledger (store/money.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from optimizer.model.errors import over_budget
from optimizer.words import dollars


@dataclass(frozen=True)
class Reserve:
    """What the search leaves of the budget: the sealed test's cost and the first looks of an
    adoption at the run's end, each named where the budget stops the search."""

    test_usd: float = 0.0
    adoption_usd: float = 0.0
    planned_test_usd: float | None = None  # the estimate's, when v0's measured price raised it

    @property
    def usd(self) -> float:
        return self.test_usd + self.adoption_usd

    def words(self, lead: str = " of it kept") -> str:
        """'$0.69 of it kept for the sealed test, $2.26 for the adoption at the end'; a reserve
        raised from the estimate's says from what ('$1.01 … for the sealed test, the estimate's
        $0.56 at v0's measured price'), so the start's line and the stop's agree."""
        named = [
            (usd, what)
            for usd, what in (
                (self.test_usd, self.test_words()),
                (self.adoption_usd, "the adoption at the end"),
            )
            if usd > 0
        ]
        return ", ".join(
            f"${usd:.2f}{lead if k == 0 else ''} for {what}" for k, (usd, what) in enumerate(named)
        )

    def test_words(self) -> str:
        """'the sealed test', and where v0's measured price raised it, from what."""
        planned = self.planned_test_usd
        if planned is None or self.test_usd <= planned + 5e-3:
            return "the sealed test"
        return f"the sealed test, the estimate's {dollars(planned)} at v0's measured price"


NO_RESERVE = Reserve()


@dataclass
class Apart:
    """What the calls of a Budget.paid_apart block cost, known when it ends."""

    before_usd: float  # the counted spend when the block began
    usd: float = 0.0


class Budget:
    """The ceiling (None: no limit), the spend counted against it (the ledger's before this process,
    adoptions apart, and every call counted since), the estimates of the calls in flight and the
    reserve. A call is admitted only while the counted spend, the calls in flight and it stay
    within the ceiling less the reserve."""

    def __init__(self, ceiling_usd: float | None, counted_usd: float = 0.0) -> None:
        self.ceiling_usd = ceiling_usd
        self.counted_usd = counted_usd
        self.in_flight_usd = 0.0
        # What each holder keeps: one run keeps under the name "", every member of a fleet night
        # under its own (they share one Budget), so one member's sealed test never frees another's.
        self._kept: dict[str, Reserve] = {}

    @property
    def reserve(self) -> Reserve:
        """Every holder's reserve, summed."""
        kept = [self._kept[k] for k in sorted(self._kept)]
        if not kept:
            return NO_RESERVE
        if len(kept) == 1:
            return kept[0]
        planned = [r.planned_test_usd for r in kept if r.planned_test_usd is not None]
        return Reserve(
            sum(r.test_usd for r in kept),
            sum(r.adoption_usd for r in kept),
            sum(planned) if planned else None,
        )

    # -- what changes it --------------------------------------------------------------------------

    def keep(self, reserve: Reserve, holder: str = "") -> None:
        """Hold `reserve` back from the search for `holder` (engine.keep_for_test; NO_RESERVE lets
        it go), never more than the ceiling leaves beside the other holders' reserves: a reserve
        larger than the budget would name money the run does not have."""
        others = sum(r.usd for k, r in self._kept.items() if k != holder)
        room = (
            None
            if self.ceiling_usd is None
            else max(0.0, self.ceiling_usd - self.counted_usd - others)
        )
        if room is not None and reserve.usd > room + 1e-9:
            share = room / reserve.usd
            reserve = Reserve(
                reserve.test_usd * share, reserve.adoption_usd * share, reserve.planned_test_usd
            )
        self._kept[holder] = reserve

    def allow(self, limit_usd: float) -> None:
        """An adoption the user approved on its estimate: from now on the calls may spend
        `limit_usd` more, whatever the run's budget had left; nothing is kept."""
        self.ceiling_usd = self.counted_usd + self.in_flight_usd + limit_usd
        self._kept = {}

    @contextmanager
    def paid_apart(self) -> Iterator[Apart]:
        """Calls made inside are admitted whatever is left and leave the room the budget had:
        what they cost moves the ceiling by as much (a measurement no search pays for)."""
        ceiling, kept, before = self.ceiling_usd, self._kept, self.counted_usd
        apart = Apart(before)
        self.ceiling_usd, self._kept = None, {}
        try:
            yield apart
        finally:
            apart.usd = self.counted_usd - before
            self.ceiling_usd = None if ceiling is None else ceiling + apart.usd
            self._kept = kept

    def admit(self, role: str, model: str, estimate: float) -> None:
        """Hold a call's estimate, or BudgetExhausted when it would take the spend past the
        ceiling less the reserve (the call is then never made)."""
        ceiling = self.ceiling_usd
        if ceiling is not None and (
            self.counted_usd + self.in_flight_usd + estimate > ceiling - self.reserve.usd
        ):
            raise over_budget(
                role,
                model,
                estimate=estimate,
                spent=self.counted_usd,
                in_flight=self.in_flight_usd,
                budget=ceiling,
                kept=self.reserve.usd,
                kept_for=self._kept_for(),
            )
        self.in_flight_usd += estimate

    def settle(self, estimate: float) -> None:
        """A held estimate goes (never below zero, where float sums drift)."""
        self.in_flight_usd = max(0.0, self.in_flight_usd - estimate)

    def pay(self, cost: float) -> None:
        self.counted_usd += cost

    # -- what it says -----------------------------------------------------------------------------

    def kept_for(self, holder: str = "") -> Reserve:
        """What `holder` keeps (NO_RESERVE when it keeps nothing)."""
        return self._kept.get(holder, NO_RESERVE)

    def committed_usd(self) -> float:
        """The counted spend and the calls in flight."""
        return self.counted_usd + self.in_flight_usd

    def left_usd(self) -> float | None:
        """What calls may still spend (0 at the least); None without a ceiling."""
        if self.ceiling_usd is None:
            return None
        return max(0.0, self.ceiling_usd - self.reserve.usd - self.committed_usd())

    def exhausted(self) -> str | None:
        """The budget stop's reason ('spent $3.91 of the $4.00 budget ($0.69 of it kept for the
        sealed test)'), None while the search may go on."""
        ceiling = self.ceiling_usd
        if ceiling is None or self.counted_usd < ceiling - self.reserve.usd:
            return None
        held = f" ({self.reserve.words()})" if self.reserve.usd > 0 else ""
        return f"spent ${self.counted_usd:.2f} of the ${ceiling:.2f} budget{held}"

    def _kept_for(self) -> str:
        r = self.reserve
        return f"({r.words(lead='')})" if r.adoption_usd else f"for {r.test_words()}"
