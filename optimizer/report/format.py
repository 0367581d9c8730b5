"""How the terminal views write numbers, money, times and intervals, and how they print rich
renderables. Never prints model-written text as rich markup."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from optimizer.report.caveats import evals_note

COLOURS = {"won": "green", "lost": "red", "tie": "yellow", "baseline": "blue"}


def emit(console: Console, *items: Any) -> None:
    # The CLI's console soft-wraps (no cropping of plain lines); panels, trees and tables must
    # still fold long model-written text inside their borders rather than crop it.
    console.print(*items, soft_wrap=False)


def num(x: Any, digits: int = 3) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def signed(x: Any, digits: int = 3) -> str:
    return "—" if x is None else f"{x:+.{digits}f}"


def pct(x: Any) -> str:
    return "—" if x is None else f"{100 * x:.0f}%"


def money(x: Any) -> str:
    return "—" if x is None else f"${x:.2f}" if x >= 0.01 or x == 0 else f"${x:.4f}"


def duration(seconds: Any) -> str:
    if seconds is None:
        return "—"
    s = int(round(seconds))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s" if m else f"{s}s"


def interval(ci: Any, n: Any = None, unit: str | None = "eval", *, sign: bool = True) -> str:
    """' [+0.010, +0.090] (n=3 evals)': an interval with how few evals it rests on."""
    if not ci:
        return ""
    shown = signed if sign else num
    return f" [{shown(ci[0])}, {shown(ci[1])}]{evals_note(n, unit)}"
