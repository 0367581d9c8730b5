"""The terminal views (status, lineage, show, diff) on synthesized run folders and on folders that
hold only a history.json, as a user would read them."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fixtures.workspace_builder import build_workspace
from rich.console import Console

from optimizer import schemas
from optimizer.errors import BadInput
from optimizer.report import progress, read, show, status
from optimizer.report import tree as lineage_view
from optimizer.report.format import num, readable
from optimizer.store.db import Store
from optimizer.store.files import Workspace, write_json
from optimizer.store.lock import lock

SEEDS = Path(__file__).parents[1] / "fixtures" / "seeds"


def render(fn, *args) -> str:
    console = Console(record=True, width=220, color_system=None)
    fn(console, *args)
    return console.export_text()


@pytest.fixture
def built(tmp_path):
    return build_workspace(tmp_path / "csv-report-run", versions=7)


def _walk(nodes):
    for n in nodes:
        yield n
        yield from _walk(n["children"])


def test_lineage_tree_from_the_store(built):
    tree = lineage_view.lineage(built.root)
    json.dumps(tree)  # --json must be serialisable as is
    assert tree["count"] == len(built.labels)
    assert [n["label"] for n in tree["tree"]] == ["v0"]
    nodes = {n["label"]: n for n in _walk(tree["tree"])}
    assert set(nodes) == set(built.labels)
    for label, n in nodes.items():
        assert n["parent"] == built.parents.get(label)
        assert n["decision"] == built.decisions[label]
        assert all(child["parent"] == label for child in n["children"])
    assert [n["label"] for n in nodes.values() if n["is_best"]] == [built.best]
    assert tree["run"]["simulated"] is True and tree["run"]["source"] == "state.db"
    benchmarked = [n for n in nodes.values() if n["phase"] == "benchmark"]
    assert benchmarked and all(
        n["score_ci"] and n["score_ci"][0] <= n["score"] <= n["score_ci"][1] for n in benchmarked
    )
    assert all(n["cost_usd"] > 0 for n in nodes.values() if n["decision"])
    won = next(n for n in nodes.values() if n["decision"] == "won")
    assert won["ci"][0] < won["delta"] < won["ci"][1] and won["seconds"] > 0


def test_lineage_shows_the_sealed_train_gap_of_what_the_sealed_test_measured(built):
    tree = lineage_view.lineage(built.root)
    nodes = {n["label"]: n for n in _walk(tree["tree"])}
    test = read.load(built.root).run.test or {}
    for label, n in nodes.items():
        measured = test["versions"].get(label)
        if measured is None:
            assert n["sealed"] is None and n["sealed_gap"] is None
        else:
            assert n["sealed"] == measured["score"]
            assert n["sealed_gap"] == round(measured["score"] - n["score"], 4)
    assert nodes["v0"]["sealed"] is not None and nodes[built.best]["sealed"] is not None
    text = render(lineage_view.print_lineage, tree)
    assert f"sealed {num(nodes['v0']['sealed'])} (" in text and "against train)" in text


def test_print_lineage_marks_best_decisions_and_simulation(built):
    text = render(lineage_view.print_lineage, lineage_view.lineage(built.root))
    assert "SIMULATED" in text
    assert f"★ {built.best}" in text
    for label, decision in built.decisions.items():
        line = next(line for line in text.splitlines() if f" {label} " in f" {line} ")
        assert (decision or "pending") in line
    assert "Δ +" in text or "Δ -" in text


def test_lineage_json_from_the_command_line(built, cli):
    done = cli("lineage", built.root, "--json")
    assert done.exit_code == 0, done.output
    tree = json.loads(done.stdout)
    assert tree["count"] == len(built.labels) and tree["run"]["current_best"] == built.best


def test_lineage_from_history_json_only_iterations_form(tmp_path):
    shutil.copy(SEEDS / "002_history.json", tmp_path / "history.json")
    tree = lineage_view.lineage(tmp_path)
    assert tree["run"]["source"] == "history.json" and tree["count"] == 3
    chain = list(_walk(tree["tree"]))
    assert [n["label"] for n in chain] == ["v0", "v1", "v2"]
    assert [n["decision"] for n in chain] == ["baseline", "won", "won"]
    text = render(lineage_view.print_lineage, tree)
    assert "★ v2" in text and "pass 85%" in text


def test_lineage_from_history_json_only_versions_form(tmp_path):
    shutil.copy(SEEDS / "001_history.json", tmp_path / "history.json")
    tree = lineage_view.lineage(tmp_path)
    assert tree["run"]["form"] == "versions" and tree["count"] == 1
    text = render(lineage_view.print_lineage, tree)
    for shown in ("Current description text", "85%", "90%", "80%"):
        assert shown in text


def test_lineage_from_a_history_json_with_our_extras(built, tmp_path):
    alone = tmp_path / "copied"
    alone.mkdir()
    shutil.copy(built.root / "history.json", alone / "history.json")
    schemas.History.model_validate(json.loads((alone / "history.json").read_text()))
    tree = lineage_view.lineage(alone)
    nodes = {n["label"]: n for n in _walk(tree["tree"])}
    decided = [label for label, d in built.decisions.items() if d]
    assert set(nodes) == set(decided)  # a pending version is not in history.json yet
    assert nodes[built.best]["is_best"]
    assert any(n["ci"] for n in nodes.values())


def test_not_a_run_folder(tmp_path):
    with pytest.raises(BadInput, match="not a run folder"):
        lineage_view.lineage(tmp_path)
    with pytest.raises(BadInput, match="not a run folder"):
        status.status(tmp_path)


def _snapshot(root: Path) -> tuple:
    db = root / "state.db"
    return db.stat().st_mtime_ns, db.read_bytes(), sorted(p.name for p in root.iterdir())


def test_status_is_read_only(built):
    before = _snapshot(built.root)
    info = status.status(built.root)
    render(status.print_status, info)
    assert _snapshot(built.root) == before  # not a byte, not a -wal or -shm file


def test_status_reports_the_run(tmp_path):
    deadline = (datetime.now(UTC) + timedelta(hours=2)).isoformat(timespec="seconds")
    built = build_workspace(tmp_path / "run", versions=5, deadline=deadline)
    info = status.status(built.root)
    json.dumps(info)
    assert info["running"] is False and info["pid"] is None and info["status"] == "stopped"
    assert info["versions"] == 5 and info["pending"] == ["v4"]
    assert info["current_best"]["version"] == built.best
    assert info["budget_usd"] == 5.0 and 0 < info["spent_usd"] < 5.0
    assert info["cache_hits"] == 1 and info["saved_usd"] == pytest.approx(0.125)
    assert 7000 < info["seconds_left"] <= 7200
    assert info["test"]["best"] == built.best and info["stop_reason"] == "max iterations reached"
    sources = {s["key"]: s["source"] for s in info["settings"]}
    assert sources["llm.provider"] == "command-line flag"
    assert sources["budget.usd"] == "--set budget.usd"
    assert sources["evals.runs_per_eval"] == "evals.json eval_config"
    assert "models.grader" not in sources  # config.toml set it to its default: not worth a line
    text = render(status.print_status, info)
    for shown in (
        f"★ {built.best}",
        "$5.00",
        "1 served from the ledger",
        "left",
        "--set budget.usd",
        "SIMULATED",
        "sealed test",
    ):
        assert shown in text


def test_status_while_a_daemon_holds_the_folder(tmp_path):
    built = build_workspace(tmp_path / "run", versions=3, status="running")
    ws = Workspace(built.root)
    writer = Store(ws.state_db)  # as the daemon: WAL, a committed row not yet checkpointed
    try:
        with writer.atomic():
            writer.db["versions"].insert(
                {
                    "label": "v9",
                    "hash": "h9",
                    "parent": "v0",
                    "iteration": 9,
                    "status": "proposed",
                    "summary": "new",
                }
            )
            writer.db["runs"].update(built.root.name, {"last_error": "disk full on /tmp"})
        with lock(ws):
            info = status.status(built.root)
        assert info["running"] is True and info["pid"] == os.getpid()
        assert info["versions"] == 4 and "v9" in info["pending"]
        assert "disk full" in render(status.print_status, info)
    finally:
        writer.close()
    dead = status.status(built.root)  # the row says running, nobody holds the lock
    assert dead["running"] is False
    assert "daemon died" in render(status.print_status, dead)


@pytest.mark.parametrize(
    "reason, said, row",
    [
        ("stopped by SIGINT", "stopped by SIGINT", "by SIGINT"),
        (
            "no win in 3 iterations (plateau)",
            "stopped: no win in 3 iterations (plateau)",
            "no win in 3 iterations (plateau)",
        ),
    ],
)
def test_how_a_run_stopped_is_said_once_by_status_lineage_and_the_review_page(
    built, reason, said, row
):
    with sqlite3.connect(built.root / "state.db") as conn:
        conn.execute("update runs set status = 'stopped', stop_reason = ?", [reason])
    info = status.status(built.root)
    assert info["ended"] == said and progress.snapshot(info)["ended"] == said
    assert said in render(lineage_view.print_lineage, lineage_view.lineage(built.root))
    shown = render(status.print_status, info)
    stopped = next(line for line in shown.splitlines() if line.startswith("stopped "))
    assert stopped.split(None, 1)[1].strip() == row  # was "stopped  stopped by SIGINT"
    page = (Path(show.__file__).parent / "template.html.j2").read_text(encoding="utf-8")
    assert "p.ended ||" in page  # the review page's line says it as status does


def test_show_prints_the_change_numbers_and_evidence(built):
    label = "v1"
    text = render(show.print_version, built.root, label)
    assert "diff --git a/SKILL.md b/SKILL.md" in text and "+- Rule 1:" in text
    assert "Runs of v0 left out the summary" in text
    for e, score in built.scores[label].items():
        assert f"{score:.3f}" in text, e
    assert "failing expectations" in text and "it ends after the table" in text
    assert "selection" in text and built.decisions[label] in text
    assert "Give the summary a fixed three-line template" in text


def test_a_child_stopped_at_screening_shows_its_reason_not_a_line_of_dashes(built):
    screened = {  # what the loop writes for a child it stops at screening
        "decision": "lost",
        "reason": "stopped at screening: mean difference -0.177 over 2 evals is below -0.15 (clearly worse than the parent).",
        "stage": "screening",
        "parent": "v0",
    }
    (built.root / "v1" / "selection.json").write_text(json.dumps(screened), encoding="utf-8")
    text = render(show.print_version, built.root, "v1")
    assert "decision: lost at screening against v0" in text and screened["reason"] in text
    assert "[—, —]" not in text and "— evals × — runs" not in text and "of — runs" not in text


def test_show_does_not_interpret_model_text_as_markup(built):
    with sqlite3.connect(built.root / "state.db") as conn:
        conn.execute("update versions set summary = ? where label = 'v1'", ["[bold red]x[/] y"])
    # the markup itself, not " y": the line ends near the render's width, past the intervals' levels
    assert "[bold red]x[/]" in " ".join(render(show.print_version, built.root, "v1").split())


def test_show_renders_quoted_comparisons_without_tags_and_cuts_at_a_word(built):
    path = built.root / "v1" / "analysis.json"
    analysis = json.loads(path.read_text())
    analysis["comparison_summary"]["comparator_reasoning"] = (
        "20 pairs judged in both orders.\n"
        '<comparison eval="1" run="1" winner="v1" output_a="v0">\nOutput A scores 0.59; output B is '
        "preferred.\n</comparison>\n"
        '<comparison eval="2" run="1" winner="v1" output_a="v1">\nOutput B misses the summa'
    )
    path.write_text(json.dumps(analysis))
    text = " ".join(render(show.print_version, built.root, "v1").split())  # unfolded
    assert (
        "<comparison" not in text and "</comparison>" not in text and "misses the summa" not in text
    )
    assert (
        "comparison eval 1, run 1, winner v1, output A v0: Output A scores 0.59; output B is preferred."
        in text
    )
    assert "comparison eval 2, run 1, winner v1, output A v1: Output B misses the…" in text
    assert readable("x" * 10 + " " + "y" * 10, limit=15) == "x" * 10 + "…"
    assert readable("a b c d e f", limit=7) == "a b c d…"  # the cut fell between words


def test_show_unknown_version_names_the_known_ones(built, cli):
    with pytest.raises(BadInput) as err:
        show.print_version(Console(), built.root, "v42")
    assert "v42" in str(err.value) and "v0, v1" in str(err.value)
    done = cli("show", built.root, "v42")
    assert done.exit_code == 2 and "known versions" in done.stderr


def test_diff_shows_files_and_per_eval_differences(built):
    text = render(show.print_diff, built.root, "v0", built.best)
    assert "diff --git a/SKILL.md b/SKILL.md" in text and "+- Rule" in text
    for e in built.evals:
        a, b = built.scores["v0"][e], built.scores[built.best][e]
        row = next(line for line in text.splitlines() if line.split() and line.split()[0] == str(e))
        assert f"{a:.3f}" in row and f"{b:.3f}" in row and f"{b - a:+.3f}" in row
    with pytest.raises(BadInput, match="v77"):
        show.print_diff(Console(), built.root, "v0", "v77")


def test_diff_into_a_file_is_a_patch_that_applies_to_the_older_version(built, cli, tmp_path):
    ws = Workspace(built.root)
    changed = ws.skill(built.best) / "SKILL.md"
    long_line = "- " + " ".join(["Keep every column's type, range and mean in one table row"] * 4)
    changed.write_text(changed.read_text(encoding="utf-8") + long_line + "\n", encoding="utf-8")
    done = cli("diff", built.root, "v0", built.best)  # stdout is not a terminal here: `> d.patch`
    assert done.exit_code == 0, done.output
    assert done.stdout.startswith("diff --git a/SKILL.md b/SKILL.md") and "per-eval" in done.stderr
    target = Path(shutil.copytree(ws.skill("v0"), tmp_path / "applied"))
    (tmp_path / "d.patch").write_text(done.stdout, encoding="utf-8")
    patched = subprocess.run(
        ["patch", "-p1", "-d", str(target), "-i", str(tmp_path / "d.patch")],
        capture_output=True,
        text=True,
    )
    assert patched.returncode == 0, patched.stdout + patched.stderr
    assert (target / "SKILL.md").read_text(encoding="utf-8") == changed.read_text(encoding="utf-8")


def test_views_of_a_real_simulated_run(simulated):
    root = simulated
    history = json.loads((root / "history.json").read_text())
    before = _snapshot(root)
    tree = lineage_view.lineage(root)
    info = status.status(root)
    assert _snapshot(root) == before
    nodes = {n["label"]: n for n in _walk(tree["tree"])}
    assert {it["version"] for it in history["iterations"]} <= set(nodes)
    assert tree["run"]["current_best"] == history["current_best"] == info["current_best"]["version"]
    assert info["status"] == "stopped" and info["running"] is False and info["spent_usd"] > 0
    best = history["current_best"]
    text = render(show.print_version, root, best)
    bench = json.loads((root / best / "benchmark.json").read_text())
    for row in bench["per_eval"]:
        assert f"{row['with_skill']['mean']:.3f}" in text
    if best != "v0":
        assert "diff --git" in text
        assert "diff --git" in render(show.print_diff, root, "v0", best)
    assert "SIMULATED" in render(lineage_view.print_lineage, tree)


# --- what the numbers rest on and what they do not say ----------------------------------------


def _won_off_the_line(root: Path) -> None:
    """Seed 0 gives v1, v2, v5 won (v5 best) and v4 a tie against v2: make v4 a win that is not
    promoted, the case that read as "v4 won" while another version is best."""
    with sqlite3.connect(root / "state.db") as conn:
        conn.execute("update versions set decision = 'won' where label = 'v4'")
        conn.execute("update decisions set decision = 'won' where version = 'v4'")


def _test_went_backwards(root: Path, best: str, v0: dict, final: dict) -> None:
    test = {
        "evals": [int(e) for e in v0],
        "versions": {
            "v0": {"score": sum(v0.values()) / len(v0), "per_eval": v0},
            best: {"score": sum(final.values()) / len(final), "per_eval": final},
        },
        "best": best,
    }
    with sqlite3.connect(root / "state.db") as conn:
        conn.execute("update runs set test_json = ?", [json.dumps(test)])


def _raw_t_interval(root: Path, label: str) -> None:
    """A benchmark.json as written before intervals were clamped: 0.315 [-0.922, 1.552]."""
    path = root / label / "benchmark.json"
    bench = json.loads(path.read_text())
    bench["run_summary"]["with_skill"]["overall_efficiency"].update(ci_low=-0.922, ci_high=1.552)
    write_json(path, bench, schemas.Benchmark)


def test_a_win_says_against_what_and_why_it_is_not_the_best(built):
    _won_off_the_line(built.root)
    tree = lineage_view.lineage(built.root)
    nodes = {n["label"]: n for n in _walk(tree["tree"])}
    assert nodes["v5"]["is_best"] and nodes["v5"]["verdict"] == "won against its parent v2"
    v4 = nodes["v4"]["verdict"]
    assert v4.startswith("won against its parent v2; not the best: v5 scores higher (")
    assert (
        nodes["v1"]["verdict"]
        == "won against its parent v0; not the best: v5, built on it, won after it"
    )
    assert nodes["v3"]["verdict"] == "lost against its parent v2"
    text = render(lineage_view.print_lineage, tree)
    assert v4 in text
    info = status.status(built.root)
    assert info["other_wins"] == {"v4": v4}  # v1 and v2 are the line v5 was built along
    text = render(status.print_status, info)
    assert f"v4 {v4}" in text and "pass rate " in text and "  won against its parent v2" in text
    assert "(won against" not in text  # "(won against its parent v0 (better on these tasks))"


def test_a_train_gain_that_the_sealed_test_does_not_show_is_flagged_beside_its_train_delta(built):
    nodes = {n["label"]: n for n in _walk(lineage_view.lineage(built.root)["tree"])}
    gain = round(nodes[built.best]["score"] - nodes["v0"]["score"], 4)
    assert gain > 0  # the fixture's best gained on the train evals
    test = {
        "evals": [4],
        "versions": {
            "v0": {"score": 0.5, "per_eval": {"4": 0.5}},
            built.best: {"score": 0.5, "per_eval": {"4": 0.5}},
        },
        "best": built.best,
        "delta": 0.0,
    }
    with sqlite3.connect(built.root / "state.db") as conn:
        conn.execute("update runs set test_json = ?", [json.dumps(test)])
    info = status.status(built.root)
    assert info["test"]["train_delta"] == gain
    warning = (
        f"sealed test: {built.best} gained {gain:+.3f} over v0 on the train evals and "
        "+0.000 on the 1 sealed eval; less than half the gain has shown beyond the tasks "
        "the loop saw"
    )
    assert warning in info["warnings"]
    text = render(status.print_status, info)
    assert f"(on the train evals Δ {gain:+.3f})" in " ".join(text.split())
    assert f"warning: {warning}" in render(
        lineage_view.print_lineage, lineage_view.lineage(built.root)
    )
    carried = {
        **test,
        "versions": {**test["versions"], built.best: {"score": 0.5 + gain / 2 + 0.001}},
    }
    with sqlite3.connect(built.root / "state.db") as conn:
        conn.execute("update runs set test_json = ?", [json.dumps(carried)])
    assert not any(w.startswith("sealed test") for w in status.status(built.root)["warnings"])


def test_a_sealed_test_of_v0_alone_shows_no_difference_and_names_its_evals(built):
    test = {"evals": [3], "versions": {"v0": {"score": 0.475}}, "best": "v0", "delta": 0.0}
    with sqlite3.connect(built.root / "state.db") as conn:
        conn.execute("update runs set test_json = ?", [json.dumps(test)])
    text = " ".join(render(status.print_status, status.status(built.root)).split())
    assert "sealed test eval 3: v0 0.475 (the check of generality" in text
    assert "Δ +0.000" not in text and "evals [3]" not in text  # v0 against itself, a list's repr


def test_a_sealed_test_below_v0_is_flagged_only_when_its_interval_says_so(built):
    # Three sealed evals, each lower: the interval lies below zero, a warning every view shows.
    _test_went_backwards(
        built.root, built.best, {"4": 1.0, "5": 0.9, "6": 0.95}, {"4": 0.8, "5": 0.7, "6": 0.72}
    )
    info = status.status(built.root)
    [warning] = [w for w in info["warnings"] if w.startswith("sealed test")]
    assert warning.startswith(f"sealed test (3 evals): {built.best} 0.740 vs v0 0.950, Δ -0.210 [")
    assert warning.endswith(
        "95% CI over the evals: below v0; the gain may be overfitting to the train evals"
    )
    assert warning in render(status.print_status, info)
    tree = lineage_view.lineage(built.root)
    assert warning in tree["run"]["warnings"]
    assert f"warning: {warning}" in render(lineage_view.print_lineage, tree)


def test_a_sealed_test_of_one_eval_says_it_cannot_tell(built):
    _test_went_backwards(built.root, built.best, {"4": 1.0}, {"4": 0.889})
    assert not [w for w in status.status(built.root)["warnings"] if w.startswith("sealed test")]
    tree = lineage_view.lineage(built.root)
    shown = render(lineage_view.print_lineage, tree)
    said = (
        f"sealed test (1 eval): {built.best} 0.889 vs v0 1.000, Δ -0.111 (no interval from one "
        "eval): cannot tell"
    )
    assert tree["run"]["sealed"] == said and " ".join(shown.split()).count(said) == 1


def test_small_splits_are_called_small_by_status_and_not_repeated_by_lineage(built):
    info = status.status(built.root)  # 3 train evals, 1 sealed test eval
    small = [w for w in info["warnings"] if w.startswith("small suite")]
    assert (
        small
        and "train has 3 evals and the sealed test 1" in small[0]
        and "add 14 evals" in small[0]
    )
    assert "small suite: train has 3 evals" in render(status.print_status, info)
    tree = lineage_view.lineage(built.root)
    assert any(w.startswith("small suite") for w in tree["run"]["warnings"])  # in --json
    assert "small suite" not in render(lineage_view.print_lineage, tree)  # said by every view


def test_intervals_in_the_views_stay_in_range_and_say_how_many_evals(built):
    _raw_t_interval(built.root, built.best)
    tree = lineage_view.lineage(built.root)
    best = next(n for n in _walk(tree["tree"]) if n["label"] == built.best)
    assert best["score_ci"] == [0.0, 1.0] and best["score_evals"] == len(built.evals)
    text = render(lineage_view.print_lineage, tree)
    assert "-0.922" not in text and "1.552" not in text
    assert f"[0.000, 1.000] 95% CI (n={len(built.evals)} evals)" in text
    # beside Δ's interval too, with the level of the decision that made it
    assert f"] 95% CI, the decision's (n={len(built.evals)} evals)  score" in text
    info = status.status(built.root)
    assert info["current_best"]["score_ci"] == [0.0, 1.0]
    assert f"[0.000, 1.000] 95% CI (n={len(built.evals)} evals)" in render(
        status.print_status, info
    )
    shown = render(show.print_version, built.root, built.best)
    assert "-0.922" not in shown and f"(n={len(built.evals)} evals)" in shown


def test_a_view_of_a_state_db_run_never_reads_history_json_back(tmp_path):
    """history.json is written from state.db for other tools; a view of the run reads state.db
    alone, so a history.json edited by hand (or by another tool) changes nothing it shows."""
    built = build_workspace(tmp_path / "run", versions=3, simulated=False)
    before = read.load(built.root)
    assert before.simulated is False and before.source == "state.db"
    ws = Workspace(built.root)
    ws.history.write_text(
        json.dumps({"simulated": True, "test": {"versions": {"v9": {"score": 1.0}}}}),
        encoding="utf-8",
    )
    after = read.load(built.root)
    assert after.simulated is False
    assert after.run.test == before.run.test
    assert after.history == {}
