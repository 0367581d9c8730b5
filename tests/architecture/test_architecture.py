"""The layout rules of docs/architecture.md. The layering, the stages' MAY_IMPORT policy and the
absence of import cycles are import-linter contracts in pyproject.toml, checked here by running
lint-imports; the tests below them check what import-linter cannot: private names used across
modules, SQL outside the store, module size, and bare dicts in the signatures that cross a stage
boundary."""

from __future__ import annotations

import ast
import functools
import re
import tomllib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "optimizer"
PYPROJECT = PACKAGE.parent / "pyproject.toml"
CONTRACTS = {
    c["id"]: c
    for c in tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["importlinter"][
        "contracts"
    ]
}
# The layers of the contract, top to bottom: the entry points, the stages of docs/design.md §4
# (each may import the stages below it, never one above) and the flat contract modules.
LAYERS = [[m.strip() for m in layer.split(":")] for layer in CONTRACTS["layers"]["layers"]]
ENTRY = tuple(LAYERS[0])  # they may import anything, and only they may import each other
SHARED = tuple(LAYERS[-1])  # every stage may import them; they import only each other
STAGES = tuple(layer[0] for layer in reversed(LAYERS[1:-1]))  # first the lowest
MAX_LINES = 400
MAX_FLAT = 8


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


MODULES = modules()


@functools.cache
def tree(name: str) -> ast.Module:
    """A module's syntax tree, parsed once for every test here (they only read it)."""
    return ast.parse(MODULES[name].read_text(encoding="utf-8"))


@functools.cache
def nodes(name: str) -> list[ast.AST]:
    """Every node of a module's tree (ast.walk, once)."""
    return list(ast.walk(tree(name)))


# Parsed while the file is collected, not in the first test that reads a tree: parsing every
# module takes 1.7 s, which under load pushed that test past the fast tier's 2 s limit.
for _name in MODULES:
    nodes(_name)


def imports(name: str) -> list[tuple[str, str | None, int]]:
    """(module imported, name taken from it or None, line) of every import of the package, at any
    depth (a lazy import inside a function, one for type checkers only, is an import too)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[str, str | None, int]] = []

    def visit(node: ast.AST) -> None:
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

    visit(tree(name))
    return found


def stage_of(name: str) -> str:
    """The stage (folder) or flat module a module belongs to: optimizer.grade.judge -> grade."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


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


def test_the_import_contracts_hold(capsys):
    """pyproject.toml's contracts, as `lint-imports` checks them: every stage imports only the
    stages below it and none that its MAY_IMPORT leaves out, the shared modules import no stage,
    nothing imports an entry point, and there is no import cycle; type-only and lazy imports count."""
    from importlinter import api  # noqa: F401  (configures import-linter on import)
    from importlinter.application import use_cases

    kept = use_cases.lint_imports(str(PYPROJECT), cache_dir=None, no_logo=True)
    printed = capsys.readouterr().out
    assert kept, printed
    # Every contract was checked, so a kept run means something.
    assert all(f"{c['name']} KEPT" in " ".join(printed.split()) for c in CONTRACTS.values())


# What issues SQL, outside optimizer/store/: a statement's text (a string, an f-string or a sum of
# them; docstrings aside), a call that runs one or reaches a table (.query, .execute, .table,
# readonly.rows, sqlite3.connect), the Store's generic helpers (store.get, .upsert, .query, .table,
# .db), or sqlite_utils. The store owns every statement: a repository per table or concern
# (store/ledger.py, runs.py, versions.py, decisions.py, iterations.py, gradings.py, ...).
SQL_TEXT = re.compile(
    r"^\s*(select\s.*\bfrom\b|select\s+(1|count|coalesce|max|min|sum)\b|insert\s.*\binto\b"
    r"|update\s+\[?\w+\]?\s+set\b|delete\s+from\b|pragma\s|(create|drop|alter)\s+(table|index|view)\b)",
    re.IGNORECASE | re.DOTALL,
)
SQL_CALLS = {"query", "execute", "executemany", "executescript", "table"}
STORE_HELPERS = {"get", "upsert", "query", "table", "db"}
# Modules outside optimizer/store/ that still issue SQL, each with the reason it is left there.
SQL_LEFT: dict[str, str] = {}


