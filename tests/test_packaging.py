"""What an installed package holds: every package and data file of optimizer/, and prompts/ as
optimizer/prompts. A broken install (a template missing) is a failure of the work, not bad input.
scripts/check-wheel.sh builds the real wheel, installs it and runs the demo (CI runs it)."""

from __future__ import annotations

import tomllib
from fnmatch import fnmatch
from pathlib import Path

from optimizer.model import prompts as prompting

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "csv-report"


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
