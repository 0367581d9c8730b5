"""Per-version benchmark files (benchmark.json, benchmark.md, the baseline linked in) and the
analyst notes that join the eval-feedback aggregate, rebuilt from state.db and the run folders.
Never grades or runs anything: it summarizes what is committed."""

from __future__ import annotations

import math
import os

from optimizer import schemas
from optimizer.grade.aggregate import aggregate
from optimizer.grade.markdown import render_markdown
from optimizer.grade.notes import analyst_notes
from optimizer.grade.unit import committed
from optimizer.inputs.evals import EvalSet
from optimizer.search.state import RunState
from optimizer.store import gradings, versions
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


def record_scores(run: RunState, label: str) -> None:
    """A version's score is over every committed, scored train run it has, whichever stage added
    them; never over what one caller happens to hold (a resume would record fewer runs). Runs are
    read in (eval, run number) order and summed exactly, so no completion order shows in the
    number; unscored runs and judge errors are left out (docs/design.md §7)."""
    rows = gradings.scored_with_skill(run.store, f"{label}/")
    scores: dict[int, list[float]] = {}
    rates: dict[int, list[float]] = {}
    for row in rows:
        e = row["eval_id"]
        if e in run.train:
            rates.setdefault(e, []).append(row["pass_rate"])
            if row["score"] is not None:
                scores.setdefault(e, []).append(row["score"])
    per_eval, rate = means(scores), means(rates)
    versions.record_scores(
        run.store,
        label,
        score=math.fsum(per_eval.values()) / len(per_eval) if per_eval else None,
        pass_rate=math.fsum(rate.values()) / len(rate) if rate else None,
        per_eval=per_eval,
    )


def means(scores: dict[int, list[float]]) -> dict[int, float]:
    """Per eval, the mean of its scores, in eval order; evals without scores are left out."""
    return {e: math.fsum(v) / len(v) for e, v in sorted(scores.items()) if v}
