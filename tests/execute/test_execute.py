"""Executors against the simulator and the real sandbox: complete run folders, errors and timeouts
as data, confined tools, refused inputs, the command executor and the pool. No network."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
import tiers

from optimizer import sandbox
from optimizer import schemas as s
from optimizer.config import Settings
from optimizer.errors import BadInput, BudgetExhausted
from optimizer.execute import Executor, TrialRecord, get_executor
from optimizer.execute.agent import run_bash, run_editor
from optimizer.execute.staging import resolve_inputs
from optimizer.grade.benchmark import run_once
from optimizer.grade.jobs import BASELINE, jobs_for
from optimizer.grade.unit import Grader, GradingHooks
from optimizer.inputs.evals import Eval, load_evals
from optimizer.model import make_client
from optimizer.sim import Service, Simulator
from optimizer.sim.transport import error_reply
from optimizer.store.db import Store

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "tests" / "fixtures" / "csv-report"
# Lines only the skill's body carries; the simulated agent copies what it follows.
SKILL_SNIPPETS = ("Row count:", "## Columns", "# Report:", "Following the guideline")
RUN_FILES = (
    "transcript.jsonl",
    "transcript.md",
    "timing.json",
    "eval_metadata.json",
    "outputs/metrics.json",
)
needs_bwrap = tiers.needs(
    "bubblewrap",
    None
    if sandbox.bwrap_available()
    else "bubblewrap is missing here (apt-get install bubblewrap)",
)


async def no_wait(_seconds: float) -> None:
    await asyncio.sleep(0)


class RecordingSim(Simulator):
    """The real simulator, keeping every request body it was sent."""

    def __init__(self, **knobs: object) -> None:
        super().__init__(**knobs)  # type: ignore[arg-type]
        self.bodies: list[str] = []

    def handle(self, method, target, headers, raw):  # type: ignore[no-untyped-def]
        self.bodies.append(raw.decode("utf-8", errors="replace"))
        return super().handle(method, target, headers, raw)


class RefusingSim(Simulator):
    """Every model call is refused for good (HTTP 400): the run fails, the loop goes on."""

    def handle(self, method, target, headers, raw):  # type: ignore[no-untyped-def]
        return error_reply(400, "invalid_request_error", "simulated permanent refusal")


def settings_with(**execute: object) -> Settings:
    return Settings.model_validate({"llm": {"provider": "sim"}, "execute": execute})


def example_eval() -> Eval:
    return load_evals(EXAMPLE).by_id(1)


async def execute(
    executor: Executor,
    trial_dir: Path,
    *,
    with_skill: bool,
    sample: int = 0,
    ev: Eval | None = None,
    skill: Path = EXAMPLE,
) -> TrialRecord:
    return await executor.execute(
        skill_dir=skill if with_skill else None,
        skill_name=None,
        eval=ev or example_eval(),
        inputs_root=skill,
        trial_dir=trial_dir,
        run_number=1,
        sample=sample,
    )


def assert_complete(trial_dir: Path) -> dict:
    for name in RUN_FILES:
        assert (trial_dir / name).is_file(), name
    assert not (trial_dir / ".work").exists() and not (trial_dir / ".skill").exists()
    metrics = json.loads((trial_dir / "outputs/metrics.json").read_text())
    s.Metrics.model_validate(metrics)
    s.Timing.model_validate_json((trial_dir / "timing.json").read_text())
    s.EvalMetadata.model_validate_json((trial_dir / "eval_metadata.json").read_text())
    for line in (trial_dir / "transcript.jsonl").read_text().splitlines():
        json.loads(line)
    md = (trial_dir / "transcript.md").read_text()
    assert md.index("## Eval Prompt") < md.index("\n## ", md.index("## Eval Prompt") + 1)
    return metrics


async def test_anthropic_with_and_without_skill(tmp_path: Path) -> None:
    sim = RecordingSim(seed=0)
    settings = settings_with()
    store = Store(tmp_path / "state.db")
    client = make_client(settings, store, simulator=sim, sleep=no_wait)
    executor = get_executor("anthropic", settings, client=client)
    runs = tmp_path / "runs"
    with_skill = await execute(executor, runs / "with_skill/run-1", with_skill=True)
    without = await execute(executor, runs / "without_skill/run-1", with_skill=False)

    assert (with_skill.status, without.status) == ("ok", "ok")
    assert with_skill.configuration == "with_skill" and without.configuration == "without_skill"
    metrics = assert_complete(with_skill.trial_dir)
    assert_complete(without.trial_dir)
    assert with_skill.skill_invoked is True and without.skill_invoked is None
    assert metrics["skill_invoked"] is True
    # The report, and the user notes when this run has some (a harness file, not an output).
    writes = 1 + (with_skill.trial_dir / "outputs/user_notes.md").exists()
    # The agent views its one input file, then the style guide the skill names for every report
    # (sim/inputs.py, sim/compose.references), before it writes.
    assert metrics["tool_calls"] == {"Skill": 1, "Read": 2, "Write": writes}
    assert metrics["total_tool_calls"] == 3 + writes
    assert metrics["files_created"] == ["report.md"] and with_skill.cost_usd > 0
    report = (with_skill.trial_dir / "outputs/report.md").read_text()
    assert any(snippet in report for snippet in SKILL_SNIPPETS)
    baseline = (without.trial_dir / "outputs/report.md").read_text()
    assert not any(snippet in baseline for snippet in SKILL_SNIPPETS)
    assert metrics["output_chars"] == len(report)
    assert json.loads((with_skill.trial_dir / "timing.json").read_text())["total_tokens"] > 0

    bodies = "\n".join(sim.bodies)
    assert '"name": "Skill"' in bodies or '"name":"Skill"' in bodies
    assert "/workspace/evals/files/sales.csv" in bodies
    for host in (str(tmp_path), str(REPO), str(Path.home())):
        assert host not in bodies

    # A complete folder is read back, never rerun or rewritten.
    calls = sim.stats.calls
    again = await execute(executor, with_skill.trial_dir, with_skill=True)
    assert sim.stats.calls == calls
    assert (again.status, again.tokens, again.tool_calls) == (
        "ok",
        with_skill.tokens,
        with_skill.tool_calls,
    )
    assert again.to_row()["skill_invoked"] == 1
    await client.aclose()
    store.close()


async def test_requests_do_not_depend_on_where_the_run_folder_is(tmp_path: Path) -> None:
    seen = []
    for place in ("a/deep/folder", "b"):
        sim = RecordingSim(seed=3)
        store = Store(tmp_path / place / "state.db")
        client = make_client(settings_with(), store, simulator=sim, sleep=no_wait)
        executor = get_executor("anthropic", settings_with(), client=client)
        record = await execute(executor, tmp_path / place / "run-1", with_skill=True, sample=2)
        seen.append((sim.bodies, (record.trial_dir / "outputs/report.md").read_text()))
        await client.aclose()
        store.close()
    assert seen[0] == seen[1]


async def test_a_relative_run_folder_works_as_an_absolute_one(tmp_path: Path, monkeypatch) -> None:
    # runs/… relative to the current folder is the default (and `make demo`): the outputs stay,
    # and the model is asked exactly what it is asked for an absolute folder elsewhere.
    monkeypatch.chdir(tmp_path)
    seen = []
    for trial_dir in (Path("runs/rel/run-1"), tmp_path / "elsewhere/deeper/run-1"):
        sim = RecordingSim(seed=3)
        store = Store(tmp_path / f"{trial_dir.parent.name}.db")
        client = make_client(settings_with(), store, simulator=sim, sleep=no_wait)
        record = await execute(
            get_executor("anthropic", settings_with(), client=client),
            trial_dir,
            with_skill=True,
            sample=2,
        )
        await client.aclose()
        store.close()
        assert record.status == "ok", record.error
        assert record.files_created == ["report.md"]
        assert_complete(tmp_path / trial_dir)
        seen.append((sim.bodies, (tmp_path / trial_dir / "outputs/report.md").read_text()))
    assert seen[0] == seen[1]
    bodies = "\n".join(seen[0][0])
    assert "runs/rel" not in bodies and str(tmp_path) not in bodies


async def test_a_refused_model_call_leaves_the_run_unscored_with_a_complete_folder(
    tmp_path: Path, store
) -> None:
    """A model call that failed for good is a failure of ours, not the skill's (docs/design.md §7)."""
    client = make_client(settings_with(), store, simulator=RefusingSim(seed=0), sleep=no_wait)
    record = await execute(
        get_executor("anthropic", settings_with(), client=client),
        tmp_path / "run-1",
        with_skill=True,
    )
    assert record.status == "unscored" and "400" in (record.error or "")
    metrics = assert_complete(record.trial_dir)
    assert metrics["errors_encountered"] >= 1 and metrics["status"] == "unscored"
    assert record.skill_invoked is False
    assert "simulated permanent refusal" in (record.trial_dir / "transcript.md").read_text()
    await client.aclose()


