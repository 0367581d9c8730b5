"""`optimizer lineage`: the version tree with scores, intervals, decisions and costs, as data
(--json) and as a rich tree. Never writes to the run folder."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from optimizer import words
from optimizer.report import adopted, caveats, read
from optimizer.report.format import COLOURS, duration, emit, interval, money, num, pct, signed
from optimizer.schemas import Adoption


def lineage(run_dir: Path) -> dict:
    """The version tree as JSON-able data: each node with its children."""
    data = read.load(run_dir)
    sealed = sealed_scores(data.run.test)
    nodes = {
        n.label: {
            **n.shown(),
            "is_adopted": n.label == data.adopted,
            **gap(sealed.get(n.label), n.score),
            "children": [],
        }
        for n in data.nodes
    }
    roots: list[dict[str, Any]] = []
    for n in nodes.values():
        parent = nodes.get(n.get("parent") or "")
        (parent["children"] if parent is not None and parent is not n else roots).append(n)
    return {
        "run": {
            "id": data.run.id or data.root.name,
            "skill_name": data.run.skill_name,
            "source": data.source,
            "form": data.form,
            "simulated": data.simulated,
            "current_best": data.current_best,
            "status": data.run.status,
            "stop_reason": data.run.stop_reason,
            "warnings": data.warnings,
            "sealed": _sealed_line(data.run.test, data.current_best),
            "from_run": data.run.from_run,
            "adopted_line": adopted.adopted_line(data.adoptions, data.current_best, str(run_dir)),
        },
        **adopted.as_json(data.adoptions),
        "proposals": read.proposals(data.iterations),
        "promotions": caveats.promotions(data.nodes),
        "count": len(nodes),
        "tree": roots,
    }


def _sealed_line(test: object, best: str | None) -> str | None:
    """The sealed verdict with its size and interval, once the sealed test measured a best
    other than v0 (caveats.sealed_verdict)."""
    if best is None or best == "v0":
        return None
    numbers = caveats.sealed_numbers(test, best)
    return caveats.sealed_verdict(numbers, best) if numbers is not None else None


def sealed_scores(test: Mapping[str, Any] | None) -> dict[str, float]:
    """The sealed test's score of each version it measured (v0 and the final best)."""
    test = test or {}
    return {
        label: v["score"]
        for label, v in (test.get("versions") or {}).items()
        if isinstance(v, dict) and v.get("score") is not None
    }


def gap(sealed: float | None, train: float | None) -> dict[str, float | None]:
    """A version's sealed score and its gap to its train score (sealed − train): how much of what
    the search saw holds on evals it never saw. None where the sealed test did not measure it."""
    if sealed is None:
        return {"sealed": None, "sealed_gap": None}
    return {"sealed": sealed, "sealed_gap": None if train is None else round(sealed - train, 4)}


def node_text(n: dict) -> Text:
    text = Text(overflow="fold")
    if n.get("is_best"):
        text.append("★ ", style="bold yellow")
    text.append(n["label"], style="bold")
    if n.get("is_adopted"):
        text.append("  adopted", style="bold cyan")
    decision = n.get("decision")
    if n.get("status") == "failed":
        text.append(f"  failed: {n.get('error')}", style="red")
    elif decision is None:
        text.append(f"  pending ({n.get('status') or 'proposed'})", style="dim")
    else:
        text.append(f"  {n.get('verdict') or decision}", style=COLOURS.get(decision, ""))
        if n.get("phase") == "screening":
            text.append(" at screening", style="dim")
    if n.get("delta") is not None:
        text.append(
            f"  Δ {signed(n['delta'])}"
            + interval(
                n.get("ci"), n.get("delta_evals"), n.get("delta_unit"), level=n.get("ci_level", "")
            )
        )
    text.append(f"  score {num(n.get('score'))}")
    if n.get("score_ci"):
        text.append(
            interval(n["score_ci"], n.get("score_evals"), sign=False, level=caveats.SCORE_LEVEL),
            style="dim",
        )
    if n.get("sealed") is not None:
        gap_text = (
            f" ({signed(n['sealed_gap'])} against train)" if n.get("sealed_gap") is not None else ""
        )
        text.append(f"  sealed {num(n['sealed'])}{gap_text}", style="bold")
    text.append(f"  pass {pct(n.get('pass_rate'))}")
    text.append(f"  {money(n.get('cost_usd'))}  {duration(n.get('seconds'))}", style="dim")
    if n.get("summary"):
        text.append(f"  {n['summary']}", style="italic")
    return text


def print_lineage(console: Console, tree: dict) -> None:
    run = tree["run"]
    head = Text(
        f"{run.get('skill_name') or run['id']} lineage ({tree['count']} versions, from {run['source']})",
        style="bold",
    )
    if run["simulated"]:
        head.append("  SIMULATED", style="bold magenta")
    if run["form"] == "versions":
        emit(console, head)
        table = Table(show_edge=False)
        for col in ("iteration", "description", "pass rate", "precision", "recall"):
            table.add_column(col)
        for n in _flatten(tree["tree"]):
            table.add_row(
                Text(str(n.get("iteration"))),
                Text(n.get("description") or ""),
                Text(pct(n.get("pass_rate"))),
                Text(pct(n.get("precision"))),
                Text(pct(n.get("recall"))),
            )
        emit(console, table)
        _warn(console, run)
        return
    root = Tree(head)
    stack = [(root, n) for n in reversed(tree["tree"])]
    while stack:  # iterative, so a 200-deep chain of wins cannot hit the recursion limit
        parent, n = stack.pop()
        branch = parent.add(node_text(n))
        stack.extend((branch, c) for c in reversed(n["children"]))
    emit(console, root)
    if tree["proposals"]["proposals"]:
        emit(console, Text(read.proposals_line(tree["proposals"]), style="dim"))
    if tree.get("promotions"):
        emit(console, Text(tree["promotions"], style="dim"))
    for a in tree["adoptions"]:
        emit(console, Text(f"adoption {adopted.line(Adoption.model_validate(a))}"))
    emit(console, Text(f"adopted: {run['adopted_line']}", style="bold"))
    if run.get("stop_reason"):
        emit(console, Text(words.ended("stopped", run["stop_reason"]), style="dim"))
    if run.get("sealed"):
        emit(console, Text(run["sealed"]))
    _warn(console, run)


def _warn(console: Console, run: dict) -> None:
    # The inputs' small-suite sentence is for `run`, `status` and the summary to say; every view
    # repeating it buried the warnings about the versions themselves.
    for warning in run.get("warnings") or []:
        if not warning.startswith("small suite"):
            emit(console, Text(f"warning: {warning}", style="bold yellow"))


def _flatten(nodes: list[dict]) -> list[dict]:
    out, stack = [], list(reversed(nodes))
    while stack:
        n = stack.pop()
        out.append(n)
        stack.extend(reversed(n.get("children", [])))
    return out
