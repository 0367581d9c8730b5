"""What a person watching `optimizer run` in the foreground sees: stage, runs done, spend, best.
Never the only record of anything: the log and state.db hold it all."""

from __future__ import annotations

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from optimizer.store.db import Store


class Reporter:
    def __init__(self, console: Console | None, store: Store, *, simulated: bool) -> None:
        self.console, self.store, self.simulated = console, store, simulated
        self.runs = 0
        self._stage = "starting"
        self._progress: Progress | None = None

    def __enter__(self) -> Reporter:
        if self.console is not None and self.console.is_terminal:
            self._progress = Progress(SpinnerColumn(), TextColumn("{task.description}"),
                                      TimeElapsedColumn(), console=self.console, transient=True)
            self._progress.start()
            self._task = self._progress.add_task(self._line())
        elif self.console is not None and self.simulated:
            self.console.print("[dim]provider: sim — every result of this run is simulated[/]")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def _line(self) -> str:
        spent = self.store.spent_usd()
        run = self.store.run_row() or {}
        best = run.get("current_best") or "v0"
        score = (self.store.get("versions", best) or {}).get("score")
        shown = f"{score:.3f}" if score is not None else "…"
        sim = " [simulated]" if self.simulated else ""
        return f"{self._stage} · {self.runs} runs graded · ${spent:.2f} spent · best {best} {shown}{sim}"

    def _refresh(self) -> None:
        if self._progress is not None:
            self._progress.update(self._task, description=self._line())

    def stage(self, text: str) -> None:
        self._stage = text
        self._refresh()

    def run_done(self) -> None:
        self.runs += 1
        self._refresh()

    def decided(self, label: str, verdict: str, reason: str) -> None:
        if self.console is not None:
            colour = {"won": "green", "lost": "red"}.get(verdict, "yellow")
            self.console.print(f"[{colour}]{label} {verdict}[/]: {reason}", highlight=False)
        self._refresh()

    def finished(self, reason: str, best: str) -> None:
        if self.console is not None:
            self.console.print(f"stopped ({reason}); current best: {best}")