class SleeperSim(Simulator):
    """The simulated agent's first answer runs `sleep 30` in bash; its next one ends the run."""

    def respond(self, body, headers):  # type: ignore[no-untyped-def]
        if self.roles_of(body) != "executor":
            return super().respond(body, headers)
        first = len(body["messages"]) == 1
        content = (
            [
                {
                    "type": "tool_use",
                    "id": "toolu_sleep",
                    "name": "bash",
                    "input": {"command": "sleep 30"},
                }
            ]
            if first
            else [{"type": "text", "text": "Done."}]
        )
        return {
            "id": "msg_sleep",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": "tool_use" if first else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 10},
        }

    @staticmethod
    def roles_of(body):  # type: ignore[no-untyped-def]
        from optimizer.sim import world

        return world.detect_role(body, {})


@pytest.mark.slow
async def test_a_slow_provider_is_not_the_skills_timeout(tmp_path: Path, store) -> None:
    """Three calls at 0.6 s each against a 0.3 s limit: the waiting is the provider's, not the
    skill's, so the run finishes (before the run clock it was a timeout, scored 0)."""
    settings = settings_with(timeout_s=0.3, model_tokens_per_s=0)
    client = make_client(
        settings, store, simulator=Simulator(seed=0, service=Service(latency_ms=600)), sleep=no_wait
    )
    record = await execute(
        get_executor("anthropic", settings, client=client), tmp_path / "run-1", with_skill=True
    )
    await client.aclose()
    assert record.status == "ok", record.error
    metrics = assert_complete(record.trial_dir)
    assert (
        metrics["model_calls"] >= 2
        and metrics["model_wait_seconds"] >= 0.6 * metrics["model_calls"] - 0.1
    )
    assert metrics["skill_seconds"] < 0.3 < record.duration_s


