"""The layout rules of docs/architecture.md, read from the code's own imports: stages import only
stages above them, nothing imports another module's private names, there is no import cycle,
modules stay small and every stage says in its __init__ what it owns and may import."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "optimizer"
# The stages of docs/design.md §4 in order: each may import the stages before it, never one after it.
STAGES = (
    "decide",
    "inputs",
    "store",
    "sim",
    "model",
    "sandbox",
    "execute",
    "grade",
    "search",
    "grow",
    "report",
)
# Flat contract modules every stage may import; they import only each other.
SHARED = ("errors", "config", "prices", "schemas", "logs", "tags", "words")
# Entry points: they may import anything, and only they may import each other.
ENTRY = ("cli", "daemon", "nightly", "__main__")
MAX_LINES = 400
LONGER = {"optimizer.schemas"}  # the contract of the seed files, kept in one file on purpose
MAX_FLAT = 8


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


MODULES = modules()


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports(name: str, *, typing: bool = False) -> list[tuple[str, str | None, int]]:
    """(module imported, name taken from it or None, line) of every import of the package, at any
    depth (a lazy import inside a function is an import too); those only for type checkers too
    when `typing`."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[str, str | None, int]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking(node) and not typing:
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.extend(
                (a.name, None, node.lineno) for a in node.names if a.name.startswith("optimizer")
            )
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            if base.startswith("optimizer"):
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    found.append(
                        (sub, None, node.lineno)
                        if sub in MODULES
                        else (base, alias.name, node.lineno)
                    )
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return found


def stage_of(name: str) -> str:
    """The stage (folder) or flat module a module belongs to: optimizer.grade.judge -> grade."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def rank(stage: str) -> int | None:
    return STAGES.index(stage) if stage in STAGES else None


def test_no_module_imports_another_modules_private_names():
    bad = [
        f"{name}:{line} takes {taken} from {target}"
        for name in MODULES
        for target, taken, line in imports(name)
        if taken is not None
        and taken.startswith("_")
        and not taken.startswith("__")
        and target != name
    ]
    assert bad == []


def test_stages_import_only_the_stages_above_them():
    bad = []
    for name in MODULES:
        mine = stage_of(name)
        for target, _, line in imports(name):
            theirs = stage_of(target)
            if theirs in ("__init__", mine) or mine in ENTRY:
                continue
            if theirs in ENTRY:
                bad.append(f"{name}:{line} imports the entry point {target}")
            elif mine in SHARED and theirs not in SHARED:
                bad.append(f"{name}:{line}: a shared module imports the stage {target}")
            elif theirs in STAGES and (rank(mine) is None or rank(theirs) > rank(mine)):
                bad.append(f"{name}:{line}: {mine} imports {target}, a later stage")
    assert bad == []


def test_there_is_no_import_cycle():
    """Type-only imports count: two modules that need each other's types are one module, or need
    a protocol between them."""
    graph = {
        name: sorted({t for t, _, _ in imports(name, typing=True) if t in MODULES and t != name})
        for name in MODULES
    }
    # A package's __init__ imports its own modules to export them; that is not a cycle of code.
    graph = {
        n: [t for t in ts if not (MODULES[n].name == "__init__.py" and t.startswith(n + "."))]
        for n, ts in graph.items()
    }
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def walk(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in graph[node]:
            if state.get(nxt) == 1:
                cycles.append(path[path.index(nxt) :] + [nxt])
            elif nxt not in state:
                walk(nxt, path + [nxt])
        state[node] = 2

    for start in sorted(graph):
        if start not in state:
            walk(start, [start])
    assert cycles == []


def test_no_query_matches_run_keys_as_text():
    """A run's parts are columns (store/keys.py); matching key text breaks on run-10 and hides
    the query from the index."""
    like = re.compile(r"\bkey\s+like\b", re.IGNORECASE)
    found = [
        f"{name}:{i}"
        for name, path in MODULES.items()
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if like.search(line)
    ]
    assert found == []


def test_modules_stay_small_and_few_stay_flat():
    long = {n: len(p.read_text(encoding="utf-8").splitlines()) for n, p in MODULES.items()}
    assert {n: k for n, k in long.items() if k > MAX_LINES and n not in LONGER} == {}
    flat = [
        n
        for n, p in MODULES.items()
        if p.parent == PACKAGE and p.stem not in ("__init__", "__main__")
    ]
    assert len(flat) <= MAX_FLAT, flat
    assert set(flat) <= {f"optimizer.{m}" for m in (*SHARED, *ENTRY)}, flat


def test_the_line_limit_counts_formatted_text():
    """No module is exempt from the formatter, so `ruff format --check` (make check, CI) holds each
    to its formatted text and the limit above counts that, not lines packed by hand. A module that
    would pass the limit once formatted is split, never excluded."""
    config = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))
    ruff = config["tool"]["ruff"]
    excluded = [
        *ruff.get("exclude", []),
        *ruff.get("extend-exclude", []),
        *ruff.get("format", {}).get("exclude", []),
    ]
    exempt = sorted(path for path in excluded if path.startswith("optimizer"))
    assert exempt == [], exempt


@pytest.mark.parametrize("stage", STAGES)
def test_every_stage_says_what_it_owns_and_may_import(stage):
    doc = ast.get_docstring(
        ast.parse((PACKAGE / stage / "__init__.py").read_text(encoding="utf-8"))
    )
    assert doc and len(doc) > 120 and "import" in doc, f"optimizer/{stage}/__init__.py"
