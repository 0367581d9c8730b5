"""Skill folders: SKILL.md front matter rules, snapshots of a folder with a content hash, file diffs.
Never read or copy anything outside the skill folder, and never change the folder being read.
"""

from __future__ import annotations

import difflib
import fnmatch
import hashlib
import os
import re
import shutil
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict

from optimizer.errors import BadInput

SKILL_FILE = "SKILL.md"
ALLOWED_KEYS = ("name", "description", "license", "allowed-tools", "metadata", "compatibility")
NAME_MAX = 64
DESCRIPTION_MAX = 1024
COMPATIBILITY_MAX = 500
NAME_RE = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")

# Never part of a skill, anywhere in the tree: caches, editor litter, installed dependencies.
IGNORED_NAMES = ("__pycache__", ".DS_Store", "node_modules", ".git")
IGNORED_GLOBS = ("*.pyc",)
# Workspaces that skill-creator and this optimizer put next to a skill; only at the top level,
# because a nested `runs/` folder could be real skill content.
IGNORED_TOP = ("runs",)
IGNORED_TOP_GLOBS = ("*-workspace",)
# The version id ignores evals/: a proposal must change identity only by what the skill says,
# while the snapshot still copies evals/ because eval input files live there.
UNHASHED_TOP = ("evals",)


class SkillDoc(BaseModel):
    """A parsed SKILL.md: the front matter as written, its two required fields, the body."""

    model_config = ConfigDict(frozen=True)
    front_matter: dict[str, Any]
    name: str
    description: str
    body: str


class Skill(BaseModel):
    """A skill folder that passed every check."""

    model_config = ConfigDict(frozen=True)
    path: Path
    doc: SkillDoc
    hash: str

    @property
    def name(self) -> str:
        return self.doc.name

    @property
    def description(self) -> str:
        return self.doc.description


# ---------------------------------------------------------------------------
# SKILL.md
# ---------------------------------------------------------------------------


def _split_front_matter(text: str, path: Path | str) -> tuple[str, str, int]:
    """(front matter text, body, line number of the first front matter line) or BadInput."""
    text = text.lstrip("\ufeff").replace("\r\n", "\n")
    lines = text.split("\n")
    if not lines or lines[0].strip() != "---":
        raise BadInput(
            f"{path}: no YAML front matter; start the file with a '---' line, then "
            "'name:' and 'description:', then a closing '---' line."
        )
    for i in range(1, len(lines)):
        if lines[i].strip() in ("---", "..."):
            return "\n".join(lines[1:i]), "\n".join(lines[i + 1 :]), 2
    raise BadInput(
        f"{path}: the front matter is never closed; add a '---' line after its last field."
    )


def parse_skill_md(text: str, path: Path | str = SKILL_FILE) -> SkillDoc:
    """Parse SKILL.md; BadInput only when it cannot be read at all (see `check_skill_md` for rules)."""
    raw, body, first_line = _split_front_matter(text, path)
    try:
        front = yaml.safe_load(raw) if raw.strip() else {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + first_line}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise BadInput(
            f"{path}: the front matter is not valid YAML ({problem}{where}); fix the syntax "
            "there, and quote a value that contains ': '."
        ) from None
    if not isinstance(front, dict):
        raise BadInput(
            f"{path}: the front matter must be a YAML mapping of fields (got {type(front).__name__}); "
            "write 'name: ...' and 'description: ...' lines."
        )
    name, description = front.get("name"), front.get("description")
    return SkillDoc(
        front_matter=front,
        name=name if isinstance(name, str) else "",
        description=description if isinstance(description, str) else "",
        body=body,
    )


