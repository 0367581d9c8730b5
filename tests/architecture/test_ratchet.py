"""A ratchet on loose types in optimizer/ outside the simulator (optimizer/sim/ models free text and
stays out): per module, the uses of `Any` and the bare mappings in annotations (`dict` or `Mapping`
without parameters, or with values of any type: `dict[str, Any]`, `Mapping[str, object]`) may only
go down. tests/architecture/ratchet.json holds each module's ceiling; a count above it fails, and
so does one below it until the ceiling is lowered to it (`python tests/architecture/test_ratchet.py`
lowers, never raises).
Every annotation counts, in bodies and private helpers too, not only public signatures."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from test_architecture import MODULES, bare_dicts

CEILINGS = Path(__file__).with_name("ratchet.json")
KINDS = ("any", "bare_mappings")


def _annotations(tree: ast.AST) -> list[ast.expr]:
    """Every annotation of a module (arguments, returns, annotated names, at any depth), the type
    of every cast() and the value of every type alias (`Row = dict[str, Any]`)."""
    found: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and node.annotation is not None:
            found.append(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns:
            found.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            found.append(node.annotation)
        elif isinstance(node, ast.Call) and ast.unparse(node.func).endswith("cast") and node.args:
            found.append(node.args[0])
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Subscript | ast.BinOp):
            found.append(node.value)
    return found


def _quoted(annotation: ast.expr) -> list[ast.expr]:
    """The quoted parts of an annotation ("Json", "dict[str, Any]"), parsed."""
    parts = []
    for node in ast.walk(annotation):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                parts.append(ast.parse(node.value, mode="eval").body)
            except SyntaxError:
                continue
    return parts


def _anys(node: ast.AST) -> int:
    return sum(
        (isinstance(n, ast.Name) and n.id == "Any")
        or (isinstance(n, ast.Attribute) and n.attr == "Any")
        for n in ast.walk(node)
    )


def counts(name: str) -> dict[str, int]:
    """A module's uses of Any (anywhere in its code, quoted annotations too) and the bare mappings
    of its annotations."""
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    annotations = _annotations(tree)
    quoted = [q for a in annotations for q in _quoted(a)]
    return {
        "any": _anys(tree) + sum(_anys(q) for q in quoted),
        "bare_mappings": sum(len(bare_dicts(a)) for a in annotations),
    }


def measured() -> dict[str, dict[str, int]]:
    """{kind: {module: count}} over optimizer/ outside optimizer/sim/, modules at 0 left out."""
    found: dict[str, dict[str, int]] = {kind: {} for kind in KINDS}
    for name in MODULES:
        if name == "optimizer.sim" or name.startswith("optimizer.sim."):
            continue
        for kind, count in counts(name).items():
            if count:
                found[kind][name] = count
    return found


def test_loose_types_only_go_down():
    ceilings = json.loads(CEILINGS.read_text(encoding="utf-8"))
    now = measured()
    rose, fell = [], []
    for kind in KINDS:
        for name in sorted(set(now[kind]) | set(ceilings[kind])):
            count, ceiling = now[kind].get(name, 0), ceilings[kind].get(name, 0)
            if count > ceiling:
                rose.append(f"{name}: {count} {kind}, over the ceiling of {ceiling}")
            elif count < ceiling:
                fell.append(f"{name}: {count} {kind}, under the ceiling of {ceiling}")
    assert ceilings["totals"] == {k: sum(ceilings[k].values()) for k in KINDS}, "stale totals"
    assert rose == [], (
        "name the type: a row, a record, a value (tests/architecture/ratchet.json may only go down)"
    )
    assert fell == [], (
        "fewer now: run `python tests/architecture/test_ratchet.py` to lower its ratchet.json"
    )


# The goal a ratchet reached stays reached: Any outside the simulator under 150 (docs/architecture.md).
ANY_GOAL = 150


def test_any_stays_under_its_goal():
    assert sum(measured()["any"].values()) < ANY_GOAL, (
        f"Any outside optimizer/sim/ reached {ANY_GOAL}: name the type instead"
    )


def test_the_count_reads_bodies_quotes_and_aliases():
    """The count sees what a signature-only scan misses: a private helper's annotations, a local
    variable's, a quoted annotation, a cast and an alias."""
    tree = ast.parse(
        "def _f(a: Any, b: 'dict[str, Any]') -> Mapping:\n"
        "    x: dict = {}\n"
        "    return cast(dict[str, object], x)\n"
        "Row = Mapping[str, Any]\n"
    )
    annotations = _annotations(tree)
    assert sum(len(bare_dicts(a)) for a in annotations) == 5
    assert _anys(tree) + sum(_anys(q) for a in annotations for q in _quoted(a)) == 3


def lowered(
    now: dict[str, dict[str, int]], ceilings_file: Path, kinds: tuple[str, ...]
) -> dict[str, dict[str, int]]:
    """Today's figures under the file's ceilings, sorted: each ceiling lowered to today's figure,
    none raised, nothing added that the file does not list (a first file takes today's)."""
    if ceilings_file.exists():
        ceilings = json.loads(ceilings_file.read_text(encoding="utf-8"))
        now = {
            kind: {
                n: min(c, ceilings[kind][n]) for n, c in now[kind].items() if n in ceilings[kind]
            }
            for kind in kinds
        }
    return {kind: dict(sorted(now[kind].items())) for kind in kinds}


def lower() -> None:
    """Lowers each ceiling to today's count; never raises one, never adds a module."""
    now = lowered(measured(), CEILINGS, KINDS)
    totals = {kind: sum(now[kind].values()) for kind in KINDS}
    CEILINGS.write_text(json.dumps({"totals": totals, **now}, indent=1) + "\n", encoding="utf-8")
    print(f"{CEILINGS}: {totals}")


if __name__ == "__main__":
    lower()
