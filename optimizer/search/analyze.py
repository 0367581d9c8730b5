"""Post-hoc analyzer: after the blind comparison, explain with both versions unblinded why the
winner won, and write analysis.json (seed 002). Never stop the loop on a bad answer: a failed
analysis writes no file and returns None; never send a host path to the model."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
from pydantic import ValidationError

from optimizer.decide.comparison import ComparisonTally
from optimizer.model import ModelCallFailed, StructuredAnswerError
from optimizer.model.port import Client
from optimizer.model.prompts import load_prompt
from optimizer.schemas import Analysis
from optimizer.search.proposal import EvalCost
from optimizer.search.propose import bullet_lines, render_costs
from optimizer.store.files import Workspace, write_json
from optimizer.tags import data, tag

log = structlog.get_logger(__name__)

MAX_SKILL_FILE_CHARS = 12_000
MAX_SKILL_CHARS = 40_000  # per version
MAX_TRANSCRIPT_CHARS = 3_000  # per transcript: an excerpt, head and tail
MAX_TRANSCRIPTS_CHARS = 24_000
MAX_REASONS = 12
_LABEL_NUMBER = re.compile(r"v(\d+)$")


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    return f"{text[:head]}\n[… {len(text) - limit:,} characters cut …]\n{text[-(limit - head) :]}"


def _skill_files(skill_dir: Path) -> list[Path]:
    files = [
        p
        for p in Path(skill_dir).rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(skill_dir).parts)
    ]
    # SKILL.md first: it is what the agent reads, and what a cut must never drop.
    return sorted(
        files,
        key=lambda p: (
            p.relative_to(skill_dir).as_posix() != "SKILL.md",
            p.relative_to(skill_dir).as_posix(),
        ),
    )


def render_skill(skill_dir: Path) -> str:
    """A version's files as `<file path=..>` entries, paths relative to the skill folder."""
    entries, budget = [], MAX_SKILL_CHARS
    for path in _skill_files(skill_dir):
        rel = path.relative_to(skill_dir).as_posix()
        raw = path.read_bytes()
        if b"\x00" in raw[:8192]:
            entries.append(
                tag(
                    "file",
                    f"(binary file, {len(raw):,} bytes, not shown)",
                    path=rel,
                    binary="true",
                    size=len(raw),
                )
            )
            continue
        if budget <= 0:
            entries.append(
                tag("file", "[… not shown: the skill's text passed the limit …]", path=rel)
            )
            continue
        text = _cut(raw.decode("utf-8", errors="replace"), min(MAX_SKILL_FILE_CHARS, budget))
        budget -= len(text)
        entries.append(data("file", text, path=rel))
    return "\n".join(entries) if entries else "(no files)"


def _child_won(winner_label: str, loser_label: str, winner_is_child: bool | None) -> bool:
    """A child always has a larger version number than its parent (versions are numbered as they
    are made), so the labels say which side of the tally the winner is, unless told."""
    if winner_is_child is not None:
        return winner_is_child
    w, lo = _LABEL_NUMBER.search(winner_label), _LABEL_NUMBER.search(loser_label)
    return bool(w and lo and int(w.group(1)) > int(lo.group(1)))


def render_comparisons(
    tally: ComparisonTally | None, winner: str, loser: str, child_won: bool
) -> str:
    if tally is None:
        return "(no comparisons)"
    name = {"child": winner if child_won else loser, "parent": loser if child_won else winner}
    name["tie"] = "tie"
    wins = {name["child"]: tally.child_wins, name["parent"]: tally.parent_wins}
    consistency = "n/a" if tally.swap_consistency is None else f"{tally.swap_consistency:.0%}"
    single = (
        f", {tally.single_order} ties in the first order not judged again"
        if tally.single_order
        else ""
    )
    lines = [
        f"{tally.pairs} output pairs judged: {wins[winner]} won by {winner}, "
        f"{wins[loser]} won by {loser}, {tally.ties} ties, {tally.inconsistent} inconsistent "
        f"between the two orders, {tally.errors} errors{single} (swap consistency {consistency} "
        "over the pairs judged in both orders)."
    ]
    for reason in tally.reasons[:MAX_REASONS]:
        lines.append(
            data(
                "comparison",
                reason["reasoning"],
                eval=reason["eval_id"],
                run=reason["run"],
                winner=name[reason["verdict"]],
                output_a=name[reason["output_a"]],
            )
        )
    return "\n".join(lines)


