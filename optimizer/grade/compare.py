"""Blind comparator: every run pair it is given (select.compared_runs chooses which) is judged
twice, A and B swapped, and a verdict counts only when both orders agree. The second order is asked only when the first is
decisive (selection.second_order = "decisive"): a first-order tie or error can never become a
decisive swap-consistent verdict, the only kind the promotion rule counts, so the second call
could not change a decision. Never show a version label, a host path or whose output is whose;
never count a failed call as a verdict."""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog
from pydantic import ValidationError

from optimizer.decide.comparison import TALLY_COUNTS, ComparisonTally
from optimizer.grade.render import Rendered, content, render_view, task_sections
from optimizer.inputs.evals import Eval
from optimizer.model import ModelCallFailed, StructuredAnswerError
from optimizer.model.port import Client
from optimizer.model.prompts import load_prompt
from optimizer.schemas import Comparison
from optimizer.store.files import read_json, write_json
from optimizer.tags import tag

if TYPE_CHECKING:  # the SDK's types only: importing it costs 2 s (model/port.py)
    from anthropic.types import ContentBlockParam

__all__ = ["ComparisonTally", "build_request", "blind", "compare_versions"]

log = structlog.get_logger(__name__)

NEUTRAL_PATH, NEUTRAL_VERSION, NEUTRAL_CONFIG = "[path]", "[version]", "[configuration]"
MAX_OUTPUT_CHARS = 100_000  # per side: both sides must fit one request
MAX_IMAGES = 4  # per side, for the same reason
_VERSION = re.compile(r"\b[vV]\d+\b")
_CONFIG = re.compile(r"\bwith(?:out)?_skill\b")
_RUN_NUMBER = re.compile(r"^run-(\d+)$")


def _host_prefixes(run_dir: Path) -> list[str]:
    """Host folders that may appear in a run's outputs: the run folder up to the workspace root
    (the folder holding the `v<N>` version folder), or four levels up when there is none."""
    found: list[str] = []
    for path in {Path(run_dir), Path(run_dir).resolve()}:
        chain = [path, *path.parents]
        version = next((i for i, p in enumerate(chain) if _VERSION.fullmatch(p.name)), None)
        stop = version + 1 if version is not None else min(4, len(chain) - 1)
        found += [str(p) for p in chain[: stop + 1] if len(p.parts) > 2]
    return sorted(set(found), key=len, reverse=True)


def blind(text: str, prefixes: Sequence[str] = ()) -> str:
    """What the comparator sees of a run's file paths and contents. The run's host folders (the
    run folder up to the workspace root, as given and resolved) become `[path]`, version labels
    (`v0`, `V12`, as whole words) `[version]`, and `with_skill`/`without_skill`
    `[configuration]`. Ordinary words such as "parent" or "child" stay: they are common in real
    outputs and the prompt never uses them, so they cannot tell the sides apart. Paths are shown
    relative to outputs/, harness files (metrics.json, user_notes.md) not at all."""
    for prefix in prefixes:  # longest first, so a root never splits a longer folder
        text = text.replace(prefix, NEUTRAL_PATH)
    text = _VERSION.sub(NEUTRAL_VERSION, text)
    return _CONFIG.sub(NEUTRAL_CONFIG, text)


def render_side(run_dir: Path, label: str = "", attach: bool = True) -> Rendered:
    """One side's `<file path=..>` entries, blinded (paths relative to outputs/), with its images
    attached as `<label>1`, `<label>2`…. Office files and PDFs are shown as their (blinded) text;
    a PDF is not attached as a document, since its bytes cannot be blinded."""
    prefixes = _host_prefixes(run_dir)
    return render_view(
        run_dir,
        budget=MAX_OUTPUT_CHARS,
        shown=lambda t: blind(t, prefixes),
        prefix="",
        images=MAX_IMAGES,
        document_bytes=-1,
        label=label,
        attach=attach,
    )


def build_request(
    eval: Eval, a_dir: Path, b_dir: Path, *, attachments: bool = True
) -> str | list[ContentBlockParam]:
    """The user message: the task, its expectations and the two blinded outputs as A and B, then
    the images of A and of B (the text alone when neither side has any)."""
    a, b = render_side(a_dir, "A", attachments), render_side(b_dir, "B", attachments)
    parts = task_sections(eval)
    parts += [tag("output_a", a.text), tag("output_b", b.text)]
    return content("\n\n".join(parts), a.attachments + b.attachments)


