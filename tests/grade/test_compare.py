import asyncio
import json
import random

import pytest

from optimizer.config import Selection
from optimizer.decide.comparison import Measured
from optimizer.decide.step import decide
from optimizer.grade.compare import blind, compare_versions
from optimizer.inputs.evals import Eval
from optimizer.model import StructuredAnswerError, make_client
from optimizer.schemas import Comparison
from optimizer.sim import Knobs, Simulator
from optimizer.store.db import Store
from optimizer.store.files import read_json

EVALS = [
    Eval(
        id=1,
        name="revenue",
        prompt="Summarise the quarterly revenue report into summary.md.",
        expectations=[
            "The summary states the total revenue `4.2M`",
            "The summary names the `northern`, `southern` and `western` regions",
        ],
    ),
    Eval(
        id=2,
        name="churn",
        prompt="Explain the customer churn figures in churn.md.",
        expectations=[
            "The explanation gives the churn rate `7%`",
            "The explanation compares churn with the `previous quarter`",
        ],
    ),
]
GOOD = {
    1: "# Revenue summary\nTotal revenue: 4.2M.\nRegions: northern, southern and western.\n",
    2: "# Churn\nThe churn rate is 7%, up from 5% in the previous quarter; we compare churn.\n",
}
POOR = {1: "# Notes\nSales happened.\n", 2: "# Notes\nSome customers left.\n"}


async def no_wait(_seconds):
    await asyncio.sleep(0)


def workspace(root, runs=(3, 3), leak=True):
    """v1 (the child, good answers) and v0 (the parent, poor ones), as the loop lays them out."""
    child, parent = {}, {}
    for label, texts, n, out in (("v1", GOOD, runs[0], child), ("v0", POOR, runs[1], parent)):
        for ev in EVALS:
            for r in range(1, n + 1):
                run_dir = root / label / f"eval-{ev.id}" / "with_skill" / f"run-{r}"
                body = texts[ev.id] + f"Draft {r}.\n"  # distinct runs ask distinct questions
                if leak:  # the agent wrote where it ran and which version it was
                    body += f"\nWritten by {label} (with_skill) in {run_dir}/outputs.\n"
                (run_dir / "outputs").mkdir(parents=True)
                (run_dir / "outputs" / "answer.md").write_text(body)
                (run_dir / "outputs" / "metrics.json").write_text('{"total_tool_calls": 1}')
                (run_dir / "outputs" / f"{label}-notes.txt").write_text(f"see {root}/{label}/skill")
                out.setdefault(ev.id, []).append(run_dir)
    return child, parent


class Recorder:
    """The simulator behind the real SDK, with every request body it received kept."""

    def __init__(self, sim):
        self.sim, self.bodies = sim, []
        original = sim.handle

        def handle(method, target, headers, raw):
            self.bodies.append(raw.decode())
            return original(method, target, headers, raw)

        sim.handle = handle


@pytest.fixture
async def make(settings, store):
    clients = []

    def build(sim):
        client = make_client(settings, store, simulator=sim, sleep=no_wait)
        clients.append(client)
        return client

    yield build
    for client in clients:
        await client.aclose()


async def test_no_version_label_or_host_path_reaches_the_comparator(tmp_path, make):
    child, parent = workspace(tmp_path / "ws")
    recorder = Recorder(Simulator(seed=0, knobs=Knobs(position_bias=0.0)))
    out = tmp_path / "ws" / "v1" / "comparison"
    tally = await compare_versions(
        make(recorder.sim),
        evals=EVALS,
        child_runs=child,
        parent_runs=parent,
        out_dir=out,
        rng_seed=0,
    )
    assert len(recorder.bodies) == 12  # 2 evals × 3 pairs × 2 orders
    for body in recorder.bodies:
        text = json.loads(body)["messages"][0]["content"]
        for secret in ("v1", "v0", "V1", str(tmp_path), "with_skill", "metrics.json"):
            assert secret not in body, secret
        assert "[version]" in text and "[path]" in text and "[configuration]" in text
        assert '<file path="answer.md" boundary="' in text  # relative to outputs/ only
    # An unbiased judge sees the child's answers are better, in both orders.
    assert (tally.child_wins, tally.parent_wins, tally.inconsistent, tally.errors) == (6, 0, 0, 0)
    assert tally.pairs == 6 and tally.swap_consistency == 1.0
    assert tally.per_eval[1]["child_wins"] == 3 and tally.per_eval[2]["pairs"] == 3


