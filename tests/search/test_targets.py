"""A third target is one module and one registry line: a toy target that varies only references/
runs through the real engine and command line, with no change to optimizer/search/engine.py."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from inprocess import EXAMPLE, cli

from optimizer.inputs import skill as skills
from optimizer.search import lineage, targets
from optimizer.search.proposal import Candidate, Rejected
from optimizer.search.state import RunState, mark_baseline
from optimizer.search.target import TargetDecision

GOAL = 3  # notes in references/ a skill needs for the toy score to reach 1.0


class ReferencesTarget:
    """Varies references/ only; a version scores the share of GOAL reference files it has, the
    same on every eval. No model call: the point is what the engine asks of a target."""

    name = "references"
    phase = "references"

    def __init__(self, run: RunState) -> None:
        self.run = run

    def _score(self, label: str) -> float:
        notes = (self.run.ws.skill(label) / "references").glob("note-*.md")
        return min(1.0, len(list(notes)) / GOAL)

    def _record(self, label: str) -> float:
        score = self._score(label)
        with self.run.store.atomic():
            self.run.store.db["versions"].update(
                label,
                {
                    "score": score,
                    "pass_rate": score,
                    "split_scores_json": json.dumps({str(e): score for e in self.run.train}),
                },
            )
        return score

    async def start(self) -> str | None:
        self._record("v0")
        mark_baseline(self.run, self.phase)
        return None

    async def propose(self, parent: str, dest: Path, sample: int) -> Candidate | Rejected:
        if self._score(parent) >= 1.0:
            return Rejected(["references/ is complete"])
        shutil.copytree(self.run.ws.skill(parent), dest)
        (dest / "references").mkdir(exist_ok=True)
        (dest / "references" / f"note-{sample}.md").write_text(f"# Note {sample}\n")
        return Candidate(dest, f"add references/note-{sample}.md", "one more reference")

    async def judge(self, label: str, parent: str) -> TargetDecision:
        delta = self._score(label) - self.run.score(parent)
        verdict = "won" if delta > 0 else "lost"
        reason = f"{delta:+.2f} references score"
        return TargetDecision(
            self.phase, {"decision": verdict, "reason": reason, "delta": delta}, (label,)
        )

    async def learn(self, label: str, parent: str, verdict: TargetDecision) -> bool:
        return True

    def record(self, label: str, phase: str) -> None:
        self._record(label)

    async def measure_test(self, label: str) -> dict:
        return {"score": self._score(label)}

    def write_lineage(self, iteration: int) -> None:
        run = self.run
        lineage.write_files(
            run.ws, run.store, simulated=True, skill_name=run.skill_name, iteration=iteration
        )


@contextmanager
def open_target(run: RunState) -> Iterator[ReferencesTarget]:
    yield ReferencesTarget(run)


def test_a_toy_target_runs_through_the_engine_unchanged(tmp_path, monkeypatch):
    monkeypatch.setitem(targets.TARGETS, "references", open_target)  # the one registry line
    run_dir = tmp_path / "run"
    cli(
        monkeypatch,
        None,
        "run",
        str(EXAMPLE),
        "--target",
        "references",
        "--provider",
        "sim",
        "--max-iterations",
        "5",
        "--run-dir",
        str(run_dir),
        "--set",
        "loop.proposals_per_iteration=1",
    )

    history = json.loads((run_dir / "history.json").read_text())
    versions = {v["version"]: v for v in history["iterations"]}
    assert len(versions) == 1 + GOAL  # v0, then one reference file per iteration until complete
    assert history["current_best"] == f"v{GOAL}"
    assert [versions[f"v{k}"]["parent"] for k in range(1, GOAL + 1)] == [
        f"v{k}" for k in range(GOAL)
    ]
    assert all(versions[f"v{k}"]["is_current_best"] is (k == GOAL) for k in range(GOAL + 1))
    # Only references/ was varied: every other file of the best is v0's.
    best, base = run_dir / "v3" / "skill", run_dir / "v0" / "skill"
    changed = {p for p in skills.files_of(best) if not p.startswith("references/")}
    assert changed == {p for p in skills.files_of(base) if not p.startswith("references/")}
    assert all((best / p).read_bytes() == (base / p).read_bytes() for p in changed)
    # The engine's own stop rule ended it, on the scores the target recorded.
    with sqlite3.connect(run_dir / "state.db") as db:
        assert "target" in db.execute("select stop_reason from runs").fetchone()[0]
        # Every child was judged, learnt from and recorded through the protocol: none failed.
        assert db.execute("select count(*) from versions where error is not null").fetchone() == (
            0,
        )


def test_run_names_the_registered_targets_when_one_is_unknown(monkeypatch):
    out = cli(monkeypatch, None, "run", str(EXAMPLE), "--target", "scripts", code=2)
    assert "--target 'scripts'" in out and "body" in out and "description" in out
