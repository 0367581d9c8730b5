"""Per-version benchmark files (benchmark.json, benchmark.md, the baseline linked in) and the
analyst notes that join the eval-feedback aggregate, rebuilt from state.db and the run folders.
Never grades or runs anything: it summarizes what is committed."""

from __future__ import annotations

import os

from optimizer import schemas
from optimizer.grade.aggregate import aggregate, analyst_notes
from optimizer.grade.markdown import render_markdown
from optimizer.grade.unit import committed
from optimizer.inputs.evals import EvalSet
from optimizer.search.state import RunState
from optimizer.store.files import write_json, write_text

ACTIONS = {
    "non_discriminating": "Replace or sharpen it: it passes with and without the skill.",
    "flaky": "Make it deterministic, or check it structurally.",
    "skill_hurts": "Check whether the eval or the skill is wrong here.",
}


def write_benchmark(run: RunState, evalset: EvalSet, label: str) -> schemas.Benchmark:
    """v<N>/ as a complete benchmark folder skill-creator's tools can read: its with_skill runs,
    the baseline's without_skill runs linked beside them, benchmark.json and benchmark.md."""
    root = run.ws.root
    with_skill = committed(run.store, root, evalset, f"{label}/", run.train)
    without = (
        committed(run.store, root, evalset, "baseline/", run.train)
        if run.settings.evals.baseline_comparison
        else []
    )
    for e in run.train:
        link = run.ws.eval_dir(label, e) / "without_skill"
        target = root / "baseline" / f"eval-{e}" / "without_skill"
        if without and target.is_dir() and not link.exists() and link.parent.is_dir():
            os.symlink(os.path.relpath(target, link.parent), link)
    benchmark = aggregate(
        run.skill_name,
        [evalset.by_id(e) for e in run.train],
        {"with_skill": with_skill, **({"without_skill": without} if without else {})},
        skill_path=f"{label}/skill",
        executor_model=run.settings.models.executor,
        analyzer_model=run.settings.models.grader,
        runs_per_configuration=max((it[1].run_number for it in with_skill), default=0),
        simulated=run.client.simulated,
    )
    folder = run.ws.version(label)
    write_json(folder / "benchmark.json", benchmark, schemas.Benchmark)
    write_text(folder / "benchmark.md", render_markdown(benchmark))
    return benchmark


def analyst_suggestions(run: RunState, evalset: EvalSet) -> list[tuple[str | None, str, str]]:
    """Analyst notes of the current best against the baseline, as eval-feedback suggestions."""
    with_skill = committed(run.store, run.ws.root, evalset, f"{run.best()}/", run.train)
    if not with_skill:
        return []
    without = committed(run.store, run.ws.root, evalset, "baseline/", run.train)
    notes = analyst_notes(
        [evalset.by_id(e) for e in run.train], {"with_skill": with_skill, "without_skill": without}
    )
    return [(n.expectation, n.text, ACTIONS[n.kind]) for n in notes if n.kind in ACTIONS]
