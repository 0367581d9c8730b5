"""A ratchet on long functions and long signatures in optimizer/ (the simulator too): a function
over 60 lines, or with more than 8 parameters (self and cls aside), is listed in
tests/architecture/functions.json with its size; no function may join a list, none listed may grow,
and one that shrank is lowered there (`python tests/architecture/test_function_ratchet.py` lowers,
never raises). Where the lists are headed (docs/architecture.md, "Ratchets"): no function over 80
lines, at most 15 over 60, at most 8 with more than 8 parameters; a long signature becomes a small
typed record (decide/sequential.look(selection, asked, seen)), a long body the steps it is made of.
A typer command counts like any function: its options are its parameters."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from test_architecture import MODULES
from test_ratchet import lowered

CEILINGS = Path(__file__).with_name("functions.json")
LONG, WIDE = 60, 8  # lines of a function listed; parameters of a signature listed
GOALS = {"over_80": 0, "over_60": 15, "over_8_parameters": 8}


def _parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = node.args
    names = [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
    return sum(p is not None and p.arg not in ("self", "cls") for p in names)


def functions(name: str) -> list[tuple[str, int, int]]:
    """(qualified name, lines, parameters) of every function of a module, methods and nested
    functions named by their enclosing ones (optimizer.decide.sequential:look)."""
    found: list[tuple[str, int, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                qual = f"{prefix}{child.name}"
                lines = (child.end_lineno or child.lineno) - child.lineno + 1
                found.append((f"{name}:{qual}", lines, _parameters(child)))
                visit(child, f"{qual}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")

    visit(ast.parse(MODULES[name].read_text(encoding="utf-8")), "")
    return found


def measured() -> dict[str, dict[str, int]]:
    """{"lines": {function: lines over LONG}, "parameters": {function: count over WIDE}}."""
    out: dict[str, dict[str, int]] = {"lines": {}, "parameters": {}}
    for name in sorted(MODULES):
        for qual, lines, params in functions(name):
            if lines > LONG:
                out["lines"][qual] = lines
            if params > WIDE:
                out["parameters"][qual] = params
    return out


def standing(now: dict[str, dict[str, int]]) -> dict[str, int]:
    """Today's figures against GOALS."""
    return {
        "over_80": sum(n > 80 for n in now["lines"].values()),
        "over_60": len(now["lines"]),
        "over_8_parameters": len(now["parameters"]),
    }


def test_no_function_grows_or_joins_the_long_lists():
    ceilings = json.loads(CEILINGS.read_text(encoding="utf-8"))
    now = measured()
    rose, fell = [], []
    for kind in ("lines", "parameters"):
        for qual in sorted(set(now[kind]) | set(ceilings[kind])):
            count, ceiling = now[kind].get(qual, 0), ceilings[kind].get(qual, 0)
            if count > ceiling:
                rose.append(f"{qual}: {count} {kind}, over the ceiling of {ceiling or 'none'}")
            elif count < ceiling:
                fell.append(f"{qual}: {count} {kind}, under the ceiling of {ceiling}")
    assert rose == [], (
        "split the function into the steps it is made of, or its parameters into a small typed "
        "record (tests/architecture/functions.json may only go down)"
    )
    assert fell == [], (
        "shorter now: run `python tests/architecture/test_function_ratchet.py` to lower "
        "tests/architecture/functions.json"
    )
    assert ceilings["standing"] == standing(now), "stale standing: run the script to lower it"


def test_the_goals_reached_stay_reached():
    """Every goal of GOALS is met, and held here: no function over 80 lines, at most 15 over 60,
    at most 8 with more than 8 parameters (a typer command's options count; the shorthands of
    cli/shorthands.py are what kept `run`'s few)."""
    figures = standing(measured())
    assert all(figures[goal] <= most for goal, most in GOALS.items()), (figures, GOALS)


def test_the_count_names_methods_and_leaves_self_out():
    source = "class A:\n    def f(self, a, b, *c, d, **e):\n        def g(x): pass\n"
    tree = ast.parse(source)
    method = tree.body[0].body[0]  # type: ignore[attr-defined]
    assert _parameters(method) == 5


def lower() -> None:
    """Lowers each ceiling to today's figure; never raises one, never adds a function."""
    now = lowered(measured(), CEILINGS, ("lines", "parameters"))
    figures = standing(now)
    CEILINGS.write_text(
        json.dumps({"standing": figures, "goals": GOALS, **now}, indent=1) + "\n", encoding="utf-8"
    )
    print(f"{CEILINGS}: {figures} (goals {GOALS})")


if __name__ == "__main__":
    lower()