def _run_number(path: Path, index: int) -> int:
    m = _RUN_NUMBER.match(Path(path).name)
    return int(m.group(1)) if m else index + 1


def _pairs(child: list[Path], parent: list[Path]) -> list[tuple[int, Path, Path]]:
    """Run k of the child with run k of the parent; a run without a partner is skipped."""
    theirs = {_run_number(p, i): p for i, p in enumerate(parent)}
    mine = {_run_number(p, i): p for i, p in enumerate(child)}
    return [(n, mine[n], theirs[n]) for n in sorted(mine) if n in theirs]


@dataclass
class _Slot:
    k: int
    eval_id: int
    run: int
    order: int
    child_is_a: bool
    a_dir: Path
    b_dir: Path
    known: bool = False  # k came from assignment.json, so comparison-<k>.json is this pair's
    verdict: str | None = None  # child | parent | tie, or None on error
    reasoning: str = ""
    error: str | None = None
    skipped: bool = False  # order 2 not asked: order 1 was not decisive


def _side_of(winner: str, child_is_a: bool) -> str:
    if winner == "TIE":
        return "tie"
    return "child" if (winner == "A") == child_is_a else "parent"


def _load_previous(path: Path) -> dict[tuple[int, int, int], dict[str, Any]]:
    if not path.is_file():
        return {}
    try:
        rows = read_json(path).get("comparisons", [])
        return {(int(r["eval_id"]), int(r["run"]), int(r["order"])): r for r in rows}
    except (ValueError, KeyError, TypeError, AttributeError):
        return {}  # an unreadable assignment only costs calls; the ledger still caches them


def _plan(evals, child_runs, parent_runs, previous, rng_seed) -> list[_Slot]:
    """Every comparison with its number k: numbers already on disk are kept, so added runs
    (the adaptive rule) extend the folder without renumbering what was judged."""
    next_k = max((int(r["k"]) for r in previous.values()), default=0) + 1
    slots = []
    for ev in evals:
        if ev.id not in child_runs or ev.id not in parent_runs:
            continue
        for run, c_dir, p_dir in _pairs(child_runs[ev.id], parent_runs[ev.id]):
            # Which version is A first is drawn per pair from the seed, not from a shared
            # sequence, so a resumed or extended comparison draws the same.
            first_child_a = random.Random(f"{rng_seed}:{ev.id}:{run}").random() < 0.5
            for order in (1, 2):
                old = previous.get((ev.id, run, order))
                if old is not None:
                    k, child_is_a = int(old["k"]), old["A"] == "child"
                else:
                    k, next_k = next_k, next_k + 1
                    child_is_a = first_child_a if order == 1 else not first_child_a
                a_dir, b_dir = (c_dir, p_dir) if child_is_a else (p_dir, c_dir)
                slots.append(_Slot(k, ev.id, run, order, child_is_a, a_dir, b_dir, old is not None))
    return slots


def _attachments(client: Client) -> bool:
    # A test's stand-in client may carry no settings: it takes attachments, like the API.
    settings = getattr(client, "settings", None)
    return bool(getattr(getattr(settings, "llm", None), "attachments", True))


async def _judge(client: Client, slot: _Slot, ev: Eval, out_dir: Path) -> None:
    path = out_dir / f"comparison-{slot.k}.json"
    answer: Comparison | None = None
    if slot.known and path.is_file():
        try:
            answer = Comparison.model_validate(read_json(path))
        except (ValueError, ValidationError):
            answer = None  # a damaged file is judged again
    if answer is None:
        try:
            answer = await client.structured(
                "comparator",
                system=load_prompt("comparator").render(),
                messages=[
                    {
                        "role": "user",
                        "content": build_request(
                            ev, slot.a_dir, slot.b_dir, attachments=_attachments(client)
                        ),
                    }
                ],
                schema=Comparison,
                tool_name="submit_comparison",
                sample=0,  # the two orders already differ as requests
            )
        except (StructuredAnswerError, ModelCallFailed, ValidationError) as exc:
            slot.error = str(exc)[:500]
            log.warning(
                "compare.call_failed",
                eval_id=slot.eval_id,
                run=slot.run,
                order=slot.order,
                k=slot.k,
                error=slot.error,
            )
            return
        write_json(path, answer, Comparison)
    slot.verdict = _side_of(answer.winner, slot.child_is_a)
    slot.reasoning = answer.reasoning