async def test_each_pair_is_judged_in_both_orders_and_recorded(tmp_path, make):
    child, parent = workspace(tmp_path, leak=False)
    out = tmp_path / "cmp"
    await compare_versions(
        make(Simulator(seed=0, knobs=Knobs(position_bias=0.0))),
        evals=EVALS,
        child_runs=child,
        parent_runs=parent,
        out_dir=out,
        rng_seed=3,
    )
    rows = read_json(out / "assignment.json")["comparisons"]
    assert [r["k"] for r in rows] == list(range(1, 13))
    by_pair = {}
    for row in rows:
        by_pair.setdefault((row["eval_id"], row["run"]), []).append(row)
        comparison = Comparison.model_validate(read_json(out / f"comparison-{row['k']}.json"))
        expected = "A" if row["A"] == "child" else "B"
        assert comparison.winner == expected and row["verdict"] == "child"
        assert comparison.rubric.A.content and comparison.output_quality.B.score >= 0
    assert all({r["A"] for r in pair} == {"child", "parent"} for pair in by_pair.values())
    firsts = {pair[0]["A"] for pair in by_pair.values()}
    assert firsts == {"child", "parent"}  # the first order is drawn, not always the child


async def test_a_position_biased_comparator_decides_nothing(tmp_path, make):
    child, parent = workspace(tmp_path, leak=False)
    tally = await compare_versions(
        make(Simulator(seed=0, knobs=Knobs(position_bias=1.0))),
        evals=EVALS,
        child_runs=child,
        parent_runs=parent,
        out_dir=tmp_path / "cmp",
        rng_seed=0,
    )
    assert tally.inconsistent == tally.pairs == 6
    assert tally.child_wins == tally.parent_wins == tally.ties == 0
    assert tally.swap_consistency == 0.0
    rule = Selection(
        rule="bootstrap", min_effect=0.03, comparator_majority=0.75, max_runs_per_eval=3
    )
    straddling = {e: [0.5 + d] * 3 for e, d in enumerate([0.1, -0.08, 0.05, -0.04, 0.02])}
    parent_scores = {e: [0.5] * 3 for e in range(5)}
    d = decide(Measured(straddling, parent_scores, tally), selection=rule, rng=random.Random(0))
    assert d.decision == "tie" and "too few decisive" in d.reason


async def test_unpaired_runs_are_skipped_and_a_resume_calls_nothing_again(tmp_path, make, settings):
    child, parent = workspace(tmp_path, runs=(3, 2), leak=False)
    recorder = Recorder(Simulator(seed=0, knobs=Knobs(position_bias=0.3)))
    client = make(recorder.sim)
    out = tmp_path / "cmp"
    first = await compare_versions(
        client, evals=EVALS, child_runs=child, parent_runs=parent, out_dir=out, rng_seed=0
    )
    assert first.pairs == 4 and len(recorder.bodies) == 8
    # A fresh ledger: only the files on disk can spare the calls.
    fresh = Store(tmp_path / "other" / "state.db")
    try:
        other = make_client(settings, fresh, simulator=recorder.sim, sleep=no_wait)
        again = await compare_versions(
            other, evals=EVALS, child_runs=child, parent_runs=parent, out_dir=out, rng_seed=0
        )
        await other.aclose()
    finally:
        fresh.close()
    assert len(recorder.bodies) == 8  # every comparison-<k>.json was reused
    assert again == first
    # The parent gets a third run (the adaptive rule): only the new pairs are judged, and the
    # numbers already on disk keep their meaning.
    before = read_json(out / "assignment.json")["comparisons"]
    for ev in EVALS:
        extra = tmp_path / "v0" / f"eval-{ev.id}" / "with_skill" / "run-3"
        (extra / "outputs").mkdir(parents=True)
        (extra / "outputs" / "answer.md").write_text(POOR[ev.id])
        parent[ev.id].append(extra)
    grown = await compare_versions(
        client, evals=EVALS, child_runs=child, parent_runs=parent, out_dir=out, rng_seed=0
    )
    assert grown.pairs == 6 and len(recorder.bodies) == 12
    after = read_json(out / "assignment.json")["comparisons"]
    assert after[: len(before)] == before
    assert {r["k"] for r in after} == set(range(1, 13))


