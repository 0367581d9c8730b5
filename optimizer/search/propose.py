"""The proposer: one call that turns a parent version and its evidence into a candidate skill
folder, checked before it may become a version. Never writes outside the candidate folder, and
never shows the proposer the evals or anything of the sealed test split."""

from __future__ import annotations

import difflib
import shutil
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Literal

import structlog
from pydantic import BaseModel, Field

from optimizer.inputs import skill as skills
from optimizer.inputs import skillmd
from optimizer.model.prompts import load_prompt
from optimizer.tags import data, tag
from optimizer.words import clip

log = structlog.get_logger()

MAX_FILE_CHARS = 100_000
MAX_TOTAL_CHARS = 500_000
SHOWN_FILE_CHARS = 20_000
MAX_EVIDENCE_CHARS = 60_000  # what the proposer reads about the runs, beside the skill itself


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
    excerpt: str = ""  # the end of a failing run's transcript: what the agent did, not only why


@dataclass
class EvalCost:
    """What the skill costs on one train eval, as the mean over the parent's scored runs."""

    eval_id: int
    runs: int
    pass_rate: float
    tokens: float
    turns: float


@dataclass
class Feedback:
    """Everything the proposer may see about the parent; train evals only."""

    failures: list[Failure] = field(default_factory=list)
    costs: list[EvalCost] = field(default_factory=list)
    repeated_work: list[str] = field(default_factory=list)  # tool calls that recur across evals
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

    @property
    def reasons(self) -> list[str]:
        """The short reasons the rejection is counted under (status, lineage, the report)."""
        return sorted({reason_of(p) for p in self.problems})


# The short name each kind of problem is counted under, by a phrase of its sentence; the sentences
# themselves are written for the proposer, which gets them back to fix its answer.
REASONS = (
    ("old text not found", "does not occur"),
    ("old text not unique", "occurs "),
    ("old text empty", "'old' is empty"),
    ("outside the skill folder", "only files inside the skill folder"),
    ("description only", "description proposal"),
    ("name changed", "the name changed"),
    ("too large", "keep each file under"),
    ("too large", "keep it under"),
    ("answer not in the proposal form", "did not fit the proposal form"),
    ("internal error", "internal error"),
    ("file edit failed", "cannot be done"),
    ("file edit failed", "no such file"),
    ("file edit failed", "content is missing"),
    ("file edit failed", "needs both 'old' and 'new'"),
    ("SKILL.md deleted", "may not be deleted"),
)


def reason_of(problem: str) -> str:
    for reason, phrase in REASONS:
        if phrase in problem:
            return reason
    return "SKILL.md rules"  # skillmd.check_skill_md: front matter, name, description, body


def bullet_lines(items: list[str]) -> str:
    return "\n".join(f"- {item}" for item in items) or "(none)"


def build_request(parent: Path, feedback: Feedback, target: str) -> str:
    """The skill's files, then the evidence in priority order within MAX_EVIDENCE_CHARS: what
    failed and how the failing runs went first, the author's and the judges' words after; a
    section that no longer fits is replaced by a note saying so."""
    files = skills.files_of(parent, include_evals=False)
    shown = []
    for rel, content in files.items():
        if isinstance(content, bytes):
            shown.append(tag("file", f"(binary, {len(content)} bytes)", path=rel, binary="true"))
        else:
            text = content if len(content) <= SHOWN_FILE_CHARS else (
                content[:SHOWN_FILE_CHARS] + f"\n[… {len(content) - SHOWN_FILE_CHARS:,} characters truncated …]"
            )
            shown.append(data("file", text, path=rel))
    failures = "\n".join(
        tag("failure", f.text, eval=f.eval_id, count=f.count, evidence=f.evidence[:300])
        for f in feedback.failures
    ) or "(none: every expectation passed)"
    excerpts = "\n".join(data("failing_run", f.excerpt, eval=f.eval_id, expectation=f.text[:120])
                         for f in feedback.failures if f.excerpt) or "(none)"
    attempts = "\n".join(data("attempt", a) for a in feedback.lost_attempts) or "(none)"
    evidence = [
        tag("failed_expectations", failures),
        tag("transcript_excerpts", excerpts),
        tag("eval_costs", render_costs(feedback.costs)),
        data("repeated_work", bullet_lines(feedback.repeated_work)),
        tag("human_feedback", bullet_lines(feedback.human_feedback)),
        # Models wrote these, from outputs the skill produced: data, like the outputs.
        data("judge_feedback", bullet_lines(feedback.judge_feedback)),
        data("analysis_suggestions", bullet_lines(feedback.analysis_suggestions)),
        tag("lost_attempts", attempts),
    ]
    if target == "description":
        queries = "\n".join(
            tag("query", q, should_trigger=str(s).lower()) for q, s in feedback.missed_queries
        )
        evidence.insert(0, tag("missed_queries", queries or "(none)"))
    return "\n\n".join([tag("target", target), tag("skill_files", "\n".join(shown)),
                         *_within(evidence, MAX_EVIDENCE_CHARS)])


def render_costs(costs: list[EvalCost]) -> str:
    # Tokens and turns, not seconds: wall time depends on what else ran at once, and nothing
    # sent to a model may depend on timing (docs/design.md §12); tokens and turns measure the same cost.
    lines = [f"eval {c.eval_id}: pass rate {c.pass_rate:.2f}, {c.tokens:,.0f} tokens, "
             f"{c.turns:.1f} turns (mean of {c.runs} runs)" for c in costs]
    return "\n".join(lines) or "(none)"


