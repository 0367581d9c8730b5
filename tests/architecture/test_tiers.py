"""The tier switch itself: under OPTIMIZER_REQUIRE_ALL_TIERS=1 a test skipped for a missing tier
(a marker, a skip half-way through a test, a module skipped whole) fails the session; without it
the session passes and prints one line naming the tiers that did not run."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tiers

pytestmark = pytest.mark.slow  # each test starts a pytest session in a subprocess

HERE = Path(__file__).resolve().parents[1]  # tests/, where conftest.py and tiers.py are

SKIPPING = """
import pytest
import tiers

@tiers.needs("bubblewrap", "bubblewrap is missing in this test")
def test_marked():
    assert True

def test_half_way():
    assert 1 + 1 == 2
    tiers.skip("chromium", "no browser in this test")
    assert False, "never reached"

def test_runs():
    assert True
"""
WHOLE_MODULE = """
import pytest
import tiers

pytest.importorskip("a_module_that_is_not_there", reason=tiers.reason("ray", "no such module"))

def test_never_collected():
    assert True
"""


def session(tmp_path: Path, required: bool, *args: str) -> subprocess.CompletedProcess[str]:
    for name in ("conftest.py", "tiers.py"):
        shutil.copy(HERE / name, tmp_path / name)
    (tmp_path / "test_skipping.py").write_text(SKIPPING)
    (tmp_path / "test_whole_module.py").write_text(WHOLE_MODULE)
    env = {k: v for k, v in os.environ.items() if k != "OPTIMIZER_REQUIRE_ALL_TIERS"}
    if required:
        env["OPTIMIZER_REQUIRE_ALL_TIERS"] = "1"
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            "--rootdir",
            str(tmp_path),
            "-c",
            os.devnull,
            "-o",
            "asyncio_default_fixture_loop_scope=function",
            "-o",
            f"markers={tiers.SLOW}: registered as pyproject.toml does",
            str(tmp_path),
            *args,
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )


def test_without_the_switch_skips_pass_and_one_line_names_the_tiers_left_out(
    tmp_path: Path,
) -> None:
    done = session(tmp_path, False)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("tiers that did not run")]
    assert len(lines) == 1, done.stdout
    assert "bubblewrap (1 tests), chromium (1 tests), ray (1 tests)" in lines[0]


def test_under_the_switch_every_skip_of_a_tier_fails_the_session(tmp_path: Path) -> None:
    done = session(tmp_path, True, "-n", "2")  # through pytest-xdist's workers, as `make test`
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "tier bubblewrap did not run" in out and "tier chromium did not run" in out
    assert "tier ray did not run" in out
    # A skip in setup (a marker) or collection (a module) fails as an error, one in a test as a failure.
    assert "1 failed, 1 passed, 2 errors" in out, out
    assert "tiers that did not run" not in out


def test_the_developers_loop_leaves_out_the_tests_that_need_a_tier(tmp_path: Path) -> None:
    done = session(tmp_path, False, "-m", "not slow")  # `make check`
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    # The marked test is slow and not collected; a skip half-way through a test still counts.
    assert "1 passed, 2 skipped, 1 deselected" in out, out
    assert "bubblewrap" not in out


def test_under_the_switch_the_developers_loop_is_refused(tmp_path: Path) -> None:
    done = session(tmp_path, True, "-m", "not slow")
    assert done.returncode == 4, done.stdout + done.stderr  # a usage error: nothing ran
    assert "leaves out the slow tests: run `make test`" in done.stderr


SLEEPING = """
import time

import pytest

@pytest.fixture(scope="module")
def world():
    time.sleep(3.0)
    return 1

def test_sleeps():
    time.sleep(3.0)

def test_uses_the_world(world):
    assert world

def test_uses_the_world_again(world):
    assert world

@pytest.mark.slow
def test_marked_slow():
    time.sleep(3.0)
"""


def test_the_developers_loop_fails_a_test_or_a_fixture_over_its_limit(tmp_path: Path) -> None:
    (tmp_path / "test_sleeping.py").write_text(SLEEPING)
    done = session(tmp_path, False, "-m", "not slow", "-k", "sleeps or world")
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    # 3 s against the 2 s limit: a loaded machine's scheduling noise stays inside the margin.
    assert re.search(r"the test took 3\.\d s, over the fast tier's 2 s: mark it", out), out
    # The module fixture's setup is paid by the first test that uses it, and fails that one.
    assert re.search(r"the fixture world \(module scope, 3\.\d s\) took over the fast", out), out
    # The test after it reuses the fixture, and passes.
    assert re.search(r"\b1 failed, 1 passed\b.* 1 error\b", out), out


def test_the_whole_suite_has_no_time_limit(tmp_path: Path) -> None:
    (tmp_path / "test_sleeping.py").write_text(SLEEPING)
    done = session(tmp_path, False, "-k", "sleeps or world or marked")
    assert done.returncode == 0, done.stdout + done.stderr
