"""bench/peers.py still runs GEPA and SkillOpt through their own packages on our world: one seed,
a small budget, every method to its end, the verdict lines in their exact form. Skipped, with the
reason, only where the [peers] extra is not installed (`make setup` installs it, so CI runs it).
The bench's own accounting (a setup answer charged once, our best over spend from the ledger, an
adoption's final skill, the anytime curve) is checked on small ledgers, without a run."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from optimizer.model.budget import Budget

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "peers.py"
PEER = r"best peer (gepa|gepa\+merge|skillopt) gain/\$ -?[\d.]+"
RATIO = r"ratio (inf|[\d.]+) \[(inf|[\d.]+), (inf|[\d.]+)\]"
VERDICT = re.compile(
    rf"peers: ours gain/\$ -?[\d.]+, {PEER}, {RATIO}; worse than v0: ours \d+%, best peer \d+%"
)


def verdict_of(title: str, method: str) -> re.Pattern[str]:
    return re.compile(
        rf"peers \({re.escape(title)}\): {re.escape(method)} gain/\$ -?[\d.]+, {PEER}, {RATIO}; "
        rf"worse than v0: {re.escape(method)} \d+%, best peer \d+%"
    )


needs_peers = pytest.mark.skipif(
    not all(importlib.util.find_spec(p) for p in ("gepa", "skillopt")),
    reason="the [peers] extra (gepa, skillopt) is not installed: pip install -e '.[peers]'",
)


def bench_module(name: str):
    """A module of bench/peers/ (or bench/peers.py itself, "peers_main"), imported as the bench
    imports it."""
    sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
    try:
        if name == "peers_main":
            spec = importlib.util.spec_from_file_location("peers_main", BENCH)
            assert spec and spec.loader
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
        return importlib.import_module(f"peers.{name}")
    finally:
        for p in (str(ROOT), str(ROOT / "bench")):
            if p in sys.path:
                sys.path.remove(p)


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, str(BENCH), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
@needs_peers
def test_every_method_runs_on_one_world_and_the_verdict_lines_are_last():
    # Ours and the original skill always run; the greedy baseline and our variants are left out,
    # but for the adoption after our night.
    done = bench(
        "--seeds",
        "1-1",
        "--budget-usd",
        "1",
        "--skills",
        "release-notes",
        "--methods",
        "ours+adopt,gepa,gepa+merge,skillopt",
        "--no-write",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert VERDICT.fullmatch(lines[-3]), lines[-3]
    assert verdict_of("ours + adoption", "ours+adopt").fullmatch(lines[-2]), lines[-2]
    assert NIGHT.fullmatch(lines[-1]) and lines[-1].startswith("night $1: "), lines[-1]
    table = {row.split("|")[1].strip(): row for row in lines if row.startswith("| ")}
    assert "greedy" not in table
    for method in ("ours", "gepa", "gepa+merge", "skillopt"):
        cells = [c.strip() for c in table[method].split("|")[1:-1]]
        usd, calls, runs = float(cells[4]), int(cells[5]), int(cells[6])
        # Each search spent from the ledger: model calls and executor runs of its own.
        assert usd > 0 and calls > 0 and runs > 0, table[method]
    # The stop bound: our spend cut at the last win, never above what ours spent.
    bound = next(line for line in lines if line.startswith("ours stopped at its last win"))
    at_win = re.search(r"\$([\d.]+) a world, gain/\$ -?[\d.]+, ratio to \S+ ", bound)
    assert at_win, bound
    ours_usd = float([c.strip() for c in table["ours"].split("|")[1:-1]][4])
    assert 0 < float(at_win[1]) <= ours_usd + 0.005, (bound, ours_usd)
    # The adoption ran in our night's folder: the same night, its own runs paid on top.
    adopt_usd = float([c.strip() for c in table["ours+adopt"].split("|")[1:-1]][4])
    assert adopt_usd >= ours_usd, (adopt_usd, ours_usd)
    assert re.search(
        r"adoptions: ours\+adopt: the night's best was v0 in [01] of 1 worlds", done.stdout
    )
    # Each peer got as far as a proposal through its own loop.
    assert re.search(r"release-notes/1 gepa: \d+ candidates kept, [1-9]\d* proposals", done.stdout)
    assert re.search(r"release-notes/1 skillopt: .*, [1-9]\d* proposals", done.stdout)


@pytest.mark.slow
@needs_peers
def test_a_skill_diff_becomes_skillopt_edits_that_rebuild_it():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from peers.skillopt_peer import patch_edits
    finally:
        sys.path.remove(str(ROOT / "bench"))
    from skillopt.optimizer.skill import apply_patch

    before = "# Title\n\nIntro.\n\n- One.\n- Two.\n- Three.\n"
    after = "# Title\n\nIntro, shorter.\n\n- One.\n- Three.\n- Four, with `Upgrade steps:`.\n"
    edits = patch_edits(before, after)
    assert {e["op"] for e in edits} <= {"replace", "delete", "insert_after"}
    assert apply_patch(before, {"edits": edits}).split() == after.split()


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, says",
    [
        (["--seeds", "5-1"], "--seeds '5-1'"),
        (["--budget-usd", "0"], "--budget-usd 0.0"),
        (["--skills", "nope"], "--skills: unknown nope"),
        (["--sealed-runs", "0"], "--sealed-runs 0: give at least 1 run"),
    ],
)
def test_bad_flags_get_one_sentence_and_exit_2(args, says):
    done = bench(*args, "--no-write")
    assert done.returncode == 2
    assert done.stderr.strip().startswith(says) and len(done.stderr.strip().splitlines()) == 1


def test_gain_per_dollar_is_total_gain_over_total_spend_and_the_interval_is_paired():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from peers.stats import Unit, paired_ratio, per_dollar
    finally:
        sys.path.remove(str(ROOT / "bench"))
    ours = [
        Unit("s", i, gain, None, False, usd)
        for i, (gain, usd) in enumerate([(0.2, 2.0), (0.0, 2.0), (0.1, 1.0)])
    ]
    peer = [
        Unit("s", i, gain, None, gain < 0, usd)
        for i, (gain, usd) in enumerate([(0.1, 1.0), (-0.1, 1.0), (0.0, 1.0)])
    ]
    assert per_dollar(ours) == pytest.approx(0.3 / 5.0)
    assert per_dollar(peer) == 0.0
    point, lo, hi = paired_ratio(ours, peer, seed=1)
    # The peer gained nothing per dollar: any gain of ours is an unbounded multiple of it.
    assert point == float("inf") and lo <= hi
    assert paired_ratio(ours, ours, seed=1)[0] == 1.0


def _ledger(tmp_path: Path, calls: list[tuple[str, str, float]]):
    """A state.db whose ledger holds `calls` (hash, scope, cost) in order."""
    from optimizer.store.db import Store

    store = Store(tmp_path / "state.db")
    for h, scope, usd in calls:
        store.record_call(
            {"hash": h, "role": "executor", "outcome": "ok", "cost_usd": usd, "scope": scope}
        )
    return store


def test_a_setup_answer_served_to_a_peer_again_and_again_is_charged_once(tmp_path):
    arena_mod = bench_module("arena")
    store = _ledger(tmp_path, [("a", "v0", 0.10), ("b", "v0", 0.20)])
    arena = arena_mod.Arena.__new__(arena_mod.Arena)
    arena.store, arena.refused = store, False
    budget = Budget(None, counted_usd=0.30)  # the client's: the setup's two calls counted
    arena.client = SimpleNamespace(budget=budget)
    arena.begin(5.0)  # the search starts after the setup's two calls
    # The same hard ceiling per call as ours: the client refuses a call past $5 of search.
    assert budget.ceiling_usd == pytest.approx(5.30)
    store.record_call(
        {"hash": "c", "role": "executor", "outcome": "ok", "cost_usd": 0.50, "scope": "c-1"}
    )
    budget.pay(0.50)
    for h, saved in [("a", 0.10), ("a", 0.10), ("a", 0.10), ("b", 0.20), ("c", 0.50), ("c", 0.50)]:
        store.record_cache_hit(h, "executor", saved)
    used = arena.usage()
    # Its own call, and each setup answer once: a repeat is free, as the search's own repeats are.
    assert used.usd == pytest.approx(0.50 + 0.10 + 0.20)
    assert used.calls == 3
    # The served answers it is charged for lower the client's ceiling by as much.
    arena.check()
    assert budget.reserve.usd == pytest.approx(0.30)
    store.close()


async def test_a_call_the_ceiling_refuses_spends_the_search_budget():
    from optimizer.errors import BudgetExhausted

    arena_mod = bench_module("arena")
    arena = arena_mod.Arena.__new__(arena_mod.Arena)
    arena.refused = False

    async def refused() -> None:
        raise BudgetExhausted("the next call would pass the budget")

    with pytest.raises(arena_mod.BudgetSpent):
        await arena._ceiled(refused())
    assert arena.refused  # spent() is true from here, though the spend stopped short


def test_our_best_over_spend_is_read_from_the_ledger(tmp_path):
    arena_mod = bench_module("arena")
    store = _ledger(
        tmp_path,
        [
            ("s1", "v0", 0.3),
            ("p1", "proposal 1-0", 0.1),
            ("r1", "v1", 0.4),
            ("p2", "proposal 2-0", 0.1),
            ("r2", "v2", 0.2),
            ("r3", "v1", 0.1),  # the parent's extra runs for v2's decision
            ("p3", "proposal 3-0", 0.1),
            ("r4", "v3", 0.3),  # undecided when the budget ran out
            ("t1", "sealed test v1", 0.9),  # measurement, never the search's
        ],
    )
    store.table("runs").insert({"id": "run", "current_best": "v1"})
    for label, score in [("v0", 0.4), ("v1", 0.6), ("v2", 0.5), ("v3", None)]:
        store.table("versions").insert({"label": label, "score": score})
    for label, parent, decision in [("v1", "v0", "won"), ("v2", "v1", "lost")]:
        store.upsert(
            "decisions", {"version": label, "parent": parent, "decision": decision}, pk="version"
        )
    chosen = arena_mod.best_over_spend(store)
    assert [(round(usd, 6), label) for usd, label in chosen] == [
        (0.8, "v1"),  # v1 decided before the second proposal
        (1.2, "v1"),  # v2 lost, its parent's runs included
        (1.6, "v1"),  # the whole night
    ]
    store.close()


@pytest.mark.parametrize(
    "outcome, final, certified",
    [("certified", "v3", True), ("not certified", "v0", False), (None, "v0", None)],
)
def test_the_adopt_method_ends_with_the_certified_version_else_v0(
    monkeypatch, outcome, final, certified
):
    methods = bench_module("methods")
    from optimizer.errors import BadInput

    def claim_for(run, version):
        if outcome is None:
            raise BadInput("nothing to adopt: the best is v0")
        return SimpleNamespace(version="v3", base="v0")

    async def certify(run, target, claim):
        return SimpleNamespace(
            version="v3", status=outcome, certified=outcome == "certified", cost_usd=0.8
        )

    monkeypatch.setattr(methods.adopting, "claim_for", claim_for)
    monkeypatch.setattr(methods.adopting, "certify", certify)
    arena = SimpleNamespace(run=object(), target=object())
    got, note, was = asyncio.run(methods.adopt_best(arena))
    assert (got, was) == (final, certified), note


def test_an_anytime_curve_holds_each_choice_until_the_next_and_averages_worlds():
    anytime = bench_module("anytime")
    trace = [[1.0, 0.6], [2.0, 0.5]]
    assert [anytime.gain_at(trace, 0.4, x) for x in (0.5, 1.0, 1.5, 2.0, 9.0)] == pytest.approx(
        [0.0, 0.2, 0.2, 0.1, 0.1]
    )
    data = {
        "budget_usd": 2.0,
        "seeds": "1-2",
        "skills": ["s"],
        "worlds": [
            {"v0": 0.4, "methods": {"ours": {"usd": 2.0, "sealed": 0.5, "trace": trace}}},
            {"v0": 0.5, "methods": {"ours": {"usd": 1.0, "sealed": 0.5, "trace": [[1.0, 0.5]]}}},
        ],
    }
    assert anytime.mean_curve(data, "ours", [0.0, 1.0, 2.0]) == pytest.approx([0.0, 0.1, 0.05])
    assert anytime.final_point(data, "ours") == pytest.approx((1.5, 0.05))
    data["worlds"][1]["methods"]["ours"]["trace"] = None  # not observable in one world: no curve
    assert anytime.mean_curve(data, "ours", [1.0]) is None


def test_the_verdict_lines_come_for_each_of_our_methods_against_the_best_peer():
    main = bench_module("peers_main")
    methods = bench_module("methods")

    def outcome(name: str, sealed: float, usd: float):
        return methods.Outcome(name, "v0", sealed, usd, 1, 1, 0.0, 1.0, "the score's maximum")

    results = {
        ("s", seed): {
            "original": outcome("original", 0.5, 0.0),
            "ours": outcome("ours", 0.6, 2.0),
            "ours+adopt": outcome("ours+adopt", 0.5 if seed == 1 else 0.6, 2.5),
            "ours-cheap": outcome("ours-cheap", 0.55, 1.0),
            "skillopt": outcome("skillopt", 0.45 if seed == 1 else 0.7, 1.0),
        }
        for seed in (1, 2, 3)
    }
    chosen = ["original", "ours", "ours+adopt", "ours-cheap", "skillopt"]
    lines = main.verdicts(results, chosen)
    assert len(lines) == 3
    assert VERDICT.fullmatch(lines[0]), lines[0]
    assert verdict_of("ours + adoption", "ours+adopt").fullmatch(lines[1]), lines[1]
    assert verdict_of("ours-cheap", "ours-cheap").fullmatch(lines[2]), lines[2]
    # skillopt: (-0.05 + 0.2 + 0.2) / $3 per dollar, worse than v0 in 1 of 3 worlds.
    assert "best peer skillopt gain/$ 0.1167" in lines[0] and lines[0].endswith("best peer 33%")
    assert lines[1].endswith("worse than v0: ours+adopt 0%, best peer 33%")


NIGHT = re.compile(
    r"night \$[\d.]+: ours [+-]\d\.\d{3} at \$\d+\.\d\d, best peer \S+ [+-]\d\.\d{3} at "
    r"\$\d+\.\d\d, gain ratio \S+ \[\S+, \S+\], ours − best [+-]\d\.\d{3} "
    r"\[[+-]\d\.\d{3}, [+-]\d\.\d{3}\], gain/\$ ratio \S+; worse than v0: ours \d+%, "
    r"best peer \d+%"
)


def test_the_night_line_compares_ours_with_the_peer_of_the_highest_mean_gain():
    main = bench_module("peers_main")
    methods = bench_module("methods")

    def outcome(name: str, sealed: float, usd: float):
        return methods.Outcome(name, "v0", sealed, usd, 1, 1, 0.0, 1.0, "the score's maximum")

    results = {
        ("s", seed): {
            "original": outcome("original", 0.5, 0.0),
            "ours": outcome("ours", 0.6, 1.0),
            # skillopt gains more per dollar, greedy more in the end: greedy is the best peer
            "skillopt": outcome("skillopt", 0.58, 0.5),
            "greedy": outcome("greedy", 0.7 if seed < 3 else 0.4, 4.0),
        }
        for seed in (1, 2, 3)
    }
    line = main.night_line(results, ["original", "ours", "skillopt", "greedy"], 4.0)
    assert NIGHT.fullmatch(line), line
    # greedy: (0.2 + 0.2 - 0.1) / 3 = +0.100; ours +0.100: ratio 1.00, difference 0
    assert line.startswith("night $4: ours +0.100 at $1.00, best peer greedy +0.100 at $4.00")
    assert "gain ratio 1.00 [" in line and "ours − best +0.000 [" in line
    assert line.endswith("worse than v0: ours 0%, best peer 33%")
    assert main.night_line(results, ["original", "skillopt"], 4.0) is None


def test_worse_than_v0_is_settled_at_more_runs_when_the_two_are_close(monkeypatch):
    arena_mod = bench_module("arena")
    arena = arena_mod.Arena.__new__(arena_mod.Arena)
    arena.test = [1]
    texts = {"v0": "a", "same": "a", "far": "b", "near": "c"}
    monkeypatch.setattr(arena, "skill_md", texts.__getitem__, raising=False)
    scores = {
        ("v0", 200): 0.500,
        ("far", 200): 0.480,
        ("near", 200): 0.497,  # -0.003 at 200 runs an eval: a draw
        ("near", 4000): 0.501,
        ("v0", 4000): 0.500,
        ("same", 200): 0.490,  # v0's own text is never worse, whatever the number
    }

    def on_test(found: dict) -> dict:  # the arena's keys: (label, runs, the evals measured)
        return {(label, runs, (1,)): v for (label, runs), v in found.items()}

    arena._expected = on_test(scores)
    assert arena.worse_than_v0("far") is True
    assert arena.worse_than_v0("near") is False
    assert arena.worse_than_v0("same") is False
    scores[("near", 4000)] = 0.499
    arena._expected = on_test(scores)
    assert arena.worse_than_v0("near") is True


def test_a_run_replaces_its_own_section_and_a_run_at_other_code_adds_one(tmp_path, monkeypatch):
    main = bench_module("peers_main")
    monkeypatch.setattr(main, "BENCH", tmp_path)
    (tmp_path / "RESULTS.md").write_text("# Benchmark results\n\n## other.py: kept\n\nx\n")
    args = SimpleNamespace(budget_usd=4.0, seeds="1-2", at="abc1234")
    main.write_results(args, ["first"], "cmd")
    (tmp_path / "RESULTS.md").write_text(
        (tmp_path / "RESULTS.md").read_text() + "\n## later.py: kept\n\ny\n"
    )
    main.write_results(args, ["second"], "cmd")
    main.write_results(SimpleNamespace(budget_usd=4.0, seeds="1-2", at="def5678"), ["third"], "cmd")
    text = (tmp_path / "RESULTS.md").read_text()
    assert "first" not in text and text.count("seeds 1-2, at abc1234\n") == 1
    assert "second\n\n## later.py: kept" in text  # one blank line before the next section
    assert text.index("## other.py") < text.index("abc1234") < text.index("## later.py")
    assert text.rstrip().endswith("third") and "seeds 1-2, at def5678" in text


class ClimbWorld:
    """An arena for greedy's loop whose proposals and scores are given, in order: the world's
    expected (judged) score, and the product's score on train (`product`, None: the judged one)."""

    train = [1, 2]
    SCORES = {"v0": 0.40, "up": 0.50, "down": 0.45, "same": 0.50, "upper": 0.60}

    def __init__(self, product: dict[str, float] | None = None) -> None:
        self.children = ["up", "down", "same", "upper"]
        self.score = dict(self.SCORES)
        self.product_score = product or self.score
        self.paid: list[tuple[str, int]] = []
        self.read: list[tuple[str, int, list[int]]] = []
        self.chosen: list[str] = []

    def skill_md(self, label: str) -> str:
        return label

    def add(self, text: str) -> str:
        return text

    def spent(self) -> bool:
        return not self.children

    async def propose(self, parent: str, evals: list[int]) -> str:
        return self.children.pop(0)

    async def evaluate_mean(self, label: str, evals: list[int], runs: int) -> float:
        self.paid.append((label, runs))
        return 0.0  # a run's score never decides: only the world's

    def expected(self, label: str, evals: list[int]) -> float:
        return self.score[label]

    async def product(self, label: str, runs: int, evals: list[int]) -> float:
        self.read.append((label, runs, evals))
        return self.product_score[label]

    def chose(self, label: str) -> None:
        self.chosen.append(label)