def _tally(slots: list[_Slot]) -> tuple[ComparisonTally, list[dict[str, Any]]]:
    tally, pairs = ComparisonTally(), []
    grouped: dict[tuple[int, int], list[_Slot]] = {}
    for slot in slots:
        grouped.setdefault((slot.eval_id, slot.run), []).append(slot)
    for (eval_id, run), both in grouped.items():
        both.sort(key=lambda s: s.order)
        counts = tally.per_eval.setdefault(
            eval_id,
            dict.fromkeys(
                (
                    "child_wins",
                    "parent_wins",
                    "ties",
                    "inconsistent",
                    "errors",
                    "pairs",
                    "single_order",
                ),
                0,
            ),
        )
        counts["pairs"] += 1
        tally.pairs += 1
        both = [s for s in both if not s.skipped]
        verdicts = {s.verdict for s in both if s.verdict is not None}
        if any(s.verdict is None for s in both):
            verdict, key = "error", "errors"
        elif len(both) == 1:  # a first-order tie: not asked again, neither agreeing nor not
            verdict, key = "single_order", "single_order"
        elif len(verdicts) == 1:
            verdict = verdicts.pop()
            key = {"child": "child_wins", "parent": "parent_wins", "tie": "ties"}[verdict]
            tally.reasons.append(
                {
                    "eval_id": eval_id,
                    "run": run,
                    "verdict": verdict,
                    "output_a": "child" if both[0].child_is_a else "parent",
                    "reasoning": both[0].reasoning,
                }
            )
        else:
            verdict, key = "inconsistent", "inconsistent"
        counts[key] += 1
        setattr(tally, key, getattr(tally, key) + 1)
        pairs.append(
            {"eval_id": eval_id, "run": run, "comparisons": [s.k for s in both], "verdict": verdict}
        )
    judged = tally.pairs - tally.errors - tally.single_order
    agreeing = tally.child_wins + tally.parent_wins + tally.ties
    tally.swap_consistency = agreeing / judged if judged else None
    return tally, pairs


def _assignment(slots: list[_Slot], pairs: list[dict], tally: ComparisonTally | None) -> dict:
    rows = []
    for s in sorted(slots, key=lambda s: s.k):
        row: dict[str, Any] = {
            "k": s.k,
            "eval_id": s.eval_id,
            "run": s.run,
            "order": s.order,
            "A": "child" if s.child_is_a else "parent",
            "B": "parent" if s.child_is_a else "child",
        }
        if s.verdict is not None:
            row["verdict"] = s.verdict
        if s.error is not None:
            row["error"] = s.error
        if s.skipped:
            row["skipped"] = "the first order was not decisive"
        rows.append(row)
    data: dict[str, Any] = {"comparisons": rows, "pairs": pairs}
    if tally is not None:
        data["tally"] = {k: getattr(tally, k) for k in TALLY_COUNTS}
    return data


async def compare_versions(
    client: Client,
    *,
    evals: list[Eval],
    child_runs: dict[int, list[Path]],
    parent_runs: dict[int, list[Path]],
    out_dir: Path,
    rng_seed: int,
    second_order: str = "decisive",
) -> ComparisonTally:
    """Judge every run pair in its first order, then in the second order the pairs whose first
    verdict was decisive (every pair when second_order = "always"); write comparison-<k>.json and
    assignment.json (which version was A in each k) under out_dir; return the tally of
    swap-consistent verdicts. Which pairs get a second call depends only on the first verdicts,
    never on which call finished first."""
    out_dir = Path(out_dir)
    assignment = out_dir / "assignment.json"
    slots = _plan(evals, child_runs, parent_runs, _load_previous(assignment), rng_seed)
    # The mapping is on disk before any verdict is, so a comparison file is never orphaned.
    write_json(assignment, _assignment(slots, [], None))
    by_id = {ev.id: ev for ev in evals}
    firsts = {(s.eval_id, s.run): s for s in slots if s.order == 1}
    await asyncio.gather(*(_judge(client, s, by_id[s.eval_id], out_dir) for s in firsts.values()))
    seconds = [s for s in slots if s.order == 2]
    for s in seconds:
        first = firsts[s.eval_id, s.run]
        s.skipped = second_order == "decisive" and first.verdict not in ("child", "parent")
    await asyncio.gather(
        *(_judge(client, s, by_id[s.eval_id], out_dir) for s in seconds if not s.skipped)
    )
    tally, pairs = _tally(slots)
    write_json(assignment, _assignment(slots, pairs, tally))
    log.info("compare.completed", **{k: getattr(tally, k) for k in TALLY_COUNTS})
    return tally
