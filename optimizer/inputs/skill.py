"""Skill folders: the checks of a whole folder, snapshots with a content hash, file diffs.
Never read or copy anything outside the skill folder, and never change the folder being read."""

from __future__ import annotations

import difflib
import fnmatch
import hashlib
import os
import shutil
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from optimizer.errors import BadInput
from optimizer.inputs.skillmd import SKILL_FILE, SkillDoc, check_skill_md, parse_skill_md

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
# What one file a proposal writes may hold (search/edits.py); a file of the skill past it, or a
# binary one, is carried from version to version as it is (carried_as_is).
MAX_WRITTEN_CHARS = 100_000


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


def carried_as_is(skill_dir: Path) -> list[str]:
    """The files of the skill no proposal is expected to rewrite, with their size and why: binary
    ones and text past what a proposal may write ("themes.pdf, 124 KB (binary)"), by path."""
    carried = []
    for rel, content in files_of(skill_dir, include_evals=False).items():
        kb = (
            f"{len(content.encode('utf-8') if isinstance(content, str) else content) / 1000:.0f} KB"
        )
        if isinstance(content, bytes):
            carried.append(f"{rel}, {kb} (binary)")
        elif len(content) > MAX_WRITTEN_CHARS:
            carried.append(
                f"{rel}, {kb} (over the {MAX_WRITTEN_CHARS:,} characters a proposal writes)"
            )
    return carried


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