@pytest.mark.slow
async def test_a_slow_provider_charges_only_the_models_normal_generation_time(
    tmp_path: Path, store
) -> None:
    """At 10 tokens a second each answer's tokens cost the skill more than the call took: the
    whole call is charged, nothing is waiting, and the run is over its limit."""
    settings = settings_with(timeout_s=0.3, model_tokens_per_s=10)
    client = make_client(
        settings, store, simulator=Simulator(seed=0, service=Service(latency_ms=200)), sleep=no_wait
    )
    record = await execute(
        get_executor("anthropic", settings, client=client), tmp_path / "run-1", with_skill=True
    )
    await client.aclose()
    assert record.status == "timeout" and "execute.timeout_s = 0.3 s" in (record.error or "")
    metrics = assert_complete(record.trial_dir)
    assert metrics["model_wait_seconds"] < 0.1 and metrics["skill_seconds"] >= 0.3


@pytest.mark.slow
async def test_a_run_over_its_limit_only_by_a_slow_providers_generation_time_is_unscored(
    tmp_path: Path, store
) -> None:
    """At 1 s a call and 1000 tokens a second, each call charges its tokens' worth, the rest is
    waiting: the limit passes only by the estimate, which a slow provider makes unsure."""
    settings = settings_with(timeout_s=0.3, model_tokens_per_s=1000)
    client = make_client(
        settings,
        store,
        simulator=Simulator(seed=0, service=Service(latency_ms=1000)),
        sleep=no_wait,
    )
    record = await execute(
        get_executor("anthropic", settings, client=client), tmp_path / "run-1", with_skill=True
    )
    await client.aclose()
    assert record.status == "unscored", record.error
    assert "only by the model's generation time while the provider was slow" in (record.error or "")
    metrics = assert_complete(record.trial_dir)
    assert metrics["skill_seconds"] >= 0.3 and metrics["model_wait_seconds"] > 0.1


