"""Read-only access to a run folder for the views, the report and the review server: one RunView
(report/view.py) from state.db, else, for a folder without one, from history.json in either form.
Never writes, migrates or locks anything: a daemon may be running."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from optimizer import words
from optimizer.decide import verdict
from optimizer.errors import BadInput
from optimizer.report import caveats
from optimizer.report.info import Proposals
from optimizer.report.view import Node, RunView
from optimizer.schemas import Adoption
from optimizer.store import (
    adoptions,
    decisions,
    gradings,
    iterations,
    ledger,
    readonly,
    resumes,
    runs,
    trials,
    versions,
)
from optimizer.store.decisions import DecisionRecord
from optimizer.store.errors import StoreError
from optimizer.store.files import Workspace
from optimizer.store.iterations import Iteration
from optimizer.store.lock import running_pid
from optimizer.store.runs import Run
from optimizer.store.versions import Version

DECISIONS = ("baseline", "won", "lost", "tie")


def label_key(label: str) -> tuple[int, str]:
    """v2 before v10."""
    m = re.fullmatch(r"v(\d+)", label or "")
    return (int(m.group(1)), "") if m else (10**9, label or "")


def read_json(path: Path) -> Any:
    """A JSON file, or None when absent or unreadable (a run in progress may be mid-rename)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def seconds_between(start: str | None, end: str | None) -> float | None:
    try:
        a = datetime.fromisoformat(str(start).replace("Z", "+00:00"))
        b = datetime.fromisoformat(str(end).replace("Z", "+00:00"))
    except (TypeError, ValueError):
        return None
    return max(0.0, (b - a).total_seconds())


def load(run_dir: Path, *, with_calls: bool = False) -> RunView:
    data = _load(Workspace(run_dir), with_calls)
    for node in data.nodes:
        node.score_ci, node.score_evals = caveats.score_interval(data.root, node.label)
    test = data.run.test
    data.warnings = caveats.annotate(
        data.root, data.nodes, data.current_best, data.run, data.settings, test
    )
    refused = every_proposal_refused(data.iterations)
    if refused:  # said where the run is read, not only in the JSON log
        data.warnings.insert(0, refused)
    return data


def every_proposal_refused(iterations: list[Iteration]) -> str | None:
    """'every proposal was refused (2 of 2); the first: ...' when no proposal of the run became a
    version because each was refused; the first refusal by iteration and proposal."""
    made = [o for it in iterations for _, o in sorted(it.candidates.items())]
    refused = [o for o in made if "rejected" in o]
    if not refused or len(refused) < len(made):
        return None
    first = (refused[0].get("rejected") or ["no reason kept"])[0]
    return (
        f"every proposal was refused ({len(refused)} of {len(made)}), so no version was made; "
        f"the first: {first}"
    )


def _load(ws: Workspace, with_calls: bool) -> RunView:
    run_dir = ws.root
    if ws.state_db.is_file():
        try:
            return _from_db(ws, with_calls)
        except StoreError as exc:  # not a database, pages damaged past the header, a bad column
            raise BadInput(*exc.naming(ws.state_db)) from None
    if ws.history.is_file():
        return _from_history(ws)
    raise BadInput(
        words.not_a_run(
            run_dir, "state.db and no history.json", "pass the folder `optimizer run` created."
        )
    )


def _from_db(ws: Workspace, with_calls: bool) -> RunView:
    with readonly.View(ws.state_db, live=running_pid(ws) is not None) as db:
        run = runs.row(db)
        if run is None:  # an empty file, or `optimizer run` killed while it created the folder
            raise BadInput(
                f"{ws.state_db}: holds no run; restore it from a copy, or start the run "
                "again with `optimizer run`."
            )
        settings = run.settings
        best = run.best
        decided = decisions.all_of(db)
        spent = ledger.by_scope(db)
        done = trials.last_completed(db)
        scoped = any(scope is not None for scope in spent)  # else cost per version is unknown
        nodes = [
            _node(v, decided.get(v.label), spent if scoped else None, done.get(v.label), best)
            for v in versions.all_of(db)
        ]
        data = RunView(
            root=ws.root,
            source="state.db",
            run=run,
            nodes=nodes,
            current_best=best,
            simulated=(settings.get("llm") or {}).get("provider") == "sim",
            ledger=ledger.report_totals(db),
            iterations=iterations.all_of(db),
            resumes=resumes.all_of(db),
        )
        data.adoptions = adoptions.read(db, spent)
        data.unscored = gradings.unscored_keys(db)
        if with_calls:
            data.calls = ledger.priced_calls(db)
    return data  # history.json is written from state.db, never read back beside it


