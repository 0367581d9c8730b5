"""The morning summary: every run ends with summary.md and a valid summary.json, `--notify` runs
the user's command with its path, `optimizer summary` prints it, and what it says (the winner, its
intervals and scope, the diff, the cost, what to look at) comes from the run folder."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from fixtures.workspace_builder import build_workspace

from optimizer import schemas
from optimizer.report import summary

REPO = Path(__file__).resolve().parents[2]


def _notifier(tmp_path: Path) -> tuple[str, Path]:
    """A command of the user's: it records the path it was given and the file's first line."""
    record = tmp_path / "notified.txt"
    script = tmp_path / "notify.py"
    script.write_text(
        "import sys, pathlib\np = pathlib.Path(sys.argv[1])\n"
        f"pathlib.Path({str(record)!r}).write_text(str(p) + '\\n' + "
        "p.read_text().splitlines()[0])\n"
    )
    return f"{sys.executable} {script}", record


@pytest.mark.slow
def test_a_run_ends_with_a_summary_and_notifies(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    command, record = _notifier(tmp_path)
    run_dir = tmp_path / "run"
    result = cli(
        "run",
        "tests/fixtures/csv-report",
        "--provider",
        "sim",
        "--max-iterations",
        "1",
        "--run-dir",
        run_dir,
        "--set",
        "evals.runs_per_eval=1",
        "--set",
        "selection.max_runs_per_eval=2",
        "--notify",
        command,
    )
    assert result.exit_code == 0, result.output
    md, js = summary.paths(run_dir)
    assert md.is_file() and js.is_file()
    # read after the lock was released: a finished run folder keeps no WAL reader's files
    assert not (run_dir / "state.db-wal").exists() and not (run_dir / "state.db-shm").exists()
    data = schemas.MorningSummary.model_validate(json.loads(js.read_text()))
    assert data.best and data.train is not None and data.spent_usd > 0
    text = md.read_text()
    assert text.startswith("# Morning summary: csv-report") and "## Cost" in text
    path, first = record.read_text().splitlines()
    assert Path(path) == md and first == "# Morning summary: csv-report"
    printed = cli("summary", run_dir)
    assert printed.exit_code == 0 and printed.output.strip() == text.strip()
    as_json = cli("summary", run_dir, "--json")
    assert schemas.MorningSummary.model_validate(json.loads(as_json.output)).best == data.best


def test_a_failing_notify_command_is_a_warning_not_a_failure(tmp_path):
    built = build_workspace(tmp_path / "run", versions=3, pending=False)
    lines: list[str] = []

    class Console:
        def print(self, text, **_kw):
            lines.append(text)

    path = summary.at_end(built.root, f"{sys.executable} -c 'import sys; sys.exit(3)'", Console())  # type: ignore[arg-type]
    assert path == built.root / "summary.md" and path.is_file()
    assert any(line.startswith("warning: --notify") and "exited with 3" in line for line in lines)
    assert summary.notify("/no/such/command", path) is not None


def test_the_winner_its_numbers_diff_and_what_to_look_at(tmp_path):
    built = build_workspace(tmp_path / "run", versions=8, pending=False)
    assert built.best != "v0"  # the builder's seeded walk has a winner
    skill = tmp_path / "skill"
    (skill / "evals").mkdir(parents=True)
    (skill / "evals" / "candidates.json").write_text(
        json.dumps({"candidates": [{"prompt": "a"}, {"prompt": "b"}]})
    )
    import sqlite3

    with sqlite3.connect(built.root / "state.db") as conn:
        conn.execute("update runs set skill_dir = ?", [str(skill)])
    found = summary.build(built.root)
    assert found.won and found.best == built.best
    v0 = sum(built.scores["v0"][e] for e in built.evals) / len(built.evals)
    best = sum(built.scores[built.best][e] for e in built.evals) / len(built.evals)
    assert found.train is not None and abs(found.train.delta - (best - v0)) < 1e-3
    assert found.train.low is not None and found.train.low < found.train.delta < found.train.high
    # three train evals and one sealed: no sealed interval, so no claim beyond these tasks
    assert found.scope == "a step on these tasks"  # the lineage's words for the decision
    assert found.diff and "+- Rule" in found.diff
    assert any("2 candidate evals" in item for item in found.look_at)
    assert any(item.startswith("small suite") for item in found.look_at)
    text = summary.markdown(found)
    assert f"**{built.best} won against" in text and "```diff" in text and "[+" in text


def test_a_stated_scope_is_used_as_it_is(tmp_path):
    built = build_workspace(tmp_path / "run", versions=8, pending=False)
    sel = built.root / built.best / "selection.json"
    data = json.loads(sel.read_text())
    sel.write_text(json.dumps({**data, "scope": "general"}))
    assert summary.build(built.root).scope == "a step over evals like these"


def test_a_night_error_is_the_headline(tmp_path):
    built = build_workspace(tmp_path / "run", versions=3, pending=False)
    path = summary.write(built.root, night_error="No API key: set ANTHROPIC_API_KEY.")
    assert "**This night did not run: No API key: set ANTHROPIC_API_KEY.**" in path.read_text()


def test_summary_of_a_folder_that_is_not_a_run_is_bad_input(cli, tmp_path):
    (tmp_path / "x").mkdir()
    result = cli("summary", tmp_path / "x")
    assert result.exit_code == 2 and "not a run folder" in result.output


def test_unscored_runs_and_a_failure_are_things_to_look_at(tmp_path):
    import sqlite3

    built = build_workspace(tmp_path / "run", versions=3, pending=False)
    with sqlite3.connect(built.root / "state.db") as conn:
        conn.execute(
            "insert into gradings (key, status, error) values ('v1/eval-9/with_skill/run-1', "
            "'unscored', 'the sandbox could not start')"
        )
        conn.execute("update runs set status = 'failed', last_error = 'the disk is full'")
    found = summary.build(built.root)
    assert any(item.startswith("1 run could not be scored") for item in found.look_at)
    assert "the run failed: the disk is full" in found.look_at
    assert "## What to look at\n\n- " in summary.markdown(found)


def test_a_sealed_test_that_did_not_run_names_the_command_that_finishes_it(simulated, cli):
    """status, summary.md and the report say how to finish it; the command they give does."""
    import shlex
    import sqlite3

    conn = sqlite3.connect(simulated / "state.db")
    with conn:
        conn.execute("update runs set test_json = null")  # what a run stopped before it leaves
    conn.close()
    todo = json.loads(cli("status", simulated, "--json").stdout)["sealed_todo"]
    command = todo.split("`")[1]
    assert todo.startswith("the sealed test did not run") and command.startswith("optimizer resume")
    assert command.endswith("--budget-usd 20.00")  # the run's own budget: the command never cuts it
    assert command in summary.write(simulated).read_text()
    assert cli("report", simulated).exit_code == 0
    assert command in (simulated / "report.html").read_text()
    assert cli(*shlex.split(command)[1:]).exit_code == 0
    test = json.loads(
        sqlite3.connect(simulated / "state.db").execute("select test_json from runs").fetchone()[0]
    )
    assert test["versions"]["v0"]["score"] is not None and "incomplete" not in test
    assert json.loads(cli("status", simulated, "--json").stdout)["sealed_todo"] is None


def test_a_headline_states_no_number_its_interval_does_not_support(tmp_path):
    """Two sealed evals whose differences disagree (+0.30, −0.06): Δ +0.119 with a 95% interval
    far across zero is too small to tell, not "+0.119 on the sealed test"."""
    import sqlite3

    built = build_workspace(tmp_path / "run", versions=8, pending=False, test_evals=(4, 5))
    test = {
        "evals": [4, 5],
        "versions": {
            "v0": {"score": 0.5, "per_eval": {"4": 0.5, "5": 0.5}},
            built.best: {"score": 0.619, "per_eval": {"4": 0.8, "5": 0.438}},
        },
        "best": built.best,
        "delta": 0.119,
    }
    with sqlite3.connect(built.root / "state.db") as conn:
        conn.execute("update runs set test_json = ?", [json.dumps(test)])
    found = summary.build(built.root)
    assert found.sealed is not None and found.sealed.low < 0 < found.sealed.high
    assert "sealed test: too small to tell (2 evals)" in found.headline, found.headline
    assert "0.119" not in found.headline


def test_one_delta_has_one_interval_per_level_and_each_view_names_the_level(
    cli, tmp_path, monkeypatch
):
    """The best won against v0 at a look's level (99.94%): the lineage, the report and the
    summary give its Δ the decision's own interval, each naming the level, beside the scores'
    95% intervals. The summary once gave the same Δ a second interval, computed over evals,
    under "95%", and the lineage and the report showed the decision's with no level at all."""
    import sqlite3

    built = build_workspace(tmp_path / "run", versions=8, pending=False)
    delta = summary.build(built.root).train.delta  # type: ignore[union-attr]
    ci = {"low": round(delta - 0.2, 4), "high": round(delta + 0.2, 4), "confidence": 0.9994}
    path = built.root / built.best / "selection.json"
    selection = {**json.loads(path.read_text()), "parent": "v0", "delta": delta, "interval": ci}
    path.write_text(json.dumps(selection))
    with sqlite3.connect(built.root / "state.db") as conn:
        conn.execute(
            "update decisions set parent = 'v0', delta = ?, ci_low = ?, ci_high = ?, "
            "selection_json = ? where version = ?",
            [delta, ci["low"], ci["high"], json.dumps(selection), built.best],
        )
        conn.execute("update versions set parent = 'v0' where label = ?", [built.best])
    # the level as the decision's reason states it: "99.940% CI [...] (Student-t)"
    shown = f"[{ci['low']:+.3f}, {ci['high']:+.3f}] 99.940% CI, the decision's"
    # One line per version, so no interval is cut in two. The console reads COLUMNS when it is
    # made, at the first import of the command line, which another test may have done already.
    from optimizer.cli import common

    monkeypatch.setattr(common.out, "width", 400)
    lineage = cli("lineage", built.root).stdout
    assert f"Δ {delta:+.3f} {shown}" in lineage, lineage
    assert "] 95% CI (n=" in lineage  # the scores' intervals say theirs
    text = summary.markdown(summary.build(built.root))
    assert f"Δ {delta:+.3f} {shown}" in text, text
    assert cli("report", built.root).exit_code == 0
    assert "99.940% CI, the decision" in (built.root / "report.html").read_text()