@needs_bwrap
async def test_a_command_that_sleeps_past_the_limit_still_times_out(tmp_path: Path, store) -> None:
    """A slow provider does not excuse the skill's own work: `sleep 30` against a 1 s limit."""
    settings = settings_with(timeout_s=1, model_tokens_per_s=0)
    client = make_client(
        settings,
        store,
        simulator=SleeperSim(seed=0, service=Service(latency_ms=400)),
        sleep=no_wait,
    )
    started = time.monotonic()
    record = await execute(
        get_executor("anthropic", settings, client=client), tmp_path / "run-1", with_skill=False
    )
    await client.aclose()
    assert time.monotonic() - started < 30 / 2  # stopped at its limit, not when `sleep 30` ended
    assert record.status == "timeout" and "execute.timeout_s = 1 s" in (record.error or "")
    metrics = assert_complete(record.trial_dir)
    assert metrics["errors_encountered"] == 1 and metrics["skill_seconds"] >= 1
    assert metrics["model_wait_seconds"] >= 0.3
    assert "## Error" in (record.trial_dir / "transcript.md").read_text()


@pytest.mark.slow
async def test_a_provider_slower_than_the_wait_limit_leaves_the_run_unscored(
    tmp_path: Path, store
) -> None:
    settings = settings_with(timeout_s=0.3, model_wait_max_s=0.5)
    latency_s = 60
    client = make_client(
        settings,
        store,
        simulator=Simulator(seed=0, service=Service(latency_ms=latency_s * 1000)),
        sleep=no_wait,
    )
    started = time.monotonic()
    record = await execute(
        get_executor("anthropic", settings, client=client), tmp_path / "run-1", with_skill=False
    )
    assert time.monotonic() - started < latency_s / 2  # stopped before one call could answer
    assert record.status == "unscored" and "execute.model_wait_max_s = 0.5 s" in (
        record.error or ""
    )
    metrics = assert_complete(record.trial_dir)
    assert metrics["errors_encountered"] == 1 and metrics["model_wait_seconds"] >= 0.5
    await client.aclose()


class Broken(Executor):
    """An executor with a bug of ours: a KeyError in the middle of its work."""

    name = "broken"

    async def _run(self, ctx, transcript, tally):  # type: ignore[no-untyped-def]
        return {}["missing"]


async def test_an_exception_of_ours_leaves_the_run_unscored_as_an_internal_error(
    tmp_path: Path, log_capture
) -> None:
    record = await execute(Broken(settings_with()), tmp_path / "run-1", with_skill=False)
    assert record.status == "unscored"
    assert (record.error or "").startswith("internal error: KeyError")
    assert_complete(record.trial_dir)
    logged = [e for e in log_capture if e["event"] == "run.internal_error"]
    assert logged and logged[0]["error_type"] == "KeyError" and logged[0]["exc_info"] is not None


async def test_a_spent_budget_stops_the_work_and_leaves_no_complete_folder(
    tmp_path: Path, store, sim
) -> None:
    client = make_client(settings_with(), store, budget_usd=0.0, simulator=sim, sleep=no_wait)
    with pytest.raises(BudgetExhausted):
        await execute(
            get_executor("anthropic", settings_with(), client=client),
            tmp_path / "run-1",
            with_skill=True,
        )
    assert not (tmp_path / "run-1" / "timing.json").exists()
    await client.aclose()


# -- the tools a model drives ---------------------------------------------------------------------


