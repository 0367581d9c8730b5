"""A candidate eval from one use of the skill in a session: the task as the prompt, its small input
files copied into evals/files/, expectations from what the user corrected. Everything redacted first."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from optimizer.grow import checks
from optimizer.grow.candidates import candidate_id
from optimizer.inputs import redact
from optimizer.inputs.sessions import Use, is_correction
from optimizer.schemas import Candidate, CandidateEval, CandidateOrigin, CandidateSignals
from optimizer.store.files import write_bytes

MAX_COPY_BYTES = 512 * 1024  # an eval's input, not a data set: bigger files are named, not copied
FILES_DIR = Path("evals") / "files"
_PATHISH = re.compile(r"(?<![\w/.-])((?:\.{0,2}/)?[\w.\-]+(?:/[\w.\-]+)*\.[A-Za-z0-9]{1,8})\b")
_SIGNAL_CHARS = 300


def _clip(text: str, limit: int = _SIGNAL_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _inputs(use: Use) -> list[str]:
    """Files the task used: those the agent read, and those the task names that exist, in the order
    first seen; never a file the agent wrote first, nor one of the skill's own files."""
    written = set(use.writes)
    named = [m.group(1) for m in _PATHISH.finditer(use.task)]
    seen: list[str] = []
    for raw in [*named, *use.reads]:
        path = Path(raw) if Path(raw).is_absolute() else Path(use.cwd or ".") / raw
        key = str(path)
        if key in seen or key in written or not path.is_file():
            continue
        if use.skill_dir and path.is_relative_to(use.skill_dir):
            continue
        if ".claude" in path.parts:
            continue
        seen.append(key)
    return seen


def _copy(skill_dir: Path, source: Path, cwd: str) -> tuple[str | None, str]:
    """(the eval's path of the copy, '') or (None, why it was only named)."""
    if not cwd or not source.resolve().is_relative_to(Path(cwd).resolve()):
        return None, "outside the session's project folder"
    if any(
        part.startswith(".") for part in source.resolve().relative_to(Path(cwd).resolve()).parts
    ):
        return None, "a hidden file (.env and the like hold settings, not task inputs)"
    size = source.stat().st_size
    if size > MAX_COPY_BYTES:
        return None, f"{size} bytes, over the {MAX_COPY_BYTES // 1024} KB copied"
    data = source.read_bytes()
    try:
        decoded = data.decode("utf-8")
    except UnicodeDecodeError:
        if redact.holds_secret(data.decode("latin-1")):
            return None, "a binary file that holds something key-like"
    else:
        data = redact.text(decoded).encode("utf-8")
    target = skill_dir / FILES_DIR / source.name
    if target.exists() and target.read_bytes() != data:
        digest = hashlib.sha256(data).hexdigest()[:8]
        target = target.with_name(f"{source.stem}-{digest}{source.suffix}")
    if not target.exists():
        write_bytes(target, data)
    return target.relative_to(skill_dir).as_posix(), ""


def _in_prompt(task: str, original: str, source: Path, cwd: str, copied: str) -> str:
    """The task with the file's name as the user wrote it replaced by where the eval keeps it."""
    forms = {original, str(source)}
    if cwd and source.is_relative_to(cwd):
        rel = source.relative_to(cwd).as_posix()
        forms |= {rel, f"./{rel}"}
    for form in sorted(forms, key=len, reverse=True):
        task = re.sub(rf"(?<![\w/.-]){re.escape(form)}(?![\w/-])", copied, task)
    return task


def _expectations(use: Use, task: str, outputs: list[str], corrections: list[str]) -> list[str]:
    """Checks the first answer could have failed: the files it wrote, what the user corrected
    (each clause of it), a limit the task states, no tool errors. Never one that cannot fail:
    with none of these the candidate waits for the user to write one."""
    subject = f"`{outputs[0]}`" if len(outputs) == 1 else "The answer"
    out = [f"The file `{o}` is written" for o in outputs]
    stated = checks.limit(task, subject)
    out += [stated] if stated else []
    for c in corrections:
        out += [e for e in checks.from_correction(c, subject) if e not in out]
    if use.errors:
        out.append("The run finishes without tool errors")
    # Never one built around a masked value: it names nothing an output could hold.
    return [e for e in out if checks.checkable(e) and checks.unmasked(e) == e]


def _outputs(use: Use) -> list[str]:
    seen: list[str] = []
    for raw in use.writes:
        path = Path(raw)
        rel = (
            path.relative_to(use.cwd).as_posix()
            if use.cwd and path.is_relative_to(use.cwd)
            else path.name
        )
        if rel not in seen and not rel.startswith(".claude/"):
            seen.append(rel)
    return seen


def candidate(skill_dir: Path, use: Use) -> Candidate:
    """The heuristic draft: every string passes through redaction before the candidate holds it."""
    task = redact.text(use.task)
    files, named = [], []
    for source in _inputs(use):
        copied, why = _copy(skill_dir, Path(source), use.cwd)
        if copied is None:
            named.append(redact.text(f"{source} ({why})"))
            continue
        files.append(copied)
        original = next(
            (
                m.group(1)
                for m in _PATHISH.finditer(task)
                if Path(use.cwd or ".", m.group(1)) == Path(source) or m.group(1) == source
            ),
            source,
        )
        task = _in_prompt(task, original, Path(source), use.cwd, copied)
    later = [redact.text(m) for m in use.later]
    # "keep it under 80 words" corrects the answer as much as "no, that is wrong" does.
    corrections = [m for m in later if is_correction(m) or checks.asks_for_change(m)]
    outputs = [redact.text(o) for o in _outputs(use)]
    words = " ".join(task.split()[:8])
    day = use.time[:10]
    expected = (
        "; ".join(
            filter(
                None,
                [
                    f"writes {', '.join(outputs)}" if outputs else "",
                    (
                        "gets right at once what the user corrected afterwards: "
                        + " / ".join(_clip(c, 160) for c in corrections)
                    )
                    if corrections
                    else "",
                ],
            )
        )
        or "does what the task asks"
    )
    return Candidate(
        id=candidate_id("session", use.session_id or str(use.file), use.time, task),
        kind="new_eval",
        origin=CandidateOrigin(
            source="session", file=str(use.file), time=use.time, session_id=use.session_id
        ),
        eval=CandidateEval(
            name=_clip(f"{words} ({day})", 80),
            prompt=task,
            expected_output=f"The result {expected}.",
            files=files,
            expectations=[redact.text(e) for e in _expectations(use, task, outputs, corrections)],
        ),
        signals=CandidateSignals(
            corrections=[_clip(c) for c in corrections],
            follow_ups=[_clip(m) for m in later if m not in corrections],
            errors=[_clip(redact.text(e)) for e in use.errors],
            outputs=outputs,
            final_answer=_clip(redact.text(use.final)),
        ),
        files_named=named,
        reason=f"the skill was used in session {use.session_id or use.file.name} on {day}",
    )