def test_the_oracle_accepts_exactly_the_children_whose_expected_train_score_rises():
    methods = bench_module("methods")
    world = ClimbWorld()
    final, note = asyncio.run(methods.oracle(world, 4.0))
    assert (final, note) == ("upper", "2 accepted")
    assert world.chosen == ["up", "up", "up", "upper"]  # a tie is no rise
    assert world.paid == [(label, 1) for label in ("v0", "up", "down", "same", "upper")]


@pytest.mark.slow
def test_the_product_ruler_gives_one_text_one_number_and_names_itself(tmp_path):
    arena = bench_module("arena")
    methods = bench_module("methods")
    product = bench_module("product")
    skill = ROOT / "tests" / "fixtures" / "csv-report"
    overrides = arena.run_settings(skill, 3, [])
    dirs = {}
    for name in ("original", "ours"):
        dirs[name] = tmp_path / name
        arena.start_run(skill, dirs[name], overrides, {"loop.max_iterations": 0})
    # ours "ends" on an edited text in its own folder, then on v0's text: one number per text
    edited = dirs["ours"] / "v0" / "skill"
    changed = tmp_path / "changed"
    changed.mkdir()
    (changed / "SKILL.md").write_text(
        (edited / "SKILL.md").read_text() + "\nKeep the report under one page.\n"
    )

    def outcome(name: str, final: str):
        return methods.Outcome(
            name, final, 0.5, 1.0, 1, 1, 1.0, 0.9, "the world's", trace=[(1, 0.5)]
        )

    cell = {"original": outcome("original", "v0"), "ours": outcome("ours", "v0")}
    first = product.remeasure(cell, dirs, runs=2)
    assert first["ours"].sealed == first["original"].sealed is not None
    assert first["ours"].worse is False and first["ours"].trace is None
    assert first["ours"].ceiling == 1.0 and "product" in first["ours"].ceiling_source
    # the same edited text, reached in two folders, is measured once and read alike
    for name in ("original", "ours"):
        ws_skill = dirs[name] / "v9" / "skill"
        ws_skill.mkdir(parents=True)
        (ws_skill / "SKILL.md").write_text((changed / "SKILL.md").read_text())
    cell = {
        "original": outcome("original", "v0"),
        "ours": outcome("ours", "v9"),
        "greedy": outcome("greedy", "v9"),
    }
    dirs["greedy"] = dirs["original"]
    again = product.remeasure(cell, dirs, runs=2)
    assert again["ours"].sealed == again["greedy"].sealed is not None
    assert again["original"].sealed == first["original"].sealed
    assert again["ours"].worse == (again["ours"].sealed < again["original"].sealed)


