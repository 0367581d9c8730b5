"""A corpus of bad input, one fault per case, through the real command line: flags, config.toml,
SKILL.md, evals.json in each dialect, trigger evals, feedback.json, and damaged run folders. Each
gets exit 2 (1 for a damaged database) and one clear line per problem, never a traceback, and
nothing is written outside the run folder (a bad `run` writes nothing at all). The corpus runs in
this process (typer's CliRunner, stderr apart from stdout); a few cases also run as real processes,
through `python -m optimizer` and the `optimizer` console script."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from test_daemon import EXAMPLE, ROOT
from test_faults import reference_run
from typer.testing import CliRunner

from optimizer import logs
from optimizer.cli import app


@dataclass
class Ctx:
    """One case's sandbox: a copy of the example skill, a scratch cwd and HOME, a run folder."""

    root: Path
    skill: Path
    run: Path
    cwd: Path
    reference: Callable[[], Path]  # the finished run, made on first use (once per session)
    finished_run: bool  # the case says it copies the finished run
    env: dict[str, str] = field(default_factory=dict)

    def write(self, rel: str, content: str | bytes) -> Path:
        path = self.skill / rel if not rel.startswith("/") else Path(rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        return path

    def evals(
        self, mutate: Callable[[dict], object] | None = None, *, raw: str | None = None
    ) -> Path:
        data = json.loads((EXAMPLE / "evals" / "evals.json").read_text())
        if mutate is not None:
            changed = mutate(data)  # edits in place, or returns a new document
            data = changed if isinstance(changed, dict) else data
        return self.write("evals/evals.json", raw if raw is not None else json.dumps(data))

    def file(self, name: str, content: str | bytes) -> Path:
        path = self.root / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        return path

    def run_copy(self) -> Path:
        """A finished run folder to damage (the shared reference stays untouched)."""
        assert self.finished_run, "a case that copies the finished run says so: finished_run=True"
        shutil.copytree(self.reference(), self.run)
        (self.run / "optimizer.pid").unlink(missing_ok=True)
        return self.run


def run_args(c: Ctx, *extra: str) -> list[str]:
    return [
        "run",
        str(c.skill),
        "--run-dir",
        str(c.run),
        "--provider",
        "sim",
        "--max-iterations",
        "1",
        *extra,
    ]


# The three dialects of evals.json (docs/design.md §6): the example's extended form, plus these two.
def expectations_dialect(d: dict) -> dict:
    return {
        "skill_name": "csv-report",
        "evals": [
            {
                "id": e["id"],
                "prompt": e["prompt"],
                "expected_output": e["expected_output"],
                "files": e["files"],
                "expectations": e["expectations"],
            }
            for e in d["evals"]
        ],
    }


def assertions_dialect(d: dict) -> dict:
    return {
        "skill_name": "csv-report",
        "evals": [
            {
                "id": e["id"],
                "prompt": e["prompt"],
                "expected_output": e["expected_output"],
                "files": e["files"],
                "assertions": [
                    {"id": f"a{i}", "text": t} for i, t in enumerate(e["expectations"], 1)
                ],
            }
            for e in d["evals"]
        ],
    }


def first(d: dict) -> dict:
    return d["evals"][0]


def damage_pages(path: Path) -> None:
    data = bytearray(path.read_bytes())
    for offset in range(8 * 4096, len(data) - 4096, 40 * 4096):
        data[offset : offset + 4096] = b"\xff" * 4096
    path.write_bytes(bytes(data))


def break_column(path: Path) -> None:
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("update versions set split_scores_json = 'oops' where label = 'v0'")
    conn.close()


def truncate_half(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def without_db(c: Ctx) -> Path:
    run = c.run_copy()
    for name in ("state.db", "state.db-wal", "state.db-shm"):
        (run / name).unlink(missing_ok=True)
    return run


@dataclass(frozen=True)
class Case:
    id: str
    build: Callable[[Ctx], list[str]]  # sets the fault up, returns the command's arguments
    code: int = 2
    says: str = ""  # a word the message must contain (the file, the key or the fix)
    # It damages a copy of the finished run (Ctx.run_copy), which takes seconds to make: slow.
    finished_run: bool = False


def trigger_case(id: str, data: object, says: str) -> Case:
    def build(c: Ctx) -> list[str]:
        c.write("evals/trigger_evals.json", data if isinstance(data, str) else json.dumps(data))
        return run_args(c, "--target", "description")

    return Case(id, build, says=says)


def db_case(id: str, damage: Callable[[Path], object], command: str) -> Case:
    """A damaged state.db under `command`: the views refuse it as bad input (2), resume as a
    failure of the work (1)."""

    def build(c: Ctx) -> list[str]:
        damage(c.run_copy() / "state.db")
        return [command, str(c.run)]

    return Case(id, build, code=1 if command == "resume" else 2, says="state.db", finished_run=True)


GOOD_QUERIES = [
    {"query": "profile this csv file", "should_trigger": True},
    {"query": "what is the capital of peru", "should_trigger": False},
]
SKILL_MD = (EXAMPLE / "SKILL.md").read_text()
BODY = SKILL_MD.split("---", 2)[2]

CASES = [
    # -- command-line flags and environment
    Case(
        "flag: missing skill folder",
        lambda c: run_args(c)[:1] + [str(c.root / "nope")] + run_args(c)[2:],
        says="nope",
    ),
    Case(
        "flag: skill is a file",
        lambda c: ["run", str(c.skill / "SKILL.md"), "--run-dir", str(c.run)],
        says="SKILL.md",
    ),
    Case("flag: unknown setting", lambda c: run_args(c, "--set", "loop.sed=1"), says="loop.seed"),
    Case(
        "flag: setting of the wrong type",
        lambda c: run_args(c, "--set", "loop.seed=abc"),
        says="loop.seed",
    ),
    Case(
        "flag: --set without =",
        lambda c: run_args(c, "--set", "noequals"),
        says="section.key=value",
    ),
    Case(
        "flag: value not among the choices",
        lambda c: run_args(c, "--set", "execute.executor=docker"),
        says="execute.executor",
    ),
    *[
        Case(
            f"flag: unknown --executor for {cmd}",
            build,
            says="--executor 'docker': use one of anthropic, claude-code, command (execute.executor).",
        )
        for cmd, build in (
            ("run", lambda c: run_args(c, "--executor", "docker")),
            (
                "benchmark",
                lambda c: ["benchmark", str(c.skill), "--out", str(c.run), "--executor", "docker"],
            ),
            (
                "execute",
                lambda c: [
                    "execute",
                    str(c.skill),
                    "--eval",
                    "1",
                    "--out",
                    str(c.run),
                    "--executor",
                    "docker",
                ],
            ),
        )
    ],
    Case(
        "flag: value out of range",
        lambda c: run_args(c, "--set", "sim.fault_rate=2"),
        says="sim.fault_rate",
    ),
    Case(
        "flag: negative iterations",
        lambda c: run_args(c, "--max-iterations", "-1"),
        says="max_iterations",
    ),
    Case(
        "flag: negative budget",
        lambda c: run_args(c, "--budget-usd", "-5"),
        says="--budget-usd -5: give a finite amount of US dollars above 0",
    ),
    Case(
        "flag: deadline not a time", lambda c: run_args(c, "--deadline", "tomorrow"), says="HH:MM"
    ),
    Case("flag: unknown target", lambda c: run_args(c, "--target", "sideways"), says="--target"),
    Case(
        "flag: unknown provider",
        lambda c: ["run", str(c.skill), "--run-dir", str(c.run), "--provider", "openai"],
        says="llm.provider",
    ),
    Case(
        "flag: --budget-usd inf",
        lambda c: run_args(c, "--budget-usd", "inf"),
        says="--budget-usd inf: give a finite amount of US dollars above 0",
    ),
    Case(
        "set: budget.usd=inf",
        lambda c: run_args(c, "--set", "budget.usd=inf"),
        says="'budget.usd' must be",
    ),
    Case(
        "flag: --budget-usd 0",
        lambda c: run_args(c, "--budget-usd", "0"),
        says="--budget-usd 0: give a finite amount of US dollars above 0",
    ),
    Case(
        "flag: --until in the past",
        lambda c: run_args(c, "--until", "2020-01-01T00:00"),
        says="--until 2020-01-01T00:00: that time has passed",
    ),
    Case(
        "models: a retired model",
        lambda c: run_args(c, "--set", "models.grader=claude-opus-4-1"),
        says="models.grader = claude-opus-4-1: the Claude API retired this model on 2026-08-05",
    ),
    Case(
        "models: a name the API does not serve, with the simulator",
        lambda c: run_args(c, "--set", "models.executor=claude-sonnet-9"),
        says="models.executor = claude-sonnet-9: not a model the Claude API serves",
    ),
    Case(
        "models: a model without a price, on the Messages API",
        lambda c: [
            "run",
            str(c.skill),
            "--run-dir",
            str(c.run),
            "--dry-run",
            "--provider",
            "anthropic",
            "--set",
            "models.proposer=claude-sonnet-9",
        ],
        says="no price for model claude-sonnet-9 (models.proposer = claude-sonnet-9)",
    ),
    Case(
        "flag: missing --evals file",
        lambda c: run_args(c, "--evals", str(c.root / "nope.json")),
        says="nope.json",
    ),
    Case(
        "flag: missing --config file",
        lambda c: run_args(c, "--config", str(c.root / "nope.toml")),
        says="nope.toml",
    ),
    Case(
        "flag: --from a folder that is no run",
        lambda c: run_args(c, "--from", str(c.cwd)),
        says="--from",
    ),
    Case(
        "env: unknown OPTIMIZER_ variable",
        lambda c: c.env.update(OPTIMIZER_LOOP_SEEDS="1") or run_args(c),
        says="loop.seed",
    ),
    Case(
        "env: OPTIMIZER_ value of the wrong type",
        lambda c: c.env.update(OPTIMIZER_EVALS_RUNS_PER_EVAL="zero") or run_args(c),
        says="runs_per_eval",
    ),
    Case(
        "flag: resume a folder that is no run",
        lambda c: ["resume", str(c.cwd)],
        says="not a run folder",
    ),
    Case(
        "flag: export an unknown version",
        lambda c: ["export", str(c.run_copy()), "v99", "--to", str(c.run / "out")],
        says="v99",
        finished_run=True,
    ),
    Case(
        "flag: check-artifact with an unknown kind",
        lambda c: ["check-artifact", str(c.file("x.json", "{}")), "--kind", "nonsense"],
        says="--kind",
    ),
    # -- config.toml
    Case(
        "config.toml: bad TOML syntax",
        lambda c: run_args(c, "--config", str(c.file("config.toml", "[loop\nseed = 1\n"))),
        says="config.toml",
    ),
    Case(
        "config.toml: unknown key",
        lambda c: run_args(c, "--config", str(c.file("config.toml", "[loop]\nseeds = 1\n"))),
        says="loop.seed",
    ),
    Case(
        "config.toml: unknown section",
        lambda c: run_args(c, "--config", str(c.file("config.toml", "[looop]\nseed = 1\n"))),
        says="config.toml",
    ),
    Case(
        "config.toml: wrong type",
        lambda c: run_args(c, "--config", str(c.file("config.toml", '[loop]\nseed = "five"\n'))),
        says="loop.seed",
    ),
    Case(
        "config.toml: a key outside any section",
        lambda c: run_args(c, "--config", str(c.file("config.toml", "seed = 1\n"))),
        says="seed",
    ),
    Case(
        "config.toml: not UTF-8",
        lambda c: run_args(c, "--config", str(c.file("config.toml", b"\xff\xfe[loop]\x00"))),
        says="config.toml",
    ),
    Case(
        "config.toml: negative price",
        lambda c: run_args(
            c,
            "--config",
            str(
                c.file(
                    "config.toml",
                    '[prices."claude-opus-4-6"]\ninput = -1.0\noutput = 1.0\ncache_write = 1.0\ncache_read = 1.0\n',
                )
            ),
        ),
        says="prices",
    ),
    # -- SKILL.md
    Case(
        "SKILL.md: missing",
        lambda c: (c.skill / "SKILL.md").unlink() or run_args(c),
        says="SKILL.md",
    ),
    Case(
        "SKILL.md: no front matter",
        lambda c: c.write("SKILL.md", "Just instructions.\n") and run_args(c),
        says="SKILL.md",
    ),
    Case(
        "SKILL.md: front matter never closed",
        lambda c: c.write("SKILL.md", "---\nname: csv-report\ndescription: x\n") and run_args(c),
        says="SKILL.md",
    ),
    Case(
        "SKILL.md: no name",
        lambda c: (
            c.write("SKILL.md", "---\ndescription: Profiles CSV files.\n---\n" + BODY)
            and run_args(c)
        ),
        says="name",
    ),
    Case(
        "SKILL.md: front matter not YAML",
        lambda c: c.write("SKILL.md", "---\nname: [csv\n---\n" + BODY) and run_args(c),
        says="SKILL.md",
    ),
    Case(
        "SKILL.md: front matter a list",
        lambda c: c.write("SKILL.md", "---\n- a\n- b\n---\n" + BODY) and run_args(c),
        says="SKILL.md",
    ),
    Case(
        "SKILL.md: not UTF-8",
        lambda c: c.write("SKILL.md", b"---\nname: csv\xff\xfe\n---\n") and run_args(c),
        says="UTF-8",
    ),
    Case(
        "SKILL.md: name with spaces and capitals",
        lambda c: (
            c.write("SKILL.md", SKILL_MD.replace("name: csv-report", "name: CSV Report!"))
            and run_args(c)
        ),
        says="name",
    ),
    # -- evals.json, every dialect
    Case(
        "evals.json: missing",
        lambda c: (c.skill / "evals" / "evals.json").unlink() or run_args(c),
        says="evals.json",
    ),
    Case(
        "evals.json: not JSON",
        lambda c: c.evals(raw='{"evals": [') and run_args(c),
        says="evals.json",
    ),
    Case(
        "evals.json: top level a list",
        lambda c: c.evals(raw="[]") and run_args(c),
        says="evals.json",
    ),
    Case(
        "evals.json: no evals",
        lambda c: c.evals(lambda d: d.update(evals=[])) and run_args(c),
        says="evals",
    ),
    Case(
        "evals.json: NaN in a number",
        lambda c: (
            c.evals(
                raw='{"skill_name": "csv-report", "evals": [{"id": NaN, "prompt": "p", "expectations": ["e"]}]}'
            )
            and run_args(c)
        ),
        says="evals.json",
    ),
    Case(
        "evals.json: not UTF-8",
        lambda c: (
            c.evals(raw="")
            and c.write("evals/evals.json", b'{"evals": ["\xff\xfe"]}')
            and run_args(c)
        ),
        says="evals.json",
    ),
    Case(
        "evals.json: prompt missing",
        lambda c: c.evals(lambda d: first(d).pop("prompt")) and run_args(c),
        says="prompt",
    ),
    Case(
        "evals.json: duplicate ids",
        lambda c: c.evals(lambda d: d["evals"][1].update(id=d["evals"][0]["id"])) and run_args(c),
        says="id",
    ),
    Case(
        "evals.json: input file escapes the skill",
        lambda c: c.evals(lambda d: first(d).update(files=["../../../etc/passwd"])) and run_args(c),
        says="etc/passwd",
    ),
    Case(
        "evals.json: input file an absolute path",
        lambda c: c.evals(lambda d: first(d).update(files=["/etc/passwd"])) and run_args(c),
        says="/etc/passwd",
    ),
    Case(
        "evals.json: input file missing",
        lambda c: (
            c.evals(lambda d: first(d).update(files=["evals/files/nope.csv"])) and run_args(c)
        ),
        says="nope.csv",
    ),
    Case(
        "evals.json: eval_config runs_per_eval 0",
        lambda c: c.evals(lambda d: d["eval_config"].update(runs_per_eval=0)) and run_args(c),
        says="runs_per_eval",
    ),
    Case(
        "expectations dialect: an expectation not text",
        lambda c: (
            c.evals(lambda d: (e := expectations_dialect(d), first(e).update(expectations=[3]))[0])
            and run_args(c)
        ),
        says="expectations",
    ),
    Case(
        "expectations dialect: empty expectation list",
        lambda c: (
            c.evals(lambda d: (e := expectations_dialect(d), first(e).update(expectations=[]))[0])
            and run_args(c)
        ),
        says="expectations",
    ),
    Case(
        "assertions dialect: an assertion without text",
        lambda c: (
            c.evals(
                lambda d: (e := assertions_dialect(d), first(e)["assertions"][0].pop("text"))[0]
            )
            and run_args(c)
        ),
        says="text",
    ),
    Case(
        "assertions dialect: assertions not a list",
        lambda c: (
            c.evals(
                lambda d: (e := assertions_dialect(d), first(e).update(assertions="all good"))[0]
            )
            and run_args(c)
        ),
        says="assertions",
    ),
    Case(
        "extended dialect: unknown structural check type",
        lambda c: (
            c.evals(lambda d: first(d)["structural_expectations"][0].update(type="file_smells"))
            and run_args(c)
        ),
        says="file_smells",
    ),
    Case(
        "extended dialect: invalid regex",
        lambda c: (
            c.evals(
                lambda d: first(d)["structural_expectations"].append(
                    {
                        "id": "S9",
                        "type": "file_contains",
                        "description": "d",
                        "pattern": "report.md",
                        "match_regex": "([",
                        "critical": False,
                    }
                )
            )
            and run_args(c)
        ),
        says="match_regex",
    ),
    Case(
        "extended dialect: negative rubric weight",
        lambda c: (
            c.evals(lambda d: first(d)["quality_rubric"]["dimensions"][0].update(weight=-2))
            and run_args(c)
        ),
        says="weight",
    ),
    Case(
        "extended dialect: structural check without its pattern",
        lambda c: (
            c.evals(lambda d: first(d)["structural_expectations"][0].pop("pattern")) and run_args(c)
        ),
        says="pattern",
    ),
    # -- trigger evals (`--target description`)
    trigger_case("trigger evals: not a list", {"queries": GOOD_QUERIES}, "trigger_evals.json"),
    trigger_case("trigger evals: empty", [], "trigger_evals.json"),
    trigger_case("trigger evals: not JSON", '[{"query": ', "trigger_evals.json"),
    trigger_case(
        "trigger evals: item without query", [{"should_trigger": True}, *GOOD_QUERIES], "query"
    ),
    trigger_case(
        "trigger evals: should_trigger as text",
        [{"query": "make a report", "should_trigger": "yes"}, *GOOD_QUERIES],
        "should_trigger",
    ),
    trigger_case(
        "trigger evals: one class only",
        [q for q in GOOD_QUERIES if q["should_trigger"]],
        "should_trigger",
    ),
    trigger_case("trigger evals: a repeated query", [*GOOD_QUERIES, GOOD_QUERIES[0]], "repeats"),
    # -- feedback.json (written by `optimizer review`, read by the proposer)
    Case(
        "feedback.json: not JSON",
        lambda c: ["check-artifact", str(c.file("feedback.json", '{"reviews": ['))],
        says="feedback.json",
    ),
    Case(
        "feedback.json: reviews not a list",
        lambda c: [
            "check-artifact",
            str(c.file("feedback.json", '{"reviews": {}, "status": "complete"}')),
        ],
        says="reviews",
    ),
    Case(
        "feedback.json: review without run_id",
        lambda c: [
            "check-artifact",
            str(
                c.file(
                    "feedback.json",
                    '{"reviews": [{"feedback": "ok", "timestamp": "t"}], "status": "complete"}',
                )
            ),
        ],
        says="run_id",
    ),
    Case(
        "feedback.json: feedback not text",
        lambda c: [
            "check-artifact",
            str(
                c.file(
                    "feedback.json",
                    '{"reviews": [{"run_id": "v1-eval-1-with_skill-run-1", "feedback": 42, "timestamp": "t"}], "status": "complete"}',
                )
            ),
        ],
        says="feedback",
    ),
    Case(
        "feedback.json: status missing",
        lambda c: ["check-artifact", str(c.file("feedback.json", '{"reviews": []}'))],
        says="status",
    ),
    Case(
        "feedback.json: binary",
        lambda c: ["check-artifact", str(c.file("feedback.json", b"\x00\x01\x02"))],
        says="feedback.json",
    ),
    # -- damaged run folders
    *[
        db_case(f"state.db {how}: {cmd}", damage, cmd)
        for how, damage in (
            ("random bytes", lambda p: p.write_bytes(os.urandom(8192))),
            ("cut in half", truncate_half),
            ("empty", lambda p: p.write_bytes(b"")),
            ("with damaged pages", damage_pages),
        )
        for cmd in ("lineage", "status", "resume")
    ],
    # a JSON column that is not an object: the store's StoreError, said as one sentence
    *[
        db_case(f"state.db with a broken JSON column: {cmd}", break_column, cmd)
        for cmd in ("lineage", "status")
    ],
    Case(
        "history.json not JSON: lineage",
        lambda c: (
            (without_db(c) / "history.json").write_text('{"iterations": [')
            and ["lineage", str(c.run)]
        ),
        says="history.json",
        finished_run=True,
    ),
    Case(
        "history.json wrong types: lineage",
        lambda c: (
            (without_db(c) / "history.json").write_text(
                '{"skill_name": 3, "iterations": [{"version": 5}]}'
            )
            and ["lineage", str(c.run)]
        ),
        says="history.json",
        finished_run=True,
    ),
    Case(
        "history.json neither form: lineage",
        lambda c: (
            (without_db(c) / "history.json").write_text('{"iterations": "all"}')
            and ["lineage", str(c.run)]
        ),
        says="history.json",
        finished_run=True,
    ),
    Case(
        "history.json but no state.db: resume",
        lambda c: without_db(c) and ["resume", str(c.run)],
        says="state.db",
        finished_run=True,
    ),
    Case(
        "run.toml not TOML: resume",
        lambda c: (c.run_copy() / "run.toml").write_text("[loop\n") and ["resume", str(c.run)],
        says="run.toml",
        finished_run=True,
    ),
]


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Callable[[], Path]:
    return lambda: reference_run(tmp_path_factory)


def snapshot(folder: Path, skip: Path) -> dict[str, tuple[int, int]]:
    """Size and mtime of every file under `folder`, the folder `skip` left out."""
    found = {}
    for top, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if os.path.join(top, d) != str(skip)]
        for name in files:
            try:
                info = os.stat(os.path.join(top, name))
            except OSError:  # a dangling link is no file
                continue
            if stat.S_ISREG(info.st_mode):
                found[os.path.relpath(os.path.join(top, name), folder)] = (
                    info.st_size,
                    info.st_mtime_ns,
                )
    return found


def sandbox(case: Case, reference: Callable[[], Path], tmp_path: Path) -> tuple[Ctx, list[str]]:
    skill = tmp_path / "skill"
    shutil.copytree(EXAMPLE, skill)
    (tmp_path / "cwd").mkdir()
    (tmp_path / "home").mkdir()
    c = Ctx(
        root=tmp_path,
        skill=skill,
        run=tmp_path / "run",
        cwd=tmp_path / "cwd",
        reference=reference,
        finished_run=case.finished_run,
    )
    return c, case.build(c)


def refused(
    case: Case, c: Ctx, args: list[str], command: Callable[[], tuple[int, str, str]]
) -> None:
    """Runs `command` (it returns the exit code, stdout and stderr) and checks the refusal."""
    run_existed = c.run.exists()
    before = snapshot(c.root, c.run)
    run_before = snapshot(c.run, c.root / "none") if run_existed else {}
    code, stdout, stderr = command()

    err = stderr.strip()
    assert code == case.code, (code, stdout, err)
    assert "Traceback" not in err + stdout, err
    lines = err.splitlines()
    if args[0] == "check-artifact" and code == 2 and len(lines) > 1:
        assert lines[0].endswith("file:") and all(line.startswith("  ") for line in lines[1:]), err
    else:
        assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert case.says in err, err
    assert snapshot(c.root, c.run) == before  # nothing written outside the run folder
    if not run_existed:
        assert not c.run.exists()  # a refused `run` writes nothing at all
    elif args[0] in ("lineage", "status"):
        assert snapshot(c.run, c.root / "none") == run_before  # read-only commands read only


def clean_env(c: Ctx) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPTIMIZER_", "ANTHROPIC_"))}
    env.update(HOME=str(c.root / "home"), PYTHONPATH=str(ROOT), **c.env)
    return env


@pytest.mark.parametrize(
    "case",
    [pytest.param(c, marks=pytest.mark.slow) if c.finished_run else c for c in CASES],
    ids=[c.id for c in CASES],
)
def test_bad_input_gets_one_clear_line_and_writes_nothing(
    case: Case, reference, tmp_path, monkeypatch
):
    c, args = sandbox(case, reference, tmp_path)
    for key in [k for k in os.environ if k.startswith(("OPTIMIZER_", "ANTHROPIC_"))]:
        monkeypatch.delenv(key)
    for key, value in {"HOME": str(c.root / "home"), **c.env}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(c.cwd)

    def in_process() -> tuple[int, str, str]:
        try:  # an exception escaping the command fails the test: that would be a traceback
            result = CliRunner().invoke(app, args, prog_name="optimizer", catch_exceptions=False)
        finally:
            logs.reset()  # the log sinks a `resume` configured
        return result.exit_code, result.stdout, result.stderr

    refused(case, c, args, in_process)


# The real process path: the exit status and a clean stderr of an interpreter that ends, through
# each entry point (`python -m optimizer`, the console script the package installs).
PROCESS_CASES = {
    "config.toml: unknown key": [sys.executable, "-m", "optimizer"],
    "state.db random bytes: resume": [str(Path(sys.executable).with_name("optimizer"))],
}


@pytest.mark.slow
@pytest.mark.parametrize(
    "case", [c for c in CASES if c.id in PROCESS_CASES], ids=list(PROCESS_CASES)
)
def test_bad_input_as_a_real_process(case: Case, reference, tmp_path):
    c, args = sandbox(case, reference, tmp_path)
    entry = PROCESS_CASES[case.id]
    assert Path(entry[0]).is_file(), f"{entry[0]}: no such entry point; install the package"

    def in_a_process() -> tuple[int, str, str]:
        proc = subprocess.run(
            [*entry, *args], capture_output=True, text=True, timeout=60, env=clean_env(c), cwd=c.cwd
        )
        return proc.returncode, proc.stdout, proc.stderr

    refused(case, c, args, in_a_process)
