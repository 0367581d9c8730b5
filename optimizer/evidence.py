"""What the proposer may know about a parent: its failures on train evals with the judge's
evidence, the judge's remarks on the evals, analyses, human feedback and the attempts that lost.
Never reads a run of the sealed test split."""

from __future__ import annotations

import json
from collections import Counter

from . import schemas
from .files import Workspace, read_json
from .propose import Failure, Feedback
from .store import Store

MAX_FAILURES = 12


def gather(ws: Workspace, store: Store, parent: str, train: list[int]) -> Feedback:
    counts: Counter[tuple[int, str]] = Counter()
    evidence: dict[tuple[int, str], str] = {}
    remarks: Counter[str] = Counter()
    for e in train:
        rows = store.query("select grading_json from gradings where key like ? and grading_json is not null",
                           [f"{parent}/eval-{e}/with_skill/run-%"])
        for row in rows:
            grading = json.loads(row["grading_json"])
            for item in grading.get("expectations", []):
                if not item.get("passed"):
                    counts[(e, item["text"])] += 1
                    evidence.setdefault((e, item["text"]), item.get("evidence", ""))
            feedback = grading.get("eval_feedback") or {}
            if feedback.get("overall"):
                remarks[feedback["overall"]] += 1
    failures = [Failure(e, text, n, evidence[(e, text)]) for (e, text), n in counts.most_common(MAX_FAILURES)]
    return Feedback(
        failures=failures,
        judge_feedback=[text for text, _ in remarks.most_common(5)],
        analysis_suggestions=_analysis_suggestions(ws, store, parent),
        human_feedback=_human_feedback(ws),
        lost_attempts=_lost_attempts(store, parent),
    )


def _analysis_suggestions(ws: Workspace, store: Store, parent: str) -> list[str]:
    """The parent's own analysis, then that of its latest analysed child."""
    labels = [parent] + [r["label"] for r in store.query(
        "select label from versions where parent = ? and decision is not null order by rowid desc",
        [parent])]
    out: list[str] = []
    for label in labels:
        path = ws.version(label) / "analysis.json"
        if path.is_file():
            analysis = read_json(path)
            out += [f"[{s.get('priority', '?')}] {s.get('suggestion', '')}"
                    for s in analysis.get("improvement_suggestions", [])]
        if len(out) >= 6:
            break
    return out[:6]


def _human_feedback(ws: Workspace) -> list[str]:
    if not ws.feedback.is_file():
        return []
    try:
        feedback = schemas.Feedback.model_validate(read_json(ws.feedback))
    except (ValueError, OSError):
        return []  # a broken feedback.json is reported by `optimizer review`, not fatal here
    return [f"{r.run_id}: {r.feedback.strip()}" for r in feedback.reviews if r.feedback.strip()]


def _lost_attempts(store: Store, parent: str) -> list[str]:
    rows = store.query(
        "select v.summary, d.reason from versions v join decisions d on d.version = v.label "
        "where v.parent = ? and v.decision in ('lost', 'tie') order by v.rowid", [parent])
    return [f"{r['summary']} — {r['reason']}" for r in rows]