@pytest.mark.parametrize(
    ("best_scores", "ends_on", "held"),
    [((0.6, 0.7), "v3", True), ((0.5, 0.5), "v0", False), ((0.2, 0.3), "v0", False)],
)
def test_a_confirmed_night_ends_on_its_best_only_when_fresh_runs_hold_it(
    best_scores, ends_on, held
):
    methods = bench_module("methods")
    asked = []

    class Target:
        async def fresh(self, order, *, scope):
            asked.append((order, scope))
            score = {"v3": best_scores, "v0": (0.5, 0.5)}
            return {
                label: {
                    e: [SimpleNamespace(score=score[label][e - 1], run_number=n)]
                    for lab, e, n in order
                    if lab == label
                }
                for label in ("v3", "v0")
            }

    arena = SimpleNamespace(
        run=SimpleNamespace(best=lambda: "v3"),
        settings=SimpleNamespace(evals=SimpleNamespace(runs_per_eval=1)),
        train=[1, 2],
        target=Target(),
    )
    final, note, confirmed = asyncio.run(methods.confirm_best(arena))
    assert (final, confirmed) == (ends_on, held)
    order, scope = asked[0]
    assert scope == "confirm" and {n for _, _, n in order} == {methods.CONFIRM_FIRST}
    arena.run = SimpleNamespace(best=lambda: "v0")
    assert asyncio.run(methods.confirm_best(arena))[::2] == ("v0", None)


def test_the_product_oracle_accepts_exactly_the_children_whose_product_score_rises():
    methods = bench_module("methods")
    # by the judged ruler "down" would be the one to take; by the product's, "up" then "upper"
    world = ClimbWorld(product=dict(ClimbWorld.SCORES))
    world.score = {**ClimbWorld.SCORES, "down": 0.9}
    final, note = asyncio.run(methods.oracle_product(world, 4.0))
    assert (final, note) == ("upper", "2 accepted")
    assert world.paid == [(label, 1) for label in ("v0", "up", "down", "same", "upper")]
    assert {(runs, tuple(evals)) for _, runs, evals in world.read} == {
        (methods.ORACLE_RUNS, (1, 2))
    }
