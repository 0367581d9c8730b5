"""The store hands out domain objects (docs/design.md §3): outside optimizer/store no module imports
sqlite3 (StoreError is what a caller catches), decodes a `*_json` column of state.db, or casts a
value to one of the store's row or record types (each record is built once, by its from_row)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "optimizer"
STORE = PACKAGE / "store"
COLUMN = re.compile(r"^\w+_json$")  # state.db's JSON columns: split_json, grading_json, ...
DECODERS = {"loads", "parse_json", "model_validate_json", "validate_json"}


def store_types() -> set[str]:
    """Every class the store defines: its row TypedDicts and its frozen records."""
    return {
        node.name
        for path in STORE.glob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ClassDef)
    }


def _column(node: ast.AST) -> str | None:
    """The `*_json` column a node names: a string constant, or a variable or attribute so named."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and COLUMN.match(node.value):
        return node.value
    if isinstance(node, ast.Name) and COLUMN.match(node.id):
        return node.id
    if isinstance(node, ast.Attribute) and COLUMN.match(node.attr):
        return node.attr
    return None


def _called(node: ast.Call) -> str:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def crossings(source: str, types: set[str]) -> list[str]:
    """What a module outside the store does that only the store may: each as 'line: what'."""
    found = []
    for node in ast.walk(ast.parse(source)):
        line = getattr(node, "lineno", 0)
        # a row's JSON column read by hand (row["x_json"], row.get("x_json")), whatever decodes it
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            if isinstance(node.slice, ast.Constant) and (c := _column(node.slice)):
                found.append(f"{line}: reads {c}")
        if isinstance(node, ast.Import) and any(
            a.name.split(".")[0] == "sqlite3" for a in node.names
        ):
            found.append(f"{line}: imports sqlite3")
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "sqlite3":
            found.append(f"{line}: imports from sqlite3")
        if not isinstance(node, ast.Call):
            continue
        name = _called(node)
        if name == "get" and node.args and (c := _column(node.args[0])):
            found.append(f"{line}: reads {c}")
        if name in DECODERS:
            named = {c for arg in node.args for sub in ast.walk(arg) if (c := _column(sub))}
            found += [f"{line}: decodes {c}" for c in sorted(named)]
        if name == "cast" and node.args:
            cast_to = {n.id for n in ast.walk(node.args[0]) if isinstance(n, ast.Name)}
            cast_to |= {n.attr for n in ast.walk(node.args[0]) if isinstance(n, ast.Attribute)}
            found += [f"{line}: casts to the store's {t}" for t in sorted(cast_to & types)]
    return sorted(found, key=lambda hit: (int(hit.split(":")[0]), hit))


def test_no_module_outside_the_store_reads_state_db_for_itself():
    types = store_types()
    offenders = {
        str(path.relative_to(ROOT)): hits
        for path in sorted(PACKAGE.rglob("*.py"))
        if STORE not in path.parents
        and (hits := crossings(path.read_text(encoding="utf-8"), types))
    }
    assert offenders == {}


def test_the_guard_sees_each_way_round_the_store():
    """The check above finds what it looks for, written the ways the code once wrote it."""
    source = """
import sqlite3
from sqlite3 import Row
import json
from typing import cast
split = json.loads(run.get("split_json") or "{}")
test = parse_json(data.run["test_json"])
scores = orjson.loads(estimate_json)
graded = row["grading_json"]
row = cast(RunRow, found[0])
rows = cast(list[rows.VersionRow], found)
fine = json.loads(path.read_text())
also_fine = cast(MessageCreateParams, item)
"""
    assert crossings(source, {"RunRow", "VersionRow"}) == [
        "2: imports sqlite3",
        "3: imports from sqlite3",
        "6: decodes split_json",
        "6: reads split_json",
        "7: decodes test_json",
        "7: reads test_json",
        "8: decodes estimate_json",
        "9: reads grading_json",
        "10: casts to the store's RunRow",
        "11: casts to the store's VersionRow",
    ]


def test_the_store_defines_the_types_the_guard_protects():
    assert {"Run", "Version", "DecisionRecord", "Iteration", "Graded", "CallRow"} <= store_types()
