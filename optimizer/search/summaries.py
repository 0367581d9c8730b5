"""Per-version benchmark files (benchmark.json, benchmark.md, the baseline linked in) and the
analyst notes that join the eval-feedback aggregate, rebuilt from state.db and the run folders.
Never grades or runs anything: it summarizes what is committed."""

from __future__ import annotations

import json
import os
import re

from optimizer import schemas
from optimizer.execute.record import RunRecord
from optimizer.grade.aggregate import aggregate, analyst_notes, render_markdown
from optimizer.grade.judge import GradeOutcome, unscored
from optimizer.store.files import write_json, write_text

_KEY = re.compile(r"eval-(\d+)/(with_skill|without_skill)/run-(\d+)$")


def items(run, prefix: str, eval_ids: list[int]) -> list[tuple]:
    """(eval, record, outcome) of every graded run under `prefix` (a version label or baseline)."""
    rows = run.store.query("select * from gradings where key like ? order by key", [f"{prefix}/eval-%"])
    out = []
    for row in rows:
        m = _KEY.search(row["key"])
        if not m or int(m.group(1)) not in eval_ids or row["key"].count("/") != 3:
            continue
        run_dir = run.ws.root / row["key"]
        eval = run.evalset.by_id(int(m.group(1)))
        if row["status"] == "unscored":
            outcome = unscored(eval, None, row["error"] or "")
        else:
            outcome = GradeOutcome(
                status=row["status"],
                grading=schemas.Grading.model_validate(json.loads(row["grading_json"])),
                structural=schemas.Structural.model_validate(json.loads(row["structural_json"])),
                pass_rate=row["pass_rate"] or 0.0, rubric_normalized=row["rubric_normalized"],
                score=row["score"],
            )
        out.append((eval, RunRecord.load(run_dir), outcome))
    return sorted(out, key=lambda it: (it[0].id, it[1].run_number))


def write_benchmark(run, label: str) -> schemas.Benchmark:
    """v<N>/ as a complete benchmark folder skill-creator's tools can read: its with_skill runs,
    the baseline's without_skill runs linked beside them, benchmark.json and benchmark.md."""
    with_skill = items(run, label, run.train)
    without = items(run, "baseline", run.train) if run.settings.evals.baseline_comparison else []
    for e in run.train:
        link = run.ws.eval_dir(label, e) / "without_skill"
        target = run.ws.root / "baseline" / f"eval-{e}" / "without_skill"
        if without and target.is_dir() and not link.exists() and link.parent.is_dir():
            os.symlink(os.path.relpath(target, link.parent), link)
    benchmark = aggregate(
        run.skill_name, [run.evalset.by_id(e) for e in run.train],
        {"with_skill": with_skill, **({"without_skill": without} if without else {})},
        skill_path=f"{label}/skill", executor_model=run.settings.models.executor,
        analyzer_model=run.settings.models.analyzer,
        runs_per_configuration=max((it[1].run_number for it in with_skill), default=0),
        simulated=getattr(run.client, "simulated", False),
    )
    folder = run.ws.version(label)
    write_json(folder / "benchmark.json", benchmark, schemas.Benchmark)
    write_text(folder / "benchmark.md", render_markdown(benchmark))
    return benchmark


def analyst_suggestions(run) -> list[tuple[str | None, str, str]]:
    """Analyst notes of the current best against the baseline, as eval-feedback suggestions."""
    best = run.best()
    with_skill = items(run, best, run.train)
    if not with_skill:
        return []
    without = items(run, "baseline", run.train)
    notes = analyst_notes([run.evalset.by_id(e) for e in run.train],
                          {"with_skill": with_skill, "without_skill": without})
    actions = {
        "non_discriminating": "Replace or sharpen it: it passes with and without the skill.",
        "flaky": "Make it deterministic, or check it structurally.",
        "skill_hurts": "Check whether the eval or the skill is wrong here.",
    }
    return [(n.expectation, n.text, actions[n.kind]) for n in notes if n.kind in actions]