# history.json as parsed, its seed form checked (inputs/artifacts.check_data): field by field, as
# the Nodes below read it.
History = dict[str, Any]


def _node(
    v: Version,
    d: DecisionRecord | None,
    spent: Mapping[str | None, float] | None,
    done: str | None,
    best: str | None,
) -> Node:
    """One version as the views read it: its row, its decision's numbers and claim, what it
    cost (None when calls were not scoped by version) and how long it took to decide."""
    selection = d.selection if d else {}
    low, high = (d.ci_low, d.ci_high) if d else (None, None)
    end = (d.decided_at if d else None) or (done if v.decision else None)
    return Node.model_validate(
        {
            "label": v.label,
            "parent": v.parent,
            "iteration": v.iteration,
            "decision": verdict.word(v.decision, low, high),
            "phase": v.phase,
            "status": v.status,
            "error": v.error,
            "summary": v.summary,
            "rationale": v.rationale,
            "score": v.score,
            "pass_rate": v.pass_rate,
            "delta": d.delta if d else None,
            "ci": _pair(low, high),
            "ci_level": caveats.decision_level((selection.get("interval") or {}).get("confidence")),
            "reason": d.reason if d else None,
            "comparator": selection.get("comparator"),
            # the claim a promotion makes, and the night's control it was made under
            "scope": selection.get("scope"),
            "alpha": selection.get("alpha"),
            "night": selection.get("night"),
            "delta_evals": selection.get("evals") or selection.get("queries"),
            "cost_usd": None if spent is None else round(spent.get(v.label) or 0.0, 6),
            "seconds": seconds_between(v.created_at or None, end),
            "created_at": v.created_at or None,
            "decided_at": d.decided_at if d else None,
            "is_best": v.label == best,
            "per_eval": {str(k): score for k, score in v.per_eval.items()},
        }
    )


def _from_history(ws: Workspace) -> RunView:
    """A run folder without state.db, read from its history.json in either seed form."""
    history = _checked_history(ws)
    if isinstance(history.get("versions"), list):
        return _from_versions(ws, history)
    if not isinstance(history.get("iterations"), list):
        raise BadInput(
            f"{ws.history}: has neither 'iterations' (seed 002) nor 'versions' (seed 001)."
        )
    return _from_iterations(ws, history)


def _checked_history(ws: Workspace) -> History:
    """history.json parsed and checked against its seed form: one sentence when it is not."""
    from optimizer.inputs.artifacts import check_data, detect_form

    history = read_json(ws.history)
    if not isinstance(history, dict):
        raise BadInput(f"{ws.history}: not valid JSON; restore it or rebuild it from state.db.")
    if isinstance(history.get("versions"), list) or isinstance(history.get("iterations"), list):
        problems = check_data(detect_form("history", history)[1], history)
        if problems:  # wrong types would surface as a traceback below
            raise BadInput(
                f"{ws.history}: not a valid history file ({problems[0]}); restore it or "
                "rebuild it from state.db."
            )
    return history


def _from_versions(ws: Workspace, history: History) -> RunView:
    """Seed 001: a description run's versions, one after the other."""
    nodes: list[History] = []
    prev = None
    for item in history["versions"]:
        label = f"iteration {item.get('iteration', len(nodes))}"
        nodes.append(
            {
                "label": label,
                "parent": prev,
                "iteration": item.get("iteration"),
                "description": item.get("description", ""),
                "pass_rate": item.get("pass_rate"),
                "precision": item.get("precision"),
                "recall": item.get("recall"),
                "decision": None,
                "is_best": False,
            }
        )
        prev = label
    return RunView(
        root=ws.root,
        source="history.json",
        form="versions",
        nodes=_nodes(ws, nodes),
        history=history,
        simulated=bool(history.get("simulated")),
    )


