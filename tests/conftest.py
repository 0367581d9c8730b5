"""Shared fixtures: one per real thing (settings, a state.db, the seeded simulator, a model client
over it, a structlog capture). Keep it small; a fixture used by one file lives in that file."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
import tiers

from optimizer.cli.compose import use_the_simulator  # noqa: E402
from optimizer.config import Settings
from optimizer.model import ModelClient, make_client
from optimizer.store.db import Store

# The tests drive the layers as the CLI does: with the simulator its composition root builds.
use_the_simulator()

# The simulator answers only when chosen (docs/design.md §9): the tests choose it here, for every
# command they run in this process and in the processes they start with this environment. A test
# of the unchosen provider removes it (monkeypatch.delenv), as the helpers that start commands in
# a clean environment do (they pass --provider sim themselves).
os.environ["OPTIMIZER_LLM_PROVIDER"] = "sim"
# The index of run folders (store/registry.py) lives in the user's state folder: the tests keep
# theirs apart, in a folder of this session, and so do the commands they start.
os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="optimizer-tests-state-")

# The longest files, started first: pytest-xdist hands files to its workers in collection order
# (--dist loadfile), and the real-model tier (100 s on one core) started last would leave the
# other worker idle for most of it. Longest first: the tail of the suite is short files.
LONGEST_FIRST = (
    "test_real_model.py",
    "test_daemon.py",
    "test_security.py",
    "test_crash.py",
    "test_disk_faults.py",
    "test_bad_input.py",
)


# The fast tier (a `-m` that leaves out the slow tests, as `make check`'s "not slow"): a test whose
# call takes longer than this fails, and so does the test whose setup ran a fixture (of any scope,
# paid once by the first test that uses it) that took longer; the mend is `@pytest.mark.slow` on
# the test, or on every test that uses the fixture. The whole suite (`make test`, CI) has no limit.
# The time is the wall time less the time the test's thread waited for a CPU that other programs
# held (Linux's schedstat): a busy machine does not fail a test, a sleep or a wait still counts.
FAST_LIMIT_S = 2.0
# Fixtures that make a real run: a test that uses one is slow by itself (the marker's definition).
RUN_FIXTURES = ("simulated_once",)
_slow_fixtures: list[str] = []  # fixtures set up over the limit for the test being set up
_WAITED = pytest.StashKey[float]()  # seconds the test's call waited for a CPU


def pytest_configure(config: pytest.Config) -> None:
    """Under OPTIMIZER_REQUIRE_ALL_TIERS=1 every test runs: a `-m` that leaves out the slow tests
    (`make check`'s) is refused, so it cannot make CI green with its tiers left out."""
    if tiers.required() and tiers.leaves_out_slow(config.option.markexpr or ""):
        raise pytest.UsageError(
            f"{tiers.REQUIRE_ALL}=1 runs every tier, and -m {config.option.markexpr!r} "
            f"leaves out the {tiers.SLOW} tests: run `make test` (all of them)"
        )


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects: a tier's tests are slow
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        uses = getattr(item, "fixturenames", ())
        if tiers.needs_a_tier(item) or any(f in uses for f in RUN_FIXTURES):
            item.add_marker(tiers.SLOW)
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(
        key=lambda item: rank.get(item.path.name, len(rank))
    )  # stable: files keep their order


def _skip_text(report: pytest.CollectReport | pytest.TestReport) -> str:
    longrepr = report.longrepr
    return str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)


def _fail_the_skip(report: pytest.CollectReport | pytest.TestReport) -> None:
    """Under OPTIMIZER_REQUIRE_ALL_TIERS=1 a skip is a failure: a tier that cannot run here must
    not leave the session green (docs/design.md §12)."""
    if report.skipped and tiers.required() and not hasattr(report, "wasxfail"):
        why = _skip_text(report)
        report.outcome = "failed"
        report.longrepr = (
            f"tier {tiers.tier_of(why)} did not run, and {tiers.REQUIRE_ALL}=1 "
            f"requires every tier: {why}"
        )