@needs_bwrap
async def test_bash_tool_cannot_see_home_project_or_keys(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-never-inside")
    work = tmp_path / "work"
    (work / "outputs").mkdir(parents=True)
    policy = sandbox.SandboxPolicy(mode="bwrap", timeout_s=10)

    async def bash(command: str) -> tuple[str, bool]:
        return await run_bash({"command": command}, work_dir=work, skill_dir=EXAMPLE, policy=policy)

    text, is_error = await bash("env")
    assert not is_error and "ANTHROPIC" not in text and "sk-ant" not in text
    text, is_error = await bash(f"cat {REPO}/pyproject.toml")
    assert is_error and "skill-optimizer" not in text
    text, is_error = await bash(f"ls {Path.home()}")
    assert is_error and "No such file" in text
    text, is_error = await bash("cat /skill/SKILL.md && pwd && echo made > outputs/x.txt")
    assert not is_error and "csv-report" in text and "/workspace" in text
    assert (work / "outputs/x.txt").read_text() == "made\n"
    text, is_error = await bash("touch /skill/new")
    assert is_error and not (EXAMPLE / "new").exists()


def test_editor_tool_is_confined(tmp_path: Path) -> None:
    work, skill = tmp_path / "work", tmp_path / "skill"
    (work / "outputs").mkdir(parents=True)
    skill.mkdir()
    (skill / "SKILL.md").write_text("---\nname: x\ndescription: d\n---\nbody\n")
    (work / "escape").symlink_to("/etc")

    def edit(**tool_input: object) -> tuple[str, bool]:
        return run_editor(tool_input, work_dir=work, skill_dir=skill, max_file_bytes=1000)

    assert edit(command="create", path="/workspace/outputs/a.md", file_text="one\ntwo\n") == (
        "File created successfully at: /workspace/outputs/a.md",
        False,
    )
    assert (
        edit(command="str_replace", path="/workspace/outputs/a.md", old_str="two", new_str="2")[1]
        is False
    )
    assert (
        edit(command="insert", path="/workspace/outputs/a.md", insert_line=0, insert_text="zero")[1]
        is False
    )
    assert (work / "outputs/a.md").read_text() == "zero\none\n2\n"
    text, is_error = edit(command="view", path="/workspace/outputs/a.md", view_range=[2, 3])
    assert not is_error and "one" in text and "zero" not in text
    assert edit(command="view", path="/skill/SKILL.md")[1] is False
    for refused in (
        {"command": "view", "path": "/etc/passwd"},
        {"command": "view", "path": "/workspace/../../etc/passwd"},
        {"command": "view", "path": "/workspace/escape/passwd"},
        {"command": "create", "path": "/skill/SKILL.md", "file_text": "hijack"},
        {"command": "create", "path": "/workspace/big.txt", "file_text": "x" * 2000},
        {"command": "str_replace", "path": "/workspace/outputs/a.md", "old_str": "absent"},
        {"command": "undo_edit", "path": "/workspace/outputs/a.md"},
    ):
        text, is_error = edit(**refused)
        assert is_error and text.startswith("Error") and str(tmp_path) not in text, refused
    assert (skill / "SKILL.md").read_text().endswith("body\n")


# -- inputs ---------------------------------------------------------------------------------------


def test_input_paths_that_escape_are_refused(tmp_path: Path) -> None:
    skill = tmp_path / "skill"
    (skill / "evals/files").mkdir(parents=True)
    (skill / "evals/files/ok.csv").write_text("a\n1\n")
    (tmp_path / "secret.txt").write_text("secret")
    (skill / "evals/files/link.csv").symlink_to(tmp_path / "secret.txt")
    assert resolve_inputs(["evals/files/ok.csv"], skill, eval_id=1) == [
        ((skill / "evals/files/ok.csv").resolve(), "evals/files/ok.csv")
    ]
    cases = {
        "../../etc/passwd": "'..'",
        "/etc/passwd": "absolute",
        "evals/files/link.csv": "symbolic link",
        "evals/files/missing.csv": "does not exist",
    }
    for rel, words in cases.items():
        with pytest.raises(BadInput) as caught:
            resolve_inputs([rel], skill, eval_id=7)
        assert (
            words in str(caught.value)
            and "eval 7" in str(caught.value)
            and rel in str(caught.value)
        )


async def test_executor_refuses_bad_inputs_before_making_a_folder(tmp_path: Path, client) -> None:
    ev = example_eval().model_copy(update={"files": ["../../etc/passwd"]})
    with pytest.raises(BadInput):
        await execute(
            get_executor("anthropic", settings_with(), client=client),
            tmp_path / "run-1",
            with_skill=True,
            ev=ev,
        )
    assert not (tmp_path / "run-1").exists()


# -- the command executor -------------------------------------------------------------------------


async def test_command_executor_runs_the_template_in_the_sandbox(tmp_path: Path) -> None:
    settings = settings_with(
        executor="command", command="cp {prompt_file} {work_dir}/outputs/echo.txt && ls {skill_dir}"
    )
    record = await execute(get_executor(None, settings), tmp_path / "run-1", with_skill=True)
    assert record.status == "ok", record.error
    assert_complete(record.trial_dir)
    assert (record.trial_dir / "outputs/echo.txt").read_text() == example_eval().prompt
    assert record.files_created == ["echo.txt"] and record.skill_invoked is False
    md = (record.trial_dir / "transcript.md").read_text()
    assert "SKILL.md" in md and "evals" not in md.split("stdout:")[1].split("stderr:")[0]


@pytest.mark.slow
async def test_command_executor_failure_and_timeout_are_data(tmp_path: Path) -> None:
    failed = await execute(
        get_executor(None, settings_with(executor="command", command="echo oops >&2; exit 3")),
        tmp_path / "fail",
        with_skill=False,
    )
    assert (
        failed.status == "error"
        and "code 3" in (failed.error or "")
        and "oops" in (failed.error or "")
    )
    slow = await execute(
        get_executor(None, settings_with(executor="command", command="sleep 30", timeout_s=0.5)),
        tmp_path / "slow",
        with_skill=False,
    )
    assert slow.status == "timeout"
    for record in (failed, slow):
        assert_complete(record.trial_dir)
    with pytest.raises(BadInput, match="execute.command"):
        await execute(get_executor("command", settings_with()), tmp_path / "none", with_skill=False)


# -- the pool and the command-line entry ----------------------------------------------------------


class Sleepy(Executor):
    """A real Executor whose work is a sleep, to watch the pool's scheduling."""

    name = "sleepy"

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.running = self.peak = 0

    async def _run(self, ctx, transcript, tally):  # type: ignore[no-untyped-def]
        self.running += 1
        self.peak = max(self.peak, self.running)
        await asyncio.sleep(0.05 * (6 - ctx.run_number))  # later jobs finish first
        self.running -= 1
        return None


async def test_the_grader_bounds_concurrency_and_keeps_job_order(
    tmp_path: Path, client, store
) -> None:
    settings = settings_with(concurrency=2)
    executor = Sleepy(settings)
    finished: list[int] = []
    grader = Grader(
        store,
        client,
        settings,
        load_evals(EXAMPLE),
        executor,
        skill_name="csv-report",
        inputs_root=EXAMPLE,
        hooks=GradingHooks(on_run=lambda s: finished.append(s.run_number)),
    )
    jobs = jobs_for([1], 5, prefix="", root=tmp_path, side=BASELINE)
    results = await grader.grade(jobs, scope="baseline")
    assert [s.run_number for s in results[1]] == [1, 2, 3, 4, 5]
    assert executor.peak == 2
    assert sorted(finished) == [1, 2, 3, 4, 5] and finished != [1, 2, 3, 4, 5]
    assert all((job.trial_dir / "timing.json").is_file() for job in jobs)


async def test_run_once_numbers_runs_grades_them_and_reads_the_evals(
    tmp_path: Path, client, store
) -> None:
    settings = settings_with()
    done = [
        await run_once(
            settings,
            client,
            store,
            skill_dir=EXAMPLE,
            eval_id=1,
            without_skill=without,
            out_dir=tmp_path,
        )
        for without in (False, False, True)
    ]
    assert [d.relative_to(tmp_path).as_posix() for d, _ in done] == [
        "with_skill/run-1",
        "with_skill/run-2",
        "without_skill/run-1",
    ]
    assert all((d / "grading.json").is_file() and s.score is not None for d, s in done)
    with pytest.raises(BadInput, match="no eval has id 99"):
        await run_once(
            settings,
            client,
            store,
            skill_dir=EXAMPLE,
            eval_id=99,
            without_skill=False,
            out_dir=tmp_path,
        )
    with pytest.raises(BadInput, match="not an executor"):
        get_executor("nope", settings)


class EndingSim(Simulator):
    """The real simulator, whose executor turns after the first end with `stop_reason`."""

    def __init__(self, stop_reason: str) -> None:
        super().__init__(seed=0)
        self.stop_reason = stop_reason

    def respond(self, body, headers):  # type: ignore[no-untyped-def]
        reply = super().respond(body, headers)
        if len(body["messages"]) > 1:
            reply = {**reply, "content": [{"type": "text", "text": "…"}]}
            reply["stop_reason"] = self.stop_reason
        return reply


@pytest.mark.parametrize(
    ("stop_reason", "said"),
    [
        ("refusal", "the model declined to go on with the task"),
        ("model_context_window_exceeded", "outgrew the model's context window"),
    ],
)
async def test_a_run_the_model_ended_without_finishing_fails_as_the_skills(
    tmp_path: Path, stop_reason: str, said: str
) -> None:
    settings = settings_with()
    store = Store(tmp_path / "state.db")
    client = make_client(settings, store, simulator=EndingSim(stop_reason), sleep=no_wait)
    executor = get_executor("anthropic", settings, client=client)
    record = await execute(executor, tmp_path / "runs/with_skill/run-1", with_skill=True)
    await client.aclose()
    # Not a finish read as a success: the run failed, for a reason of the skill's and task's.
    assert record.status == "error" and said in (record.error or "")
