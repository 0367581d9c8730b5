"""Where a fleet night's next step goes (fleet/allocate.py): a pure function of the members'
ledgers, whatever order they are read in."""

from __future__ import annotations

import itertools
from dataclasses import replace

from optimizer.budget.worth import Judged
from optimizer.fleet.allocate import Seen, choose, per_dollar


def win(delta: float, se: float = 0.03) -> Judged:
    return Judged(won=True, delta=delta, se=se, false_step=0.025)


def loss(delta: float = 0.0, se: float = 0.03) -> Judged:
    return Judged(won=False, delta=delta, se=se, false_step=0.025)


def member(
    name: str, judged: list[Judged], *, usd: float = 0.25, headroom: float = 0.4, **kw
) -> Seen:
    return Seen(
        name=name,
        iterations_done=kw.get("iterations_done", max(1, len(judged) // 2)),
        open_iteration=kw.get("open_iteration"),
        proposals=len(judged),
        search_usd=usd * len(judged),
        judged=tuple(judged),
        headroom=headroom,
    )


def test_an_open_iteration_goes_on_first_then_first_looks_in_name_order():
    busy = member("b-skill", [win(0.2)] * 4)
    fresh = member("c-skill", [], iterations_done=0)
    left_open = member("z-skill", [loss()] * 2, open_iteration=3)
    assert choose([busy, fresh, left_open]).name == "z-skill"
    assert choose([busy, fresh]).name == "c-skill"
    assert (
        choose([member("b", [], iterations_done=0), member("a", [], iterations_done=0)]).name == "a"
    )


def test_the_member_that_keeps_winning_gets_the_step():
    steady = member("steady", [win(0.05), loss(), win(0.06), loss(), win(0.05), loss()])
    spent = member("spent", [loss(), loss(), loss(), loss(), loss(), loss()])
    choice = choose([spent, steady])
    assert choice.name == "steady"
    assert choice.expected["steady"] > choice.expected["spent"]


def test_one_lucky_first_step_does_not_outrank_a_member_seen_winning_often():
    """A member seen for two proposals with one large win, beside members seen for eight with
    wins every other proposal: its own figure is shrunk toward the fleet's by how little it was
    seen, so it does not take the night on one draw."""
    lucky = member("lucky", [win(0.30, se=0.12), loss(se=0.12)])
    steady = [member(f"steady-{k}", [win(0.06), loss(), win(0.05), loss()] * 2) for k in range(3)]
    quiet = [member(f"quiet-{k}", [loss()] * 8) for k in range(2)]
    rates = per_dollar([lucky, *steady, *quiet])
    raw_lucky = 0.30 / 2 / 0.25  # its unshrunk gain a dollar
    assert rates["lucky"] < raw_lucky / 2


def test_cost_counts_a_cheaper_member_buys_more_a_dollar():
    same = [win(0.05), loss(), win(0.05), loss()]
    cheap = member("cheap", same, usd=0.10)
    dear = member("dear", same, usd=0.40)
    assert choose([dear, cheap]).name == "cheap"


def test_headroom_ranks_members_when_no_window_bought_anything():
    """Where the last windows bought nothing, the fleet's night-long gain scaled by headroom
    decides, not the name."""
    history = [win(0.05), loss(), loss(), loss(), loss(), loss(), loss(), loss(), loss()]
    full = member("a-full", history, headroom=0.05)
    roomy = member("b-roomy", history, headroom=0.6)
    assert choose([full, roomy]).name == "b-roomy"


def test_the_choice_never_depends_on_the_order_the_members_are_read_in():
    members = [
        member("m1", [win(0.04), loss(), win(0.02)]),
        member("m2", [loss(), win(0.08), loss(), loss()], usd=0.3),
        member("m3", [win(0.03)] * 3, headroom=0.2),
        member("m4", [loss()] * 5, headroom=0.7),
    ]
    choices = {repr(choose(list(order))) for order in itertools.permutations(members)}
    assert len(choices) == 1


def test_no_member_left_means_no_choice():
    assert choose([]) is None


def test_a_member_whose_proposals_keep_being_refused_does_not_take_the_night():
    """Refused proposals cost little and buy nothing: cheap a proposal is not cheap a point."""
    refused = member("refused", [Judged()] * 10, usd=0.03, headroom=0.5)
    measured = member("measured", [win(0.04), loss(), loss(), win(0.03), loss(), loss()], usd=0.3)
    choice = choose([refused, measured])
    assert choice.name == "measured"


def test_each_member_gets_its_share_first_the_least_spent_first():
    """A member that has spent less of its share goes before one whose steps look better; once
    every share is spent, the expected gain a dollar chooses."""
    steady = member("steady", [win(0.05), loss(), win(0.06), loss()])
    spent = member("spent", [loss(), loss(), loss(), loss()])
    shares = [
        replace(steady, spent_usd=1.0, share_usd=1.25),
        replace(spent, spent_usd=0.6, share_usd=1.25),
    ]
    first = choose(shares)
    assert first.name == "spent" and "within its share" in first.why
    beyond = [replace(s, spent_usd=1.3) for s in shares]
    assert choose(beyond).name == "steady"
