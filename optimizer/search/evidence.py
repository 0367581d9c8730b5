"""What the proposer may know about a parent: its failures on train evals with the judge's
evidence and the end of a failing run's transcript, what each eval costs, tool calls that recur
across evals (work a script could do), the judge's remarks, analyses, human feedback and the
attempts that lost. Never reads a run of the sealed test split."""

from __future__ import annotations

import math
import re
from collections import Counter

from optimizer import schemas
from optimizer.grade.render import read_text, truncate
from optimizer.search import work
from optimizer.search.proposal import EvalCost, Failure, Feedback
from optimizer.store import gradings, versions
from optimizer.store.db import Store
from optimizer.store.files import Workspace, read_json

MAX_FAILURES = 12
MAX_EXCERPTS = 4  # transcript excerpts, for the most frequent failures
EXCERPT_CHARS = 1_500


def gather(ws: Workspace, store: Store, parent: str, train: list[int]) -> Feedback:
    """Failures are read run by run in (eval, run number) order; the evidence kept for a failure
    is that of its lowest-numbered run, and ties in the counts are broken by eval id, then text,
    so the request never depends on which run finished first."""
    counts: Counter[tuple[int, str]] = Counter()
    first: dict[tuple[int, str], tuple[str, int]] = {}  # evidence and run of the lowest failing run
    remarks: Counter[str] = Counter()
    for e in sorted(train):
        for n, grading in _gradings(store, parent, e):
            for item in grading.expectations:
                if not item.passed:
                    counts[(e, item.text)] += 1
                    first.setdefault((e, item.text), (item.evidence, n))
            overall = grading.eval_feedback.overall if grading.eval_feedback else ""
            if overall:
                remarks[overall] += 1
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0][0], kv[0][1]))
    failures = []
    for k, ((e, text), count) in enumerate(ranked[:MAX_FAILURES]):
        said, n = first[(e, text)]
        excerpt = ""
        if k < MAX_EXCERPTS:  # the tail: where a run goes wrong, it usually ends
            transcript = read_text(ws.trial_dir(parent, e, "with_skill", n) / "transcript.md")
            excerpt = (
                truncate(transcript, EXCERPT_CHARS, head=EXCERPT_CHARS // 5) if transcript else ""
            )
        failures.append(Failure(e, text, count, said, excerpt))
    runs = _runs(store, parent, train)
    return Feedback(
        failures=failures,
        costs=_costs(ws, store, parent, runs),
        repeated_work=work.repeated(ws, parent, runs),
        judge_feedback=[
            text for text, _ in sorted(remarks.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
        ],
        analysis_suggestions=_analysis_suggestions(ws, store, parent),
        human_feedback=_human_feedback(ws, train),
        lost_attempts=_lost_attempts(store, parent),
    )


def _runs(store: Store, parent: str, train: list[int]) -> list[tuple[int, int]]:
    """(eval, run number) of the parent's scored with_skill runs of train evals, in that order."""
    rows = gradings.scored_with_skill(store, f"{parent}/")
    return [(r["eval_id"], r["run_number"]) for r in rows if r["eval_id"] in train]


def _costs(ws: Workspace, store: Store, parent: str, runs: list[tuple[int, int]]) -> list[EvalCost]:
    """Per eval the mean pass rate, tokens and turns: what the skill costs, not only whether it
    passes."""
    rows = {(r["eval_id"], r["run_number"]): r for r in gradings.with_tokens(store, f"{parent}/")}
    per_eval: dict[int, list[tuple[float, float, float]]] = {}
    for e, n in runs:
        row = rows.get((e, n))
        if row is None:
            continue
        metrics = ws.trial_dir(parent, e, "with_skill", n) / "outputs" / "metrics.json"
        turns = (read_json(metrics).get("total_steps") or 0) if metrics.is_file() else 0
        per_eval.setdefault(e, []).append((row["pass_rate"] or 0.0, row["tokens"] or 0, turns))
    return [
        EvalCost(e, len(v), *(math.fsum(x[i] for x in v) / len(v) for i in range(3)))
        for e, v in sorted(per_eval.items())
    ]


def _gradings(store: Store, parent: str, eval_id: int) -> list[tuple[int, schemas.Grading]]:
    """(run number, grading) of the parent's scored with_skill runs of one eval, by run number;
    unscored runs and judge errors say nothing about the skill."""
    return gradings.scored_gradings(store, f"{parent}/", eval_id)


def _analysis_suggestions(ws: Workspace, store: Store, parent: str) -> list[str]:
    """The parent's own analysis, then that of its latest analysed child."""
    labels = [parent] + versions.decided_children(store, parent)
    out: list[str] = []
    for label in labels:
        path = ws.version(label) / "analysis.json"
        if path.is_file():
            analysis = read_json(path)
            out += [
                f"[{s.get('priority', '?')}] {s.get('suggestion', '')}"
                for s in analysis.get("improvement_suggestions", [])
            ]
        if len(out) >= 6:
            break
    return out[:6]


def _human_feedback(ws: Workspace, train: list[int]) -> list[str]:
    """Reviews of runs of train evals only, in run-id order: a remark on a sealed test run (or
    on a run of an eval this run does not train on) must never reach a proposer."""
    if not ws.feedback.is_file():
        return []
    try:
        feedback = schemas.Feedback.model_validate(read_json(ws.feedback))
    except (ValueError, OSError):
        return []  # a broken feedback.json is reported by `optimizer review`, not fatal here
    kept = [r for r in feedback.reviews if r.feedback.strip() and train_run(r.run_id, train)]
    return [f"{r.run_id}: {r.feedback.strip()}" for r in sorted(kept, key=lambda r: r.run_id)]


_RUN_ID = re.compile(r"(?:v\d+|baseline)-eval-(\d+)-(?:with_skill|without_skill)-run-\d+")


def train_run(run_id: str, train: list[int]) -> bool:
    """A feedback.json run id (docs/design.md §5) of a run of a train eval, outside the sealed test/."""
    m = _RUN_ID.fullmatch(run_id)
    return m is not None and int(m.group(1)) in train


def _lost_attempts(store: Store, parent: str) -> list[str]:
    return [f"{summary} — {reason}" for summary, reason in versions.lost_children(store, parent)]