def _within(sections: list[str], budget: int) -> list[str]:
    """The sections in order while they fit; each later one becomes a one-line note."""
    kept, left = [], budget
    for text in sections:
        if len(text) <= left:
            kept.append(text)
            left -= len(text)
            continue
        name = text[1: text.index(">")].split()[0]
        kept.append(tag(name, f"[… not shown: {len(text):,} characters, over the evidence limit …]"))
        left = 0  # a later, smaller section never jumps ahead of a more important one
    return kept


def _safe_rel(path: str) -> str | None:
    pure = PurePosixPath(path.replace("\\", "/"))
    if pure.is_absolute() or not pure.parts or ".." in pure.parts or pure.parts[0] == "evals":
        return None
    return str(pure)


def replace_once(text: str, old: str | None, new: str | None) -> tuple[str, str | None]:
    """text with `old` replaced by `new`, or the one sentence that tells the proposer what to fix.
    Safe near-misses are tolerated, as a careful human editor would: CRLF against LF line endings,
    and trailing whitespace (a final newline the file lacks) when the match ends the file."""
    if old is None or new is None:
        return text, "a replace needs both 'old' and 'new'."
    if not old:
        return text, "'old' is empty; quote the exact text to replace, or write the whole file."
    crlf = "\r\n" in text
    flat, old_flat, new_flat = (t.replace("\r\n", "\n") for t in (text, old, new))
    count = flat.count(old_flat)
    if count == 1:
        out = flat.replace(old_flat, new_flat, 1)
    elif count > 1:
        return text, (f"the old text occurs {count} times; quote a longer passage so that it "
                      "occurs exactly once.")
    elif old_flat.rstrip() and flat.rstrip().endswith(old_flat.rstrip()) \
            and flat.count(old_flat.rstrip()) == 1:
        out = flat.rstrip()[: -len(old_flat.rstrip())] + new_flat  # the match ends the file
    else:
        return text, f"the old text does not occur in the file{_closest(flat, old_flat)}; quote it exactly."
    return (out.replace("\n", "\r\n") if crlf else out), None


def _closest(text: str, old: str) -> str:
    """Where the proposer probably meant, so its retry can quote the line as it is."""
    first = next((line for line in old.split("\n") if line.strip()), "")
    lines = text.split("\n")
    match = difflib.get_close_matches(first, lines, n=1, cutoff=0.6)
    if not match:
        return ""
    return f" (its first line is closest to line {lines.index(match[0]) + 1}: {match[0][:120]!r})"


def apply_edits(parent: Path, dest: Path, answer: ProposalAnswer, *, target: str) -> list[str]:
    """Copy the parent into dest and apply the edits there; return every problem found."""
    problems: list[str] = []
    parent_doc = skillmd.parse_skill_md((parent / "SKILL.md").read_text(encoding="utf-8"))
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
                if current is None:
                    problems.append(f"replace in '{rel}': no such file; use write to create it.")
                    continue
                changed, problem = replace_once(current, edit.old, edit.new)
                if problem:
                    problems.append(f"replace in '{rel}': {problem}")
                    continue
                path.write_text(changed, encoding="utf-8")
        except (OSError, ValueError) as exc:
            # The path is model-written: a folder, a NUL byte, a name too long, a binary file.
            # That is a rejected proposal (data), never an exception that stops the run.
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            problems.append(f"{edit.action} of '{rel[:100]}': cannot be done ({why}); "
                            "edit text files inside the skill folder only.")
    problems += _check(dest, parent_doc, target)
    return problems


def _check(folder: Path, parent_doc: skillmd.SkillDoc, target: str) -> list[str]:
    skill_md = folder / "SKILL.md"
    if not skill_md.is_file():
        return ["SKILL.md may not be deleted."]
    text = skill_md.read_text(encoding="utf-8")
    problems = skillmd.check_skill_md(text, "SKILL.md")
    if problems:
        return problems
    doc = skillmd.parse_skill_md(text)
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
    # Imported here: the review commands read this module's reasons, and the model package's
    # errors import the anthropic SDK (2 s of CPU) that they never call.
    from optimizer.model import StructuredAnswerError

    system = load_prompt("proposer").render()
    request = build_request(parent, feedback, target)
    messages: list[dict] = [{"role": "user", "content": request}]
    problems: list[str] = []
    for attempt in (0, 1):
        if problems:
            messages = [{"role": "user", "content": request + "\n\n" + tag(
                "previous_problems", bullet_lines(problems)
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
            return Candidate(dest, _summary(answer), answer.rationale)
        log.info("proposal.rejected", attempt=attempt + 1, problems=problems)
    shutil.rmtree(dest, ignore_errors=True)
    return Rejected(problems)


def _summary(answer: ProposalAnswer) -> str:
    """The first non-blank line of the summary; a blank one is no reason to lose a proposal."""
    for text in (answer.summary, answer.rationale):
        line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
        if line:
            return clip(line, 200)
    return clip("edits " + ", ".join(sorted({e.path for e in answer.edits})), 200)


def proposal_markdown(label: str, parent_label: str, candidate: Candidate, diff: str) -> str:
    return (
        f"# {label}: {candidate.summary}\n\nParent: {parent_label}\n\n## Rationale\n\n"
        f"{candidate.rationale.strip()}\n\n## Diff against {parent_label}\n\n```diff\n{diff}```\n"
    )