def render_failures(failed: list[tuple[Any, str, int]]) -> str:
    ordered = sorted(failed, key=lambda f: (-f[2], str(f[0]), f[1]))
    return (
        "\n".join(
            tag("failure", text, eval=eval_id, count=count) for eval_id, text, count in ordered
        )
        or "(none)"
    )


def render_transcripts(transcripts: dict[str, str]) -> str:
    entries, budget = [], MAX_TRANSCRIPTS_CHARS
    for name in sorted(transcripts):
        if budget <= 0:
            break
        text = _cut(transcripts[name], min(MAX_TRANSCRIPT_CHARS, budget))
        budget -= len(text)
        entries.append(data("transcript", text, name=name))
    return "\n".join(entries) or "(none)"


def _skill_ref(skill_dir: Path, label: str) -> str:
    # The workspace layout puts a version's skill at <root>/<label>/skill: name it from the root.
    p = Path(skill_dir)
    return f"{label}/{p.name}" if p.parent.name == label else label


@dataclass(frozen=True)
class Pairing:
    """What the analyzer reads of one decided pair: both skills and labels, the comparator's
    tally, the loser's failed expectations (eval, text, count), the first transcripts, and the
    evidence the proposer gets too (each eval's cost, the tool calls runs repeat), and whether
    the winner is the child (None: read from the labels)."""

    winner_skill: Path
    loser_skill: Path
    winner_label: str
    loser_label: str
    tally: ComparisonTally | None
    failed_expectations: list[tuple[Any, str, int]]
    transcripts: dict[str, str]
    winner_is_child: bool | None = None
    costs: list[EvalCost] = field(default_factory=list)
    repeated_work: list[str] = field(default_factory=list)


async def analyze(client: Client, pair: Pairing, out_path: Path) -> Analysis | None:
    """Ask the analyzer; write and return analysis.json, or None (and no file) when it fails."""
    winner_skill, loser_skill = pair.winner_skill, pair.loser_skill
    winner_label, loser_label = pair.winner_label, pair.loser_label
    child_won = _child_won(winner_label, loser_label, pair.winner_is_child)
    request = "\n\n".join(
        [
            tag("winner_skill", render_skill(winner_skill), label=winner_label),
            tag("loser_skill", render_skill(loser_skill), label=loser_label),
            tag(
                "comparisons", render_comparisons(pair.tally, winner_label, loser_label, child_won)
            ),
            tag("failed_expectations", render_failures(pair.failed_expectations)),
            tag("transcripts", render_transcripts(pair.transcripts)),
            # The same evidence the proposer gets: what each eval costs the version whose failures
            # are listed, and the tool calls its runs repeat (candidates for a bundled script).
            tag("eval_costs", render_costs(pair.costs)),
            data("repeated_work", bullet_lines(pair.repeated_work)),
        ]
    )
    try:
        answer = await client.structured(
            "analyzer",
            system=load_prompt("analyzer").render(),
            messages=[{"role": "user", "content": request}],
            schema=Analysis,
            tool_name="submit_analysis",
        )
    except (StructuredAnswerError, ModelCallFailed, ValidationError) as exc:
        log.warning("analyze.failed", winner=winner_label, loser=loser_label, error=str(exc)[:500])
        return None
    # Facts we know better than the model: who won and where each version lives.
    summary = answer.comparison_summary.model_copy(
        update={
            "winner": winner_label,
            "winner_skill": _skill_ref(winner_skill, winner_label),
            "loser_skill": _skill_ref(loser_skill, loser_label),
        }
    )
    analysis = answer.model_copy(update={"comparison_summary": summary})
    write_json(Path(out_path), analysis, Analysis)
    log.info(
        "analyze.completed",
        winner=winner_label,
        loser=loser_label,
        suggestions=len(analysis.improvement_suggestions),
    )
    return analysis


def first_transcripts(ws: Workspace, winner: str, loser: str, evals: list[int]) -> dict[str, str]:
    """The first run's transcript of each side on each of `evals`, clipped, as the analyzer reads
    them (a side with no transcript on an eval has none there)."""
    out = {}
    for label in (winner, loser):
        for e in evals:
            path = ws.trial_dir(label, e, "with_skill", 1) / "transcript.md"
            if path.is_file():
                side = "winner" if label == winner else "loser"
                out[f"{side} eval {e}"] = path.read_text(encoding="utf-8")[:4000]
    return out
