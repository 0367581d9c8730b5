"""A proposal's edits applied to a candidate folder: the parent copied, each write, replace or
delete done inside it (never outside the skill folder, never in evals/), and the result checked
(SKILL.md's rules, the name kept, a description proposal's body unchanged, the size limits).
Every problem is one sentence the proposer gets back to fix its answer."""

from __future__ import annotations

import difflib
import shutil
from pathlib import Path, PurePosixPath

from optimizer.inputs import skill as skills
from optimizer.inputs import skillmd
from optimizer.schemas import ProposalAnswer

MAX_FILE_CHARS = skills.MAX_WRITTEN_CHARS
MAX_TOTAL_CHARS = 500_000


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
        return text, (
            f"the old text occurs {count} times; quote a longer passage so that it "
            "occurs exactly once."
        )
    elif (
        old_flat.rstrip()
        and flat.rstrip().endswith(old_flat.rstrip())
        and flat.count(old_flat.rstrip()) == 1
    ):
        out = flat.rstrip()[: -len(old_flat.rstrip())] + new_flat  # the match ends the file
    else:
        return (
            text,
            f"the old text does not occur in the file{_closest(flat, old_flat)}; quote it exactly.",
        )
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
    written: set[str] = set()
    for edit in answer.edits:
        rel = _safe_rel(edit.path)
        if rel is None:
            problems.append(
                f"edit of '{edit.path}': only files inside the skill folder (not evals/) may change."
            )
            continue
        if target == "description" and rel != "SKILL.md":
            problems.append(
                f"edit of '{rel}': a description proposal may change SKILL.md's description only."
            )
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
                written.add(rel)
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
                written.add(rel)
        except (OSError, ValueError) as exc:
            # The path is model-written: a folder, a NUL byte, a name too long, a binary file.
            # That is a rejected proposal (data), never an exception that stops the run.
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            problems.append(
                f"{edit.action} of '{rel[:100]}': cannot be done ({why}); "
                "edit text files inside the skill folder only."
            )
    problems += _check(dest, parent_doc, target)
    problems += _sizes(dest, written, _text_chars(parent))
    return problems


def _text_chars(folder: Path) -> int:
    return sum(
        len(c) for c in skills.files_of(folder, include_evals=False).values() if isinstance(c, str)
    )


def _sizes(folder: Path, written: set[str], parent_chars: int) -> list[str]:
    """The size limits bound what a proposal writes, never what the skill ships: a large or binary
    file no edit touched (a PDF, an image) is carried as it is (`validate` says so). The total is
    of text files and refused only when this proposal passed the limit or grew past it."""
    problems = []
    for rel in sorted(written):
        path = folder / rel
        size = len(path.read_text(encoding="utf-8")) if path.is_file() else 0
        if size > MAX_FILE_CHARS:
            problems.append(
                f"'{rel}' is {size:,} characters; keep each file under {MAX_FILE_CHARS:,}."
            )
    total = _text_chars(folder)
    if total > MAX_TOTAL_CHARS and total > parent_chars:
        problems.append(
            f"the skill's text is {total:,} characters; keep it under {MAX_TOTAL_CHARS:,}."
        )
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
        problems.append(
            f"the name changed from '{parent_doc.name}' to '{doc.name}'; keep the name."
        )
    if target == "description" and doc.body.strip() != parent_doc.body.strip():
        problems.append("a description proposal changed the body; change the description only.")
    return problems
