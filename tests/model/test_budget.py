"""The run's one budget (model/budget.py) and the one reading of its spend (store/money.py): a
call is admitted only within the ceiling less the reserve, an adoption is paid apart, and the
adoptions' spend is never counted against the budget."""

from __future__ import annotations

import pytest

from optimizer.errors import BudgetExhausted
from optimizer.model.budget import Budget, Reserve
from optimizer.store import money
from optimizer.store.db import Store


def test_a_call_past_the_ceiling_less_the_reserve_is_refused_and_holds_nothing():
    budget = Budget(1.00, counted_usd=0.50)
    budget.keep(Reserve(test_usd=0.30))
    budget.admit("grader", "m", 0.15)  # 0.50 + 0.15 <= 0.70
    with pytest.raises(BudgetExhausted, match=r"less \$0.30 kept for the sealed test"):
        budget.admit("grader", "m", 0.10)  # 0.50 + 0.15 in flight + 0.10 > 0.70
    assert budget.in_flight_usd == pytest.approx(0.15)
    budget.settle(0.15)
    budget.pay(0.12)
    assert budget.committed_usd() == pytest.approx(0.62)
    assert budget.left_usd() == pytest.approx(0.08)


def test_the_budget_stop_names_each_reserve_and_where_the_test_reserve_came_from():
    budget = Budget(3.00, counted_usd=1.59)
    assert budget.exhausted() is None
    budget.keep(Reserve(test_usd=1.01, adoption_usd=0.40, planned_test_usd=0.56))
    assert budget.exhausted() == (
        "spent $1.59 of the $3.00 budget ($1.01 of it kept for the sealed test, the estimate's "
        "$0.56 at v0's measured price, $0.40 for the adoption at the end)"
    )


def test_an_adoption_is_allowed_its_own_limit_whatever_the_budget_had_left():
    budget = Budget(1.00, counted_usd=1.00)
    budget.keep(Reserve(test_usd=0.20))
    with pytest.raises(BudgetExhausted):
        budget.admit("executor", "m", 0.01)
    budget.allow(0.50)
    budget.admit("executor", "m", 0.50)
    with pytest.raises(BudgetExhausted):
        budget.admit("executor", "m", 0.01)


def test_calls_paid_apart_leave_the_room_the_budget_had():
    budget = Budget(2.00, counted_usd=1.00)
    with budget.paid_apart() as apart:
        budget.admit("grader", "m", 5.0)  # no ceiling inside
        budget.settle(5.0)
        budget.pay(0.75)
    assert apart.usd == pytest.approx(0.75)
    assert budget.left_usd() == pytest.approx(1.00)


def test_a_reserve_is_never_larger_than_what_the_ceiling_leaves():
    budget = Budget(2.00, counted_usd=1.40)
    budget.keep(Reserve(test_usd=0.90, adoption_usd=0.30))
    assert budget.reserve.usd == pytest.approx(0.60)
    assert budget.reserve.test_usd == pytest.approx(0.45)


def test_members_of_a_fleet_keep_their_reserves_side_by_side_in_one_budget():
    """Each member keeps its sealed test under its own name: one member's release (its sealed
    test begins) frees its own reserve only, and a late keep fits beside the others'."""
    budget = Budget(3.00, counted_usd=1.00)
    budget.keep(Reserve(test_usd=0.40), holder="sql-helper")
    budget.keep(Reserve(test_usd=0.30), holder="team-updates")
    assert budget.reserve.usd == pytest.approx(0.70)
    assert budget.left_usd() == pytest.approx(1.30)
    budget.keep(Reserve(0.0), holder="sql-helper")
    assert budget.reserve.usd == pytest.approx(0.30)
    budget.pay(1.50)
    budget.keep(Reserve(test_usd=0.40), holder="sql-helper")  # only $0.20 beside the other's
    assert budget.reserve.usd == pytest.approx(0.50)
    with pytest.raises(BudgetExhausted, match=r"less \$0.50 kept"):
        budget.admit("grader", "m", 0.01)


def test_the_account_leaves_the_adoptions_out_of_what_the_budget_counts(tmp_path):
    store = Store(tmp_path / "state.db")
    for key, scope, usd in [
        ("a", "v0", 0.40),
        ("b", "adoption 1", 0.90),
        ("c", None, 0.10),
        ("d", "adoption 12", 0.05),
        ("e", "sealed test v1", 0.20),
    ]:
        store.record_call(
            {"hash": key, "role": "executor", "outcome": "ok", "cost_usd": usd, "scope": scope}
        )
    found = money.account(store)
    assert found.total_usd == pytest.approx(1.65)
    assert found.adoptions_usd == pytest.approx(0.95)
    assert found.budgeted_usd == pytest.approx(0.70)
    assert found.left_usd(1.00) == pytest.approx(0.30)
    store.close()