def _waited_s() -> float:
    """Seconds this thread has waited, ready to run, for a CPU (Linux; 0 where unknown)."""
    try:
        return int(Path("/proc/thread-self/schedstat").read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def _fast_tier(config: pytest.Config) -> bool:
    return re.search(rf"\bnot\s+{tiers.SLOW}\b", config.option.markexpr or "") is not None


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    start, waited = time.perf_counter(), _waited_s()
    yield
    took = time.perf_counter() - start - (_waited_s() - waited)
    if took > FAST_LIMIT_S and _fast_tier(request.config):
        _slow_fixtures.append(f"{fixturedef.argname} ({fixturedef.scope} scope, {took:.1f} s)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    waited = _waited_s()
    yield
    item.stash[_WAITED] = _waited_s() - waited


def _fail_the_slow(report: pytest.TestReport, call: pytest.CallInfo, waited: float) -> None:
    """In the fast tier, a call or a fixture's setup over FAST_LIMIT_S fails the test."""
    slow, _slow_fixtures[:] = list(_slow_fixtures), []  # one fixture set up in a call is the call's
    if report.when == "setup":
        if slow and report.passed:
            report.outcome = "failed"
            report.longrepr = (
                f"the fixture {', '.join(slow)} took over the fast tier's {FAST_LIMIT_S:g} s to "
                "set up: mark every test that uses it @pytest.mark.slow, or make it faster"
            )
    elif report.when == "call" and report.passed and call.duration - waited > FAST_LIMIT_S:
        report.outcome = "failed"
        report.longrepr = (
            f"the test took {call.duration - waited:.1f} s, over the fast tier's "
            f"{FAST_LIMIT_S:g} s: mark it @pytest.mark.slow, or make it faster"
        )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    _fail_the_skip(report)
    if _fast_tier(item.config):
        _fail_the_slow(report, call, item.stash.get(_WAITED, 0.0))


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    outcome = yield  # a module skipped whole (importorskip at its top) is a skip too
    _fail_the_skip(outcome.get_result())


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # type: ignore[no-untyped-def]
    """One line naming the tiers that did not run here, so a local green says what it left out."""
    skipped = terminalreporter.stats.get("skipped", [])
    counts = Counter(tiers.tier_of(_skip_text(r)) for r in skipped)
    if counts:
        listed = ", ".join(f"{tier} ({n} tests)" for tier, n in sorted(counts.items()))
        terminalreporter.write_line(
            f"tiers that did not run: {listed}; see README.md (Tests), "
            f"CI runs them all ({tiers.REQUIRE_ALL}=1)",
            yellow=True,
        )


async def no_wait(_seconds: float) -> None:
    """Retries in tests do not wait; they still yield, as a real sleep would."""
    await asyncio.sleep(0)


@pytest.fixture
def settings() -> Settings:
    return Settings.model_validate({"llm": {"provider": "sim"}})


@pytest.fixture
def store(tmp_path):
    db = Store(tmp_path / "state.db")
    yield db
    db.close()


@pytest.fixture
def sim():
    from optimizer.sim import Simulator

    return Simulator(seed=0)


@pytest.fixture
def sim_url():
    """The simulator on loopback (for the Claude Code CLI), shut down after the test."""
    from optimizer.sim import Simulator, serve

    server, port = serve(Simulator(seed=0), "127.0.0.1", 0)
    yield f"http://127.0.0.1:{port}"
    server.shutdown()
    server.server_close()


@pytest.fixture
async def client(settings, store, sim) -> ModelClient:
    model_client = make_client(settings, store, simulator=sim, sleep=no_wait)
    yield model_client
    await model_client.aclose()


@pytest.fixture(scope="session")
def simulated_once(tmp_path_factory) -> Path:
    from fixtures.workspace_builder import simulated_run

    return simulated_run(tmp_path_factory.mktemp("simulated") / "real")


@pytest.fixture
def simulated(simulated_once, tmp_path) -> Path:
    """A small real simulated run (`simulated_run`), made once per session; each test gets its own
    copy, free to write a report into."""
    return Path(shutil.copytree(simulated_once, tmp_path / "real"))


@pytest.fixture
def log_capture():
    with structlog.testing.capture_logs() as captured:
        yield captured


@pytest.fixture
def cli():
    """`optimizer ARGS…` in-process (typer's CliRunner): the exit code and what it printed. The
    run's log sinks it configured are closed afterwards, so no later test writes to them."""
    from typer.testing import CliRunner

    from optimizer import logs
    from optimizer.cli import app

    def invoke(*args: str):
        return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)

    yield invoke
    logs.reset()
