"""`optimizer run --target description` as a user drives it, on the simulated router: recall goes
up from a narrow description, failed probes stay missing data, a constant signal stops the run,
the sealed test split never reaches the proposer, bad trigger evals exit 2, and a killed run resumes.
The command line runs in this process (the `cli` fixture); the killed run is a real process."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import time
from collections import Counter
from pathlib import Path

import pytest
from inprocess import use_simulator
from launcher import launch

from optimizer.config import Sim
from optimizer.inputs import triggers as trigger
from optimizer.inputs.artifacts import check_artifact
from optimizer.inputs.skillmd import set_description
from optimizer.sim import Simulator, detect_role
from optimizer.sim.protocol import error_reply

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "tests" / "fixtures" / "csv-report"
NARROW = "Profiles the columns of a CSV file."
SHOULD = [
    "Give me an overview of the survey spreadsheet export in summary.md",
    "Write a summary of this tabular dataset for my manager",
    "What is in this spreadsheet export? I need an overview of the dataset",
    "Profile the columns of the survey dataset, as a summary",
    "An overview of the tabular export from our billing system",
    "Describe the dataset in the spreadsheet export",
    "A report on the columns of the survey export, with an overview",
    "Tabular data overview for the finance export",
    # More queries, so validation holds enough of them to conclude anything: with 4, even an
    # exact test cannot reach 5% (the promotion rule now controls its error here too)
    "Summarise the dataset in this spreadsheet for the team",
    "An overview of the survey export, please",
    "Give me a summary of the tabular billing data",
    "What does this spreadsheet export contain? A short overview",
    "Profile the dataset from the survey as a summary report",
    "Overview of the columns in the finance spreadsheet export",
    "Describe this tabular dataset in a summary",
    "A summary of the survey spreadsheet, with an overview of each column",
]
SHOULD_NOT = [
    "Convert orders.csv to JSON",
    "Draw a bar chart of revenue by month",
    "Write a SQL query for the top customers",
    "Translate this paragraph into German",
    "Schedule a meeting with the design team next week",
    "Review my pull request for bugs",
    "Resize these photos for the website",
    "Draft an email declining the invitation",
    "Book a flight to Berlin for Monday",
    "Fix the failing unit test in the parser",
    "Compose a birthday poem for my sister",
    "Set up a cron job for nightly backups",
    "Explain how TCP handshakes work",
    "Rename all variables to snake_case",
    "Plan a three-day trip to Lisbon",
    "Write a cover letter for a design job",
]


class Instrumented(Simulator):
    """The simulator of the default settings, instrumented: every request body is kept, and the
    trigger requests of chosen queries get HTTP 500 (the service failing, not the router deciding)."""

    def __init__(self, fail: list[str] | None = None) -> None:
        default = Simulator.from_settings(Sim())
        super().__init__(seed=default.seed, knobs=default.knobs, service=default.service)
        self.fail = set(fail or [])
        self.requests: list[dict] = []

    def handle(self, method, target, headers, raw):
        body = json.loads(raw) if raw else None
        if isinstance(body, dict) and body.get("messages"):
            role = detect_role(body, {k.lower(): v for k, v in headers.items()})
            self.requests.append({"role": role, "body": body})
            if role == "trigger" and body["messages"][0].get("content") in self.fail:
                return error_reply(500, "api_error", "Internal server error (forced by the test)")
        return super().handle(method, target, headers, raw)


def make_skill(tmp_path: Path, description: str = NARROW, name: str = "csv-report") -> Path:
    skill = tmp_path / "skill"
    shutil.copytree(EXAMPLE, skill)
    md = skill / "SKILL.md"
    md.write_text(
        set_description(md.read_text(), description).replace("name: csv-report", f"name: {name}")
    )
    items = [{"query": q, "should_trigger": True} for q in SHOULD]
    items += [{"query": q, "should_trigger": False} for q in SHOULD_NOT]
    (skill / "evals" / "trigger_evals.json").write_text(json.dumps(items, indent=1))
    return skill


def run(cli, skill: Path, run_dir: Path, *extra: str, code: int = 0):
    result = cli(
        "run", skill, "--target", "description", "--provider", "sim", "--run-dir", run_dir, *extra
    )
    assert result.exit_code == code, result.output
    return result


def history(run_dir: Path) -> dict:
    return json.loads((run_dir / "history.json").read_text())


def stage(run_dir: Path) -> str:
    try:
        conn = sqlite3.connect(f"file:{run_dir / 'state.db'}?mode=ro", uri=True)
        try:
            row = conn.execute("select activity from runs").fetchone()
        finally:
            conn.close()
        return (row[0] or "") if row else ""
    except sqlite3.Error:
        return ""


def split_of(run_dir: Path) -> dict:
    conn = sqlite3.connect(run_dir / "state.db")
    try:
        return json.loads(conn.execute("select split_json from runs").fetchone()[0])
    finally:
        conn.close()


@pytest.mark.slow
def test_a_narrow_description_gains_recall_and_the_files_hold_it(tmp_path, cli):
    run_dir = tmp_path / "run"
    run(cli, make_skill(tmp_path), run_dir, "--max-iterations", "3")
    h = history(run_dir)
    assert check_artifact(run_dir / "history.json", None, True).ok
    v0 = h["versions"][0]
    best = next(v for v in h["versions"] if v["is_current_best"])
    assert v0["description"] == NARROW and best["version"] != "v0"
    assert best["recall"] > v0["recall"] + 0.3  # train and validation together
    for split in ("train", "validation"):
        assert best["splits"][split]["recall"] > v0["splits"][split]["recall"]
    assert best["splits"]["validation"]["pass_rate"] > v0["splits"]["validation"]["pass_rate"]
    assert best["description"].startswith(NARROW) and len(best["description"]) <= 1024
    assert h["test"]["best"] == best["version"] and set(h["test"]["versions"]) == {
        "v0",
        best["version"],
    }
    assert h["simulated"] is True and h["target"] == "description"
    conn = sqlite3.connect(run_dir / "state.db")
    decided = dict(conn.execute("select version, decision from decisions").fetchall())
    assert decided[best["version"]] == "won"
    assert set(decided) == {v["version"] for v in h["versions"]} - {"v0"}
    selection = json.loads((run_dir / best["version"] / "selection.json").read_text())
    assert selection["split"] == "validation" and selection["delta"] > 0
    lineage = cli("lineage", run_dir, "--json")
    assert lineage.exit_code == 0 and json.loads(lineage.stdout), lineage.output


@pytest.mark.slow
def test_failed_probes_are_missing_data_never_negatives(tmp_path, cli, monkeypatch):
    skill = make_skill(tmp_path)
    sp = trigger.split(trigger.load(skill), seed=0)
    queries = {q.id: q for q in trigger.load(skill).queries}
    dev = sp.train + sp.validation
    failing = [
        next(q for q in dev if queries[q].should_trigger),
        next(q for q in dev if not queries[q].should_trigger),
    ]
    run_dir = tmp_path / "run"
    use_simulator(monkeypatch, Instrumented(fail=[queries[q].query for q in failing]))
    run(
        cli,
        skill,
        run_dir,
        "--max-iterations",
        "1",
        "--set",
        "llm.max_attempts=2",
        "--set",
        "llm.backoff_initial_s=0",
    )
    v0 = history(run_dir)["versions"][0]
    assert v0["probe_errors"] == 2 * 3 and v0["missing_queries"] == 2
    assert v0["queries"] == len(dev) - 2
    per_query = json.loads((run_dir / "v0" / "trigger.json").read_text())
    for split in ("train", "validation"):
        assert not {str(q) for q in failing} & set(per_query[split]["per_query"])
    conn = sqlite3.connect(run_dir / "state.db")
    rows = conn.execute(
        "select status, skill_invoked, error from trials where version = 'v0' "
        f"and eval_id in ({failing[0]}, {failing[1]})"
    ).fetchall()
    assert len(rows) == 6 and {r[:2] for r in rows} == {("error", None)}
    assert all("failed after 2 attempts" in r[2] for r in rows)
    # the recall of v0 is over the should-trigger queries that were observed, the failed one out
    observed = [q for q, v in per_query["train"]["per_query"].items() if v["should_trigger"]]
    observed += [q for q, v in per_query["validation"]["per_query"].items() if v["should_trigger"]]
    assert len(observed) == sum(queries[q].should_trigger for q in dev) - 1


@pytest.mark.slow
def test_a_constant_signal_stops_the_run_with_a_reason(tmp_path, cli):
    skill = make_skill(tmp_path, "Zebra xylophone marimba.", name="quokka-tool")
    run_dir = tmp_path / "run"
    proc = run(cli, skill, run_dir, "--max-iterations", "3")
    assert "constant signal" in proc.stdout
    h = history(run_dir)
    assert [v["version"] for v in h["versions"]] == ["v0"]
    assert h["versions"][0]["constant_signal"] == "never"
    assert h["stop_reason"].startswith("constant signal: v0's description triggered on none")
    conn = sqlite3.connect(run_dir / "state.db")
    assert conn.execute("select count(*) from calls where role = 'proposer'").fetchone()[0] == 0


@pytest.mark.slow
def test_the_sealed_test_queries_never_reach_the_proposer(tmp_path, cli, monkeypatch):
    sim = Instrumented()
    use_simulator(monkeypatch, sim)
    run_dir = tmp_path / "run"
    run(cli, make_skill(tmp_path), run_dir, "--max-iterations", "2")
    sp = split_of(run_dir)
    text = {q["id"]: q["query"] for q in sp["queries"]}
    requests = sim.requests
    proposer = [
        (i, json.dumps(r["body"], ensure_ascii=False))
        for i, r in enumerate(requests)
        if r["role"] == "proposer"
    ]
    assert proposer
    for _, body in proposer:
        for q in sp["test"] + sp["validation"]:
            assert text[q] not in body
    assert any(text[q] in body for q in sp["train"] for _, body in proposer)  # the capture works
    sealed = [
        i
        for i, r in enumerate(requests)
        if r["role"] == "trigger"
        and r["body"]["messages"][0]["content"] in {text[q] for q in sp["test"]}
    ]
    assert sealed and min(sealed) > max(i for i, _ in proposer)


def test_bad_trigger_evals_exit_2_with_one_sentence_and_write_nothing(tmp_path, cli):
    skill = make_skill(tmp_path)
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps(
            [
                {"query": "Summarise a.csv", "should_trigger": True},
                {"query": "", "should_trigger": False},
            ]
        )
    )
    run_dir = tmp_path / "run"
    proc = run(cli, skill, run_dir, "--evals", bad, code=2)
    assert "Traceback" not in proc.output
    assert f"error: {bad}: [1].query is empty; write the user's request" in proc.stderr
    assert not run_dir.exists()
    (skill / "evals" / "trigger_evals.json").unlink()
    proc = run(cli, skill, run_dir, code=2)
    assert "trigger_evals.json: missing" in proc.stderr


@pytest.mark.slow
def test_kill_9_in_the_middle_then_resume_ends_with_the_same_lineage(tmp_path, cli):
    skill = make_skill(tmp_path)
    seeds = ("--max-iterations", "2", "--set", "loop.seed=1", "--set", "sim.seed=1")
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    run(cli, skill, straight, *seeds)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPTIMIZER_", "ANTHROPIC_"))}
    with open(os.devnull, "w") as null:
        proc = launch(
            [
                "run",
                str(skill),
                "--target",
                "description",
                "--provider",
                "sim",
                "--run-dir",
                str(killed),
                *seeds,
                "--set",
                "sim.latency_ms=40",
            ],
            cwd=ROOT,
            env=env,
            stdout=null,
            stderr=null,
        )
    try:
        deadline = time.monotonic() + 60
        # Polls another process's progress: killed while it probes a child description.
        while not re.match(r"v[1-9]\d*: trigger probe", stage(killed)):
            assert proc.poll() is None and time.monotonic() < deadline, "never probed a child"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    resumed = cli("resume", killed, "--set", "sim.latency_ms=0")
    assert resumed.exit_code == 0, resumed.output

    def lineage(run_dir):
        return [
            (v["version"], v.get("parent"), v["decision"], v["description"], v["pass_rate"])
            for v in history(run_dir)["versions"]
        ]

    assert lineage(killed) == lineage(straight)
    assert history(killed)["test"] == history(straight)["test"]
    paid = Counter(
        json.loads(line).get("hash")
        for line in (killed / "optimizer.log").read_text().splitlines()
        if json.loads(line).get("event") == "llm.call_completed"
    )
    assert paid and max(paid.values()) == 1  # the ledger answered every repeated request