def test_a_best_no_better_than_v0_by_its_own_interval_gets_no_train_number(tmp_path):
    """Won step by step, each against its parent, but against v0 the train evals differ by
    +0.1, −0.1 and 0: the headline says so instead of a Δ its 95% interval does not support."""
    import sqlite3

    built = build_workspace(tmp_path / "run", versions=8, pending=False)
    best = built.scores[built.best]
    v0 = {str(e): best[e] + d for e, d in zip(built.evals, (0.1, -0.1, 0.0), strict=True)}
    with sqlite3.connect(built.root / "state.db") as conn:
        conn.execute(
            "update versions set split_scores_json = ? where label = 'v0'", [json.dumps(v0)]
        )
    found = summary.build(built.root)
    assert found.train is not None and found.train.low < 0 < found.train.high  # type: ignore[operator]
    assert "against v0 on the train evals: too small to tell (3 evals)" in found.headline
    assert "won by" not in found.headline, found.headline


def test_a_child_no_interval_could_decide_is_named_in_the_morning(tmp_path):
    """ "No version beat it" while v2 scored 0.139 against v0's 0.067, a tie because every run of
    each eval scored the same: the morning names the child and why it was not decided."""
    from optimizer.report import summary
    from optimizer.report.view import Node, RunView

    same = "tie: every run of each eval scored the same for the child and the parent"
    data = RunView(
        root=tmp_path,
        source="state.db",
        nodes=[
            Node(label="v0", score=0.067),
            Node(label="v1", parent="v0", score=0.05, decision="lost", reason="lost: below"),
            Node(label="v2", parent="v0", score=0.139, decision="tie", reason=same),
        ],
    )
    [said] = summary._undecidable(data)
    assert said.startswith("v2 was not decided against v0: every run of each eval scored the same")
    assert "0.139" in said
