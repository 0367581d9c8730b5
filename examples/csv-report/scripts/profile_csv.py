#!/usr/bin/env python3
"""Profile a CSV file and print the profile as markdown: columns, types, missing counts, and
min/max/mean of numeric columns. Standard library only.

Usage: python scripts/profile_csv.py FILE.csv [--delimiter ,]
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
from pathlib import Path

MISSING = {"", "na", "n/a", "nan", "null", "none", "-"}
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def is_missing(value: str) -> bool:
    return value.strip().lower() in MISSING


def number(value: str) -> float | None:
    try:
        return float(value) if value.strip() else None
    except ValueError:
        return None


def column_type(values: list[str]) -> str:
    """integer, number, date or text: the narrowest type every present value fits."""
    present = [v.strip() for v in values if not is_missing(v)]
    if not present:
        return "empty"
    if all(re.fullmatch(r"[-+]?\d+", v) for v in present):
        return "integer"
    if all(number(v) is not None for v in present):
        return "number"
    if all(DATE.match(v) for v in present):
        return "date"
    return "text"


def fmt(x: float) -> str:
    return f"{x:.2f}".rstrip("0").rstrip(".") if x != int(x) else str(int(x))


def profile(path: Path, delimiter: str | None = None) -> str:
    text = path.read_text(encoding="utf-8-sig")
    if delimiter is None:
        try:
            delimiter = csv.Sniffer().sniff(text[:4096], delimiters=",;\t|").delimiter
        except csv.Error:
            delimiter = ","
    rows = list(csv.reader(text.splitlines(), delimiter=delimiter))
    if not rows:
        return f"# Profile: {path.name}\n\nThe file is empty.\n"
    header, data = rows[0], rows[1:]
    lines = [
        f"# Profile: {path.name}",
        "",
        f"Rows: {len(data)}",
        f"Columns: {len(header)}",
        "",
        "| Column | Type | Missing | Min | Max | Mean |",
        "|---|---|---|---|---|---|",
    ]
    ragged = sum(1 for r in data if len(r) != len(header))
    for i, name in enumerate(header):
        values = [r[i] if i < len(r) else "" for r in data]
        kind = column_type(values)
        missing = sum(1 for v in values if is_missing(v))
        low = high = mean = ""
        if kind in ("integer", "number"):
            nums = [n for v in values if not is_missing(v) and (n := number(v)) is not None]
            low, high, mean = fmt(min(nums)), fmt(max(nums)), fmt(sum(nums) / len(nums))
        elif kind == "date":
            dates = sorted(v.strip() for v in values if not is_missing(v))
            low, high = dates[0], dates[-1]
        lines.append(f"| {name} | {kind} | {missing} | {low} | {high} | {mean} |")
    if ragged:
        lines += ["", f"Warning: {ragged} rows do not have {len(header)} fields."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Profile a CSV file as markdown.")
    parser.add_argument("csv_file", type=Path)
    parser.add_argument("--delimiter", default=None, help="field separator (default: sniffed)")
    args = parser.parse_args(argv)
    if not args.csv_file.is_file():
        print(f"error: {args.csv_file} is not a file", file=sys.stderr)
        return 2
    sys.stdout.write(profile(args.csv_file, args.delimiter))
    return 0


if __name__ == "__main__":
    sys.exit(main())
