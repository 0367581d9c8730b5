"""Where a run's money goes: the blind comparator judges only the pairs that can inform the claim,
and an iteration stops proposing once a child won (docs/design.md §3, §8)."""

from __future__ import annotations

import json
from contextlib import closing

import pytest
from inprocess import EXAMPLE, cli

from optimizer.config import Selection
from optimizer.decide.step import compared_runs
from optimizer.store import readonly
from optimizer.store.files import Workspace, read_json

# csv-report has 5 evals, 4 of them train: below few_evals, so "auto" claims `tasks`.
# The guarded step rule: these tests are about its looks, comparator pairs and added runs.
RUN = (
    "run", str(EXAMPLE), "--provider", "sim", "--max-iterations", "2",
    "--set", "selection.step=guarded",
)  # fmt: skip


@pytest.mark.parametrize(
    ("settings", "n_evals", "runs", "pairs"),
    [
        ({}, 4, 6, 1),  # the sequential rule: the first pair of each eval, whatever the claim
        ({"scope": "general"}, 12, 6, 1),
        ({"scope": "tasks"}, 30, 9, 1),
        ({}, 4, 0, 0),  # no runs yet, no pair
        ({"compare_pairs": "all"}, 4, 6, 6),
        ({"rule": "bootstrap"}, 4, 3, 3),  # its comparator majority counts every pair
    ],
)
def test_the_comparator_judges_every_pair_only_where_asked_or_counted(
    settings, n_evals, runs, pairs
):
    assert compared_runs(Selection(**settings), runs) == pairs


def _compared_run_numbers(run_dir) -> dict[str, set[int]]:
    ws = Workspace(run_dir)
    out = {}
    for label in _benchmark_runs(run_dir):
        path = ws.comparison_dir(label) / "assignment.json"
        if path.is_file():
            out[label] = {row["run"] for row in read_json(path)["comparisons"]}
    return out


def _rows(run_dir, sql: str) -> list[dict]:
    with closing(readonly.connect(run_dir / "state.db")) as conn:
        return readonly.rows(conn, sql)


def _benchmark_runs(run_dir) -> dict[str, int]:
    rows = _rows(run_dir, "select version, selection_json from decisions")
    return {
        r["version"]: json.loads(r["selection_json"]).get("runs_per_eval") or 0
        for r in rows
        if r["selection_json"]
    }


@pytest.mark.slow
def test_under_the_tasks_claim_only_the_first_run_pair_of_each_eval_is_compared(
    tmp_path, monkeypatch
):
    auto, every = tmp_path / "auto", tmp_path / "all"
    cli(monkeypatch, None, *RUN, "--set", "sim.seed=2", "--run-dir", str(auto))
    cli(
        monkeypatch,
        None,
        *RUN,
        *("--set", "sim.seed=2", "--set", "selection.compare_pairs=all", "--run-dir", str(every)),
    )
    runs = _benchmark_runs(auto)
    assert max(runs.values()) > 3  # a child reached a later look: pairs 2 and on existed there
    compared = _compared_run_numbers(auto)
    assert compared and all(numbers == {1} for numbers in compared.values())
    # The same seed with every pair judged compares later runs too: the saving is real.
    assert any(max(numbers) > 1 for numbers in _compared_run_numbers(every).values())


def _candidates(run_dir) -> dict[int, list[str]]:
    rows = _rows(run_dir, "select number, candidates_json from iterations")
    return {r["number"]: sorted(json.loads(r["candidates_json"] or "{}")) for r in rows}


def _winners(run_dir) -> list[str]:
    return [r["label"] for r in _rows(run_dir, "select label from versions where decision = 'won'")]


@pytest.mark.slow
def test_an_iteration_ends_at_its_first_winner(tmp_path, monkeypatch):
    """No proposal of an iteration is asked after one of its children won; asked to judge every
    proposal, the same iteration goes on. The first seed (of 0-11) whose night has a child of an
    iteration's first proposal win shows both; a seed is searched for, never fixed, so a change
    of the simulated world moves the seed, not the property."""
    for seed in range(12):
        first = tmp_path / f"first-{seed}"
        cli(monkeypatch, None, *RUN, "--set", f"sim.seed={seed}", "--run-dir", str(first))
        won = _won_keys(first)
        for n, k in won.items():  # no proposal after the winner was asked
            assert _candidates(first)[n] == [str(j) for j in range(k + 1)]
        if any(k == 0 for k in won.values()):
            break
    else:
        pytest.fail("no seed of 0-11 has a first proposal win")
    every = tmp_path / "all"
    cli(
        monkeypatch,
        None,
        *RUN,
        *(
            "--set",
            f"sim.seed={seed}",
            "--set",
            "loop.judge_proposals=all",
            "--run-dir",
            str(every),
        ),
    )
    # Asked to judge every proposal, the same iteration goes on to its second one.
    assert all(_candidates(every)[n] == ["0", "1"] for n, k in won.items() if k == 0)


def _won_keys(run_dir) -> dict[int, int]:
    """Each iteration with a winner: the key of its winning proposal."""
    won = set(_winners(run_dir))
    out = {}
    for r in _rows(run_dir, "select number, candidates_json from iterations"):
        for key, made in json.loads(r["candidates_json"] or "{}").items():
            if made.get("label") in won:
                out[r["number"]] = int(key)
    return out


@pytest.mark.slow
def test_a_stop_right_after_the_winning_decision_resumes_into_the_next_iteration(
    tmp_path, monkeypatch
):
    """The break is read from the ledger: a run stopped as the winner's analysis is announced
    (its decision not yet recorded) or just after it, then resumed, asks exactly what the
    uninterrupted run asked and never proposal 2 of the won iteration."""
    from inprocess import history

    from optimizer.report.live import Reporter

    reference = tmp_path / "reference"
    cli(monkeypatch, None, *RUN, "--set", "sim.seed=4", "--run-dir", str(reference))
    winner = sorted(_winners(reference))[0]
    show = Reporter.activity
    for when in (f"{winner}: analysis", "iteration 2: choosing a parent"):
        run_dir = tmp_path / when.split(":")[0].replace(" ", "-")
        stopped: list[str] = []

        def stage(self, text: str, when=when, run_dir=run_dir, stopped=stopped) -> None:
            if text == when and not stopped:
                stopped.append(text)
                (run_dir / "STOP").write_text("stop requested by the test\n")
            show(self, text)

        with monkeypatch.context() as patch:
            patch.setattr(Reporter, "activity", stage)
            out = cli(patch, None, *RUN, "--set", "sim.seed=4", "--run-dir", str(run_dir))
        assert stopped == [when] and "STOP" in out
        cli(monkeypatch, None, "resume", str(run_dir))
        assert history(run_dir) == history(reference)
        assert _candidates(run_dir) == _candidates(reference)