def same_answers(root):
    """Child and parent with the same good answers: an unbiased judge calls every pair a tie."""
    child, parent = workspace(root, leak=False)
    for runs in parent.values():
        for run_dir in runs:
            ev = int(run_dir.parent.parent.name.split("-")[1])
            n = int(run_dir.name.split("-")[1])
            # not byte-equal: the two orders must be two requests, not one the ledger serves
            (run_dir / "outputs" / "answer.md").write_text(GOOD[ev] + f"Draft {n}. Reviewed.\n")
    return child, parent


async def test_the_second_order_is_skipped_after_a_first_order_tie(tmp_path, make):
    child, parent = same_answers(tmp_path)
    recorder = Recorder(Simulator(seed=0, knobs=Knobs(position_bias=0.0)))
    out = tmp_path / "cmp"
    tally = await compare_versions(
        make(recorder.sim),
        evals=EVALS,
        child_runs=child,
        parent_runs=parent,
        out_dir=out,
        rng_seed=0,
    )
    assert len(recorder.bodies) == 6  # one order per pair: every first verdict was a tie
    assert tally.pairs == tally.single_order == 6
    assert tally.ties == tally.inconsistent == tally.child_wins == tally.parent_wins == 0
    assert tally.swap_consistency is None  # no pair was judged in both orders
    assert tally.per_eval[1]["single_order"] == 3 and tally.reasons == []
    rows = read_json(out / "assignment.json")["comparisons"]
    assert [r["k"] for r in rows] == list(range(1, 13))  # numbers kept for both orders
    skipped = [r for r in rows if "skipped" in r]
    assert len(skipped) == 6 and all(r["order"] == 2 and "verdict" not in r for r in skipped)
    assert not any((out / f"comparison-{r['k']}.json").exists() for r in skipped)
    pairs = read_json(out / "assignment.json")["pairs"]
    assert {p["verdict"] for p in pairs} == {"single_order"}


async def test_both_orders_are_judged_when_asked(tmp_path, make):
    child, parent = same_answers(tmp_path / "a")
    recorder = Recorder(Simulator(seed=0, knobs=Knobs(position_bias=0.0)))
    tally = await compare_versions(
        make(recorder.sim),
        evals=EVALS,
        child_runs=child,
        parent_runs=parent,
        out_dir=tmp_path / "a" / "cmp",
        rng_seed=0,
        second_order="always",
    )
    assert len(recorder.bodies) == 12 and tally.ties == 6 and tally.single_order == 0
    assert tally.swap_consistency == 1.0


class FailingOnce:
    """A comparator whose answers never validate on one eval: StructuredAnswerError there."""

    def __init__(self, real, bad_eval_prompt):
        self.real, self.bad = real, bad_eval_prompt

    async def structured(self, role, **kw):
        if self.bad in kw["messages"][0]["content"]:
            raise StructuredAnswerError(
                role=role, tool_name=kw["tool_name"], first_error="x", second_error="y"
            )
        return await self.real.structured(role, **kw)


async def test_a_failed_comparator_call_is_an_error_never_a_verdict(tmp_path, make):
    child, parent = workspace(tmp_path, leak=False)
    client = FailingOnce(make(Simulator(seed=0, knobs=Knobs(position_bias=0.0))), EVALS[1].prompt)
    out = tmp_path / "cmp"
    tally = await compare_versions(
        client, evals=EVALS, child_runs=child, parent_runs=parent, out_dir=out, rng_seed=0
    )
    assert tally.errors == 3 and tally.child_wins == 3 and tally.pairs == 6
    assert tally.swap_consistency == 1.0  # errors are not judged pairs
    assert tally.per_eval[2] == {
        "child_wins": 0,
        "parent_wins": 0,
        "ties": 0,
        "inconsistent": 0,
        "errors": 3,
        "pairs": 3,
        "single_order": 0,
    }
    rows = read_json(out / "assignment.json")["comparisons"]
    failed = [r for r in rows if r["eval_id"] == 2]
    assert all("verdict" not in r for r in failed)
    # the first order failed, so the second was not asked: the pair is an error either way
    assert all("error" in r for r in failed if r["order"] == 1)
    assert all("skipped" in r for r in failed if r["order"] == 2)
    assert not any((out / f"comparison-{r['k']}.json").exists() for r in failed)


def test_blind_replaces_labels_paths_and_configurations():
    text = "v12 beat V3 at /work/runs/r/v12/eval-1/with_skill/run-1; without_skill too; vivid v2x"
    out = blind(text, ["/work/runs/r"])
    assert out == (
        "[version] beat [version] at [path]/[version]/eval-1/[configuration]/run-1; "
        "[configuration] too; vivid v2x"
    )
