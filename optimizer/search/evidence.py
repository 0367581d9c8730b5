"""What the proposer may know about a parent: its failures on train evals with the judge's
evidence, the judge's remarks on the evals, analyses, human feedback and the attempts that lost.
Never reads a run of the sealed test split."""

from __future__ import annotations

import json
import re
from collections import Counter

from optimizer import schemas
from optimizer.search.propose import Failure, Feedback
from optimizer.store.db import Store
from optimizer.store.files import Workspace, read_json

MAX_FAILURES = 12


def gather(ws: Workspace, store: Store, parent: str, train: list[int]) -> Feedback:
    """Failures are read run by run in (eval, run number) order; the evidence kept for a failure
    is that of its lowest-numbered run, and ties in the counts are broken by eval id, then text,
    so the request never depends on which run finished first."""
    counts: Counter[tuple[int, str]] = Counter()
    evidence: dict[tuple[int, str], str] = {}
    remarks: Counter[str] = Counter()
    for e in sorted(train):
        for grading in _gradings(store, f"{parent}/eval-{e}/with_skill"):
            for item in grading.get("expectations", []):
                if not item.get("passed"):
                    counts[(e, item["text"])] += 1
                    evidence.setdefault((e, item["text"]), item.get("evidence", ""))
            feedback = grading.get("eval_feedback") or {}
            if feedback.get("overall"):
                remarks[feedback["overall"]] += 1
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0][0], kv[0][1]))
    failures = [Failure(e, text, n, evidence[(e, text)]) for (e, text), n in ranked[:MAX_FAILURES]]
    return Feedback(
        failures=failures,
        judge_feedback=[text for text, _ in sorted(remarks.items(), key=lambda kv: (-kv[1], kv[0]))[:5]],
        analysis_suggestions=_analysis_suggestions(ws, store, parent),
        human_feedback=_human_feedback(ws, train),
        lost_attempts=_lost_attempts(store, parent),
    )


def _gradings(store: Store, prefix: str) -> list[dict]:
    """The scored gradings under `prefix` (e.g. v1/eval-2/with_skill) by run number; unscored runs
    and judge errors say nothing about the skill."""
    rows = store.query("select key, grading_json from gradings where key like ? and "
                       "grading_json is not null and status in ('ok', 'gated', 'exec_error')",
                       [f"{prefix}/run-%"])
    rows.sort(key=lambda r: run_number(r["key"]))
    return [json.loads(r["grading_json"]) for r in rows]


def run_number(key: str) -> int:
    """The n of a key ending in run-<n>: run-10 comes after run-9, as text order would not."""
    return int(key.rpartition("/run-")[2])


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
    """A feedback.json run id (DESIGN §5) of a run of a train eval, outside the sealed test/."""
    m = _RUN_ID.fullmatch(run_id)
    return m is not None and int(m.group(1)) in train


def _lost_attempts(store: Store, parent: str) -> list[str]:
    rows = store.query(
        "select v.summary, d.reason from versions v join decisions d on d.version = v.label "
        "where v.parent = ? and v.decision in ('lost', 'tie') order by v.rowid", [parent])
    return [f"{r['summary']} — {r['reason']}" for r in rows]