def _from_iterations(ws: Workspace, history: History) -> RunView:
    """Seed 002: the lineage of versions with their decisions, and the run's own fields."""
    best = history.get("current_best")
    nodes = [_iteration_node(it, best) for it in history["iterations"]]
    return RunView(
        root=ws.root,
        source="history.json",
        form="iterations",
        # history.json's fields under the row's names (None when it has none)
        run=Run(
            skill_name=_text(history.get("skill_name")),
            started_at=_text(history.get("started_at")),
            stop_reason=_text(history.get("stop_reason")),
            test=test if isinstance(test := history.get("test"), dict) else None,
        ),
        nodes=_nodes(ws, nodes),
        current_best=best,
        history=history,
        simulated=bool(history.get("simulated")),
        adoptions=[Adoption.model_validate(a) for a in history.get("adoptions") or []],
    )


def _iteration_node(it: History, best: object) -> History:
    """One entry of seed 002's iterations under the Node's names."""
    ci = it.get("ci") if isinstance(it.get("ci"), list) and len(it["ci"]) == 2 else None
    return {
        "label": it.get("version"),
        "parent": it.get("parent"),
        "iteration": it.get("iteration"),
        "decision": it.get("grading_result"),
        "phase": it.get("decided_at_stage"),
        "status": "decided",
        "summary": it.get("summary") or "",
        "rationale": "",
        "score": it.get("overall_efficiency"),
        "pass_rate": it.get("expectation_pass_rate"),
        "delta": it.get("delta"),
        "ci": _pair(*ci) if ci else None,
        "reason": it.get("reason"),
        "ci_level": caveats.decision_level(None),
        "comparator": it.get("comparator"),
        "cost_usd": it.get("cost_usd"),
        "seconds": None,
        "created_at": it.get("created_at"),
        "decided_at": None,
        "is_best": bool(it.get("is_current_best")) or it.get("version") == best,
        "per_eval": {},
    }


def _nodes(ws: Workspace, entries: list[dict[str, Any]]) -> list[Node]:
    """history.json's versions as Nodes; one sentence when an entry's field has the wrong type."""
    try:
        return [Node.model_validate(e) for e in entries]
    except ValidationError as exc:
        where = ".".join(str(p) for p in exc.errors()[0]["loc"])
        raise BadInput(
            f"{ws.history}: not a valid history file (a version's {where} has the wrong type); "
            "restore it or rebuild it from state.db."
        ) from None


def proposals(iterations: list[Iteration]) -> Proposals:
    """What became of every proposal: versions made, duplicates, and rejections counted by reason
    (most frequent first), so a run that rejects most of its proposals says so and why."""
    from optimizer.schemas import reason_of

    made = [o for it in iterations for _, o in sorted(it.candidates.items())]
    reasons: dict[str, int] = {}
    for o in made:
        if "rejected" in o:
            for reason in o.get("reasons") or sorted({reason_of(p) for p in o["rejected"]}):
                reasons[reason] = reasons.get(reason, 0) + 1
    return {
        "proposals": len(made),
        "versions": sum("label" in o for o in made),
        "duplicates": sum("duplicate" in o for o in made),
        "rejected": sum("rejected" in o for o in made),
        "reasons": dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))),
    }


def proposals_line(counts: Proposals) -> str:
    """'12 proposals: 5 versions, 1 duplicate, 6 rejected (old text not found 4, too large 2)'."""
    why = ", ".join(f"{reason} {n}" for reason, n in counts["reasons"].items())
    return (
        f"{words.plural(counts['proposals'], 'proposal')}: "
        f"{words.plural(counts['versions'], 'version')}, "
        f"{words.plural(counts['duplicates'], 'duplicate')}, {counts['rejected']} rejected"
        + (f" ({why})" if why else "")
    )


def _text(value: Any) -> str | None:
    """A history.json field that must be text, None when it is not (the file is the user's)."""
    return value if isinstance(value, str) else None


def _pair(low: Any, high: Any) -> list | None:
    return None if low is None or high is None else [low, high]


def per_eval(ws: Workspace, node: Node) -> dict[str, float]:
    """Mean score per eval id (as text): the store's split scores, else benchmark.json's table."""
    if node.per_eval:
        return {str(k): v for k, v in node.per_eval.items() if v is not None}
    bench = read_json(ws.version(node.label) / "benchmark.json") or {}
    return {
        str(r["eval_id"]): r["with_skill"]["mean"]
        for r in bench.get("per_eval") or []
        if (r.get("with_skill") or {}).get("mean") is not None
    }