def _text(node: ast.AST) -> str | None:
    """A string expression's text, "?" for what is computed: "a" + b + f"c{d}" reads "a?c?"."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "?" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text(node.left), _text(node.right)
        return None if left is None and right is None else (left or "?") + (right or "?")
    return None


def sql_in(name: str) -> list[str]:
    """Where module `name` issues SQL, as "line: what"."""
    docstrings = {
        id(n.value)
        for n in nodes(name)
        if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
    }
    found: set[str] = set()
    for node in nodes(name):
        line = getattr(node, "lineno", 0)
        if id(node) not in docstrings and (text := _text(node)) and SQL_TEXT.match(text):
            found.add(f"{line}: {text[:40]!r}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            receiver, attr = ast.unparse(node.func.value), node.func.attr
            if (attr in SQL_CALLS and not receiver.endswith("executor")) or (receiver, attr) in {
                ("readonly", "rows"),
                ("sqlite3", "connect"),
            }:
                found.add(f"{line}: {receiver}.{attr}()")
        if isinstance(node, ast.Attribute) and node.attr in STORE_HELPERS:
            if ast.unparse(node.value).rpartition(".")[2] == "store":
                found.add(f"{line}: {ast.unparse(node)}")
        if isinstance(node, ast.Import | ast.ImportFrom):
            modules = (
                [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
            )
            if any((m or "").split(".")[0] == "sqlite_utils" for m in modules):
                found.add(f"{line}: imports sqlite_utils")
    return sorted(found, key=lambda hit: int(hit.split(":")[0]))


def test_only_the_store_issues_sql():
    """Every SQL statement is the store's (optimizer/store/); the rest calls its typed methods, so
    what a module reads or writes is named once and the report reads through a read-only View."""
    found = {
        name: hits
        for name in MODULES
        if not name.startswith("optimizer.store") and (hits := sql_in(name))
    }
    assert {n: h for n, h in found.items() if n not in SQL_LEFT} == {}
    assert [n for n in SQL_LEFT if n not in found] == [], "no SQL is left there: drop the entry"
    # The scan sees what the store does, so an empty answer above means something.
    assert sql_in("optimizer.store.ledger") and sql_in("optimizer.store.gradings")


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
    assert {n: k for n, k in long.items() if k > MAX_LINES} == {}
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


def may_import(stage: str) -> tuple[str, ...] | None:
    """The stage's own statement of the stages it may import: MAY_IMPORT in its __init__.py."""
    tree = ast.parse((PACKAGE / stage / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.AnnAssign | ast.Assign):
            targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets
            if any(isinstance(t, ast.Name) and t.id == "MAY_IMPORT" for t in targets):
                assert node.value is not None
                return tuple(ast.literal_eval(node.value))
    return None


def forbidden(stage: str) -> set[str]:
    """The lower stages a forbidden contract of pyproject.toml keeps the stage from importing."""
    return {
        m.removeprefix("optimizer.")
        for c in CONTRACTS.values()
        if c["type"] == "forbidden" and c["source_modules"] == [f"optimizer.{stage}"]
        for m in c["forbidden_modules"]
    }


@pytest.mark.parametrize("stage", STAGES)
def test_every_stage_says_what_it_owns_and_may_import(stage):
    """The docstring says what the stage owns; MAY_IMPORT names the lower stages it may import, a
    policy: a forbidden contract of pyproject.toml keeps it from every other lower stage, so the
    statement and the contract cannot drift apart, and lint-imports holds the code to both."""
    where = f"optimizer/{stage}/__init__.py"
    doc = ast.get_docstring(
        ast.parse((PACKAGE / stage / "__init__.py").read_text(encoding="utf-8"))
    )
    assert doc and len(doc) > 120 and "import" in doc, where
    declared = may_import(stage)
    assert declared is not None, f"{where} declares no MAY_IMPORT"
    lower = STAGES[: STAGES.index(stage)]
    assert all(s in lower for s in declared), (where, declared)
    assert sorted(declared, key=STAGES.index) == list(declared), (
        f"{where}: list them in stage order"
    )
    assert forbidden(stage) == set(lower) - set(declared), (
        f"pyproject.toml: the contract of {stage} forbids the lower stages {where} does not name"
    )


# A bare dict in a signature: `dict` or `Mapping` without parameters, or with values of any type
# (Any, object). What crosses a stage boundary is named for what it is: a row, a record, a value.
MAPPINGS = {"dict", "Dict", "Mapping", "MutableMapping"}
Signature = ast.FunctionDef | ast.AsyncFunctionDef


def _last(node: ast.expr) -> str:
    return ast.unparse(node).rpartition(".")[2]


def bare_dicts(annotation: ast.expr) -> list[str]:
    """The bare dicts an annotation holds, at any depth (`list[dict[str, Any]]` holds one)."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        annotation = ast.parse(annotation.value, mode="eval").body
    parameterised = {id(n.value) for n in ast.walk(annotation) if isinstance(n, ast.Subscript)}
    found = []
    for node in ast.walk(annotation):
        if isinstance(node, ast.Name | ast.Attribute) and _last(node) in MAPPINGS:
            if id(node) not in parameterised:
                found.append(_last(node))
        elif isinstance(node, ast.Subscript) and _last(node.value) in MAPPINGS:
            parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if _last(parts[-1]) in ("Any", "object"):
                found.append(ast.unparse(node))
    return found


@functools.cache
def public_api(name: str) -> dict[str, list[Signature]]:
    """A module's public functions ({name: [it]}) and classes ({name: [their public methods]})."""
    api: dict[str, list[Signature]] = {}
    for node in tree(name).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if not node.name.startswith("_"):
                body = node.body if isinstance(node, ast.ClassDef) else [node]
                api[node.name] = [
                    f
                    for f in body
                    if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
                    and not f.name.startswith("_")
                ]
    return api


@functools.cache
def _imported_names(name: str) -> dict[str, tuple[str, str | None]]:
    """{local name: (module, name taken from it or None for the module itself)} of a module's
    imports of the package, type-only and lazy ones too."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: dict[str, tuple[str, str | None]] = {}
    for node in nodes(name):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name in MODULES:
                    found[a.asname or a.name] = (a.name, None)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            for a in node.names:
                sub = f"{base}.{a.name}"
                if base.startswith("optimizer"):
                    found[a.asname or a.name] = (sub, None) if sub in MODULES else (base, a.name)
    return found


def _home(module: str, name: str, seen: int = 0) -> tuple[str, str] | None:
    """Where a name a module offers is defined, following re-exports (a package's __init__)."""
    if name in public_api(module):
        return module, name
    taken = _imported_names(module).get(name)
    if taken is None or taken[1] is None or seen > 5:
        return None
    return _home(taken[0], taken[1], seen + 1)


def crossing() -> set[tuple[str, str, str]]:
    """(module, function or class, method or "") of every public function or method of a stage
    that a module of another stage or an entry point uses: imports it, reads it off its module,
    or imports its class (or reads it off its module) and calls the method."""
    used: set[tuple[str, str, str]] = set()
    for user in MODULES:
        mine = stage_of(user)
        if mine not in STAGES and mine not in ENTRY:
            continue
        # A method is named where it is called; a property where it is read.
        called = {
            n.func.attr
            for n in nodes(user)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
        }
        read = {n.attr for n in nodes(user) if isinstance(n, ast.Attribute)}
        names = _imported_names(user)
        offered = [(m, n) for m, n in names.values() if n is not None]
        offered += [
            (names[n.value.id][0], n.attr)
            for n in nodes(user)
            if isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name)
            and names.get(n.value.id, ("", ""))[1] is None
        ]
        for module, taken in offered:
            home = _home(module, taken) if module in MODULES else None
            if home is None or stage_of(home[0]) not in STAGES or stage_of(home[0]) == mine:
                continue
            for f in public_api(home[0])[home[1]]:
                named = read if any(_last(d) == "property" for d in f.decorator_list) else called
                if f.name == home[1] or f.name in named:
                    used.add((home[0], home[1], "" if f.name == home[1] else f.name))
    return used


def boundary_dicts() -> list[str]:
    """What crosses a stage boundary with a bare dict in its signature: "module.name: dicts"."""
    bad = []
    for module, top, method in sorted(crossing()):
        f = next(f for f in public_api(module)[top] if f.name == (method or top))
        args = [*f.args.posonlyargs, *f.args.args, *f.args.kwonlyargs, f.args.vararg, f.args.kwarg]
        hints = [a.annotation for a in args if a is not None and a.annotation is not None]
        dicts = [d for h in [*hints, f.returns] if h is not None for d in bare_dicts(h)]
        if dicts:
            bad.append(f"{module}.{top}{'.' + method if method else ''}: {', '.join(dicts)}")
    return bad


def test_no_bare_dict_crosses_a_stage_boundary():
    """What one stage hands another is named for what it is (a store row as a TypedDict, a record
    as a model, a value as a dataclass, a JSON document no model checked yet as a JsonObject),
    never a dict of anything: the reader of a signature learns its keys there. A method counts
    once a module of another stage calls it, so the store's generic helpers (Store.query, upsert,
    View.query), which only the store calls (test_only_the_store_issues_sql), stay its own."""
    assert boundary_dicts() == []
    # The scan sees what crosses: a repository's function, a method of the client's port, one
    # re-exported by a package's __init__; and a bare dict where it is.
    seen = crossing()
    assert ("optimizer.store.versions", "all_of", "") in seen
    assert ("optimizer.model.port", "Client", "message") in seen
    assert ("optimizer.execute.record", "TrialRecord", "to_row") in seen
    assert ("optimizer.model.factory", "make_client", "") in seen
    hint = ast.parse("list[dict[str, Any]] | Mapping[str, object] | dict", mode="eval").body
    assert sorted(bare_dicts(hint)) == ["Mapping[str, object]", "dict", "dict[str, Any]"]


def test_no_file_of_the_repository_cites_a_file_outside_it():
    """A reader of a clone has the repository alone: a decision is cited where it lives here
    (docs/design.md), never in a product note beside the repository."""
    root = Path(__file__).resolve().parents[2]
    outside = re.compile(r"\.\./shared/")
    cited = [
        f"{path.relative_to(root)}:{n}"
        for folder in ("optimizer", "tests", "docs", "bench", "scripts", "prompts", "examples")
        for path in sorted((root / folder).rglob("*"))
        if path.suffix in {".py", ".md", ".toml", ".sh", ".json"}
        and "__pycache__" not in path.parts
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if outside.search(line) and path.name != Path(__file__).name
    ]
    readme = (root / "README.md").read_text()
    assert cited == [] and not outside.search(readme), cited
