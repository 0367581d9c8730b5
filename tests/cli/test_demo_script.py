"""`make demo` on a machine without a working bubblewrap (scripts/demo.sh): it installs it where it
can (root, apt-get) and otherwise runs the simulated demo unconfined, saying so in one line;
scripts/install-system.sh installs only the packages it is asked for. Stub programs on PATH stand
in for apt-get, id, python and optimizer: nothing is installed and no run starts."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BASH = shutil.which("bash") or "/bin/bash"


def _stub(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text(f"#!{BASH}\n{body}\n")
    path.chmod(0o755)


def _demo(tmp_path: Path, *, works: bool) -> subprocess.CompletedProcess[str]:
    scripts, venv = tmp_path / "scripts", tmp_path / "venv"
    scripts.mkdir()
    venv.mkdir()
    shutil.copy(REPO / "scripts" / "demo.sh", scripts)
    # install-system.sh stands for itself: it records that bubblewrap alone was asked for.
    _stub(scripts, "install-system.sh", f'echo "$@" > {tmp_path}/asked')
    _stub(venv, "python", f"exit {0 if works else 1}")
    _stub(venv, "optimizer", f'echo "$@" > {tmp_path}/ran')
    return subprocess.run(
        [BASH, str(scripts / "demo.sh"), str(venv)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": os.environ["PATH"]},
    )


@pytest.mark.parametrize("works", [True, False])
def test_the_demo_runs_confined_where_bubblewrap_works_else_unconfined_and_says_so(
    tmp_path, works
) -> None:
    done = _demo(tmp_path, works=works)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "asked").read_text().split() == ["bubblewrap"]
    ran = (tmp_path / "ran").read_text().split()
    assert ran[:2] == ["run", "examples/csv-report"] and "--provider" in ran
    assert ran[ran.index("--provider") + 1] == "sim"  # never a real provider unconfined
    assert ("--unconfined" in ran) is not works
    said = [line for line in done.stderr.splitlines() if "unconfined" in line]
    assert len(said) == (0 if works else 1), done.stderr


def test_install_system_looks_only_at_the_packages_it_is_asked_for(tmp_path) -> None:
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    _stub(bin_, "id", "echo 1000")  # not root: it says what is missing and installs nothing
    script = str(REPO / "scripts" / "install-system.sh")
    env = {"PATH": str(bin_)}
    asked = subprocess.run(
        [BASH, script, "bubblewrap"], capture_output=True, text=True, env=env, check=False
    )
    every = subprocess.run([BASH, script], capture_output=True, text=True, env=env, check=False)
    assert asked.returncode == every.returncode == 0
    assert "note: bubblewrap not installed" in asked.stderr and "chromium" not in asked.stderr
    assert "note: bubblewrap chromium not installed" in every.stderr
