"""What the views read from a run's folders rather than from state.db: a version's diff and rationale,
its runs and their failing expectations, the blind comparisons unblinded, and where each setting
came from. Read only; a file that is missing or damaged reads as absent, never as an error."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable
from pathlib import Path

from typing_extensions import TypedDict

from optimizer import config
from optimizer.grade.preview import natural_key
from optimizer.inputs import skill as skills
from optimizer.report.info import Setting
from optimizer.report.read import read_json
from optimizer.store.files import Workspace

# -- a version's folder ------------------------------------------------------------------------


def version_diff(ws: Workspace, parent: str | None, label: str) -> str | None:
    """The file diff of a version against its parent; proposal.md's copy when a snapshot is gone."""
    if parent and ws.skill(parent).is_dir() and ws.skill(label).is_dir():
        return skills.unified_diff(ws.skill(parent), ws.skill(label))
    try:
        text = (ws.version(label) / "proposal.md").read_text(encoding="utf-8")
    except OSError:
        return None
    m = re.search(r"```diff\n(.*?)```", text, re.S)
    return m.group(1) if m else None


def rationale(proposal_md: str) -> str:
    """The '## Rationale' section of proposal.md (the whole text when it has none)."""
    m = re.search(r"^## Rationale\s*\n(.*?)(?=^## |\Z)", proposal_md, re.S | re.M)
    return (m.group(1) if m else proposal_md).strip()


def run_dirs(folder: Path, configuration: str = "with_skill") -> list[Path]:
    """Run folders under a version (or baseline) folder: eval-*/<configuration>/run-*."""
    return sorted(
        (p for p in folder.glob(f"eval-*/{configuration}/run-*") if p.is_dir()), key=natural_key
    )


def eval_of(run_dir: Path) -> str:
    return run_dir.parent.parent.name.removeprefix("eval-")


class Failing(TypedDict):
    """An expectation that failed in some runs of an eval, and the first evidence given."""

    eval_id: str
    text: str
    failed: int
    runs: int
    evidence: str


def failing(folder: Path) -> list[Failing]:
    """Failed expectations over the with_skill runs of a version, most frequent first."""
    return tally_failing(
        (eval_of(run), read_json(run / "grading.json")) for run in run_dirs(folder)
    )


def tally_failing(gradings: Iterable[tuple[str, object]]) -> list[Failing]:
    """failing() over (eval id, grading.json) pairs already read, in run order."""
    seen: dict[tuple[str, str], Failing] = {}
    for eval_id, grading in gradings:
        for item in (grading if isinstance(grading, dict) else {}).get("expectations") or []:
            key = (eval_id, str(item.get("text", "")))
            entry = seen.setdefault(
                key, {"eval_id": key[0], "text": key[1], "failed": 0, "runs": 0, "evidence": ""}
            )
            entry["runs"] += 1
            if not item.get("passed"):
                entry["failed"] += 1
                entry["evidence"] = entry["evidence"] or str(item.get("evidence", ""))
    out = [e for e in seen.values() if e["failed"]]
    return sorted(out, key=lambda e: (-e["failed"], natural_key(e["eval_id"]), e["text"]))


def _unblind(assignment: object, name: str, k: str) -> dict:
    """Which side sat behind A and B (compare.py records {"comparisons": [{k, eval_id, A, B}]})."""
    items = assignment.get("comparisons") if isinstance(assignment, dict) else assignment
    if isinstance(assignment, dict) and isinstance(assignment.get(name) or assignment.get(k), dict):
        return assignment.get(name) or assignment[k]
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and str(item.get("k", item.get("file", ""))) in (name, k):
            return item
    return {}


def comparisons(folder: Path, label: str | None = None, parent: str | None = None) -> list[dict]:
    """Every comparison-<k>.json of a version, unblinded through assignment.json: the sides
    "child" and "parent" become the version labels when they are given."""
    cdir = folder / "comparison"
    assignment = read_json(cdir / "assignment.json")
    names: dict[str | None, str | None] = {"child": label, "parent": parent}
    out = []
    for path in sorted(cdir.glob("comparison-*.json"), key=natural_key):
        data = read_json(path)
        if not isinstance(data, dict):
            continue
        k = path.stem.removeprefix("comparison-")
        sides = _unblind(assignment, path.name, k)
        a, b = (names.get(sides.get(x)) or sides.get(x) for x in ("A", "B"))
        winner = str(data.get("winner", ""))
        key = {"output_a": "A", "output_b": "B"}.get(winner, winner)
        out.append(
            {
                "name": path.name,
                "eval_id": sides.get("eval_id"),
                "run": sides.get("run"),
                "winner": winner,
                "winner_version": {"A": a, "B": b}.get(key),
                "A": a,
                "B": b,
                "reasoning": str(data.get("reasoning", "")),
            }
        )
    return out


# -- run.toml provenance -----------------------------------------------------------------------


def provenance(run_toml: Path) -> list[Setting]:
    """Settings of run.toml that differ from the built-in defaults or were set on purpose (flag,
    --set, environment, the evals file), each with the source its trailing comment names."""
    try:
        text = run_toml.read_text(encoding="utf-8")
        values = tomllib.loads(text)
    except (OSError, tomllib.TOMLDecodeError):
        return []
    defaults = config.Settings().model_dump()
    out: list[Setting] = []
    section = None
    for line in text.splitlines():
        header = re.fullmatch(r"\s*\[([^\]]+)\]\s*", line)
        if header:
            section = header.group(1)
            continue
        if (
            section is None
            or section.startswith("prices")
            or "=" not in line
            or line.lstrip().startswith("#")
        ):
            continue
        body, sep, source = line.rpartition("  # ")
        key = (body if sep else line).split("=", 1)[0].strip()
        if not sep or key not in (values.get(section) or {}):
            continue
        value = values[section][key]
        default = (defaults.get(section) or {}).get(key)
        deliberate = not source.startswith(("default", "run.toml")) and not source.endswith(".toml")
        if value != default or deliberate:
            out.append(
                {
                    "key": f"{section}.{key}",
                    "value": value,
                    "default": default,
                    "source": source.strip(),
                }
            )
    return out
