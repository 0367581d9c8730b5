"""What a run spent, read one way for the budget and for every view (status, resume, the stop
line, the summary, the report): the ledger's total, the part paid apart by adoptions (each on its
own limit, the scopes "adoption N") and the rest, which the budget counts (model/budget.py)."""

from __future__ import annotations

from dataclasses import dataclass

from optimizer.store.readonly import Reader

ADOPTION_SCOPES = "scope like 'adoption %'"


@dataclass(frozen=True)
class Account:
    total_usd: float  # every call's cost, paid or failed
    adoptions_usd: float  # the adoptions' fresh runs, paid on their own limits

    @property
    def budgeted_usd(self) -> float:
        """The spend the budget counts: the search, its baseline and v0, the sealed tests."""
        return max(0.0, self.total_usd - self.adoptions_usd)

    def left_usd(self, budget_usd: float | None) -> float | None:
        """What `budget_usd` leaves after the counted spend; None without a budget."""
        return None if budget_usd is None else max(0.0, budget_usd - self.budgeted_usd)


def account(db: Reader) -> Account:
    """The run's spend from the ledger, summed by SQLite in one statement."""
    rows = db.query(
        "select coalesce(sum(cost_usd), 0) as total, "
        f"coalesce(sum(case when {ADOPTION_SCOPES} then cost_usd end), 0) as adoptions "
        "from calls where cost_usd is not null"
    )
    row = rows[0] if rows else {"total": 0.0, "adoptions": 0.0}
    return Account(float(row["total"]), float(row["adoptions"]))
