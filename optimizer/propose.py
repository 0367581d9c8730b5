"""The proposer: one call that turns a parent version and its evidence into a candidate skill
folder, checked before it may become a version. Never writes outside the candidate folder, and
never shows the proposer the evals or anything of the sealed test split."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Literal

import structlog
from pydantic import BaseModel, Field

from . import skill as skills
from .llm import StructuredAnswerError
from .prompting import load_prompt, tag

log = structlog.get_logger()

MAX_FILE_CHARS = 100_000
MAX_TOTAL_CHARS = 500_000
SHOWN_FILE_CHARS = 20_000


class Edit(BaseModel):
    path: str = Field(description="Relative path inside the skill folder, e.g. SKILL.md")
    action: Literal["write", "replace", "delete"]
    content: str | None = Field(None, description="Whole new content, for write")
    old: str | None = Field(None, description="Exact text to replace, for replace")
    new: str | None = Field(None, description="Replacement text, for replace")


class ProposalAnswer(BaseModel):
    summary: str = Field(description="One line: what changed")
    rationale: str = Field(description="Why, citing the evidence")
    edits: list[Edit] = Field(min_length=1)


@dataclass
class Failure:
    eval_id: int
    text: str
    count: int
    evidence: str = ""


@dataclass
class Feedback:
    """Everything the proposer may see about the parent; train evals only."""

    failures: list[Failure] = field(default_factory=list)
    judge_feedback: list[str] = field(default_factory=list)
    analysis_suggestions: list[str] = field(default_factory=list)
    human_feedback: list[str] = field(default_factory=list)
    lost_attempts: list[str] = field(default_factory=list)
    missed_queries: list[tuple[str, bool]] = field(default_factory=list)


@dataclass
class Candidate:
    folder: Path
    summary: str
    rationale: str


@dataclass
class Rejected:
    problems: list[str]


def _lines(items: list[str]) -> str:
    return "\n".join(f"- {item}" for item in items) or "(none)"


def build_request(parent: Path, feedback: Feedback, target: str) -> str:
    files = skills.files_of(parent, include_evals=False)
    shown = []
    for rel, content in files.items():
        if isinstance(content, bytes):
            shown.append(tag("file", f"(binary, {len(content)} bytes)", path=rel, binary="true"))
        else:
            text = content if len(content) <= SHOWN_FILE_CHARS else (
                content[:SHOWN_FILE_CHARS] + f"\n[… {len(content) - SHOWN_FILE_CHARS:,} characters truncated …]"
            )
            shown.append(tag("file", text, path=rel))
    failures = "\n".join(
        tag("failure", f.text, eval=f.eval_id, count=f.count, evidence=f.evidence[:300])
        for f in feedback.failures
    ) or "(none: every expectation passed)"
    attempts = "\n".join(tag("attempt", a) for a in feedback.lost_attempts) or "(none)"
    parts = [
        tag("target", target),
        tag("skill_files", "\n".join(shown)),
        tag("failed_expectations", failures),
        tag("judge_feedback", _lines(feedback.judge_feedback)),
        tag("analysis_suggestions", _lines(feedback.analysis_suggestions)),
        tag("human_feedback", _lines(feedback.human_feedback)),
        tag("lost_attempts", attempts),
    ]
    if target == "description":
        queries = "\n".join(
            tag("query", q, should_trigger=str(s).lower()) for q, s in feedback.missed_queries
        )
        parts.append(tag("missed_queries", queries or "(none)"))
    return "\n\n".join(parts)


def _safe_rel(path: str) -> str | None:
    pure = PurePosixPath(path.replace("\\", "/"))
    if pure.is_absolute() or not pure.parts or ".." in pure.parts or pure.parts[0] == "evals":
        return None
    return str(pure)


def apply_edits(parent: Path, dest: Path, answer: ProposalAnswer, *, target: str) -> list[str]:
    """Copy the parent into dest and apply the edits there; return every problem found."""
    problems: list[str] = []
    parent_doc = skills.parse_skill_md((parent / "SKILL.md").read_text(encoding="utf-8"))
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(parent, dest)
    for edit in answer.edits:
        rel = _safe_rel(edit.path)
        if rel is None:
            problems.append(f"edit of '{edit.path}': only files inside the skill folder (not evals/) may change.")
            continue
        if target == "description" and rel != "SKILL.md":
            problems.append(f"edit of '{rel}': a description proposal may change SKILL.md's description only.")
            continue
        path = dest / rel
        try:
            if edit.action == "delete":
                if rel == "SKILL.md":
                    problems.append("SKILL.md may not be deleted.")
                elif path.is_file():
                    path.unlink()
                else:
                    problems.append(f"delete of '{rel}': no such file.")
            elif edit.action == "write":
                if edit.content is None:
                    problems.append(f"write of '{rel}': content is missing.")
                    continue
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(edit.content, encoding="utf-8")
            else:
                current = path.read_text(encoding="utf-8") if path.is_file() else None
                if current is None or edit.old is None or edit.new is None or edit.old not in current:
                    problems.append(f"replace in '{rel}': the old text was not found exactly once; quote it exactly.")
                    continue
                path.write_text(current.replace(edit.old, edit.new, 1), encoding="utf-8")
        except (OSError, ValueError) as exc:
            # The path is model-written: a folder, a NUL byte, a name too long, a binary file.
            # That is a rejected proposal (data), never an exception that stops the run.
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            problems.append(f"{edit.action} of '{rel[:100]}': cannot be done ({why}); "
                            "edit text files inside the skill folder only.")
    problems += _check(dest, parent_doc, target)
    return problems


def _check(folder: Path, parent_doc: skills.SkillDoc, target: str) -> list[str]:
    skill_md = folder / "SKILL.md"
    if not skill_md.is_file():
        return ["SKILL.md may not be deleted."]
    text = skill_md.read_text(encoding="utf-8")
    problems = skills.check_skill_md(text, "SKILL.md")
    if problems:
        return problems
    doc = skills.parse_skill_md(text)
    if doc.name != parent_doc.name:
        problems.append(f"the name changed from '{parent_doc.name}' to '{doc.name}'; keep the name.")
    if target == "description" and doc.body.strip() != parent_doc.body.strip():
        problems.append("a description proposal changed the body; change the description only.")
    total = 0
    for rel, content in skills.files_of(folder, include_evals=False).items():
        size = len(content)
        total += size
        if size > MAX_FILE_CHARS:
            problems.append(f"'{rel}' is {size:,} characters; keep each file under {MAX_FILE_CHARS:,}.")
    if total > MAX_TOTAL_CHARS:
        problems.append(f"the skill is {total:,} characters; keep it under {MAX_TOTAL_CHARS:,}.")
    return problems


async def propose(
    client, *, parent: Path, feedback: Feedback, target: str, dest: Path, sample: int
) -> Candidate | Rejected:
    """Ask once; on problems ask once more with them; then give up (a counted, logged rejection)."""
    system = load_prompt("proposer").render(extra_rules="")
    request = build_request(parent, feedback, target)
    messages: list[dict] = [{"role": "user", "content": request}]
    problems: list[str] = []
    for attempt in (0, 1):
        if problems:
            messages = [{"role": "user", "content": request + "\n\n" + tag(
                "previous_problems", _lines(problems)
                + "\nYour previous proposal was rejected for these reasons; propose again without them.")}]
        try:
            answer = await client.structured(
                "proposer", system=system, messages=messages, schema=ProposalAnswer,
                tool_name="submit_proposal", sample=sample * 2 + attempt,
            )
        except StructuredAnswerError as exc:
            problems = [f"the answer did not fit the proposal form: {exc}"]
            continue
        problems = apply_edits(parent, dest, answer, target=target)
        if not problems:
            return Candidate(dest, answer.summary.strip().splitlines()[0][:200], answer.rationale)
        log.info("proposal.rejected", attempt=attempt + 1, problems=problems)
    shutil.rmtree(dest, ignore_errors=True)
    return Rejected(problems)


def proposal_markdown(label: str, parent_label: str, candidate: Candidate, diff: str) -> str:
    return (
        f"# {label}: {candidate.summary}\n\nParent: {parent_label}\n\n## Rationale\n\n"
        f"{candidate.rationale.strip()}\n\n## Diff against {parent_label}\n\n```diff\n{diff}```\n"
    )