def front_matter_problems(doc: SkillDoc, path: Path | str = SKILL_FILE) -> list[str]:
    """Every rule of the front matter and body that `doc` breaks, one sentence each."""
    fm = doc.front_matter
    problems: list[str] = []
    unknown = [k for k in fm if k not in ALLOWED_KEYS]
    for key in unknown:
        close = difflib.get_close_matches(str(key), ALLOWED_KEYS, n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        problems.append(
            f"{path}: front matter field '{key}' is not allowed; {hint}use only "
            f"{', '.join(ALLOWED_KEYS)} (put anything else under 'metadata')."
        )
    name = fm.get("name")
    if name is None or name == "":
        problems.append(
            f"{path}: front matter field 'name' is missing; add 'name: my-skill' (kebab-case)."
        )
    elif not isinstance(name, str):
        problems.append(
            f"{path}: front matter field 'name' must be text (got {name!r}); write it in kebab-case."
        )
    else:
        if len(name) > NAME_MAX:
            problems.append(
                f"{path}: front matter field 'name' has {len(name)} characters; shorten it to "
                f"at most {NAME_MAX}."
            )
        if not NAME_RE.fullmatch(name):
            suggestion = re.sub(r"-+", "-", re.sub(r"[^a-z0-9]+", "-", name.lower())).strip("-")
            problems.append(
                f"{path}: front matter field 'name' is '{name}', which is not kebab-case; use "
                f"lowercase letters, digits and single hyphens, e.g. '{suggestion or 'my-skill'}'."
            )
    description = fm.get("description")
    if description is None or (isinstance(description, str) and not description.strip()):
        problems.append(
            f"{path}: front matter field 'description' is missing or empty; say what the skill "
            "does and when to use it."
        )
    elif not isinstance(description, str):
        problems.append(
            f"{path}: front matter field 'description' must be text (got {type(description).__name__}); "
            "quote it."
        )
    else:
        if len(description) > DESCRIPTION_MAX:
            problems.append(
                f"{path}: front matter field 'description' has {len(description)} characters; "
                f"shorten it to at most {DESCRIPTION_MAX}."
            )
        if "<" in description or ">" in description:
            problems.append(
                f"{path}: front matter field 'description' contains an angle bracket ('<' or '>'); "
                "remove it, since descriptions are placed inside XML tags."
            )
    if "compatibility" in fm:
        compat = fm["compatibility"]
        if not isinstance(compat, str) or not compat.strip():
            problems.append(
                f"{path}: front matter field 'compatibility' must be non-empty text; describe the "
                "environment the skill needs or remove the field."
            )
        elif len(compat) > COMPATIBILITY_MAX:
            problems.append(
                f"{path}: front matter field 'compatibility' has {len(compat)} characters; shorten "
                f"it to at most {COMPATIBILITY_MAX}."
            )
    if "license" in fm and not isinstance(fm["license"], str):
        problems.append(
            f"{path}: front matter field 'license' must be text; write e.g. 'license: MIT'."
        )
    if "metadata" in fm and not isinstance(fm["metadata"], dict):
        problems.append(
            f"{path}: front matter field 'metadata' must be a mapping of keys to values; indent "
            "its entries under 'metadata:'."
        )
    if "allowed-tools" in fm:
        tools = fm["allowed-tools"]
        ok = isinstance(tools, str) or (
            isinstance(tools, list) and all(isinstance(t, str) for t in tools)
        )
        if not ok:
            problems.append(
                f"{path}: front matter field 'allowed-tools' must be a space-separated string or "
                "a list of tool names; write e.g. 'allowed-tools: Read Bash'."
            )
    if not doc.body.strip():
        problems.append(
            f"{path}: there are no instructions after the front matter; write the skill's body "
            "below the closing '---'."
        )
    return problems


def check_skill_md(text: str, path: Path | str = SKILL_FILE) -> list[str]:
    """All problems of one SKILL.md text (a proposal can be checked before it becomes a folder)."""
    try:
        doc = parse_skill_md(text, path)
    except BadInput as exc:
        return list(exc.problems)
    return front_matter_problems(doc, path)


def check_skill(skill_dir: Path) -> list[str]:
    """Every problem of a skill folder, one sentence each (file, field, fix); empty when fine."""
    skill_dir = Path(skill_dir)
    if not skill_dir.is_dir():
        return [f"{skill_dir}: not a folder; pass the skill folder that holds {SKILL_FILE}."]
    skill_md = skill_dir / SKILL_FILE
    problems: list[str] = []
    if not skill_md.is_file():
        near = [p.name for p in skill_dir.iterdir() if p.name.lower() == SKILL_FILE.lower()]
        hint = f"rename '{near[0]}' to {SKILL_FILE}" if near else f"create {SKILL_FILE}"
        problems.append(f"{skill_md}: missing; {hint} with front matter and instructions.")
    else:
        try:
            text = skill_md.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            problems.append(f"{skill_md}: not UTF-8 text; save it as UTF-8.")
        else:
            problems += check_skill_md(text, skill_md)
    problems += _walk(skill_dir)[1]
    return problems


def load_skill(skill_dir: Path) -> Skill:
    """The skill in `skill_dir`, or BadInput listing every problem."""
    skill_dir = Path(skill_dir)
    problems = check_skill(skill_dir)
    if problems:
        raise BadInput(*problems)
    doc = parse_skill_md(
        (skill_dir / SKILL_FILE).read_text(encoding="utf-8"), skill_dir / SKILL_FILE
    )
    return Skill(path=skill_dir, doc=doc, hash=content_hash(skill_dir))


def set_description(text: str, new: str) -> str:
    """SKILL.md text with the front matter's description replaced by `new`, the rest untouched."""
    text = text.replace("\r\n", "\n")
    _split_front_matter(text, SKILL_FILE)
    lines = text.lstrip("\ufeff").split("\n")
    close = next(i for i in range(1, len(lines)) if lines[i].strip() in ("---", "..."))
    # yaml renders the scalar (quoting, escapes); an endless width keeps it on one line.
    rendered = yaml.safe_dump({"description": new}, allow_unicode=True, width=float("inf"))
    rendered = rendered.rstrip("\n")
    start = next((i for i in range(1, close) if re.match(r"description\s*:", lines[i])), None)
    if start is None:
        name_at = next((i for i in range(1, close) if re.match(r"name\s*:", lines[i])), close - 1)
        lines[name_at + 1 : name_at + 1] = rendered.split("\n")
    else:
        end = start + 1
        # A folded or multi-line value continues on indented lines (and blank lines between them).
        while end < close and (lines[end][:1] in (" ", "\t") or not lines[end].strip()):
            end += 1
        while end > start + 1 and not lines[end - 1].strip():
            end -= 1
        lines[start:end] = rendered.split("\n")
    result = "\n".join(lines)
    if parse_skill_md(result).description != new:
        raise ValueError("set_description: the rewritten front matter does not read back")
    return result


# ---------------------------------------------------------------------------
# Folder contents: walk, hash, snapshot, diff
# ---------------------------------------------------------------------------


def _ignored(rel_parts: tuple[str, ...]) -> bool:
    name = rel_parts[-1]
    if name in IGNORED_NAMES or any(fnmatch.fnmatch(name, g) for g in IGNORED_GLOBS):
        return True
    if len(rel_parts) == 1:
        return name in IGNORED_TOP or any(fnmatch.fnmatch(name, g) for g in IGNORED_TOP_GLOBS)
    return False


def _walk(root: Path) -> tuple[dict[str, Path], list[str]]:
    """(relative posix path -> file to read, problems). A link to a file inside is read through;
    a link that leaves the folder, dangles, or names a folder is a problem (snapshots refuse it)."""
    root = Path(root)
    real_root = root.resolve()
    files: dict[str, Path] = {}
    problems: list[str] = []
    for folder, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(folder)
        rel_here = here.relative_to(root).parts
        dirnames[:] = sorted(d for d in dirnames if not _ignored((*rel_here, d)))
        for name in [*dirnames, *sorted(filenames)]:
            rel = (*rel_here, name)
            if _ignored(rel):
                continue
            path = here / name
            rel_posix = "/".join(rel)
            if path.is_symlink():
                target = path.resolve()
                if not target.is_relative_to(real_root):
                    problems.append(
                        f"{path}: a symbolic link that points outside the skill folder "
                        f"({os.readlink(path)}); copy the file into the folder instead."
                    )
                elif not target.exists():
                    problems.append(
                        f"{path}: a broken symbolic link; remove it or point it at a file."
                    )
                elif target.is_dir():
                    problems.append(
                        f"{path}: a symbolic link to a folder; replace it with the folder itself, "
                        "since snapshots copy files only."
                    )
                else:
                    files[rel_posix] = path
            elif name not in dirnames and path.is_file():
                files[rel_posix] = path
    return dict(sorted(files.items())), problems


def _files_or_raise(root: Path) -> dict[str, Path]:
    if not Path(root).is_dir():
        raise BadInput(f"{root}: not a folder; pass a skill folder.")
    files, problems = _walk(root)
    if problems:
        raise BadInput(*problems)
    return files


def content_hash(skill_dir: Path) -> str:
    """The version id: sha256 over sorted relative paths and bytes, evals/ excluded; 16 hex."""
    digest = hashlib.sha256()
    for rel, path in _files_or_raise(skill_dir).items():
        if rel.split("/", 1)[0] in UNHASHED_TOP:
            continue
        data = path.read_bytes()
        # Lengths between the parts, so no two different trees give the same byte stream.
        digest.update(f"{rel}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()[:16]


def snapshot(src: Path, dest: Path) -> str:
    """Copy a skill folder (evals/ included, ignored files left out) into the new folder `dest`,
    all or nothing, and return its content hash. A version folder is never rewritten."""
    src, dest = Path(src), Path(dest)
    files = _files_or_raise(src)
    if dest.exists():
        raise FileExistsError(f"{dest} already exists; a version folder is never rewritten")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.parent / f".{dest.name}.tmp-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    try:
        tmp.mkdir()
        for rel, path in files.items():
            target = tmp / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            # copy2 follows a link inside the folder, so the snapshot is self-contained.
            shutil.copy2(path, target)
        os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return content_hash(dest)


def files_of(skill_dir: Path, *, include_evals: bool = True) -> dict[str, str | bytes]:
    """Relative path -> content, sorted by path: text when it decodes as UTF-8 and has no NUL byte
    (git's test for binary), else bytes."""
    out: dict[str, str | bytes] = {}
    for rel, path in _files_or_raise(skill_dir).items():
        if not include_evals and rel.split("/", 1)[0] in UNHASHED_TOP:
            continue
        data = path.read_bytes()
        try:
            out[rel] = data if b"\0" in data else data.decode("utf-8")
        except UnicodeDecodeError:
            out[rel] = data
    return out


def _diff_lines(text: str) -> list[str]:
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n\\ No newline at end of file\n"
    return lines


def _mode(path: Path) -> str:
    return "100755" if os.access(path, os.X_OK) else "100644"


def unified_diff(dir_a: Path, dir_b: Path, *, context: int = 3) -> str:
    """File-by-file unified diff of two skill folders (a/ and b/ prefixes, git style); empty when
    they hold the same files."""
    files_a, files_b = files_of(dir_a), files_of(dir_b)
    chunks: list[str] = []
    for rel in sorted(set(files_a) | set(files_b)):
        a, b = files_a.get(rel), files_b.get(rel)
        if a == b:
            continue
        header = f"diff --git a/{rel} b/{rel}\n"
        if a is None:
            header += f"new file mode {_mode(Path(dir_b) / rel)}\n"
        elif b is None:
            header += f"deleted file mode {_mode(Path(dir_a) / rel)}\n"
        if isinstance(a, bytes) or isinstance(b, bytes):
            chunks.append(header + f"Binary files a/{rel} and b/{rel} differ\n")
            continue
        diff = difflib.unified_diff(
            _diff_lines(a or ""),
            _diff_lines(b or ""),
            fromfile="/dev/null" if a is None else f"a/{rel}",
            tofile="/dev/null" if b is None else f"b/{rel}",
            n=context,
        )
        chunks.append(header + "".join(diff))
    return "".join(chunks)
