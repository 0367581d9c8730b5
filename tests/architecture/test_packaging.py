"""What an installed package holds: every package and data file of optimizer/, and prompts/ as
optimizer/prompts. A broken install (a template missing) is a failure of the work, not bad input.
scripts/check-wheel.sh builds the real wheel, installs it and runs the demo (CI runs it)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from fnmatch import fnmatch
from pathlib import Path

import pytest
import tiers

from optimizer.model import prompts as prompting

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "tests" / "fixtures" / "csv-report"


def test_the_wheel_gets_every_package_and_data_file() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {"optimizer.prompts": ROOT / "prompts"} | {
        ".".join(p.relative_to(ROOT).parts): p
        for p in [ROOT / "optimizer", *(ROOT / "optimizer").rglob("*")]
        if p.is_dir() and p.name != "__pycache__"
    }
    # Listed by hand (discovery cannot map prompts/), so a new folder must be added there too.
    assert sorted(setuptools["packages"]) == sorted(folders)
    assert setuptools["package-dir"] == {"optimizer.prompts": "prompts"}
    for package, folder in folders.items():
        globs = setuptools["package-data"].get(package, [])
        for path in folder.iterdir():
            if path.is_file() and path.suffix not in (".py", ".pyc"):
                assert any(fnmatch(path.name, g) for g in globs), f"{path} is left out of the wheel"


def test_a_missing_prompt_template_is_a_broken_install(tmp_path: Path, monkeypatch, cli) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(prompting, "PROMPTS_DIR", tmp_path / "prompts")
    prompting.load_prompt.cache_clear()
    try:
        result = cli("run", EXAMPLE, "--provider", "sim", "--dry-run")
    finally:
        prompting.load_prompt.cache_clear()
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "executor.md" in lines[0] and "reinstall the package" in lines[0]
    assert not list(tmp_path.iterdir())  # a dry run writes nothing, whatever fails


@pytest.mark.slow
def test_building_the_wheel_leaves_nothing_in_the_source_tree(tmp_path: Path) -> None:
    """`pip wheel .` (what `pip install .` runs first) on a copy of the sources: a wheel with the
    prompts, and no build/ or *.egg-info left next to the sources, where the next build would
    read them again. pip fetches the build requirements (setuptools) as an install does."""
    src, dist = tmp_path / "src", tmp_path / "dist"
    listed = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for rel in filter(None, listed):
        if (ROOT / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, src / rel)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DIST_EXTRA_CONFIG")}
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--disable-pip-version-check",
            "-w",
            str(dist),
            str(src),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if (
        built.returncode != 0
        and "setuptools" in built.stderr
        and (
            "No matching distribution" in built.stderr or "Could not find a version" in built.stderr
        )
    ):
        tiers.skip(
            "package-index",
            "the package index is out of reach: pip cannot fetch setuptools to build",
        )
    assert built.returncode == 0, built.stderr[-2000:]
    names = zipfile.ZipFile(next(dist.glob("skill_optimizer-*.whl"))).namelist()
    assert "optimizer/prompts/executor.md" in names and "optimizer/cli/__init__.py" in names
    assert not [n for n in names if "build_outside" in n]  # the backend builds; it is not shipped
    assert (
        sorted(p.name for p in src.iterdir() if p.name == "build" or p.name.endswith(".egg-info"))
        == []
    )


def _planned(target: str, venv: Path) -> list[str]:
    """The commands `make TARGET` would run for a venv that does not exist yet (make -n)."""
    done = subprocess.run(
        ["make", "-n", target, f"VENV={venv}"], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_the_demo_installs_the_package_alone_and_setup_adds_what_ci_needs(tmp_path: Path) -> None:
    # The README's first command on a fresh machine: no test or peers extras (ray, playwright,
    # GEPA, SkillOpt: an 800 MB venv), only what the demo runs, on the simulator by name.
    demo = _planned("demo", tmp_path / "venv")
    installs = [line for line in demo if "pip install" in line and "--upgrade pip" not in line]
    assert installs == [f"{tmp_path / 'venv'}/bin/pip install -q -e ."]
    assert any(line.startswith("bash scripts/demo.sh ") for line in demo), demo
    script = (ROOT / "scripts" / "demo.sh").read_text()
    assert 'optimizer" run examples/csv-report --provider sim' in script
    # CI (.ci/run: make setup, then make test) and the benches install everything.
    for target in ("setup", "test", "bench"):
        assert any("-e '.[dev,peers]'" in line for line in _planned(target, tmp_path / "venv"))
